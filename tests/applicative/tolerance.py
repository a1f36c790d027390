"""The type of the tolerance dicts the tests splat into ``assert_allclose`` and ``assert_close``."""

from typing import TypedDict


class Tolerance(TypedDict):
    """``**TOL`` for ``np.testing.assert_allclose`` and ``applicative.laws.assert_close``: a plain
    ``dict[str, float]`` would also match their ``bool`` and ``str`` parameters, which mypy rejects."""

    rtol: float
    atol: float
