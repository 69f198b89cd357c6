"""Fused kernels as users write them: softmax (along rows and down columns), column statistics, log-softmax,
layernorm, rmsnorm, gelu (tanh form).

Kernel annotations are evaluated when the factory runs: no ``from __future__ import annotations``.
"""

import numpy as np

import pypto as pt

from .spec import FLOATS, SIZES_1D, SIZES_2D, M, N, case
from .values import normal, span

# A row reduction feeds every element: summation order differences reach a few 1e-6 in float32.
ROW_REDUCTION = {"float32": (3e-5, 1e-6), "float64": (1e-11, 1e-14)}
EPS = 1e-5


def _f64(x):
    return x.astype(np.float64)


def _softmax_ref(x):
    v = _f64(x)
    e = np.exp(v - v.max(axis=1, keepdims=True, initial=-np.inf))
    return {"y": e / e.sum(axis=1, keepdims=True)}


@case(
    dtypes=FLOATS,
    sizes=SIZES_2D,
    values={"x": normal(4.0)},
    functions=("exp",),
    tolerances=ROW_REDUCTION,
    reference=_softmax_ref,
)
def softmax(dt):
    """Row softmax: max, then exp of the shifted row, then its sum (the README's ``fused_softmax``)."""

    def softmax(x: pt.Tensor[dt, (M, N)], y: pt.Tensor[dt, (M, N)]):
        row, col = pt.axis(0), pt.axis(1)
        max_val = pt.reduce_max(x[row, col], axis=col)
        exp_val = pt.exp(x[row, col] - max_val)
        sum_val = pt.reduce_sum(exp_val, axis=col)
        y[row, col] = exp_val / sum_val

    return softmax


def _column_softmax_ref(x):
    v = _f64(x)
    e = np.exp(v - v.max(axis=0, keepdims=True, initial=-np.inf))
    return {"y": e / e.sum(axis=0, keepdims=True)}


@case(
    dtypes=FLOATS,
    sizes=SIZES_2D,
    values={"x": normal(4.0)},
    functions=("exp",),
    tolerances=ROW_REDUCTION,
    reference=_column_softmax_ref,
)
def column_softmax(dt):
    """Softmax down the columns (``dim=0``): every reduction and the store walk a column."""

    def column_softmax(x: pt.Tensor[dt, (M, N)], y: pt.Tensor[dt, (M, N)]):
        row, col = pt.axis(0), pt.axis(1)
        max_val = pt.reduce_max(x[row, col], axis=row)
        exp_val = pt.exp(x[row, col] - max_val)
        y[row, col] = exp_val / pt.reduce_sum(exp_val, axis=row)

    return column_softmax


def _column_stats_ref(x, dy):
    v = _f64(x)
    mean = v.mean(axis=0) if v.shape[0] else np.full(v.shape[1], np.nan)
    with np.errstate(all="ignore"):
        var = ((v - mean) ** 2).mean(axis=0) if v.shape[0] else np.full(v.shape[1], np.nan)
    return {"mean": mean, "std": np.sqrt(var + EPS), "db": _f64(dy).sum(axis=0)}


@case(
    dtypes=FLOATS,
    sizes=SIZES_2D,
    values={"x": normal(2.0), "dy": span(-0.5, 1.5)},
    functions=("sqrt",),
    tolerances=ROW_REDUCTION,
    reference=_column_stats_ref,
)
def column_stats(dt):
    """Per-column mean, standard deviation (two passes down each column) and a bias gradient
    ``db[j] = sum_i dy[i, j]``, as in batch norm and a linear layer's backward."""

    def column_stats(
        x: pt.Tensor[dt, (M, N)],
        dy: pt.Tensor[dt, (M, N)],
        mean: pt.Tensor[dt, (N,)],
        std: pt.Tensor[dt, (N,)],
        db: pt.Tensor[dt, (N,)],
    ):
        i, j = pt.axis(0), pt.axis(1)
        mu = pt.reduce_mean(x[i, j], axis=i)
        mean[j] = mu
        std[j] = pt.sqrt(pt.reduce_mean((x[i, j] - mu) * (x[i, j] - mu), axis=i) + EPS)
        db[j] = pt.reduce_sum(dy[i, j], axis=i)

    return column_stats


@case(
    dtypes=FLOATS,
    sizes=SIZES_2D,
    values={"x": normal(2.0), "dy": span(-0.5, 1.5)},
    functions=("sqrt",),
    tolerances=ROW_REDUCTION,
    reference=_column_stats_ref,
)
def column_stats_tiled(dt):
    """:func:`column_stats` in the user's blocks of 5 rows and 24 columns (``@pt.tile``)."""
    return pt.tile(i=5, j=24)(column_stats(dt))


def _log_softmax_ref(x):
    v = _f64(x)
    shifted = v - v.max(axis=1, keepdims=True, initial=-np.inf)
    return {"y": shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))}


