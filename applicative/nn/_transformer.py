"""The transformer family, written once: encoder, decoder, encoder-decoder.

    encoder layer:  x <- x + attention(norm x);           x <- x + fmap mlp (norm x)
    decoder layer:  x <- x + masked attention(norm x);
                    x <- x + attention(norm x, memory);    x <- x + fmap mlp (norm x)

(pre-norm; with ``layer_norm=False`` these are the reference's residual
layers). An ``Encoder`` or ``Decoder`` embeds its input (a linear map per
position, plus positional encodings), runs its layers, normalises and
unembeds; an ``EncoderDecoder`` feeds the encoder's states to the decoder's
cross attention. A sequence is any structure ``S (D a)``; masks are
structures of booleans (``causal_mask`` for Vec sequences). An encoder's
layers are any ``Layer``s, maps of the sequence to itself (``EncoderLayer``,
or one that views the sequence another way, as the Funcformer's layers along
its second axis do); a decoder's are any ``CrossLayer``s (``DecoderLayer``).

A model's type names only the brands its caller checks: ``Encoder[S, V, D, Out]``
(sequence, input features, model features, outputs), ``Decoder[S, V, D, E, Out]``
(E: the memory's features), ``EncoderDecoder[S, V, D, Out]``. Heads, key
features and hidden widths are the layers' business, typed in the layers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import jax
from jax import Array
from typing_extensions import TypeVar as TypeVar_

from applicative.linalg import add, check_nesting
from applicative.nn._attention import SOFTMAX, DotProduct, MultiHeadAttention, Normalisation, ScoreInit
from applicative.nn._base import Matrix, compiled_init
from applicative.nn._linear import Linear
from applicative.nn._mlp import MLP, LayerNorm
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
    "FeedForward",
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


def _norm(norm: LayerNorm[D] | None, x: Matrix[I, D]) -> Matrix[I, D]:
    return x if norm is None else x.fmap(norm)


@record
class EncoderLayer(Generic[Heads, D, Hk, Hidden]):
    """Self-attention and an MLP, each with a residual connection and an optional pre-norm."""

    attention: MultiHeadAttention[Heads, D, D, Hk, Hk]
    mlp: MLP[D, Hidden]
    norms: tuple[LayerNorm[D], LayerNorm[D]] | None

    def __call__(self, x: Matrix[S, D], mask: Matrix[S, S] | None = None) -> Matrix[S, D]:
        n1, n2 = self.norms if self.norms is not None else (None, None)
        x = add(x, self.attention(_norm(n1, x), mask=mask))
        return add(x, _norm(n2, x).fmap(self.mlp))


@record
class FeedForward(Generic[D, Hidden]):
    """x <- x + fmap mlp (norm x): an encoder layer's second block alone, a layer that mixes no
    positions (between kernel integrals it gives a neural operator its nonlinearity)."""

    mlp: MLP[D, Hidden]
    norm: LayerNorm[D] | None

    def __call__(self, x: Matrix[S, D], mask: Matrix[S, S] | None = None, /) -> Matrix[S, D]:
        return add(x, _norm(self.norm, x).fmap(self.mlp))


@record
class DecoderLayer(Generic[Heads, D, E, Hk, Hidden]):
    """Masked self-attention, cross attention to a memory (if ``cross``), and an MLP.

    ``norms`` are the pre-norms of the three blocks; the cross-attention one is None in a layer
    without cross attention (a decoder-only model has no parameter that gets no gradient)."""

    attention: MultiHeadAttention[Heads, D, D, Hk, Hk]
    cross: MultiHeadAttention[Heads, D, E, Hk, Hk] | None
    mlp: MLP[D, Hidden]
    norms: tuple[LayerNorm[D], LayerNorm[D] | None, LayerNorm[D]] | None

    def __call__(
        self,
        x: Matrix[S, D],
        mask: Matrix[S, S],
        memory: Matrix[F, E] | None = None,
        memory_mask: Matrix[S, F] | None = None,
    ) -> Matrix[S, D]:
        n1, n2, n3 = self.norms if self.norms is not None else (None, None, None)
        x = add(x, self.attention(_norm(n1, x), mask=mask))
        if self.cross is not None:
            if memory is None:
                raise ValueError("DecoderLayer: this layer attends to an encoder's output; pass memory=")
            x = add(x, self.cross(_norm(n2, x), memory, memory_mask))
        return add(x, _norm(n3, x).fmap(self.mlp))


@record
class Embedding(Generic[S, V, D]):
    """A linear map per position, plus positional encodings (fixed unless ``learned``)."""

    linear: Linear[V, D]
    positions: Matrix[S, D] | None
    learned: bool = static(default=False)

    def __call__(self, x: Matrix[S, V]) -> Matrix[S, D]:
        embedded = self.linear.each(x)
        if self.positions is None:
            return embedded
        positions = self.positions if self.learned else jax.lax.stop_gradient(self.positions)
        return add(embedded, positions)


@record
class Encoder(Generic[S, V, D, Out]):
    """embed, layers, final norm, unembed (``unembed=None`` inside an encoder-decoder)."""

    embed: Embedding[S, V, D]
    layers: tuple[Layer[S, D], ...]
    norm: LayerNorm[D] | None
    unembed: Linear[D, Out] | None

    def encode(self, x: Matrix[S, V], mask: Matrix[S, S] | None = None) -> Matrix[S, D]:
        """The final states, before unembedding."""
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h, mask)
        return _norm(self.norm, h)

    def __call__(self, x: Matrix[S, V], mask: Matrix[S, S] | None = None) -> Matrix[S, Out]:
        if self.unembed is None:
            raise ValueError("Encoder: built without an unembedding; use encode()")
        return self.unembed.each(self.encode(x, mask))


@record
class Decoder(Generic[S, V, D, E, Out]):
    """embed, layers (``DecoderLayer``s: masked self-attention, cross attention if built with a
    source), norm, unembed."""

    embed: Embedding[S, V, D]
    layers: tuple[CrossLayer[S, D, E], ...]
    norm: LayerNorm[D] | None
    unembed: Linear[D, Out]

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
        return self.unembed.each(_norm(self.norm, h))


@record
class EncoderDecoder(Generic[S, V, D, Out]):
    """decoder(target, mask, memory = encoder.encode(source))."""

    encoder: Encoder[Any, Any, D, Any]
    decoder: Decoder[S, V, D, D, Out]

    def __call__(
        self,
        source: Matrix[F, Any],
        target: Matrix[S, V],
        target_mask: Matrix[S, S],
        source_mask: Matrix[F, F] | None = None,
        cross_mask: Matrix[S, F] | None = None,
    ) -> Matrix[S, Out]:
        return self.decoder(target, target_mask, self.encoder.encode(source, source_mask), cross_mask)


# Initialisers: templates give every shape (see applicative.nn._base).


@dataclass(frozen=True)
class _Layers:
    """What every layer of a stack is built from: templates and choices."""

    model: Applicative[Any, Array]
    hidden: Applicative[Any, Array]
    heads: Applicative[Any, Any]
    head_features: Applicative[Any, Array]
    layer_norm: bool
    score: ScoreInit
    cross_score: ScoreInit
    normalise: Normalisation
    activation: Callable[[Array], Array]

    def _parts(self, key: Array, source: Applicative[Any, Array] | None) -> tuple[Any, Any, MLP[Any, Any]]:
        k1, k2, k3 = jax.random.split(key, 3)
        kw: dict[str, Any] = {"heads": self.heads, "model": self.model, "head_features": self.head_features}
        attention = MultiHeadAttention.init(k1, **kw, score=self.score, normalise=self.normalise)
        cross = (
            None
            if source is None
            else MultiHeadAttention.init(k2, **kw, source=source, score=self.cross_score, normalise=self.normalise)
        )
        return attention, cross, MLP.init(k3, self.model, self.hidden, self.activation)

    def encoder_layer(self, key: Array) -> EncoderLayer[Any, Any, Any, Any]:
        attention, _, mlp = self._parts(key, None)
        # Every norm starts as the identity (gain 1, shift 0); leaves are values, so training updates each apart.
        norm = LayerNorm.init(self.model)
        return EncoderLayer(attention, mlp, (norm, norm) if self.layer_norm else None)

    def decoder_layer(
        self, key: Array, source: Applicative[Any, Array] | None
    ) -> DecoderLayer[Any, Any, Any, Any, Any]:
        attention, cross, mlp = self._parts(key, source)
        norm = LayerNorm.init(self.model)
        norms = (norm, None if cross is None else norm, norm)
        return DecoderLayer(attention, cross, mlp, norms if self.layer_norm else None)


def _embedding(
    key: Array,
    inputs: Applicative[V, Array],
    model: Applicative[D, Array],
    positions: Matrix[S, D] | None,
    learned: bool,
) -> Embedding[S, V, D]:
    return Embedding(Linear.init(key, inputs, model), positions, learned)


def _templates(op: str, layers: int, *templates: object) -> None:
    """A clear error naming ``op`` for a layer count that is not a non-negative integer, or a template
    that is not nested as it must be: inputs, model, hidden, heads, head_features, outputs (a
    structure of scalars each; heads' elements are unused) and positions (of structures of scalars)."""
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 0:
        raise ValueError(f"{op}: layers must be a non-negative integer, got {layers!r}")
    names = ("inputs", "model", "hidden", "heads", "head_features", "outputs", "positions")
    given = [(name, t) for name, t in zip(names, templates, strict=True) if t is not None]
    check_nesting(op, None, *((name, t, 1) for name, t in given if name == "heads"))
    check_nesting(op, ARITHMETIC, *((name, t, 2 if name == "positions" else 1) for name, t in given if name != "heads"))


@compiled_init
def init_encoder(
    key: Array,
    *,
    inputs: Applicative[V, Array],
    model: Applicative[D, Array],
    hidden: Applicative[Hidden, Array],
    heads: Applicative[Heads, Any],
    head_features: Applicative[Hk, Array],
    layers: int,
    outputs: Applicative[AnyOut, Array] | None,
    positions: Matrix[AnySequence, D] | None = None,
    learned_positions: bool = False,
    layer_norm: bool = True,
    score: ScoreInit = DotProduct,
    normalise: Normalisation = SOFTMAX,
    activation: Callable[[Array], Array] = jax.nn.relu,
) -> Encoder[AnySequence, V, D, AnyOut]:
    """An encoder; every shape comes from a template (``outputs=None``: no unembedding). ``score``
    and ``normalise`` may be a user's own (``nn.ScoreInit``, ``nn.Normalisation``). A template that
    is not a structure of scalars (``positions``: of structures of scalars) raises, naming it."""
    _templates("init_encoder", layers, inputs, model, hidden, heads, head_features, outputs, positions)
    spec = _Layers(model, hidden, heads, head_features, layer_norm, score, score, normalise, activation)
    keys = jax.random.split(key, layers + 2)
    return Encoder(
        _embedding(keys[layers], inputs, model, positions, learned_positions),
        tuple(spec.encoder_layer(k) for k in keys[:layers]),
        LayerNorm.init(model) if layer_norm else None,
        None if outputs is None else Linear.init(keys[layers + 1], model, outputs),
    )


@compiled_init
def init_decoder(
    key: Array,
    *,
    inputs: Applicative[V, Array],
    model: Applicative[D, Array],
    hidden: Applicative[Hidden, Array],
    heads: Applicative[Heads, Any],
    head_features: Applicative[Hk, Array],
    layers: int,
    outputs: Applicative[Out, Array],
    source: Applicative[AnyMemory, Array] | None = None,
    positions: Matrix[AnySequence, D] | None = None,
    learned_positions: bool = False,
    layer_norm: bool = True,
    score: ScoreInit = DotProduct,
    cross_score: ScoreInit = DotProduct,
    normalise: Normalisation = SOFTMAX,
    activation: Callable[[Array], Array] = jax.nn.relu,
) -> Decoder[AnySequence, V, D, AnyMemory, Out]:
    """A decoder; with ``source`` (the encoder's feature template) each layer also attends to a memory,
    scored by ``cross_score`` (self-attention by ``score``). Without one, a layer has no cross attention
    and no cross-attention norm. Templates are checked as ``init_encoder``'s."""
    _templates("init_decoder", layers, inputs, model, hidden, heads, head_features, outputs, positions)
    if source is not None:
        check_nesting("init_decoder", ARITHMETIC, ("source", source, 1))
    spec = _Layers(model, hidden, heads, head_features, layer_norm, score, cross_score, normalise, activation)
    keys = jax.random.split(key, layers + 2)
    return Decoder(
        _embedding(keys[layers], inputs, model, positions, learned_positions),
        tuple(spec.decoder_layer(k, source) for k in keys[:layers]),
        LayerNorm.init(model) if layer_norm else None,
        Linear.init(keys[layers + 1], model, outputs),
    )
