"""The model of the seq2seq baseline: the library's ``EncoderDecoder`` on ``Vec`` sequences, its settings,
and a trained one with what it reads and writes.

    Config           the sizes and the optimiser's settings (the tree parser's), and the first length bucket
    Seq2Seq          a trained model: its vocabularies, capacities, losses and seconds
    init_model       an encoder-decoder over the token kinds and symbols, without position tables
    with_positions   the model with fixed position tables of given capacities: the one that runs there

The encoder reads the token kinds (one-hot, sinusoidal positions, a padding mask), the decoder the symbols
so far (the linearised tree shifted right behind a start symbol; causal mask, cross attention masked to the
real tokens) and gives logits over the symbols: the open symbols of the training labels, ``CLOSE``,
``TOKEN`` and ``END``. Position tables are not parameters: they are laid on at each capacity
(``with_positions``), so one trained model runs on sources and targets of any length, and the weight decay
never touches them. ``batch_loss``, the mean cross entropy over a batch's real target positions, is what the
learning layer trains (``training``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import Array

from applicative import Dim, VecOf, to_array
from applicative.examples.common import Head, HeadFeature, Hidden, Model, Optimisation, template
from applicative.nn import (
    AttentionOptions,
    Decoder,
    Encoder,
    EncoderDecoder,
    causal_mask,
    init_decoder,
    init_encoder,
    one_hot,
    padding_mask,
    sinusoidal_positions,
)

__all__ = [
    "Config",
    "Kind",
    "Seq2Seq",
    "Seq2SeqModel",
    "Step",
    "Symbol",
    "Token",
    "batch_logits",
    "batch_loss",
    "decoder_at",
    "encoder_at",
    "init_model",
    "sizes",
    "with_positions",
]


class Token(Dim):
    """A position among a fragment's tokens: the encoder's sequence."""


class Kind(Dim):
    """A token kind: a one-hot input feature of the encoder."""


class Step(Dim):
    """A position in the linearised tree: the decoder's sequence."""


class Symbol(Dim):
    """A symbol of the linearised tree: a one-hot input of the decoder (the start symbol too) or an
    output logit (every symbol but the start)."""


Seq2SeqModel = EncoderDecoder[VecOf[Step], VecOf[Symbol], VecOf[Model], VecOf[Symbol]]


@dataclass(frozen=True)
class Config:
    """Model size and optimiser settings: the tree parser's."""

    width: int = 64
    hidden: int = 128
    heads: int = 4
    head_features: int = 16
    encoder_layers: int = 2
    decoder_layers: int = 2
    batch: int = 32
    optimisation: Optimisation = field(default_factory=lambda: Optimisation(learning_rate=3e-3, warmup=50))
    first_bucket: int = 64  # target positions of the shortest length bucket (``train``); 0: one bucket


class Seq2Seq(NamedTuple):
    """A trained model (without position tables: ``with_positions``) with what it reads and writes:
    ``kinds`` the token kinds' ids (``syntax.vocabulary`` of the training tokens, ``UNKNOWN`` for any
    other kind), ``symbols`` the output symbols by id (the open symbols of the training labels,
    ``CLOSE``, ``TOKEN``, ``END`` last; ``START``'s input id is ``len(symbols)``), the largest
    capacities it trained at (tokens; target positions, the start or end symbol included), each
    step's loss, taken before its update, and the seconds training took (``State.seconds``: every
    session of a resumed run)."""

    model: Seq2SeqModel
    kinds: dict[str, int]
    symbols: tuple[str, ...]
    token_capacity: int
    target_capacity: int
    losses: tuple[float, ...]
    seconds: float


