"""The transformer family, written once: encoder, decoder, encoder-decoder.

    encoder layer:  x <- x + attention(norm x);           x <- x + fmap mlp (norm x)
    decoder layer:  x <- x + masked attention(norm x);
                    x <- x + attention(norm x, memory);    x <- x + fmap mlp (norm x)

(pre-norm; with ``layer_norm=False`` these are the reference's residual
layers). Each line is a block (``nn.SelfAttentionBlock``, ``nn.CrossAttentionBlock``,
``nn.FeedForward``): a layer runs its blocks (``layer.blocks``), and ``from_blocks``
builds a layer from blocks. An ``Encoder`` or ``Decoder`` embeds its input (a linear
map per position, plus positional encodings), runs its layers, normalises and
unembeds; an ``EncoderDecoder`` feeds the encoder's states to the decoder's
cross attention. A sequence is any structure ``S (D a)``; masks are
structures of booleans (``causal_mask`` for Vec sequences). An encoder's
layers are any ``Layer``s, maps of the sequence to itself (``EncoderLayer``,
a block, or one that views the sequence another way, as the Funcformer's layers
along its second axis do); a decoder's are any ``CrossLayer``s (``DecoderLayer``,
or a user's own), and ``decoder.layer(i)`` is layer i typed as the ``DecoderLayer`` it is
(``decoder.layer(0).cross``, no ``isinstance`` needed).

Built, every model checks that its parts meet on the model's features (``nn._parts``): a
mismatch raises a ValueError naming the model and both parts, not a linear algebra operation
on first use (a layer's ``blocks`` are built, and so checked, each time it runs: at trace time
under ``jit``). ``init_encoder`` and ``init_decoder`` take the attention layers' heads, widths and
choices as one ``AttentionOptions``.

A model's type names only the brands its caller checks: ``Encoder[S, V, D, Out]``
(sequence, input features, model features, outputs), ``Decoder[S, V, D, E, Out]``
(E: the memory's features), ``EncoderDecoder[S, V, D, Out]``. Heads, key
features and hidden widths are the layers' business, typed in the layers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import jax
from jax import Array
from typing_extensions import TypeVar as TypeVar_

from applicative.linalg import add
from applicative.nn._attention import (
    AttentionOptions,
    DotProduct,
    MultiHeadAttention,
    ScoreInit,
    check_templates,
    features_of,
)
from applicative.nn._base import Draws, Matrix
from applicative.nn._blocks import NORM, CrossAttentionBlock, FeedForward, SelfAttentionBlock, check_blocks, norm_each
from applicative.nn._linear import Linear, inputs_of, outputs_of
from applicative.nn._mlp import MLP, LayerNorm
from applicative.nn._parts import Level, agree, level, nested, of_kind
from applicative.operands import check_nesting
from applicative.protocols.algebra import ARITHMETIC
from applicative.protocols.applicative import Applicative
from applicative.protocols.kinds import Measured
from applicative.records import record, static

__all__ = [
    "CrossLayer",
    "Decoder",
    "DecoderLayer",
    "Embedding",
    "Encoder",
    "EncoderDecoder",
    "EncoderLayer",
    "Layer",
    "init_decoder",
    "init_encoder",
]

# Brands; those summed over (by attention, linear maps, layer norms) are bound to Measured.
S = TypeVar("S", bound=Measured)  # the sequence structure
F = TypeVar("F", bound=Measured)  # the memory's structure (an encoder's sequence)
I = TypeVar("I")  # noqa: E741  (any sequence a layer norm is mapped over)
V = TypeVar("V", bound=Measured)  # input features (a one-hot vocabulary, or measurements)
D = TypeVar("D", bound=Measured)  # model features
E = TypeVar("E", bound=Measured)  # the encoder's model features, seen from a decoder
Out = TypeVar("Out")  # output features
Heads = TypeVar("Heads", bound=Measured)
Hk = TypeVar("Hk", bound=Measured)
Hidden = TypeVar("Hidden", bound=Measured)
# The initialisers' template-only brands: inferred from ``positions``, ``source``, ``outputs`` when
# given; without them the model accepts any sequence, memory or output brand, so they default to Any
# (PEP 696), and ``model = init_decoder(...)`` needs no annotation.
AnySequence = TypeVar_("AnySequence", bound=Measured, default=Any)
AnyMemory = TypeVar_("AnyMemory", bound=Measured, default=Any)
AnyOut = TypeVar_("AnyOut", default=Any)


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


@record
class Embedding(Generic[S, V, D]):
    """A linear map per position, plus positional encodings (fixed unless ``learned``)."""

    linear: Linear[V, D]
    positions: Matrix[S, D] | None
    learned: bool = static(default=False)

    def __post_init__(self) -> None:
        linear, positions = self.linear, self.positions
        nested("Embedding", ("positions", positions, 2))
        outputs, features = outputs_of(linear), level(positions, 1)
        agree("Embedding", ("the linear map's outputs are", outputs), ("the positions' features are", features))

    def __call__(self, x: Matrix[S, V]) -> Matrix[S, D]:
        embedded = self.linear.each(x)
        if self.positions is None:
            return embedded
        positions = self.positions if self.learned else jax.lax.stop_gradient(self.positions)
        return add(embedded, positions)


@record
class Encoder(Generic[S, V, D, Out]):
    """embed, layers, final norm, unembed (``unembed=None`` inside an encoder-decoder).

    Built, it checks that the embedding, the layers it knows (``EncoderLayer``s and blocks), the norm
    and the unembedding meet on the model's features (a ValueError naming ``Encoder`` and both parts)."""

    embed: Embedding[S, V, D]
    layers: tuple[Layer[S, D], ...]
    norm: LayerNorm[D] | None
    unembed: Linear[D, Out] | None

    def __post_init__(self) -> None:
        _check_stack("Encoder", self.embed, self.layers, self.norm, self.unembed)

    def encode(self, x: Matrix[S, V], mask: Matrix[S, S] | None = None) -> Matrix[S, D]:
        """The final states, before unembedding."""
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h, mask)
        return norm_each(self.norm, h)

    def __call__(self, x: Matrix[S, V], mask: Matrix[S, S] | None = None) -> Matrix[S, Out]:
        if self.unembed is None:
            raise ValueError("Encoder: built without an unembedding; use encode()")
        return self.unembed.each(self.encode(x, mask))


