"""Matrix products written as reductions: ``C[i, j] = pt.reduce_sum(A[i, k] * B[k, j], axis=k)``.

Kernel annotations are evaluated when the factory runs: no ``from __future__ import annotations``.
"""

import numpy as np

import pypto as pt

from .spec import FLOATS, NUMERIC, SMALL_INTS, B, K, M, N, case
from .values import floating, span

# Mostly positive operands keep every summation order within a relative bound of the exact dot product.
VALUES = {"a": span(-0.25, 1.0), "w": span(-0.25, 1.0)}
DOT = {"float32": (1e-4, 1e-5), "float64": (1e-11, 1e-13)}


def _wide(x):
    return x.astype(np.float64) if floating(x.dtype) else x.astype(np.int64)


@case(
    dtypes=NUMERIC + SMALL_INTS,
    sizes=(
        {"M": 1, "K": 1, "N": 1},
        {"M": 7, "K": 127, "N": 5},
        {"M": 24, "K": 33, "N": 17},
        {"M": 3, "K": 1031, "N": 4},
        {"M": 3, "K": 0, "N": 4},
        {"M": 0, "K": 3, "N": 2},
        {"M": 16, "K": 8, "N": 64},  # whole register tiles (8 x 32 for float32)
        {"M": 19, "K": 40, "N": 70},  # row and column tiles left over
        {"M": 300, "K": 3, "N": 2},  # tall and skinny
    ),
    values=VALUES,
    tolerances=DOT,
    reference=lambda a, w: {"c": _wide(a) @ _wide(w)},
)
def matmul(dt):
    """Matrix product; an empty inner dimension gives zeros (the empty sum); narrow integers wrap around."""

    def matmul(a: pt.Tensor[dt, (M, K)], w: pt.Tensor[dt, (K, N)], c: pt.Tensor[dt, (M, N)]):
        i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
        c[i, j] = pt.reduce_sum(a[i, k] * w[k, j], axis=k)

    return matmul


@case(
    dtypes=NUMERIC,
    sizes=(
        {"M": 1, "K": 1, "N": 1},
        {"M": 17, "K": 9, "N": 100},  # blocks of rows and tasks of columns left over, one block of k
        {"M": 40, "K": 65, "N": 24},  # five blocks of k, the last of one point
        {"M": 3, "K": 0, "N": 4},  # no k at all: zeros
    ),
    values=VALUES,
    tolerances=DOT,
    reference=lambda a, w: {"c": _wide(a) @ _wide(w)},
)
def matmul_tiled(dt):
    """A matrix product with the user's tiles: blocks of 12 rows, tasks of 40 columns (neither a multiple of
    the register tile) and blocks of 16 points of ``k``, through ``@pt.tile``."""
    return pt.tile(i=12, j=40, k=16)(matmul(dt))


@case(
    dtypes=NUMERIC,
    sizes=(
        {"B": 1, "M": 1, "K": 1, "N": 1},
        {"B": 3, "M": 7, "K": 33, "N": 5},
        {"B": 2, "M": 24, "K": 127, "N": 9},
        {"B": 0, "M": 2, "K": 3, "N": 2},
        {"B": 2, "M": 3, "K": 0, "N": 4},
    ),
    values=VALUES,
    tolerances=DOT,
    reference=lambda a, w: {"c": np.matmul(_wide(a), _wide(w))},
)
def batched_matmul(dt):
    """A batch of matrix products over a leading batch axis."""

    def batched_matmul(a: pt.Tensor[dt, (B, M, K)], w: pt.Tensor[dt, (B, K, N)], c: pt.Tensor[dt, (B, M, N)]):
        n, i, j, k = pt.axis(0), pt.axis(1), pt.axis(2), pt.axis(3)
        c[n, i, j] = pt.reduce_sum(a[n, i, k] * w[n, k, j], axis=k)

    return batched_matmul


def _dense_ref(x, w, bias):
    return {"y": np.maximum(_wide(x) @ _wide(w).T + _wide(bias), 0)}


