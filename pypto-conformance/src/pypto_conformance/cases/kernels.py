"""Kernel structure: several outputs, static shapes, scalar parameters, in-place updates, unrolled
Python loops, and one large input (16M elements) that exercises parallel reductions.

Kernel annotations are evaluated when the factory runs: no ``from __future__ import annotations``.
"""

import numpy as np

import pypto as pt

from .reductions import LONG_REDUCTION, reduce_ref
from .spec import FLOATS, NUMERIC, SIZES_1D, SIZES_2D, M, N, case
from .values import bools, floating, normal, span


def _wide(x):
    return x.astype(np.float64) if floating(x.dtype) else x.astype(np.int64)


def _multi_ref(x):
    v = _wide(x)
    return {"y": 2 * v, "z": 2 * v + 1, "total": reduce_ref("sum", 2 * v + 1, None), "peak": reduce_ref("max", x, None)}


@case(
    dtypes=NUMERIC,
    sizes=SIZES_1D,
    values={"x": normal(int_range=1000)},
    tolerances=LONG_REDUCTION,
    reference=_multi_ref,
)
def multi_output(dt):
    """Four outputs from one kernel; a later store reads an earlier output (``z`` reads ``y``)."""

    def multi_output(
        x: pt.Tensor[dt, (N,)],
        y: pt.Tensor[dt, (N,)],
        z: pt.Tensor[dt, (N,)],
        total: pt.Tensor[dt, (1,)],
        peak: pt.Tensor[dt, (1,)],
    ):
        i = pt.axis(0)
        y[i] = x[i] * 2
        z[i] = y[i] + 1
        total[0] = pt.reduce_sum(z[i], axis=i)
        peak[0] = pt.reduce_max(x[i], axis=i)

    return multi_output


def _counts_ref(x):
    v = _wide(x)
    n = v.shape[1]
    return {
        "pos": (v > 0).sum(axis=1),
        "mean": v.sum(axis=1) / n if n else np.full(v.shape[0], np.nan),
        "frac": (v > 0).mean() if v.size else np.nan,
    }


@case(
    dtypes=NUMERIC, sizes=SIZES_2D, values={"x": normal(int_range=3)}, tolerances=LONG_REDUCTION, reference=_counts_ref
)
def counts_and_shape(dt):
    """Sums of booleans count (as int32); a tensor's ``shape`` is a value in expressions; the mean of a cast."""
    out = dt if dt.is_float else pt.float32

    def counts_and_shape(
        x: pt.Tensor[dt, (M, N)],
        pos: pt.Tensor[pt.int32, (M,)],
        mean: pt.Tensor[out, (M,)],
        frac: pt.Tensor[pt.float32, (1,)],
    ):
        r, c = pt.axis(0), pt.axis(1)
        pos[r] = pt.reduce_sum(x[r, c] > 0, axis=c)
        mean[r] = pt.reduce_sum(x[r, c], axis=c) / x.shape[1]
        frac[0] = pt.reduce_mean(pt.cast(x[r, c] > 0, pt.float32), axis=(r, c))

    return counts_and_shape


def _static_ref(x, b):
    v = _wide(x)
    return {"y": v * 2 + _wide(b)[None, :], "rs": v.sum(axis=1)}