@record
class Decoder(Generic[S, V, D, E, Out]):
    """embed, layers, norm, unembed. ``init_decoder``'s layers are ``DecoderLayer``s (masked
    self-attention, cross attention if built with a source, an MLP); a decoder built by hand may hold
    any ``CrossLayer``s, so ``layers`` is typed as those, and ``layer(i)`` is layer i typed as the
    ``DecoderLayer`` it is: ``decoder.layer(0).cross`` is the first layer's cross attention (None
    without one), ``decoder.layer(0).blocks`` its blocks.

    Built, it checks that the embedding, the layers, the norm and the unembedding meet on the model's
    features (a ValueError naming ``Decoder`` and both parts)."""

    embed: Embedding[S, V, D]
    layers: tuple[CrossLayer[S, D, E], ...]
    norm: LayerNorm[D] | None
    unembed: Linear[D, Out]

    def __post_init__(self) -> None:
        _check_stack("Decoder", self.embed, self.layers, self.norm, self.unembed)

    def layer(self, i: int) -> DecoderLayer[Any, D, E, Any, Any]:
        """Layer ``i`` (negative: from the end) as the ``DecoderLayer`` it is, typed with what it holds
        (``.attention``, ``.cross``, ``.mlp``, ``.norms``, ``.blocks``); an IndexError for an index out
        of range, a TypeError for a user's own layer (read it from ``layers``)."""
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"Decoder.layer: the index must be an integer, got {i!r}")
        if not -len(self.layers) <= i < len(self.layers):
            raise IndexError(f"Decoder.layer: index {i} is out of range for {len(self.layers)} layers")
        layer = self.layers[i]
        if not isinstance(layer, DecoderLayer):
            raise TypeError(
                f"Decoder.layer: layer {i} is a {type(layer).__name__}, not a DecoderLayer; read it from layers"
            )
        return layer

    def __call__(
        self,
        x: Matrix[S, V],
        mask: Matrix[S, S],
        memory: Matrix[F, E] | None = None,
        memory_mask: Matrix[S, F] | None = None,
    ) -> Matrix[S, Out]:
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h, mask, memory, memory_mask)
        return self.unembed.each(norm_each(self.norm, h))


