"""The sequence-to-sequence baseline of the parsing example: the same transformer on ``Vec`` alone,
predicting the linearised tree.

A fragment's tree (``syntax.Node``) is written as a sequence of symbols, as Vinyals et al.'s
"Grammar as a foreign language" writes a parse (``linearise``): a node opens with its label as one
symbol (``"(Call"``), then come, in token order, the tokens it owns (each one ``"XX"``) and its
children, then ``")"``. The tokens themselves are not written: the source gives them, so every token
is one ``XX``, and ``delinearise`` reads the spans back from where the ``XX``s fall, or refuses a
malformed sequence (None).

The model is the library's ``EncoderDecoder`` on ``Vec`` sequences (``model``): the encoder reads the
token kinds, the decoder the symbols so far, and it gives logits over the symbols: the open symbols of the
training labels, ``")"``, ``"XX"`` and the end symbol. Its sizes are the tree parser's (``Config``).

``train`` (``training``) trains it through the learning layer (``applicative.training.fit``, into a run
directory: checkpoints, resume, a time budget, SIGTERM) on batches of fragments of like lengths, padded to
the fixed capacities of their length bucket (``batches``: a compiled step a bucket); ``decode``
(``decoding``) decodes greedily, batched, and ``parse`` delinearises what it decodes.

    python -m applicative.examples.seq2seq train --out DIR [--resume] [--seconds S] [--steps N] ...
    python -m applicative.examples.seq2seq evaluate DIR
    python -m applicative.examples.seq2seq plot DIR

trains a run, scores it on held-out files' fragments and draws its losses (``cli``).
``python -m applicative.examples.parsing`` trains it beside the tree parser and scores both;
docs/parsing.md gives the results.
"""

from applicative.examples.seq2seq.decoding import decode as decode
from applicative.examples.seq2seq.decoding import decoding_compilations as decoding_compilations
from applicative.examples.seq2seq.decoding import parse as parse
from applicative.examples.seq2seq.linearise import CLOSE as CLOSE
from applicative.examples.seq2seq.linearise import END as END
from applicative.examples.seq2seq.linearise import START as START
from applicative.examples.seq2seq.linearise import TOKEN as TOKEN
from applicative.examples.seq2seq.linearise import delinearise as delinearise
from applicative.examples.seq2seq.linearise import linearise as linearise
from applicative.examples.seq2seq.model import Config as Config
from applicative.examples.seq2seq.model import Kind as Kind
from applicative.examples.seq2seq.model import Seq2Seq as Seq2Seq
from applicative.examples.seq2seq.model import Seq2SeqModel as Seq2SeqModel
from applicative.examples.seq2seq.model import Step as Step
from applicative.examples.seq2seq.model import Symbol as Symbol
from applicative.examples.seq2seq.model import Token as Token
from applicative.examples.seq2seq.model import init_model as init_model
from applicative.examples.seq2seq.model import with_positions as with_positions
from applicative.examples.seq2seq.training import Data as Data
from applicative.examples.seq2seq.training import load as load
from applicative.examples.seq2seq.training import train as train

__all__ = [
    "CLOSE",
    "END",
    "START",
    "TOKEN",
    "Config",
    "Data",
    "Seq2Seq",
    "Seq2SeqModel",
    "decode",
    "decoding_compilations",
    "delinearise",
    "init_model",
    "linearise",
    "load",
    "parse",
    "train",
    "with_positions",
]
