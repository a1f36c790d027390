"""A model's type is short: it names the brands a caller checks (sequence, inputs, model features,
memory features, outputs), the initialisers infer it, and a user's own layer fits in a stack."""

from typing import TypeVar

import jax
import numpy as np

from applicative import Dim, Measured, Vec, VecOf, causal_mask, record, to_array
from applicative.nn import AttentionOptions, Decoder, Encoder, EncoderDecoder, Matrix, init_decoder, init_encoder

N = TypeVar("N", bound=Dim)
F = TypeVar("F", bound=Measured)
S = TypeVar("S", bound=Measured)


class Seq(Dim): ...


class Out(Dim): ...


class Vocab(Dim): ...


class Model(Dim): ...


class Hidden(Dim): ...


class Head(Dim): ...


class Key(Dim): ...


def zeros(n: int, tag: type[N]) -> Vec[N, jax.Array]:
    return Vec.from_array(np.zeros(n, np.float32), tag)


def positions(n: int, tag: type[N]) -> Vec[N, Vec[Model, jax.Array]]:
    return Vec.from_array(np.zeros((n, 16), np.float32), tag, Model)


Tagger = Encoder[VecOf[Seq], VecOf[Vocab], VecOf[Model], VecOf[Vocab]]
Translator = EncoderDecoder[VecOf[Out], VecOf[Vocab], VecOf[Model], VecOf[Vocab]]
OPTIONS = AttentionOptions(heads=zeros(2, Head), model=zeros(16, Model), head_features=zeros(8, Key))


def tag(model: Tagger, tokens: Vec[Seq, Vec[Vocab, jax.Array]]) -> jax.Array:
    return to_array(model(tokens))


tagger = init_encoder(jax.random.key(0), OPTIONS, inputs=zeros(8, Vocab), hidden=zeros(32, Hidden), layers=1,
                      outputs=zeros(8, Vocab), positions=positions(5, Seq))  # fmt: skip
tag(tagger, Vec.from_array(np.zeros((5, 8)), Seq, Vocab))
encoder = init_encoder(jax.random.key(1), OPTIONS, inputs=zeros(8, Vocab), hidden=zeros(32, Hidden), layers=1,
                       outputs=None)  # fmt: skip
decoder = init_decoder(jax.random.key(2), OPTIONS, inputs=zeros(8, Vocab), hidden=zeros(32, Hidden), layers=1,
                       outputs=zeros(8, Vocab), source=zeros(16, Model), positions=positions(4, Out))  # fmt: skip
translator: Translator = EncoderDecoder(encoder, decoder)
cross: Decoder[VecOf[Out], VecOf[Vocab], VecOf[Model], VecOf[Model], VecOf[Vocab]] = decoder


@record
class Skip:
    """A user's own decoder layer: the identity, whatever the memory."""

    def __call__(
        self,
        x: Matrix[S, VecOf[Model]],
        mask: Matrix[S, S],
        memory: Matrix[F, VecOf[Model]] | None = None,
        memory_mask: Matrix[S, F] | None = None,
        /,
    ) -> Matrix[S, VecOf[Model]]:
        return x


own = Decoder(decoder.embed, (Skip(), *decoder.layers), decoder.norm, decoder.unembed)
translated = EncoderDecoder(encoder, own)(
    Vec.from_array(np.zeros((7, 8)), Seq, Vocab), Vec.from_array(np.zeros((4, 8)), Out, Vocab), causal_mask(4, Out)
)
