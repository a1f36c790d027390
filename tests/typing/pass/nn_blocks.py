"""Must type-check: blocks built alone from templates, their brands inferred from the templates; a
layer from blocks and back; a decoder's layer typed as what it holds (``layer(0).cross``), no
isinstance needed."""

from typing import Any, TypeVar

import jax
import numpy as np

from applicative import Applicative, Dim, Vec, VecOf, causal_mask
from applicative.nn import (
    AttentionOptions,
    CrossAttentionBlock,
    DecoderLayer,
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


class Head(Dim): ...


class Key(Dim): ...


class Hidden(Dim): ...


class Vocab(Dim): ...


def zeros(n: int, tag: type[N]) -> Vec[N, jax.Array]:
    return Vec.from_array(np.zeros(n, np.float32), tag)


key = jax.random.key(0)
options = AttentionOptions(heads=zeros(2, Head), model=zeros(16, Model), head_features=zeros(8, Key))
typed: AttentionOptions[VecOf[Head], VecOf[Model], VecOf[Key]] = options
cross = CrossAttentionBlock.init(key, options, source=zeros(12, Source))
pinned: CrossAttentionBlock[VecOf[Head], VecOf[Model], VecOf[Source], VecOf[Key]] = cross
attend = SelfAttentionBlock.init(key, options)
forward = FeedForward.init(key, model=zeros(16, Model), hidden=zeros(32, Hidden), layer_norm=False)

x = Vec.from_array(np.zeros((4, 16)), Seq, Model)
memory = Vec.from_array(np.zeros((6, 12)), Memory, Source)
y: Applicative[VecOf[Seq], Applicative[VecOf[Model], jax.Array]] = cross(x, memory)
y = attend(forward(y), causal_mask(4, Seq))

layer: EncoderLayer[VecOf[Head], VecOf[Model], VecOf[Key], VecOf[Hidden]] = EncoderLayer.from_blocks(attend, forward)
again: SelfAttentionBlock[VecOf[Head], VecOf[Model], VecOf[Key]] = layer.blocks[0]
decoder_layer = DecoderLayer.from_blocks(attend, cross, forward)
as_typed: DecoderLayer[VecOf[Head], VecOf[Model], VecOf[Source], VecOf[Key], VecOf[Hidden]] = decoder_layer

decoder = init_decoder(key, options, inputs=zeros(8, Vocab), hidden=zeros(32, Hidden), layers=2,
                       outputs=zeros(8, Vocab), source=zeros(12, Source))  # fmt: skip
first_cross = decoder.layer(0).cross
if first_cross is not None:
    attended: MultiHeadAttention[Any, VecOf[Model], VecOf[Source], Any, Any] = first_cross
    y = first_cross(x, memory)
block = decoder.layer(-1).blocks[1]
if block is not None:
    y = block(x, memory)
