"""What every attention initialiser takes, as one value: ``AttentionOptions``.

``MultiHeadAttention.init``, the attention blocks' ``init``, ``init_encoder`` and ``init_decoder`` take
the heads, the widths, the norm, the score, the normalisation, the variance rule and the output gain
as one ``AttentionOptions``: the templates of the heads (a structure, its elements unused), of the
model features ``D`` and of a head's query/key features ``Hk`` (structures of floating scalars, whose
dtype the weights take), a pre-norm or none, a ``ScoreInit`` (``DotProduct`` by default), a hashable
``Normalisation`` (``Softmax()`` by default), a variance rule (``by_measure`` or ``fan_in``) and the gain
of the projections back into the model features. A new option is one field there.

``check_templates`` is the check of templates that the options and the initialisers share: a template
that is not nested as it must be, or whose scalars are not floating, is a TypeError naming the
operation and the template.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from jax import Array

from applicative.nn._base import Variance, by_measure, floating_template
from applicative.nn._normalisations import SOFTMAX, Normalisation
from applicative.nn._scores import DotProduct, ScoreInit
from applicative.operands import check_nesting
from applicative.protocols.algebra import ARITHMETIC
from applicative.protocols.applicative import Applicative
from applicative.protocols.kinds import Measured

__all__ = ["AttentionOptions"]

# Brands, all summed over by attention's linear maps: bound to Measured.
D = TypeVar("D", bound=Measured)  # the model's features
Hk = TypeVar("Hk", bound=Measured)  # query/key features of a head
Heads = TypeVar("Heads", bound=Measured)  # the structure of heads


@dataclass(frozen=True, eq=False)
class AttentionOptions(Generic[Heads, D, Hk]):
    """The options of attention and of the transformer family's initialisers (``MultiHeadAttention``,
    the attention blocks, ``init_encoder``, ``init_decoder``): the templates of the heads, the model
    features and a head's query/key features, and the choices every attention layer is built with.
    A new option is one field here.

    Built, it checks its templates: ``heads`` a structure (its elements unused), ``model`` and
    ``head_features`` structures of floating scalars (the weights' dtype); else a TypeError naming
    ``AttentionOptions`` and the template. ``dataclasses.replace`` gives a variant.

    >>> import numpy as np
    >>> from applicative import Dim, Vec
    >>> from applicative.nn import DotProduct, Softmax
    >>> class Head(Dim): ...
    >>> class Model(Dim): ...
    >>> class Key(Dim): ...
    >>> options = AttentionOptions(heads=Vec.from_array(np.zeros(2), Head),
    ...                            model=Vec.from_array(np.zeros(8), Model),
    ...                            head_features=Vec.from_array(np.zeros(4), Key), layer_norm=False)
    >>> options.score is DotProduct and options.normalise == Softmax()
    True
    """

    heads: Applicative[Heads, Any]
    """The structure of heads (e.g. a Vec over a head dimension); its elements are unused."""
    model: Applicative[D, Array]
    """The model's features."""
    head_features: Applicative[Hk, Array]
    """A head's query and key features (and its value features, in the blocks)."""
    layer_norm: bool = True
    """A pre-norm ``LayerNorm`` in every block and after the last layer (the blocks' and layers')."""
    score: ScoreInit = DotProduct
    """The score of the (self-)attention; a user's own is any ``ScoreInit``."""
    normalise: Normalisation = SOFTMAX
    """The normalisation of the scores; a user's own is any hashable ``Normalisation``."""
    variance: Variance = by_measure
    """The variance rule of every weight (``by_measure`` or ``fan_in``)."""
    output_gain: float = 1.0
    """The gain of the projections back into the model features (a head's output, the MLP's output)."""

    def __post_init__(self) -> None:
        check_templates("AttentionOptions", heads=self.heads, model=self.model, head_features=self.head_features)


def check_templates(op: str, **templates: object) -> None:
    """A TypeError naming ``op`` and the template unless ``heads`` is a structure and every other
    template a structure of floating scalars (the dtype of the weights drawn from it); None is skipped."""
    given = {name: t for name, t in templates.items() if t is not None}
    check_nesting(op, None, *((name, t, 1) for name, t in given.items() if name == "heads"))
    check_nesting(op, ARITHMETIC, *((name, t, 1) for name, t in given.items() if name != "heads"))
    for name, t in given.items():
        if name != "heads":
            floating_template(op, name, t)
