"""Choosing and converting: ``pt.maximum``, ``pt.minimum``, ``pt.where`` and ``pt.cast``.

Kernel annotations are evaluated when the factory runs: no ``from __future__ import annotations``.
"""

import numpy as np

import pypto as pt

from .spec import FLOATS, INTS, NUMERIC, SIZES_1D, SMALL_INTS, N, case
from .values import bools, by_kind, choice, floating, normal, span, with_specials, with_values


def _f64(x):
    return x.astype(np.float64) if floating(x.dtype) else x.astype(np.int64)


@case(
    dtypes=NUMERIC,
    sizes=SIZES_1D,
    values={"a": with_specials(normal(int_range=1000), 0.1), "b": with_specials(normal(int_range=1000), 0.1)},
    reference=lambda a, b: {
        "hi": np.maximum(_f64(a), _f64(b)),
        "lo": np.minimum(_f64(a), _f64(b)),
        "relu": np.maximum(_f64(a), 0),
        "clamp": np.minimum(np.maximum(_f64(a), -1), 2),
    },
)
def maximum_minimum(dt):
    """``pt.maximum`` / ``pt.minimum``: NaN in either operand gives NaN (like NumPy); clamps with scalars."""

    def maximum_minimum(
        a: pt.Tensor[dt, (N,)],
        b: pt.Tensor[dt, (N,)],
        hi: pt.Tensor[dt, (N,)],
        lo: pt.Tensor[dt, (N,)],
        relu: pt.Tensor[dt, (N,)],
        clamp: pt.Tensor[dt, (N,)],
    ):
        i = pt.axis(0)
        hi[i] = pt.maximum(a[i], b[i])
        lo[i] = pt.minimum(a[i], b[i])
        relu[i] = pt.maximum(a[i], 0)
        clamp[i] = pt.minimum(pt.maximum(a[i], -1), 2)

    return maximum_minimum


def _where_ref(a, b, m):
    a, b = _f64(a), _f64(b)
    return {
        "y": np.where(a > b, a, b * 2),
        "z": np.where(m, a, 0),
        "w": np.where((a > 0) & (b < 0) | ~m, -a, 1),
    }


SELECTED = {"a": with_specials(normal(int_range=1000), 0.05), "b": normal(int_range=1000), "m": bools()}
"""Two operands (NaN and infinities among the first's floats) and a boolean mask: the selects' inputs."""


@case(dtypes=NUMERIC, sizes=SIZES_1D, values=SELECTED, reference=_where_ref)
def where(dt):
    """``pt.where(cond, a, b)`` with computed and boolean-array conditions and scalar branches."""

    def where(
        a: pt.Tensor[dt, (N,)],
        b: pt.Tensor[dt, (N,)],
        m: pt.Tensor[pt.bool_, (N,)],
        y: pt.Tensor[dt, (N,)],
        z: pt.Tensor[dt, (N,)],
        w: pt.Tensor[dt, (N,)],
    ):
        i = pt.axis(0)
        y[i] = pt.where(a[i] > b[i], a[i], b[i] * 2)
        z[i] = pt.where(m[i], a[i], 0)
        w[i] = pt.where((a[i] > 0) & (b[i] < 0) | ~m[i], -a[i], 1)

    return where


def _saturated(x, name):
    """``x`` converted as pt.cast promises: toward zero, beyond the range the type's bounds, NaN 0 (Python's
    comparisons of floats with integers are exact)."""
    info = np.iinfo(name)
    out = [0 if v != v else info.min if v <= info.min else info.max if v >= info.max else int(v) for v in x.tolist()]
    return np.array(out, dtype=object).astype(name)


