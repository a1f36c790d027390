"""A block's brands come from its templates: mypy rejects a memory of other features, a pinned type
of another source, a layer from blocks of two model brands, and a decoder's layer read as attending
to another memory."""

from typing import Any, TypeVar

import jax
import numpy as np

from applicative import Dim, Vec, VecOf
from applicative.nn import (
    AttentionOptions,
    CrossAttentionBlock,
    EncoderLayer,
    FeedForward,
    MultiHeadAttention,
    SelfAttentionBlock,
    init_decoder,
)

N = TypeVar("N", bound=Dim)


class Seq(Dim): ...


class Memory(Dim): ...


class Model(Dim): ...


class Source(Dim): ...


class Other(Dim): ...


class Head(Dim): ...


class Key(Dim): ...


class Vocab(Dim): ...


def zeros(n: int, tag: type[N]) -> Vec[N, jax.Array]:
    return Vec.from_array(np.zeros(n, np.float32), tag)


key = jax.random.key(0)
options = AttentionOptions(heads=zeros(2, Head), model=zeros(16, Model), head_features=zeros(8, Key))
cross = CrossAttentionBlock.init(key, options, source=zeros(12, Source))
x = Vec.from_array(np.zeros((4, 16)), Seq, Model)
cross(x, Vec.from_array(np.zeros((6, 12)), Memory, Model))  # E: incompatible type "type[Model]"; expected "type[Source]"
pinned: CrossAttentionBlock[VecOf[Head], VecOf[Model], VecOf[Model], VecOf[Key]] = cross  # E: Incompatible types in assignment
attend = SelfAttentionBlock.init(key, options)
forward = FeedForward.init(key, model=zeros(16, Other), hidden=zeros(32, Other))
EncoderLayer.from_blocks(attend, forward)  # E: Cannot infer value of type parameter "D"
decoder = init_decoder(key, options, inputs=zeros(8, Vocab), hidden=zeros(32, Other), layers=1,
                       outputs=zeros(8, Vocab), source=zeros(12, Source))  # fmt: skip
memory: MultiHeadAttention[Any, VecOf[Model], VecOf[Model], Any, Any] | None = decoder.layer(0).cross  # E: Incompatible types in assignment
