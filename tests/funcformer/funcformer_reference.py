"""An independent float64 numpy reference of the Funcformer forward pass (``funcformer.Funcformer``).

Imports neither ``funcformer`` nor ``applicative``: parameters arrive as plain numpy arrays in
nested dicts (see ``forward``). Everything is computed another way than the model does it:

* integrals over [-1, 1] by Gauss-Legendre quadrature of the series evaluated with
  ``numpy.polynomial.chebyshev`` (the Gram matrix G[i, j] = integral T_i T_j and the weights
  integral T_k are built that way, not from their closed forms);
* "sample at P Chebyshev points, apply f, transform back" by explicit matrices: the Vandermonde
  matrix V[k, i] = T_i(x_k) at x_k = cos(pi (k + 1/2) / P) and the interpolation matrix, the first
  N rows of inv(chebvander(x, P - 1)) (not a DCT);
* linear maps integrate h against the weight functions at the quadrature nodes;
  softmax rows are shifted by their largest sampled value, not their largest coefficient.

A state is an (N, N, C) array H, h_c(x, y) = sum H[i, j, c] T_i(x) T_j(y). A layer runs along
axis 0 (the sequence); axis 1 and the channels are the features (a "y" layer transposes first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.polynomial import chebyshev as C
from numpy.polynomial import legendre as L

Params = dict[str, Any]


@dataclass(frozen=True)
class Basis:
    """Chebyshev series with n coefficients, sampled at p points."""

    n: int
    p: int

    @cached_property
    def nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Gauss-Legendre nodes and weights, exact for products of two degree-(n-1) series (and more)."""
        return L.leggauss(self.n + 4)

    @cached_property
    def at_nodes(self) -> np.ndarray:
        """(M, n): T_i at the quadrature nodes, through chebval of unit coefficient vectors."""
        x, _ = self.nodes
        return np.stack([C.chebval(x, np.eye(self.n)[i]) for i in range(self.n)], axis=1)

    @cached_property
    def gram(self) -> np.ndarray:
        """G[i, j] = integral over [-1, 1] of T_i T_j, by quadrature."""
        _, w = self.nodes
        b = self.at_nodes
        gram: np.ndarray = np.einsum("m,mi,mj->ij", w, b, b)
        return gram

    @cached_property
    def weights(self) -> np.ndarray:
        """w[k] = integral over [-1, 1] of T_k, by quadrature."""
        _, w = self.nodes
        weights: np.ndarray = w @ self.at_nodes
        return weights

    @cached_property
    def points(self) -> np.ndarray:
        k = np.arange(self.p)
        return np.cos(np.pi * (k + 0.5) / self.p)

    @cached_property
    def vander(self) -> np.ndarray:
        """(p, n): V[k, i] = T_i(x_k)."""
        return C.chebvander(self.points, self.n - 1)

    @cached_property
    def interp(self) -> np.ndarray:
        """(n, p): the first n coefficients of the degree-(p-1) interpolant of values at the points."""
        return np.linalg.inv(C.chebvander(self.points, self.p - 1))[: self.n]

    # Along an axis of an array.

    def sample(self, c: np.ndarray, axis: int) -> np.ndarray:
        return np.moveaxis(np.tensordot(self.vander, c, axes=([1], [axis])), 0, axis)

    def analyse(self, v: np.ndarray, axis: int) -> np.ndarray:
        return np.moveaxis(np.tensordot(self.interp, v, axes=([1], [axis])), 0, axis)

    def fmap(self, f: Callable[[np.ndarray], np.ndarray], c: np.ndarray, axis: int) -> np.ndarray:
        return self.analyse(f(self.sample(c, axis)), axis)

    def integrate(self, c: np.ndarray, axis: int) -> np.ndarray:
        """integral over [-1, 1] along ``axis``: the series evaluated at the Gauss nodes, weighted."""
        x, w = self.nodes
        return np.tensordot(w, np.moveaxis(C.chebval(x, np.moveaxis(c, axis, 0)), -1, 0), axes=1)


