"""Neural networks written once against the protocols: attention, kernel integrals, MLP, the transformer family.

Every model is a frozen pytree record (``applicative.record``) with an
initialiser taking a PRNG key (``jax.random.key``, drawn from by ``jax.random``) and templates that
give the shapes, a variance rule (``by_measure``, the default, or ``fan_in``), and checks
when it is built that its parts meet (a ValueError naming it and both parts; JAX's rebuilds
check nothing). Attention and the transformer family take their heads, widths, norms, score,
normalisation, variance rule and gain as one ``AttentionOptions``. Attention's softmax runs on
coordinates where keys and queries are values at positions, in chunks of queries for long ones
(memory linear in the keys; ``Softmax``). Transformer layers are made of
blocks that are built alone as well: ``SelfAttentionBlock``, ``CrossAttentionBlock``, ``FeedForward``.
The ``Vec`` sequence helpers (masks, positions, one-hot tokens) are here too; the optimisers and the loop
are the learning layer's (``applicative.training``).
"""

from applicative.nn._attention import attention as attention
from applicative.nn._base import BLOCK as BLOCK
from applicative.nn._base import Matrix as Matrix
from applicative.nn._base import Std as Std
from applicative.nn._base import Variance as Variance
from applicative.nn._base import by_measure as by_measure
from applicative.nn._base import fan_in as fan_in
from applicative.nn._base import init_each as init_each
from applicative.nn._base import keys_like as keys_like
from applicative.nn._base import measure as measure
from applicative.nn._base import normal_like as normal_like
from applicative.nn._blocks import CrossAttentionBlock as CrossAttentionBlock
from applicative.nn._blocks import FeedForward as FeedForward
from applicative.nn._blocks import SelfAttentionBlock as SelfAttentionBlock
from applicative.nn._kernel import KernelHead as KernelHead
from applicative.nn._kernel import KernelIntegral as KernelIntegral
from applicative.nn._layers import CrossLayer as CrossLayer
from applicative.nn._layers import DecoderLayer as DecoderLayer
from applicative.nn._layers import EncoderLayer as EncoderLayer
from applicative.nn._layers import Layer as Layer
from applicative.nn._linear import Linear as Linear
from applicative.nn._linear import each_of as each_of
from applicative.nn._mlp import MLP as MLP
from applicative.nn._mlp import LayerNorm as LayerNorm
from applicative.nn._multi_head import AttentionHead as AttentionHead
from applicative.nn._multi_head import MultiHeadAttention as MultiHeadAttention
from applicative.nn._normalisations import CHUNK as CHUNK
from applicative.nn._normalisations import CHUNK_ABOVE as CHUNK_ABOVE
from applicative.nn._normalisations import CoefficientSoftmax as CoefficientSoftmax
from applicative.nn._normalisations import Normalisation as Normalisation
from applicative.nn._normalisations import ReferenceSoftmax as ReferenceSoftmax
from applicative.nn._normalisations import ReluAttention as ReluAttention
from applicative.nn._normalisations import Sampled as Sampled
from applicative.nn._normalisations import Softmax as Softmax
from applicative.nn._options import AttentionOptions as AttentionOptions
from applicative.nn._relational import RelationalAttention as RelationalAttention
from applicative.nn._relational import pair_messages as pair_messages
from applicative.nn._scores import Additive as Additive
from applicative.nn._scores import Biased as Biased
from applicative.nn._scores import DotProduct as DotProduct
from applicative.nn._scores import Multiplicative as Multiplicative
from applicative.nn._scores import Score as Score
from applicative.nn._scores import ScoreInit as ScoreInit
from applicative.nn._sequence import causal_mask as causal_mask
from applicative.nn._sequence import one_hot as one_hot
from applicative.nn._sequence import padding_mask as padding_mask
from applicative.nn._sequence import sinusoidal_positions as sinusoidal_positions
from applicative.nn._transformer import Decoder as Decoder
from applicative.nn._transformer import Embedding as Embedding
from applicative.nn._transformer import Encoder as Encoder
from applicative.nn._transformer import EncoderDecoder as EncoderDecoder
from applicative.nn._transformer_init import init_decoder as init_decoder
from applicative.nn._transformer_init import init_encoder as init_encoder

__all__ = [
    "BLOCK",
    "CHUNK",
    "CHUNK_ABOVE",
    "MLP",
    "Additive",
    "AttentionHead",
    "AttentionOptions",
    "Biased",
    "CoefficientSoftmax",
    "CrossAttentionBlock",
    "CrossLayer",
    "Decoder",
    "DecoderLayer",
    "DotProduct",
    "Embedding",
    "Encoder",
    "EncoderDecoder",
    "EncoderLayer",
    "FeedForward",
    "KernelHead",
    "KernelIntegral",
    "Layer",
    "LayerNorm",
    "Linear",
    "Matrix",
    "MultiHeadAttention",
    "Multiplicative",
    "Normalisation",
    "ReferenceSoftmax",
    "RelationalAttention",
    "ReluAttention",
    "Sampled",
    "Score",
    "ScoreInit",
    "SelfAttentionBlock",
    "Softmax",
    "Std",
    "Variance",
    "attention",
    "by_measure",
    "causal_mask",
    "each_of",
    "fan_in",
    "init_decoder",
    "init_each",
    "init_encoder",
    "keys_like",
    "measure",
    "normal_like",
    "one_hot",
    "padding_mask",
    "pair_messages",
    "sinusoidal_positions",
]