@case(
    dtypes=NUMERIC,
    sizes=(
        {"M": 1, "K": 1, "N": 1},
        {"M": 9, "K": 33, "N": 40},
        {"M": 17, "K": 5, "N": 65},
        {"M": 2, "K": 0, "N": 3},
    ),
    values={"x": span(-1.0, 1.0), "w": span(-0.25, 1.0), "bias": span(-1.0, 1.0)},
    tolerances=DOT,
    reference=_dense_ref,
)
def dense_relu(dt):
    """A dense layer with its weight stored ``(out, in)`` and a fused epilogue: ``relu(x @ w.T + bias)``."""

    def dense_relu(x: pt.Tensor[dt, (M, K)], w: pt.Tensor[dt, (N, K)], bias: pt.Tensor[dt, (N,)],
                   y: pt.Tensor[dt, (M, N)]):  # fmt: skip
        i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
        y[i, j] = pt.maximum(pt.reduce_sum(x[i, k] * w[j, k], axis=k) + bias[j], 0)

    return dense_relu


@case(
    dtypes=NUMERIC,
    sizes=({"M": 1, "K": 1}, {"M": 33, "K": 70}, {"M": 5, "K": 0}, {"M": 0, "K": 4}),
    values={"a": span(-0.25, 1.0), "v": span(-0.25, 1.0), "u": span(-0.25, 1.0)},
    tolerances=DOT,
    reference=lambda a, v, u: {"y": _wide(a) @ _wide(v), "z": _wide(u) @ _wide(a)},
)
def matvec(dt):
    """Matrix-vector products both ways: ``y = a @ v`` (along rows) and ``z = u @ a`` (down columns)."""

    def matvec(a: pt.Tensor[dt, (M, K)], v: pt.Tensor[dt, (K,)], u: pt.Tensor[dt, (M,)], y: pt.Tensor[dt, (M,)],
               z: pt.Tensor[dt, (K,)]):  # fmt: skip
        i, k = pt.axis(0), pt.axis(1)
        y[i] = pt.reduce_sum(a[i, k] * v[k], axis=k)
        z[k] = pt.reduce_sum(a[i, k] * u[i], axis=i)

    return matvec


def _silu(x):
    x = _wide(x)
    return x / (1.0 + np.exp(-x))


PROLOGUE_SIZES = (
    {"M": 1, "K": 1, "N": 1},
    {"M": 9, "K": 33, "N": 40},
    {"M": 19, "K": 40, "N": 70},  # row and column tiles left over
    {"M": 3, "K": 0, "N": 4},
)


@case(
    dtypes=FLOATS,
    sizes=PROLOGUE_SIZES,
    values={"a": span(-2.0, 2.0), "w": span(-0.25, 1.0)},
    tolerances={"float32": (2e-4, 1e-5), "float64": (1e-11, 1e-13)},
    reference=lambda a, w: {"c": _silu(a) @ (0.5 * _wide(w))},
)
def prologue_matmul(dt):
    """A matrix product whose operands are computed from loads (``silu(a) @ (0.5 * w)``): each operand is
    computed once, not once per multiply-add."""

    def prologue_matmul(a: pt.Tensor[dt, (M, K)], w: pt.Tensor[dt, (K, N)], c: pt.Tensor[dt, (M, N)]):
        i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
        c[i, j] = pt.reduce_sum((a[i, k] * pt.sigmoid(a[i, k])) * (w[k, j] * 0.5), axis=k)

    return prologue_matmul


@case(
    dtypes=FLOATS,
    sizes=PROLOGUE_SIZES,
    values={"x": span(-1.0, 1.0), "w1": span(-0.25, 1.0), "w3": span(-0.25, 1.0)},
    tolerances={"float32": (2e-4, 1e-5), "float64": (1e-11, 1e-13)},
    reference=lambda x, w1, w3: {"h": _silu(_wide(x) @ _wide(w1)) * (_wide(x) @ _wide(w3))},
)
def gated_matmuls(dt):
    """Two matrix products combined elementwise, SwiGLU's hidden layer ``silu(x @ w1) * (x @ w3)``."""

    def gated_matmuls(x: pt.Tensor[dt, (M, K)], w1: pt.Tensor[dt, (K, N)], w3: pt.Tensor[dt, (K, N)],
                      h: pt.Tensor[dt, (M, N)]):  # fmt: skip
        i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
        g = pt.reduce_sum(x[i, k] * w1[k, j], axis=k)
        h[i, j] = g * pt.sigmoid(g) * pt.reduce_sum(x[i, k] * w3[k, j], axis=k)

    return gated_matmuls
