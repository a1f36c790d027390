"""A short model type still checks what it names: the memory's features, the sequence, the
encoder's features seen by the decoder."""

from typing import Any, TypeVar

import jax
import numpy as np

from applicative import Dim, Vec, VecOf, causal_mask
from applicative.nn import AttentionOptions, Decoder, EncoderDecoder, init_decoder, init_encoder

N = TypeVar("N", bound=Dim)


class Seq(Dim): ...


class Vocab(Dim): ...


class Model(Dim): ...


class Other(Dim): ...


def zeros(n: int, tag: type[N]) -> Vec[N, jax.Array]:
    return Vec.from_array(np.zeros(n, np.float32), tag)


def run(model: Decoder[Any, VecOf[Vocab], VecOf[Model], VecOf[Other], VecOf[Vocab]]) -> None: ...


options = AttentionOptions(heads=zeros(2, Other), model=zeros(16, Model), head_features=zeros(8, Other))
decoder = init_decoder(jax.random.key(0), options, inputs=zeros(8, Vocab), hidden=zeros(32, Other), layers=1,
                       outputs=zeros(8, Vocab), source=zeros(16, Model))  # fmt: skip
run(decoder)  # E: Argument 1 to "run" has incompatible type
x = Vec.from_array(np.zeros((4, 8)), Seq, Vocab)
decoder(x, causal_mask(4, Seq), Vec.from_array(np.zeros((6, 16)), Seq, Other))  # E: incompatible type "type[Other]"; expected "type[Model]"
others = AttentionOptions(heads=zeros(2, Other), model=zeros(16, Other), head_features=zeros(8, Other))
encoder = init_encoder(jax.random.key(1), others, inputs=zeros(8, Vocab), hidden=zeros(32, Other), layers=1,
                       outputs=None)  # fmt: skip
EncoderDecoder(encoder, decoder)  # E: Cannot infer value of type parameter "D" of "EncoderDecoder"