@record
class EncoderDecoder(Generic[S, V, D, Out]):
    """decoder(target, mask, memory = encoder.encode(source)).

    Built, it checks that the decoder's cross attention reads the encoder's features (a ValueError
    naming ``EncoderDecoder`` and both)."""

    encoder: Encoder[Any, Any, D, Any]
    decoder: Decoder[S, V, D, D, Out]

    def __post_init__(self) -> None:
        encoder: object = self.encoder
        decoder: object = self.decoder
        embed = encoder.embed if isinstance(encoder, Encoder) else None
        layers = _tuple(decoder.layers) if isinstance(decoder, Decoder) else ()
        crosses = [layer.cross for layer in layers if isinstance(layer, DecoderLayer) and layer.cross is not None]
        cross = crosses[0] if crosses else None
        features = ("the encoder's features are", _features(embed))
        agree("EncoderDecoder", features, ("the decoder's cross attention reads", features_of(cross)[1]))

    def __call__(
        self,
        source: Matrix[F, Any],
        target: Matrix[S, V],
        target_mask: Matrix[S, S],
        source_mask: Matrix[F, F] | None = None,
        cross_mask: Matrix[S, F] | None = None,
    ) -> Matrix[S, Out]:
        return self.decoder(target, target_mask, self.encoder.encode(source, source_mask), cross_mask)


def _feature_part(part: object) -> object:
    """The part of an embedding or a layer this module knows whose outer structure is the model's
    features (an embedding's linear map, an attention's bias, an MLP's output map); None for any other."""
    if isinstance(part, Embedding):
        return part.linear
    if isinstance(part, EncoderLayer | DecoderLayer | SelfAttentionBlock | CrossAttentionBlock):
        return part.attention.bias if isinstance(part.attention, MultiHeadAttention) else None
    if isinstance(part, FeedForward):
        return part.mlp.output if isinstance(part.mlp, MLP) else None
    return None


def _features(part: object) -> Level | None:
    """The model features of an embedding or a layer this module knows; None for any other, or where
    they do not show."""
    features = _feature_part(part)
    return outputs_of(features) if isinstance(features, Linear) else level(features)


def _tuple(x: object) -> tuple[Any, ...]:
    """``x`` if it is a tuple (a model's layers or norms), else empty (whatever else a user passed)."""
    return x if isinstance(x, tuple) else ()


def _check_stack(module: str, embed: object, layers: object, norm: object, unembed: object) -> None:
    """Check that the embedding, the layers this module knows, the final norm and the unembedding meet
    on the model's features (``nn._parts``)."""
    agree(
        module,
        ("the embedding's outputs are", _features(embed)),
        *((f"layers[{i}]'s features are", _features(layer)) for i, layer in enumerate(_tuple(layers))),
        ("the final norm is on", level(norm.gamma) if isinstance(norm, LayerNorm) else None),
        ("the unembedding's inputs are", inputs_of(unembed)),
    )


# Initialisers: options and templates give every shape (see applicative.nn._base).


@dataclass(frozen=True)
class _Layers:
    """What every layer of a stack is built from: the attention options, the MLP's hidden template and
    activation, and the options of the cross attention (the self-attention's, scored by ``cross_score``)."""

    options: AttentionOptions[Any, Any, Any]
    cross: AttentionOptions[Any, Any, Any]
    hidden: Applicative[Any, Array]
    activation: Callable[[Array], Array]

    def _blocks(self, key: Array, source: Applicative[Any, Array] | None) -> tuple[Any, Any, Any]:
        """A layer's blocks, from the requests of ``key``: the self-attention block, the cross-attention
        block (a request even without one), the feed-forward block. Every norm starts as the identity."""
        draw, options = Draws(key), self.options
        attention = SelfAttentionBlock.init(draw.key(), options)
        cross_key = draw.key()
        cross = None if source is None else CrossAttentionBlock.init(cross_key, self.cross, source=source)
        feed_forward = FeedForward.init(
            draw.key(), model=options.model, hidden=self.hidden, layer_norm=options.layer_norm,
            activation=self.activation, variance=options.variance, output_gain=options.output_gain,
        )  # fmt: skip
        return attention, cross, feed_forward

    def encoder_layer(self, key: Array) -> EncoderLayer[Any, Any, Any, Any]:
        attention, _, feed_forward = self._blocks(key, None)
        return EncoderLayer.from_blocks(attention, feed_forward)

    def decoder_layer(
        self, key: Array, source: Applicative[Any, Array] | None
    ) -> DecoderLayer[Any, Any, Any, Any, Any]:
        return DecoderLayer.from_blocks(*self._blocks(key, source))

    def embedding(
        self, key: Array, inputs: Applicative[V, Array], positions: Matrix[S, D] | None, learned: bool
    ) -> Embedding[S, V, D]:
        return Embedding(
            Linear.init(key, inputs, self.options.model, variance=self.options.variance), positions, learned
        )

    def unembedding(self, key: Array, outputs: Applicative[Out, Array]) -> Linear[D, Out]:
        return Linear.init(key, self.options.model, outputs, variance=self.options.variance)