@case(dtypes=NUMERIC, sizes=({}, {}, {}), reference=_static_ref)
def static_shape(dt):
    """Static shapes ``pt.Tensor[float, (4, 8)]`` (``float`` is float32 and ``int`` int32 in annotations)."""
    t = {pt.float32: float, pt.int32: int}.get(dt, dt)

    def static_shape(x: pt.Tensor[t, (4, 8)], b: pt.Tensor[t, (8,)], y: pt.Tensor[t, (4, 8)], rs: pt.Tensor[t, (4,)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = x[r, c] * 2 + b[c]
        rs[r] = pt.reduce_sum(x[r, c], axis=c)

    return static_shape


def _static_mixed_ref(x, s):
    v = _wide(x)
    return {"y": v * _wide(s)[:, None], "m": reduce_ref("max", x, 0), "first": v[0] - v[3]}


@case(dtypes=NUMERIC, sizes=SIZES_1D, reference=_static_mixed_ref)
def static_mixed(dt):
    """A static leading size with a symbolic trailing one ``(4, N)``; reductions over the static axis."""

    def static_mixed(
        x: pt.Tensor[dt, (4, N)],
        s: pt.Tensor[dt, (4,)],
        y: pt.Tensor[dt, (4, N)],
        m: pt.Tensor[dt, (N,)],
        first: pt.Tensor[dt, (N,)],
    ):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = x[r, c] * s[r]
        m[c] = pt.reduce_max(x[r, c], axis=r)
        first[c] = x[0, c] - x[3, c]

    return static_mixed


def _scalar_ref(alpha, x, beta, flag, n):
    v = _wide(x)
    a = v * _wide(np.asarray(alpha)) + _wide(np.asarray(beta))
    b = v - np.int64(n)
    return {"y": a if flag else b, "z": b if flag else a}


@case(
    dtypes=NUMERIC,
    sizes=SIZES_1D,
    values={"alpha": span(-3, 3), "beta": span(-10, 10), "flag": bools(), "n": span(-5, 5)},
    reference=_scalar_ref,
)
def scalar_params(dt):
    """Scalar parameters of the kernel's dtype, ``bool`` and ``int``, mixed with tensor values."""

    def scalar_params(
        alpha: dt, x: pt.Tensor[dt, (N,)], beta: dt, flag: bool, n: int, y: pt.Tensor[dt, (N,)], z: pt.Tensor[dt, (N,)]
    ):
        i = pt.axis(0)
        y[i] = pt.where(flag, alpha * x[i] + beta, x[i] - n)
        z[i] = pt.where(~flag, alpha * x[i] + beta, x[i] - n)

    return scalar_params


@case(
    dtypes=NUMERIC,
    sizes=SIZES_2D,
    values={"s": span(-50, 50)},
    reference=lambda x, s: {"out": np.abs(np.asarray(s, x.dtype)) + 0 * x},
)
def invariant_store(dt):
    """A row of points all given a value that does not vary along it (found by the fuzzer: vectors of eight
    64-bit lanes crashed PoCL's code generator); ``x`` only gives the shape."""

    def invariant_store(x: pt.Tensor[dt, (M, N)], s: dt, out: pt.Tensor[dt, (M, N)]):
        i, j = pt.axis(0), pt.axis(1)
        out[i, j] = abs(s)

    return invariant_store


@case(
    dtypes=NUMERIC,
    sizes=SIZES_1D,
    values={"x": normal(int_range=1000)},
    inplace=("x",),
    reference=lambda x: {"x": _wide(x)[::-1] * 2 + 1},
)
def in_place(dt):
    """An in-place update that reads other points of its output: the right-hand side is evaluated
    first (as in NumPy), and the second store sees the first."""

    def in_place(x: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        x[i] = x[N - 1 - i] * 2
        x[i] = x[i] + 1

    return in_place


def _poly(v, coeffs):
    acc = coeffs[0]
    for c in coeffs[1:]:
        acc = acc * v + c
    return acc


@case(
    dtypes=FLOATS,
    sizes=SIZES_1D,
    reference=lambda x: {"y": _poly(_wide(x), [1.0, -2.0, 3.0, 0.5]), "taps": _wide(x) * 10},
)
def unrolled_loop(dt):
    """Python helpers and ``for k in range(4)`` unroll while tracing (Horner's rule, a weighted sum)."""

    def unrolled_loop(x: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (N,)], taps: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        y[i] = _poly(x[i], [1.0, -2.0, 3.0, 0.5])
        acc = x[i] * 0.0
        for k in range(4):
            acc = acc + x[i] * (k + 1)
        taps[i] = acc

    return unrolled_loop


LARGE = 1 << 24  # 16,777,216 elements


def _large_ref(x):
    v = x.astype(np.float64)
    return {"y": v * 2 + 1, "total": np.exp(v).sum()}


@case(
    dtypes=("float32",),
    sizes=({"N": LARGE},),
    values={"x": span(-1.0, 1.0)},
    functions=("exp",),
    tolerances=LONG_REDUCTION,
    slow=True,
    reference=_large_ref,
)
def large_vector(dt):
    """16M elements: an elementwise map and ``sum(exp(x))`` into a ``(1,)`` output. A float32 running
    sum over this many terms would stall; backends must split the reduction."""

    def large_vector(x: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (N,)], total: pt.Tensor[dt, (1,)]):
        i = pt.axis(0)
        y[i] = x[i] * 2.0 + 1.0
        total[0] = pt.reduce_sum(pt.exp(x[i]), axis=i)

    return large_vector
