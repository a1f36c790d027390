"""The blocks transformer layers are made of, each a residual connection around one module:

    self-attention block:   x <- x + attention(norm x)              (keys and values: norm x)
    cross-attention block:  x <- x + attention(norm x, memory)      (keys and values: the memory)
    feed-forward block:     x <- x + fmap mlp (norm x)

``norm`` is a pre-norm ``LayerNorm``, or None (the reference's residual blocks). An ``EncoderLayer``
is a self-attention block then a feed-forward block, a ``DecoderLayer`` a (masked) self-attention
block, a cross-attention block if it has a memory, and a feed-forward block (``layer.blocks``,
``EncoderLayer.from_blocks``). A block is built alone (``init``: an attention block from an
``AttentionOptions``, a feed-forward block from templates), and a self-attention
or feed-forward block is itself a ``Layer`` (a map of a sequence to itself), so an ``Encoder`` may
stack blocks.

Built, a block checks that its parts are of their kinds (a TypeError naming the block, the field, and
what it must be and got) and meet on the model's features (the attention's queries, keys and values,
the MLP's output, the norm), naming the block and both parts (``nn._parts``). A cross-attention block
checks the memory it is called with against the features its keys and values read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import jax
from jax import Array

from applicative.linalg import add
from applicative.nn._base import Matrix, Variance, by_measure
from applicative.nn._linear import outputs_of
from applicative.nn._mlp import MLP, LayerNorm
from applicative.nn._multi_head import MultiHeadAttention, features_of
from applicative.nn._options import AttentionOptions, check_templates
from applicative.nn._parts import Level, agree, level, of_kind
from applicative.operands import check_nesting
from applicative.protocols.applicative import Applicative
from applicative.protocols.kinds import Measured
from applicative.records import record

__all__ = ["CrossAttentionBlock", "FeedForward", "SelfAttentionBlock"]

# Brands; those summed over (by attention, linear maps, layer norms) are bound to Measured.
S = TypeVar("S", bound=Measured)  # a sequence attending to itself
I = TypeVar("I")  # noqa: E741  (the queries' sequence of a cross attention: not summed over)
F = TypeVar("F", bound=Measured)  # the memory's sequence
D = TypeVar("D", bound=Measured)  # model features
E = TypeVar("E", bound=Measured)  # the memory's features
Heads = TypeVar("Heads", bound=Measured)
Hk = TypeVar("Hk", bound=Measured)  # a head's query/key (and value) features
Hidden = TypeVar("Hidden", bound=Measured)

NORM = (LayerNorm, type(None))
"""What a block's norm may be (``of_kind``): a pre-norm, or none."""


def norm_each(norm: LayerNorm[D] | None, x: Matrix[I, D]) -> Matrix[I, D]:
    """The pre-norm of every element of ``x`` (``x`` itself without a norm)."""
    return x if norm is None else x.fmap(norm)


def check_blocks(
    module: str,
    *,
    attention: object = None,
    cross: object = None,
    mlp: object = None,
    norms: tuple[tuple[str, object], ...] = (),
) -> None:
    """Check the parts of a block or a layer (named ``module`` in the error; ``nn._parts``): a
    ValueError unless a self-attention reads its keys and values where it reads its queries, and the
    self-attention's, the cross attention's, the MLP's and each named norm's features are one
    structure. Parts that do not show (None, or not built around arrays: ``nn._parts``) are skipped."""
    model, source = features_of(attention)
    agree(module, ("the self-attention's queries come from", model), ("its keys and values from", source))
    features: list[tuple[str, Level | None]] = [
        ("the self-attention's features are", model),
        ("the cross attention's features are", features_of(cross)[0]),
        ("the MLP's features are", outputs_of(mlp.output) if isinstance(mlp, MLP) else None),
    ]
    for name, norm in norms:
        features.append((f"{name} is on", level(norm.gamma) if isinstance(norm, LayerNorm) else None))
    agree(module, *features)


