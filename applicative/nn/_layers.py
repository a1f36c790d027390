"""The transformer's layers, each a map of a sequence to itself made of blocks: encoder and decoder layers.

    encoder layer:  x <- x + attention(norm x);           x <- x + fmap mlp (norm x)
    decoder layer:  x <- x + masked attention(norm x);
                    x <- x + attention(norm x, memory);    x <- x + fmap mlp (norm x)

(pre-norm; with ``layer_norm=False`` these are the reference's residual
layers). Each line is a block (``nn.SelfAttentionBlock``, ``nn.CrossAttentionBlock``,
``nn.FeedForward``): a layer runs its blocks (``layer.blocks``), and ``from_blocks``
builds a layer from blocks. A sequence is any structure ``S (D a)`` (``D``: the model's features), a
memory any ``F (E a)``; masks are structures of booleans. An encoder's layers are any ``Layer``s, maps of
the sequence to itself (``EncoderLayer``, a block, or one that views the sequence another way, as the
Funcformer's layers along its second axis do); a decoder's are any ``CrossLayer``s (``DecoderLayer``, or
a user's own).

Built, a layer checks that its parts are of their kinds (a TypeError naming the layer and the field)
and meet on the model's features (a ValueError naming the layer and both parts: ``nn._parts``); its
norms are one per block or None (a TypeError otherwise), and every block has a norm or none has (a
ValueError, from ``from_blocks``). A ``DecoderLayer`` with cross attention called without a memory is a
ValueError naming it.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from applicative.nn._base import Matrix
from applicative.nn._blocks import NORM, CrossAttentionBlock, FeedForward, SelfAttentionBlock, check_blocks
from applicative.nn._mlp import MLP, LayerNorm
from applicative.nn._multi_head import MultiHeadAttention
from applicative.nn._parts import of_kind
from applicative.protocols.kinds import Measured
from applicative.records import record

__all__ = ["CrossLayer", "DecoderLayer", "EncoderLayer", "Layer"]

# Brands; those summed over (by attention, linear maps, layer norms) are bound to Measured.
S = TypeVar("S", bound=Measured)  # the sequence structure
F = TypeVar("F", bound=Measured)  # the memory's structure (an encoder's sequence)
D = TypeVar("D", bound=Measured)  # model features
E = TypeVar("E", bound=Measured)  # the encoder's model features, seen from a decoder
Heads = TypeVar("Heads", bound=Measured)
Hk = TypeVar("Hk", bound=Measured)
Hidden = TypeVar("Hidden", bound=Measured)


class Layer(Protocol[S, D]):
    """A map of a sequence ``S (D a)`` to itself, with an optional self-attention mask."""

    def __call__(self, x: Matrix[S, D], mask: Matrix[S, S] | None = None, /) -> Matrix[S, D]: ...


class CrossLayer(Protocol[S, D, E]):
    """A map of a sequence ``S (D a)`` to itself under a self-attention mask, attending to a memory
    ``F (E a)`` of any structure ``F`` if it is given one."""

    def __call__(
        self,
        x: Matrix[S, D],
        mask: Matrix[S, S],
        memory: Matrix[F, E] | None = None,
        memory_mask: Matrix[S, F] | None = None,
        /,
    ) -> Matrix[S, D]: ...


def _norms(module: str, norms: object, kinds: tuple[type | tuple[type, ...], ...]) -> tuple[tuple[str, object], ...]:
    """A layer's ``norms`` named for ``check_blocks`` ("norms[i]"), once checked to be None or a tuple of
    one per block, each of its kind (``of_kind``); else a TypeError naming ``module``."""
    if norms is None:
        return ()
    if not isinstance(norms, tuple) or len(norms) != len(kinds):
        given = f"a tuple of {len(norms)}" if isinstance(norms, tuple) else type(norms).__name__
        raise TypeError(f"{module}: norms must be None or a tuple of {len(kinds)}, one per block, got {given}")
    named = tuple((f"norms[{i}]", norm) for i, norm in enumerate(norms))
    of_kind(module, *((name, norm, kind) for (name, norm), kind in zip(named, kinds, strict=True)))
    return named


def _mixed_norms(op: str, *blocks: tuple[str, object]) -> ValueError:
    """The error for blocks of which some have a norm and some none: a layer's norms are all or nothing."""
    which = ", ".join(f"the {name} block {'none' if norm is None else 'a LayerNorm'}" for name, norm in blocks)
    return ValueError(f"{op}: either every block has a norm or none has; {which}")


