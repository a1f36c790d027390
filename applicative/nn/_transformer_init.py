"""The transformer family's initialisers: ``init_encoder`` and ``init_decoder``.

An initialiser takes a PRNG key, the attention layers' heads, widths and choices as one
``AttentionOptions`` (heads, widths, norms, score, normalisation, variance rule, output gain), and every
other shape from a template: the inputs, the MLP's hidden features, the outputs, the positional
encodings, and (a decoder's) the memory's features ``source``. It builds each layer from its blocks
(each block's ``init``: ``nn._blocks``), the embedding, the final norm and the unembedding
(``nn._transformer``).

Every linear map N(0, 1 / variance(its inputs)) (LeCun's by default), the projections back into the
model features (each head's output, the MLP's output) times ``output_gain`` (a head's output also
1 / sqrt(variance(heads))), zero biases, norms the identity; the requests of ``key``: each layer's, the
embedding's, the unembedding's (``applicative.nn._base``). A layer count that is not a non-negative
integer is a ValueError, and a template that is not as it must be (inputs, hidden, outputs, source:
structures of floating scalars; positions: of structures of scalars) a TypeError, each naming the
initialiser.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import jax
from jax import Array
from typing_extensions import TypeVar as TypeVar_

from applicative.nn._base import Draws, Matrix
from applicative.nn._blocks import CrossAttentionBlock, FeedForward, SelfAttentionBlock
from applicative.nn._layers import DecoderLayer, EncoderLayer
from applicative.nn._linear import Linear
from applicative.nn._mlp import LayerNorm
from applicative.nn._options import AttentionOptions, check_templates
from applicative.nn._scores import DotProduct, ScoreInit
from applicative.nn._transformer import Decoder, Embedding, Encoder
from applicative.operands import check_nesting
from applicative.protocols.algebra import ARITHMETIC
from applicative.protocols.applicative import Applicative
from applicative.protocols.kinds import Measured

__all__ = ["init_decoder", "init_encoder"]

# Brands; those summed over (by attention, linear maps, layer norms) are bound to Measured.
S = TypeVar("S", bound=Measured)  # the sequence structure
V = TypeVar("V", bound=Measured)  # input features (a one-hot vocabulary, or measurements)
D = TypeVar("D", bound=Measured)  # model features
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