def linear(basis: Basis, weight: np.ndarray, h: np.ndarray) -> np.ndarray:
    """out_{o,c}(t) = sum_d integral W_{o,c,d}(t, s) h_d(s) ds, no bias.

    weight (N_out, C_out, N_in, C_in); h (..., N_in, C_in) -> (..., N_out, C_out). The integral is the
    Gauss quadrature of both factors at the nodes (s axis)."""
    _, w = basis.nodes
    b = basis.at_nodes  # (M, N_in)
    h_nodes = np.einsum("mi,...id->...md", b, h)
    w_nodes = np.einsum("mj,ocjd->ocmd", b, weight)
    out: np.ndarray = np.einsum("m,ocmd,...md->...oc", w, w_nodes, h_nodes)
    return out


def layer_norm(basis: Basis, gamma: np.ndarray, beta: np.ndarray, eps: float, row: np.ndarray) -> np.ndarray:
    """One row (N, C) of feature functions: gamma (h - mean) / sqrt(var + eps) + beta.

    mean, var: integrals over the feature axis summed over the channels, divided by 2 C; the square and
    the product with gamma are nonlinear maps of the values (sampled at P points, transformed back)."""
    measure = 2.0 * row.shape[1]
    mean = basis.integrate(row, 0).sum() / measure
    centred = row.copy()
    centred[0] -= mean  # the constant function
    square = basis.fmap(np.square, centred, 0)
    var = basis.integrate(square, 0).sum() / measure
    product = basis.analyse(basis.sample(gamma, 0) * basis.sample(centred, 0), 0)
    normalised: np.ndarray = product / np.sqrt(var + eps) + beta
    return normalised


def along_sequence(basis: Basis, f: Callable[[np.ndarray], np.ndarray], h: np.ndarray) -> np.ndarray:
    """fmap f over the sequence axis of h (N, N, C): f maps each of the P sampled rows (N, C)."""
    rows = basis.sample(h, 0)
    return basis.analyse(np.stack([f(r) for r in rows]), 0)


def normalise_row(basis: Basis, row: np.ndarray, how: str) -> np.ndarray:
    """A score row (N coefficients of a function of the key) normalised."""
    if how == "coefficients":
        e = np.exp(row - row.max())
        normalised: np.ndarray = e / e.sum()
        return normalised
    values = basis.sample(row, 0)
    e = basis.analyse(np.exp(values - values.max()), 0)
    normalised = e / (basis.weights @ e)
    return normalised


def attention(basis: Basis, params: Params, h: np.ndarray, how: str) -> np.ndarray:
    """h (N, N, C) in coefficients along the sequence (axis 0) -> (N, N, C)."""
    g = basis.gram
    heads = params["query"]["weight"].shape[0]
    out = np.zeros_like(h)
    for i in range(heads):
        q, k, v = (
            linear(basis, params[name]["weight"][i], h) + _t0(params[name]["bias"][i], h.shape[0])
            for name in ("query", "key", "value")
        )
        ck = q.shape[2]
        scores = sum(q[:, :, c] @ g @ k[:, :, c].T for c in range(ck)) / np.sqrt(2.0 * ck)
        # scores[a, b]: a function of (query, key); normalise each query's row at the P query points.
        rows = basis.sample(scores, 0)  # (P, N)
        weights = basis.analyse(np.stack([normalise_row(basis, r, how) for r in rows]), 0)  # (N, N)
        attended = np.einsum("ab,bc,cjd->ajd", weights, g, v)
        out += linear(basis, params["output"][i], attended)
    biased: np.ndarray = out + _t0(params["bias"], h.shape[0])
    return biased