@case(
    dtypes=FLOATS,
    sizes=SIZES_1D,
    # in range of int32 (values beyond it: cast_saturates), but float16's largest is 65504: beyond it the values
    # are infinities, which saturate
    values={"x": with_values(span(-2.0e9, 2.0e9), [2.5, -2.5, 0.99, -0.99, 0.0, 7.0, -7.0, 1e9 + 0.5])},
    reference=lambda x: {"n": _saturated(x, "int32"), "m": _saturated(x, "int64")},
)
def cast_float_to_int(dt):
    """``pt.cast(x, pt.int32 / pt.int64)`` truncates toward zero."""

    def cast_float_to_int(x: pt.Tensor[dt, (N,)], n: pt.Tensor[pt.int32, (N,)], m: pt.Tensor[pt.int64, (N,)]):
        i = pt.axis(0)
        n[i] = pt.cast(x[i], pt.int32)
        m[i] = pt.cast(x[i], pt.int64)

    return cast_float_to_int


@case(
    dtypes=INTS + SMALL_INTS,
    sizes=SIZES_1D,
    values={"x": with_values(span(-(2**30), 2**30), [2**24 + 1, -(2**24) - 3, 0, 1, -1])},
    reference=lambda x: {"f": x.astype(np.float32), "d": x.astype(np.float64), "h": x.astype(np.float32) * 0.5},
)
def cast_int_to_float(dt):
    """``pt.cast`` of integers to float32 (rounding to nearest beyond 2**24) and float64 (exact)."""

    def cast_int_to_float(
        x: pt.Tensor[dt, (N,)],
        f: pt.Tensor[pt.float32, (N,)],
        d: pt.Tensor[pt.float64, (N,)],
        h: pt.Tensor[pt.float32, (N,)],
    ):
        i = pt.axis(0)
        f[i] = pt.cast(x[i], pt.float32)
        d[i] = pt.cast(x[i], pt.float64)
        h[i] = pt.cast(x[i], pt.float32) * 0.5

    return cast_int_to_float


_BEYOND = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 127.5, 128.0, -128.5, -129.0, 255.5, 256.0, -1.0,
           32767.5, 32768.0, -32768.5, -32769.0, 65535.5, 65536.0, 2.0**31 - 1, 2.0**31, -(2.0**31) - 1, 2.0**32,
           2.0**53, 2.0**63, -(2.0**63), -(2.0**63) - 2.0**11, 2.0**64, 1e30, -1e30]  # fmt: skip
_SATURATED = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@case(
    dtypes=FLOATS,
    sizes=SIZES_1D,
    values={"x": choice(_BEYOND)},
    reference=lambda x: {f"y{k}": _saturated(x, name) for k, name in enumerate(_SATURATED)},
)
def cast_saturates(dt):
    """``pt.cast`` of floats to every integer type: values beyond the type's range give its bounds and NaN gives 0
    (NumPy and C leave these undefined; pypto defines them the same on every backend)."""

    def cast_saturates(
        x: pt.Tensor[dt, (N,)],
        y0: pt.Tensor[pt.int8, (N,)],
        y1: pt.Tensor[pt.int16, (N,)],
        y2: pt.Tensor[pt.int32, (N,)],
        y3: pt.Tensor[pt.int64, (N,)],
        y4: pt.Tensor[pt.uint8, (N,)],
        y5: pt.Tensor[pt.uint16, (N,)],
        y6: pt.Tensor[pt.uint32, (N,)],
        y7: pt.Tensor[pt.uint64, (N,)],
    ):
        i = pt.axis(0)
        y0[i] = pt.cast(x[i], pt.int8)
        y1[i] = pt.cast(x[i], pt.int16)
        y2[i] = pt.cast(x[i], pt.int32)
        y3[i] = pt.cast(x[i], pt.int64)
        y4[i] = pt.cast(x[i], pt.uint8)
        y5[i] = pt.cast(x[i], pt.uint16)
        y6[i] = pt.cast(x[i], pt.uint32)
        y7[i] = pt.cast(x[i], pt.uint64)

    return cast_saturates


