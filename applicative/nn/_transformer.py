"""The transformer family's models, written once: encoder, decoder, encoder-decoder.

    encoder:          x <- embed x;  x <- layer x, for each layer;  unembed (norm x)
    decoder:          x <- embed x;  x <- layer (x, mask, memory), for each layer;  unembed (norm x)
    encoder-decoder:  decoder(target, mask, memory = encoder.encode(source))

An ``Encoder`` or ``Decoder`` embeds its input (``Embedding``: a linear map per position, plus
positional encodings, fixed unless learned), runs its layers (``nn._layers``: an encoder's any
``Layer``s, a decoder's any ``CrossLayer``s), normalises and unembeds; an ``EncoderDecoder`` feeds
the encoder's states to the decoder's cross attention. A sequence is any structure ``S (D a)``; masks
are structures of booleans (``causal_mask`` for Vec sequences). ``decoder.layer(i)`` is layer i typed
as the ``DecoderLayer`` it is (``decoder.layer(0).cross``, no ``isinstance`` needed). ``init_encoder``
and ``init_decoder`` build them (``nn._transformer_init``).

Built, every model checks that its parts meet on the model's features (``nn._parts``): a
mismatch raises a ValueError naming the model and both parts, not a linear algebra operation
on first use (a layer's ``blocks`` are built, and so checked, each time it runs: at trace time
under ``jit``). An encoder built without an unembedding and called, and a decoder's ``layer(i)``
that is out of range or a user's own, raise a ValueError, IndexError or TypeError naming the model.

A model's type names only the brands its caller checks: ``Encoder[S, V, D, Out]``
(sequence, input features, model features, outputs), ``Decoder[S, V, D, E, Out]``
(E: the memory's features), ``EncoderDecoder[S, V, D, Out]``. Heads, key
features and hidden widths are the layers' business, typed in the layers.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import jax

from applicative.linalg import add
from applicative.nn._base import Matrix
from applicative.nn._blocks import CrossAttentionBlock, FeedForward, SelfAttentionBlock, norm_each
from applicative.nn._layers import CrossLayer, DecoderLayer, EncoderLayer, Layer
from applicative.nn._linear import Linear, inputs_of, outputs_of
from applicative.nn._mlp import MLP, LayerNorm
from applicative.nn._multi_head import MultiHeadAttention, features_of
from applicative.nn._parts import Level, agree, level, nested
from applicative.protocols.kinds import Measured
from applicative.records import record, static

__all__ = ["Decoder", "Embedding", "Encoder", "EncoderDecoder"]

# Brands; those summed over (by attention, linear maps, layer norms) are bound to Measured.
S = TypeVar("S", bound=Measured)  # the sequence structure
F = TypeVar("F", bound=Measured)  # the memory's structure (an encoder's sequence)
V = TypeVar("V", bound=Measured)  # input features (a one-hot vocabulary, or measurements)
D = TypeVar("D", bound=Measured)  # model features
E = TypeVar("E", bound=Measured)  # the encoder's model features, seen from a decoder
Out = TypeVar("Out")  # output features


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