@case(
    dtypes=FLOATS,
    sizes=SIZES_2D,
    values={"x": normal(4.0)},
    functions=("exp", "log"),
    tolerances=ROW_REDUCTION,
    reference=_log_softmax_ref,
)
def log_softmax(dt):
    """Row log-softmax: ``x - max - log(sum(exp(x - max)))``."""

    def log_softmax(x: pt.Tensor[dt, (M, N)], y: pt.Tensor[dt, (M, N)]):
        r, c = pt.axis(0), pt.axis(1)
        shifted = x[r, c] - pt.reduce_max(x[r, c], axis=c)
        y[r, c] = shifted - pt.log(pt.reduce_sum(pt.exp(shifted), axis=c))

    return log_softmax


def _layernorm_ref(x, g, b):
    v = _f64(x)
    mu = v.mean(axis=1, keepdims=True) if v.shape[1] else np.full((v.shape[0], 1), np.nan)
    var = ((v - mu) ** 2).mean(axis=1, keepdims=True) if v.shape[1] else mu
    return {"y": (v - mu) / np.sqrt(var + EPS) * _f64(g) + _f64(b)}


@case(
    dtypes=FLOATS,
    sizes=SIZES_2D,
    values={"x": normal(2.0), "g": span(0.5, 1.5), "b": normal(0.1)},
    functions=("rsqrt",),
    tolerances={"float32": (1e-4, 1e-5), "float64": (1e-10, 1e-12)},
    reference=_layernorm_ref,
)
def layernorm(dt):
    """Layer normalisation over rows with gain and bias: mean, variance, ``rsqrt(var + eps)``."""

    def layernorm(x: pt.Tensor[dt, (M, N)], g: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (M, N)]):
        r, c = pt.axis(0), pt.axis(1)
        mean = pt.reduce_mean(x[r, c], axis=c)
        var = pt.reduce_mean((x[r, c] - mean) ** 2, axis=c)
        y[r, c] = (x[r, c] - mean) * pt.rsqrt(var + 1e-5) * g[c] + b[c]

    return layernorm


def _rmsnorm_ref(x, g):
    v = _f64(x)
    ms = (v * v).mean(axis=1, keepdims=True) if v.shape[1] else np.full((v.shape[0], 1), np.nan)
    return {"y": v / np.sqrt(ms + EPS) * _f64(g)}


@case(
    dtypes=FLOATS,
    sizes=SIZES_2D,
    values={"x": normal(2.0), "g": span(0.5, 1.5)},
    functions=("rsqrt",),
    tolerances=ROW_REDUCTION,
    reference=_rmsnorm_ref,
)
def rmsnorm(dt):
    """RMS normalisation: ``x * rsqrt(mean(x**2) + eps) * g``."""

    def rmsnorm(x: pt.Tensor[dt, (M, N)], g: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (M, N)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = x[r, c] * pt.rsqrt(pt.reduce_mean(x[r, c] * x[r, c], axis=c) + 1e-5) * g[c]

    return rmsnorm


def _gelu_ref(x):
    v = _f64(x)
    return {"y": 0.5 * v * (1.0 + np.tanh(0.7978845608028654 * (v + 0.044715 * v**3)))}


@case(
    dtypes=FLOATS,
    sizes=SIZES_1D,
    values={"x": normal(3.0)},
    functions=("tanh",),
    reference=_gelu_ref,
)
def gelu_tanh(dt):
    """GELU, tanh approximation: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))``."""

    def gelu_tanh(x: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        v = x[i]
        y[i] = 0.5 * v * (1.0 + pt.tanh(0.7978845608028654 * (v + 0.044715 * v**3)))

    return gelu_tanh


def _broadcast_functions_ref(x, b):
    v, c = _f64(x), _f64(b)
    return {"y": np.tanh(0.5 * c)[None, :] * v + 1.0 / c, "z": (np.exp(c)[None, :] + v).max(axis=1, initial=-np.inf)}


@case(
    dtypes=FLOATS,
    sizes=SIZES_2D,
    values={"x": normal(2.0), "b": span(0.5, 2.0)},
    functions=("tanh", "exp"),
    tolerances=ROW_REDUCTION,
    reference=_broadcast_functions_ref,
)
def broadcast_functions(dt):
    """Functions of a row vector broadcast down the rows (``tanh(b[j])`` for every ``i``; ``exp(b[j])`` inside
    a maximum taken for every row): computed once in a nest of their own, not once per row."""

    def broadcast_functions(x: pt.Tensor[dt, (M, N)], b: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (M, N)],
                            z: pt.Tensor[dt, (M,)]):  # fmt: skip
        i, j = pt.axis(0), pt.axis(1)
        y[i, j] = pt.tanh(0.5 * b[j]) * x[i, j] + 1.0 / b[j]
        z[i] = pt.reduce_max(pt.exp(b[j]) + x[i, j], axis=j)

    return broadcast_functions