def init_model(key: Array, config: Config, kinds: int, symbols: int) -> Seq2SeqModel:
    """An encoder-decoder over ``kinds`` token kinds and ``symbols`` output symbols (the decoder reads
    one more: the start symbol), without position tables (``with_positions`` lays them on)."""
    options = AttentionOptions(
        heads=template(config.heads, Head),
        model=template(config.width, Model),
        head_features=template(config.head_features, HeadFeature),
    )
    encoder_key, decoder_key = jax.random.split(key)
    hidden = template(config.hidden, Hidden)
    encoder = init_encoder(
        encoder_key, options, inputs=template(kinds, Kind), hidden=hidden, layers=config.encoder_layers, outputs=None
    )
    decoder = init_decoder(
        decoder_key, options, inputs=template(symbols + 1, Symbol), hidden=hidden, layers=config.decoder_layers,
        outputs=template(symbols, Symbol), source=options.model,
    )  # fmt: skip
    model: Seq2SeqModel = EncoderDecoder(encoder, decoder)
    return model


def sizes(model: Seq2SeqModel) -> tuple[int, int, int]:
    """The model's width, its token kinds and its decoder's input symbols (the start included), from
    its weights' shapes (static under ``jit``)."""
    width, kinds = to_array(model.encoder.embed.linear.weight).shape
    return width, kinds, to_array(model.decoder.embed.linear.weight).shape[1]


def with_positions(model: Seq2SeqModel, tokens: int, steps: int) -> Seq2SeqModel:
    """``model`` with fixed sinusoidal position tables of ``tokens`` source positions and ``steps``
    target positions (any it held replaced): the model that runs at those capacities."""
    return EncoderDecoder(encoder_at(model, tokens), decoder_at(model, steps))


def encoder_at(model: Seq2SeqModel, tokens: int) -> Encoder[VecOf[Token], VecOf[Kind], VecOf[Model], None]:
    """The model's encoder with a sinusoidal table of ``tokens`` positions."""
    width, _, _ = sizes(model)
    table = sinusoidal_positions(tokens, Token, width, Model, jnp.float32)
    encoder = model.encoder
    return dataclasses.replace(encoder, embed=dataclasses.replace(encoder.embed, positions=table, learned=False))


def decoder_at(
    model: Seq2SeqModel, steps: int
) -> Decoder[VecOf[Step], VecOf[Symbol], VecOf[Model], VecOf[Model], VecOf[Symbol]]:
    """The model's decoder with a sinusoidal table of ``steps`` positions."""
    width, _, _ = sizes(model)
    table = sinusoidal_positions(steps, Step, width, Model, jnp.float32)
    decoder = model.decoder
    return dataclasses.replace(decoder, embed=dataclasses.replace(decoder.embed, positions=table, learned=False))


def batch_logits(model: Seq2SeqModel, sources: Array, lengths: Array, inputs: Array) -> Array:
    """The (batch, steps, symbols) logits of a batch: token ids ``sources`` (batch, tokens) of which the
    first ``lengths`` (batch,) are real, and the decoder's input ids ``inputs`` (batch, steps)."""
    tokens, steps = sources.shape[1], inputs.shape[1]
    _, kinds, symbols = sizes(model)
    positioned = with_positions(model, tokens, steps)

    def one(source: Array, length: Array, target: Array) -> Array:
        return to_array(
            positioned(
                one_hot(source, Token, kinds, Kind, jnp.float32),
                one_hot(target, Step, symbols, Symbol, jnp.float32),
                causal_mask(steps, Step),  # a real query sees real keys only: no padding mask needed
                padding_mask(length, tokens, Token),
                padding_mask(length, tokens, Token, steps, Step),
            )
        )

    return jax.vmap(one)(sources, lengths, inputs)


def batch_loss(
    model: Seq2SeqModel, sources: Array, lengths: Array, inputs: Array, outputs: Array, target_lengths: Array
) -> Array:
    """Mean cross entropy over the real target positions (the first ``target_lengths`` of each row)."""
    per_step = optax.softmax_cross_entropy_with_integer_labels(batch_logits(model, sources, lengths, inputs), outputs)
    real = jnp.arange(inputs.shape[1]) < target_lengths[:, None]
    return jnp.sum(jnp.where(real, per_step, 0.0)) / jnp.sum(real)
