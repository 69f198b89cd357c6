"""Indexing: broadcasting by omission (row and column bias), transposes, affine indices, axes as values.

Kernel annotations are evaluated when the factory runs: no ``from __future__ import annotations``.
"""

import numpy as np

import pypto as pt

from .spec import NUMERIC, SIZES_1D, SIZES_2D, M, N, case
from .values import floating, normal


def _wide(x):
    return x.astype(np.float64) if floating(x.dtype) else x.astype(np.int64)


@case(dtypes=NUMERIC, sizes=SIZES_2D, reference=lambda x, b: {"y": _wide(x) + _wide(b)[None, :]})
def row_bias(dt):
    """``y[r, c] = x[r, c] + b[c]``: ``b`` broadcasts over rows."""

    def row_bias(x: pt.Tensor[dt, (M, N)], b: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (M, N)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = x[r, c] + b[c]

    return row_bias


@case(
    dtypes=NUMERIC,
    sizes=SIZES_2D,
    reference=lambda x, s, t: {"y": _wide(x) * _wide(s)[:, None] - _wide(t)[:, None]},
)
def column_bias(dt):
    """``y[r, c] = x[r, c] * s[r] - t[r]``: per-row scale and shift broadcast over columns."""

    def column_bias(x: pt.Tensor[dt, (M, N)], s: pt.Tensor[dt, (M,)], t: pt.Tensor[dt, (M,)], y: pt.Tensor[dt, (M, N)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = x[r, c] * s[r] - t[r]

    return column_bias


@case(dtypes=NUMERIC, sizes=SIZES_2D, reference=lambda a, b: {"y": np.multiply.outer(_wide(a), _wide(b))})
def outer(dt):
    """``y[r, c] = a[r] * b[c]``: both operands broadcast."""

    def outer(a: pt.Tensor[dt, (M,)], b: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (M, N)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = a[r] * b[c]

    return outer


@case(dtypes=NUMERIC, sizes=SIZES_2D, reference=lambda x, w: {"y": x.T, "z": _wide(x) - _wide(w).T})
def transpose(dt):
    """Transposed indices: ``y[c, r] = x[r, c]`` and ``z[r, c] = x[r, c] - w[c, r]``."""

    def transpose(
        x: pt.Tensor[dt, (M, N)], w: pt.Tensor[dt, (N, M)], y: pt.Tensor[dt, (N, M)], z: pt.Tensor[dt, (M, N)]
    ):
        r, c = pt.axis(0), pt.axis(1)
        y[c, r] = x[r, c]
        z[r, c] = x[r, c] - w[c, r]

    return transpose


@case(dtypes=NUMERIC, sizes=SIZES_2D, reference=lambda x, w: {"y": x.T, "z": _wide(x) - _wide(w).T})
def transpose_tiled(dt):
    """The transposes of :func:`transpose` in the user's tiles of 12 x 20 (``@pt.tile``): edges on every side."""
    return pt.tile(r=12, c=20)(transpose(dt))


@case(dtypes=NUMERIC, sizes=SIZES_1D, reference=lambda x: {"d": np.diff(_wide(x)), "s": _wide(x)[1:] * 2})
def shift(dt):
    """Shifted reads ``x[i + 1]`` from an input declared ``(N + 1,)``."""

    def shift(x: pt.Tensor[dt, (N + 1,)], d: pt.Tensor[dt, (N,)], s: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        d[i] = x[i + 1] - x[i]
        s[i] = x[i + 1] * 2

    return shift


@case(dtypes=NUMERIC, sizes=SIZES_1D, reference=lambda x: {"r": x[::-1], "p": _wide(x) + _wide(x)[::-1]})
def reverse(dt):
    """Reversed reads ``x[N - 1 - i]``."""

    def reverse(x: pt.Tensor[dt, (N,)], r: pt.Tensor[dt, (N,)], p: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        r[i] = x[N - 1 - i]
        p[i] = x[i] + x[N - 1 - i]

    return reverse


@case(
    dtypes=NUMERIC,
    sizes=SIZES_1D,
    reference=lambda x: {"e": x[0::2], "s": _wide(x)[0::2] + _wide(x)[1::2]},
)
def strided(dt):
    """Strided reads ``x[2 * i]`` and ``x[2 * i + 1]`` from an input declared ``(2 * N,)``."""

    def strided(x: pt.Tensor[dt, (2 * N,)], e: pt.Tensor[dt, (N,)], s: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        e[i] = x[2 * i]
        s[i] = x[2 * i] + x[2 * i + 1]

    return strided


@case(
    dtypes=NUMERIC,
    sizes=SIZES_2D,
    values={"x": normal(int_range=1000)},
    reference=lambda x: {
        "y": np.arange(x.size).reshape(x.shape),
        "e": np.eye(x.shape[0], x.shape[1]),
        "s": _wide(x) + np.arange(x.shape[1])[None, :] - np.arange(x.shape[0])[:, None],
    },
)
def axes_as_values(dt):
    """Axes used as values: ``pt.cast(r * N + c, dt)``, ``pt.where(r == c, 1, 0)``, ``x[r, c] + c - r``."""

    def axes_as_values(
        x: pt.Tensor[dt, (M, N)], y: pt.Tensor[dt, (M, N)], e: pt.Tensor[dt, (M, N)], s: pt.Tensor[dt, (M, N)]
    ):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = pt.cast(r * N + c, dt)
        e[r, c] = pt.where(r == c, 1, 0)
        s[r, c] = x[r, c] + c - r

    return axes_as_values


def _stencil_ref(x):
    v = _wide(x)
    return {"y": v[:-1, :-1] + v[1:, :-1] + v[:-1, 1:] - 4 * v[1:, 1:]}


@case(dtypes=NUMERIC, sizes=SIZES_2D, reference=_stencil_ref)
def stencil(dt):
    """A four-point stencil over an input declared ``(M + 1, N + 1)``."""

    def stencil(x: pt.Tensor[dt, (M + 1, N + 1)], y: pt.Tensor[dt, (M, N)]):
        i, j = pt.axis(0), pt.axis(1)
        y[i, j] = x[i, j] + x[i + 1, j] + x[i, j + 1] - 4 * x[i + 1, j + 1]

    return stencil


def _affine_stores_ref(x):
    v = _wide(x)
    z = np.empty(2 * v.size, v.dtype)
    z[0::2], z[1::2] = v, -v
    return {"y": x[::-1], "z": z, "w": np.concatenate([[7], 2 * v])}


@case(dtypes=NUMERIC, sizes=SIZES_1D, reference=_affine_stores_ref)
def affine_stores(dt):
    """Stores at affine indices: reversed ``y[N - 1 - i]``, strided ``z[2 * i + 1]``, shifted ``w[i + 1]``, and a
    constant index ``w[0]``."""

    def affine_stores(
        x: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (N,)], z: pt.Tensor[dt, (2 * N,)], w: pt.Tensor[dt, (N + 1,)]
    ):
        i = pt.axis(0)
        y[N - 1 - i] = x[i]
        z[2 * i] = x[i]
        z[2 * i + 1] = -x[i]
        w[i + 1] = x[i] * 2
        w[0] = 7

    return affine_stores