@record
class EncoderLayer(Generic[Heads, D, Hk, Hidden]):
    """Self-attention and an MLP, each with a residual connection and an optional pre-norm: a
    ``SelfAttentionBlock`` then a ``FeedForward`` block (``blocks``).

    Built, it checks that its attention, MLP and norms meet on the model's features (a ValueError
    naming ``EncoderLayer`` and both parts)."""

    attention: MultiHeadAttention[Heads, D, D, Hk, Hk]
    mlp: MLP[D, Hidden]
    norms: tuple[LayerNorm[D], LayerNorm[D]] | None

    def __post_init__(self) -> None:
        of_kind("EncoderLayer", ("attention", self.attention, MultiHeadAttention), ("mlp", self.mlp, MLP))
        named = _norms("EncoderLayer", self.norms, (LayerNorm, LayerNorm))
        check_blocks("EncoderLayer", attention=self.attention, mlp=self.mlp, norms=named)

    @property
    def blocks(self) -> tuple[SelfAttentionBlock[Heads, D, Hk], FeedForward[D, Hidden]]:
        """The self-attention block and the feed-forward block this layer runs, in order."""
        n1, n2 = self.norms if self.norms is not None else (None, None)
        return SelfAttentionBlock(self.attention, n1), FeedForward(self.mlp, n2)

    @staticmethod
    def from_blocks(
        attention: SelfAttentionBlock[Heads, D, Hk], feed_forward: FeedForward[D, Hidden]
    ) -> EncoderLayer[Heads, D, Hk, Hidden]:
        """The layer that runs these blocks (either both have a norm or neither: a ValueError otherwise;
        a block of another kind: a TypeError)."""
        of_kind(
            "EncoderLayer.from_blocks", ("attention", attention, SelfAttentionBlock),
            ("feed_forward", feed_forward, FeedForward),
        )  # fmt: skip
        n1, n2 = attention.norm, feed_forward.norm
        if (n1 is None) != (n2 is None):
            raise _mixed_norms("EncoderLayer.from_blocks", ("self-attention", n1), ("feed-forward", n2))
        norms = (n1, n2) if n1 is not None and n2 is not None else None
        return EncoderLayer(attention.attention, feed_forward.mlp, norms)

    def __call__(self, x: Matrix[S, D], mask: Matrix[S, S] | None = None) -> Matrix[S, D]:
        attend, feed_forward = self.blocks
        return feed_forward(attend(x, mask))


@record
class DecoderLayer(Generic[Heads, D, E, Hk, Hidden]):
    """Masked self-attention (a mask of None: every position sees every other, as a tree's nodes
    do), cross attention to a memory (if ``cross``), and an MLP: a
    ``SelfAttentionBlock``, a ``CrossAttentionBlock`` (or None) and a ``FeedForward`` block (``blocks``).

    ``norms`` are the pre-norms of the three blocks; the cross-attention one is None in a layer
    without cross attention (a decoder-only model has no parameter that gets no gradient). Built, it
    checks that its attentions, MLP and norms meet on the model's features (a ValueError naming
    ``DecoderLayer`` and both parts)."""

    attention: MultiHeadAttention[Heads, D, D, Hk, Hk]
    cross: MultiHeadAttention[Heads, D, E, Hk, Hk] | None
    mlp: MLP[D, Hidden]
    norms: tuple[LayerNorm[D], LayerNorm[D] | None, LayerNorm[D]] | None

    def __post_init__(self) -> None:
        of_kind(
            "DecoderLayer", ("attention", self.attention, MultiHeadAttention),
            ("cross", self.cross, (MultiHeadAttention, type(None))), ("mlp", self.mlp, MLP),
        )  # fmt: skip
        named = _norms("DecoderLayer", self.norms, (LayerNorm, NORM, LayerNorm))
        check_blocks("DecoderLayer", attention=self.attention, cross=self.cross, mlp=self.mlp, norms=named)

    @property
    def blocks(
        self,
    ) -> tuple[SelfAttentionBlock[Heads, D, Hk], CrossAttentionBlock[Heads, D, E, Hk] | None, FeedForward[D, Hidden]]:
        """The masked self-attention block, the cross-attention block (None without cross attention)
        and the feed-forward block this layer runs, in order."""
        n1, n2, n3 = self.norms if self.norms is not None else (None, None, None)
        cross = None if self.cross is None else CrossAttentionBlock(self.cross, n2)
        return SelfAttentionBlock(self.attention, n1), cross, FeedForward(self.mlp, n3)

    @staticmethod
    def from_blocks(
        attention: SelfAttentionBlock[Heads, D, Hk],
        cross: CrossAttentionBlock[Heads, D, E, Hk] | None,
        feed_forward: FeedForward[D, Hidden],
    ) -> DecoderLayer[Heads, D, E, Hk, Hidden]:
        """The layer that runs these blocks (``cross=None``: no cross attention); either every block
        has a norm or none has (a ValueError otherwise; a block of another kind: a TypeError)."""
        of_kind(
            "DecoderLayer.from_blocks", ("attention", attention, SelfAttentionBlock),
            ("cross", cross, (CrossAttentionBlock, type(None))), ("feed_forward", feed_forward, FeedForward),
        )  # fmt: skip
        n1, n3 = attention.norm, feed_forward.norm
        crossed = [] if cross is None else [("cross-attention", cross.norm)]
        blocks = [("self-attention", n1), *crossed, ("feed-forward", n3)]
        if len({norm is None for _, norm in blocks}) > 1:
            raise _mixed_norms("DecoderLayer.from_blocks", *blocks)
        n2 = None if cross is None else cross.norm
        norms = (n1, n2, n3) if n1 is not None and n3 is not None else None
        return DecoderLayer(attention.attention, None if cross is None else cross.attention, feed_forward.mlp, norms)

    def __call__(
        self,
        x: Matrix[S, D],
        mask: Matrix[S, S] | None,
        memory: Matrix[F, E] | None = None,
        memory_mask: Matrix[S, F] | None = None,
    ) -> Matrix[S, D]:
        attend, cross, feed_forward = self.blocks
        x = attend(x, mask)
        if cross is not None:
            if memory is None:
                raise ValueError("DecoderLayer: this layer attends to an encoder's output; pass memory=")
            x = cross(x, memory, memory_mask)
        return feed_forward(x)