@record
class SelfAttentionBlock(Generic[Heads, D, Hk]):
    """x <- x + attention(norm x), with an optional self-attention mask: the first block of an encoder
    or decoder layer, and a ``Layer`` on its own."""

    attention: MultiHeadAttention[Heads, D, D, Hk, Hk]
    norm: LayerNorm[D] | None

    def __post_init__(self) -> None:
        of_kind("SelfAttentionBlock", ("attention", self.attention, MultiHeadAttention), ("norm", self.norm, NORM))
        check_blocks("SelfAttentionBlock", attention=self.attention, norms=(("the norm", self.norm),))

    def __call__(self, x: Matrix[S, D], mask: Matrix[S, S] | None = None) -> Matrix[S, D]:
        return add(x, self.attention(norm_each(self.norm, x), mask=mask))

    @staticmethod
    def init(key: jax.Array, options: AttentionOptions[Heads, D, Hk]) -> SelfAttentionBlock[Heads, D, Hk]:
        """The attention as ``MultiHeadAttention.init`` draws it from ``key`` (queries, keys and values
        N(0, 1 / variance(model)), output projections N(0, output_gain^2 / (variance(head_features)
        variance(heads))), zero biases; values of the head's features); the norm starts as the
        identity (``options.layer_norm=False``: no norm)."""
        attention: MultiHeadAttention[Heads, D, D, Hk, Hk] = MultiHeadAttention.init(
            key, options, value_features=options.head_features, source=options.model
        )
        return SelfAttentionBlock(attention, LayerNorm.init(options.model) if options.layer_norm else None)


@record
class CrossAttentionBlock(Generic[Heads, D, E, Hk]):
    """x <- x + attention(norm x, memory): queries from a sequence ``I (D a)``, keys and values from a
    memory ``F (E a)`` of any structure (an encoder's states), an optional mask ``I (F bool)``."""

    attention: MultiHeadAttention[Heads, D, E, Hk, Hk]
    norm: LayerNorm[D] | None

    def __post_init__(self) -> None:
        of_kind("CrossAttentionBlock", ("attention", self.attention, MultiHeadAttention), ("norm", self.norm, NORM))
        check_blocks("CrossAttentionBlock", cross=self.attention, norms=(("the norm", self.norm),))

    def __call__(self, x: Matrix[I, D], memory: Matrix[F, E], mask: Matrix[I, F] | None = None) -> Matrix[I, D]:
        """Checks (static: kinds, tags, sizes) that ``memory`` is a structure of the features the keys and
        values read: else a TypeError or ValueError naming ``CrossAttentionBlock`` and both."""
        check_nesting("CrossAttentionBlock", None, ("memory", memory, 2))
        features, reads = level(memory, 1), features_of(self.attention)[1]
        agree("CrossAttentionBlock", ("the memory's features are", features), ("its keys and values read", reads))
        return add(x, self.attention(norm_each(self.norm, x), memory, mask))

    @staticmethod
    def init(
        key: jax.Array, options: AttentionOptions[Heads, D, Hk], *, source: Applicative[E, Array]
    ) -> CrossAttentionBlock[Heads, D, E, Hk]:
        """As ``SelfAttentionBlock.init``, with ``source`` the template of the memory's features (keys
        and values are drawn N(0, 1 / variance(source))); a ``source`` that is not a structure of
        floating scalars raises, naming it."""
        check_templates("CrossAttentionBlock.init", source=source)
        attention: MultiHeadAttention[Heads, D, E, Hk, Hk] = MultiHeadAttention.init(
            key, options, value_features=options.head_features, source=source
        )
        return CrossAttentionBlock(attention, LayerNorm.init(options.model) if options.layer_norm else None)


@record
class FeedForward(Generic[D, Hidden]):
    """x <- x + fmap mlp (norm x): the feed-forward block, the last of an encoder or decoder layer, and
    a ``Layer`` on its own that mixes no positions (between kernel integrals it gives a neural
    operator its nonlinearity)."""

    mlp: MLP[D, Hidden]
    norm: LayerNorm[D] | None

    def __post_init__(self) -> None:
        of_kind("FeedForward", ("mlp", self.mlp, MLP), ("norm", self.norm, NORM))
        check_blocks("FeedForward", mlp=self.mlp, norms=(("the norm", self.norm),))

    def __call__(self, x: Matrix[S, D], mask: Matrix[S, S] | None = None, /) -> Matrix[S, D]:
        return add(x, norm_each(self.norm, x).fmap(self.mlp))

    @staticmethod
    def init(
        key: jax.Array,
        *,
        model: Applicative[D, Array],
        hidden: Applicative[Hidden, Array],
        layer_norm: bool = True,
        activation: Callable[[Array], Array] = jax.nn.relu,
        variance: Variance = by_measure,
        output_gain: float = 1.0,
    ) -> FeedForward[D, Hidden]:
        """Templates give the shapes; the MLP as ``MLP.init`` draws it from ``key`` (N(0, 1 /
        variance(model)) and N(0, output_gain^2 / variance(hidden)) weights, LeCun's by default; zero
        biases), the norm starts as the identity (``layer_norm=False``: no norm)."""
        check_templates("FeedForward.init", model=model, hidden=hidden)
        mlp = MLP.init(key, model, hidden, activation, variance=variance, output_gain=output_gain)
        return FeedForward(mlp, LayerNorm.init(model) if layer_norm else None)