def _templates(op: str, layers: int, **templates: object) -> None:
    """A clear error naming ``op`` for a layer count that is not a non-negative integer, or a template
    that is not nested as it must be: inputs, hidden, outputs, source (a structure of floating scalars
    each) and positions (of structures of scalars); None is skipped."""
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 0:
        raise ValueError(f"{op}: layers must be a non-negative integer, got {layers!r}")
    check_templates(op, **{name: t for name, t in templates.items() if name != "positions"})
    positions = templates.get("positions")
    if positions is not None:
        check_nesting(op, ARITHMETIC, ("positions", positions, 2))


def init_encoder(
    key: Array,
    options: AttentionOptions[Heads, D, Hk],
    *,
    inputs: Applicative[V, Array],
    hidden: Applicative[Hidden, Array],
    layers: int,
    outputs: Applicative[AnyOut, Array] | None,
    positions: Matrix[AnySequence, D] | None = None,
    learned_positions: bool = False,
    activation: Callable[[Array], Array] = jax.nn.relu,
) -> Encoder[AnySequence, V, D, AnyOut]:
    """An encoder whose attention layers ``options`` describe (heads, widths, norms, score,
    normalisation, variance rule, output gain; ``score`` and ``normalise`` may be a user's own); every
    other shape comes from a template (``outputs=None``: no unembedding). A template that is not a
    structure of floating scalars (``positions``: of structures of scalars) raises, naming it.

    Every linear map N(0, 1 / variance(its inputs)) (LeCun's by default), the projections back into
    the model features (each head's output, the MLP's output) times ``output_gain`` (a head's output
    also 1 / sqrt(variance(heads))), zero biases, norms the identity. The requests of ``key``: each
    layer's, the embedding's, the unembedding's."""
    _templates("init_encoder", layers, inputs=inputs, hidden=hidden, outputs=outputs, positions=positions)
    spec = _Layers(options, options, hidden, activation)
    draw = Draws(key)
    keys = [draw.key() for _ in range(layers + 2)]
    return Encoder(
        spec.embedding(keys[layers], inputs, positions, learned_positions),
        tuple(spec.encoder_layer(k) for k in keys[:layers]),
        LayerNorm.init(options.model) if options.layer_norm else None,
        None if outputs is None else spec.unembedding(keys[layers + 1], outputs),
    )


def init_decoder(
    key: Array,
    options: AttentionOptions[Heads, D, Hk],
    *,
    inputs: Applicative[V, Array],
    hidden: Applicative[Hidden, Array],
    layers: int,
    outputs: Applicative[Out, Array],
    source: Applicative[AnyMemory, Array] | None = None,
    positions: Matrix[AnySequence, D] | None = None,
    learned_positions: bool = False,
    cross_score: ScoreInit = DotProduct,
    activation: Callable[[Array], Array] = jax.nn.relu,
) -> Decoder[AnySequence, V, D, AnyMemory, Out]:
    """A decoder; with ``source`` (the encoder's feature template) each layer also attends to a memory,
    scored by ``cross_score`` (self-attention by ``options.score``). Without one, a layer has no cross
    attention and no cross-attention norm. Templates are checked, and weights drawn, as
    ``init_encoder``'s."""
    _templates(
        "init_decoder", layers, inputs=inputs, hidden=hidden, outputs=outputs, source=source, positions=positions
    )
    spec = _Layers(options, dataclasses.replace(options, score=cross_score), hidden, activation)
    draw = Draws(key)
    keys = [draw.key() for _ in range(layers + 2)]
    return Decoder(
        spec.embedding(keys[layers], inputs, positions, learned_positions),
        tuple(spec.decoder_layer(k, source) for k in keys[:layers]),
        LayerNorm.init(options.model) if options.layer_norm else None,
        spec.unembedding(keys[layers + 1], outputs),
    )