@case(
    dtypes=FLOATS,
    sizes=SIZES_1D,
    values={"x": with_values(normal(1e3), [1e39, -1e39, 1e-46, 0.1, np.nan, np.inf, -np.inf, 3.0])},
    reference=lambda x: {"y": x.astype(np.float32 if x.dtype == np.float64 else np.float64)},
)
def cast_float_precision(dt):
    """float32 -> float64 is exact; float64 -> float32 rounds to nearest (overflow gives an infinity)."""
    other = pt.float32 if dt == pt.float64 else pt.float64

    def cast_float_precision(x: pt.Tensor[dt, (N,)], y: pt.Tensor[other, (N,)]):
        i = pt.axis(0)
        y[i] = pt.cast(x[i], other)

    return cast_float_precision


def _cast_bool_ref(x):
    if x.dtype.kind == "b":
        return {"n": x.astype(np.int32), "f": x.astype(np.float32)}
    return {"t": x != 0}


@case(
    dtypes=(*NUMERIC, "bool"),
    sizes=SIZES_1D,
    values={"x": by_kind(with_specials(choice([0.0, -0.0, 1.5, -2.0, 0.25]), 0.2), choice([0, 0, 1, -3, 7]))},
    reference=_cast_bool_ref,
)
def cast_bool(dt):
    """``pt.cast`` from bool gives 0 / 1; to bool tests ``!= 0`` (NaN is true, -0.0 is false)."""
    if dt == pt.bool_:

        def cast_from_bool(x: pt.Tensor[dt, (N,)], n: pt.Tensor[pt.int32, (N,)], f: pt.Tensor[pt.float32, (N,)]):
            i = pt.axis(0)
            n[i] = pt.cast(x[i], pt.int32)
            f[i] = pt.cast(x[i], pt.float32)

        return cast_from_bool

    def cast_to_bool(x: pt.Tensor[dt, (N,)], t: pt.Tensor[pt.bool_, (N,)]):
        i = pt.axis(0)
        t[i] = pt.cast(x[i], pt.bool_)

    return cast_to_bool


def _if_ref(a, b, m):
    a, b = _f64(a), _f64(b)
    first, second = (a > b) & ~m, (a < 0) | m
    return {"y": np.where(first, a, np.where(second, b * 2, a - b)), "z": np.where(m & (a != 0), a, 1)}


@case(dtypes=NUMERIC, sizes=SIZES_1D, values=SELECTED, reference=_if_ref)
def if_elif_else(dt):
    """Python ``if`` / ``elif`` / ``else``, ``and`` / ``or`` / ``not`` and ``x if c else y`` on traced values:
    rewritten before tracing into selects of the branches' values (the ``pt.where`` case's program)."""

    def if_elif_else(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], m: pt.Tensor[pt.bool_, (N,)],
                     y: pt.Tensor[dt, (N,)], z: pt.Tensor[dt, (N,)]):  # fmt: skip
        i = pt.axis(0)
        if a[i] > b[i] and not m[i]:
            v = a[i]
        elif a[i] < 0 or m[i]:
            v = b[i] * 2
        else:
            v = a[i] - b[i]
        y[i] = v
        z[i] = a[i] if m[i] and a[i] else 1  # a traced number as a condition: its truth, a != 0

    return if_elif_else


def _if_stores_ref(a, b, m, y):
    a, b, y = _f64(a), _f64(b), _f64(y)
    hi = a > b
    return {"y": np.where(hi, a * 2, np.where(m, y, b)), "z": np.where(hi, 1, np.where(m, 2, 3))}


@case(
    dtypes=NUMERIC,
    sizes=SIZES_1D,
    values={**SELECTED, "y": normal(int_range=1000)},
    inplace=("y",),
    reference=_if_stores_ref,
)
def if_stores(dt):
    """Stores inside the branches of an ``if`` on traced values: each writes only where its branch is taken, and
    an element no branch writes keeps its value (``y`` is updated in place where ``m`` holds)."""

    def if_stores(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], m: pt.Tensor[pt.bool_, (N,)],
                  y: pt.Tensor[dt, (N,)], z: pt.Tensor[pt.int32, (N,)]):  # fmt: skip
        i = pt.axis(0)
        if a[i] > b[i]:
            y[i] = a[i] * 2
            z[i] = 1
        elif m[i]:
            z[i] = 2
        else:
            y[i] = b[i]
            z[i] = 3

    return if_stores