def kernel_integral(basis: Basis, params: Params, h: np.ndarray) -> np.ndarray:
    """h + sum_heads W_o integral K(s, t) (W_v h + b_v)(t) dt + b, K (N, N) the coefficients of a
    function of (s, t): the integral over t is K G V (G the Gram matrix)."""
    g, n = basis.gram, h.shape[0]
    out = np.zeros_like(h)
    for i in range(params["kernel"].shape[0]):
        v = linear(basis, params["value"]["weight"][i], h) + _t0(params["value"]["bias"][i], n)
        mixed = np.einsum("ab,bc,cjd->ajd", params["kernel"][i], g, v)
        out += linear(basis, params["output"][i], mixed)
    mixed_h: np.ndarray = h + out + _t0(params["bias"], n)
    return mixed_h


def _t0(bias: np.ndarray, n: int) -> np.ndarray:
    """A bias function of the features (N, C) as the constant function of the sequence: (n, N, C)."""
    out = np.zeros((n, *bias.shape))
    out[0] = bias
    return out


def mlp(basis: Basis, params: Params, row: np.ndarray) -> np.ndarray:
    """One row (N, C): W2 relu(W1 h + b1) + b2, relu on the values of the hidden functions."""
    hidden = linear(basis, params["hidden"]["weight"], row) + params["hidden"]["bias"]
    hidden = basis.fmap(lambda a: np.maximum(a, 0.0), hidden, 0)
    out: np.ndarray = linear(basis, params["output"]["weight"], hidden) + params["output"]["bias"]
    return out


def forward(params: Params, source: np.ndarray, *, normalise: str, points: int = 0, eps: float = 1e-5) -> np.ndarray:
    """source f (N, N) -> (N, N).

    params: {"embed": lin, "positions": (N, N, C), "layers": [layer], "norm": ln | None, "unembed": lin} with
    lin = {"weight": (N, C_out, N, C_in), "bias": (N, C_out)}, ln = {"gamma": (N, C), "beta": (N, C)},
    layer = {"axis": "x" | "y", "attention": {"query", "key", "value": heads-stacked lin,
    "output": (H, N, C, N, C_head), "bias": (N, C)}, "mlp": {"hidden": lin, "output": lin},
    "norms": [ln, ln] | None}, or a kernel layer {"axis", "kernel": {"kernel": (H, N, N), "value": heads-stacked
    lin, "output", "bias"}}, or an MLP layer {"axis", "mlp", "norms": [ln] | None}."""
    source = np.asarray(source, np.float64)
    n = source.shape[0]
    basis = Basis(n, points or 2 * n)

    def norm(ln: Params | None, h: np.ndarray) -> np.ndarray:
        if ln is None:
            return h
        return along_sequence(basis, lambda r: layer_norm(basis, ln["gamma"], ln["beta"], eps, r), h)

    embed = params["embed"]
    h = linear(basis, embed["weight"], source[:, :, None]) + _t0(embed["bias"], n) + params["positions"]
    for layer in params["layers"]:
        if layer["axis"] == "y":
            h = h.transpose(1, 0, 2)

        def layer_mlp(r: np.ndarray, lay: Params = layer) -> np.ndarray:
            return mlp(basis, lay["mlp"], r)

        if "kernel" in layer:
            h = kernel_integral(basis, layer["kernel"], h)
        elif "attention" not in layer:  # an MLP layer
            h = h + along_sequence(basis, layer_mlp, norm((layer["norms"] or [None])[0], h))
        else:
            norms = layer["norms"] or (None, None)
            h = h + attention(basis, layer["attention"], norm(norms[0], h), normalise)
            h = h + along_sequence(basis, layer_mlp, norm(norms[1], h))
        if layer["axis"] == "y":
            h = h.transpose(1, 0, 2)
    h = norm(params["norm"], h)
    unembed = params["unembed"]
    output: np.ndarray = (linear(basis, unembed["weight"], h) + _t0(unembed["bias"], n))[:, :, 0]
    return output
