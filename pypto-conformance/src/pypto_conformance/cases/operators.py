"""Operators: ``+ - * / // % **``, unary ``-``, ``abs``, comparisons, ``& | ^ ~ << >>``, weak scalars.

Kernel annotations are evaluated when the factory runs, so this module must not use
``from __future__ import annotations``.
"""

import numpy as np

import pypto as pt

from .spec import FLOATS, INTS, NUMERIC, SIZES_1D, SMALL_INTS, N, case
from .values import (
    bools,
    by_kind,
    choice,
    floating,
    normal,
    quarters,
    signed_magnitude,
    span,
    with_specials,
    with_values,
)


def f64(x):
    """Float inputs in float64 (references compute in a wider type, then round to the output's)."""
    x = np.asarray(x)
    return x.astype(np.float64) if floating(x.dtype) else x


def floor_div_ref(a, b):
    """Python/NumPy floor division, with integer division by zero giving 0."""
    if floating(a.dtype):
        return np.floor_divide(f64(a), f64(b))
    safe = np.where(b == 0, 1, b).astype(np.int64)
    return np.where(b == 0, 0, np.floor_divide(a.astype(np.int64), safe))


def remainder_ref(a, b):
    """Python/NumPy remainder (sign of the divisor), with integer remainder by zero giving 0."""
    if floating(a.dtype):
        return np.remainder(f64(a), f64(b))
    safe = np.where(b == 0, 1, b).astype(np.int64)
    return np.where(b == 0, 0, np.remainder(a.astype(np.int64), safe))


ARITH_VALUES = {"a": normal(int_range=1000), "b": normal(int_range=1000)}


@case(dtypes=NUMERIC + SMALL_INTS, sizes=SIZES_1D, values=ARITH_VALUES, reference=lambda a, b: {"c": f64(a) + f64(b)})
def add(dt):
    """Elementwise ``a + b``."""

    def add(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], c: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] + b[i]

    return add


@case(dtypes=NUMERIC + SMALL_INTS, sizes=SIZES_1D, values=ARITH_VALUES, reference=lambda a, b: {"c": f64(a) - f64(b)})
def subtract(dt):
    """Elementwise ``a - b``."""

    def subtract(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], c: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] - b[i]

    return subtract


@case(dtypes=NUMERIC + SMALL_INTS, sizes=SIZES_1D, values=ARITH_VALUES, reference=lambda a, b: {"c": f64(a) * f64(b)})
def multiply(dt):
    """Elementwise ``a * b`` (int32 and int64 products stay far from overflow; narrower types wrap around)."""

    def multiply(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], c: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] * b[i]

    return multiply


@case(
    dtypes=FLOATS,
    sizes=SIZES_1D,
    values={"a": normal(), "b": signed_magnitude(0.25, 4.0)},
    reference=lambda a, b: {"c": f64(a) / f64(b)},
)
def true_divide(dt):
    """Elementwise ``a / b`` for floats."""

    def true_divide(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], c: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] / b[i]

    return true_divide


@case(
    dtypes=INTS,
    sizes=SIZES_1D,
    values={"a": with_values(span(-1000, 1000), [0, 5, -5]), "b": with_values(span(-9, 9), [0, 0, 0, 3])},
    reference=lambda a, b: {"c": a.astype(np.float32).astype(np.float64) / b.astype(np.float32).astype(np.float64)},
)
def int_true_divide(dt):
    """``/`` on integers gives float32; 0/0 is NaN and x/0 an infinity, as in IEEE arithmetic."""

    def int_true_divide(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], c: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] / b[i]

    return int_true_divide


DIV_VALUES = {
    # integers: divisors include 0 (the result is 0) and negatives (floor, not truncation)
    # floats: multiples of 1/4, so every quotient is either exact or far from an integer
    "a": with_values(quarters(-60, 60), [7, -7, 7, -7, 0]),
    "b": with_values(quarters(-7, 7, nonzero=True), [2, 2, -2, -2, 3]),
}


def _int_zero_divisors(gen):
    def with_zeros(rng, shape, dt):
        v = gen(rng, shape, dt)
        if np.dtype(dt).kind in "iu" and v.size > 5:
            v.reshape(-1)[5::9] = 0
        return v

    return with_zeros


@case(
    dtypes=NUMERIC + SMALL_INTS,
    sizes=SIZES_1D,
    values={"a": DIV_VALUES["a"], "b": _int_zero_divisors(DIV_VALUES["b"])},
    reference=lambda a, b: {"c": floor_div_ref(a, b)},
)
def floor_divide(dt):
    """``a // b`` rounds toward minus infinity; integer division by zero gives 0."""

    def floor_divide(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], c: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] // b[i]

    return floor_divide


@case(
    dtypes=NUMERIC + SMALL_INTS,
    sizes=SIZES_1D,
    values={"a": DIV_VALUES["a"], "b": _int_zero_divisors(DIV_VALUES["b"])},
    reference=lambda a, b: {"c": remainder_ref(a, b)},
)
def remainder(dt):
    """``a % b`` takes the sign of the divisor; integer remainder by zero gives 0."""

    def remainder(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], c: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] % b[i]

    return remainder


def _power_ref(x):
    if floating(x.dtype):
        v = f64(x)
        with np.errstate(all="ignore"):
            return {"y": np.stack([v**2, v**3, np.ones_like(v), 1.0 / v, 1.0 / (v * v), v**7])}
    v = x.astype(np.int64)
    return {"y": np.stack([v**2, v**3, np.ones_like(v), v, -(v**2), v**5])}


@case(
    dtypes=NUMERIC,
    sizes=SIZES_1D,
    values={"x": by_kind(with_values(signed_magnitude(0.5, 2.0), [np.nan, np.inf, -np.inf, 0.0]), span(-50, 50))},
    reference=_power_ref,
)
def power(dt):
    """Integer powers ``x ** k``; ``x ** 0`` is 1 even for NaN; negative powers of floats are reciprocals."""
    if dt.is_float:

        def power(x: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (6, N)]):
            i = pt.axis(0)
            y[0, i] = x[i] ** 2
            y[1, i] = x[i] ** 3
            y[2, i] = x[i] ** 0
            y[3, i] = x[i] ** -1
            y[4, i] = x[i] ** -2
            y[5, i] = x[i] ** 7

        return power

    def power_int(x: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (6, N)]):
        i = pt.axis(0)
        y[0, i] = x[i] ** 2
        y[1, i] = x[i] ** 3
        y[2, i] = x[i] ** 0
        y[3, i] = x[i] ** 1
        y[4, i] = -(x[i] ** 2)
        y[5, i] = x[i] ** 5

    return power_int


@case(
    dtypes=NUMERIC + SMALL_INTS,
    sizes=SIZES_1D,
    values={"x": with_specials(normal(int_range=10**6), 0.05)},
    reference=lambda x: {"y": -f64(x), "z": np.abs(f64(x)), "w": np.abs(f64(x))},
)
def negative_absolute(dt):
    """Unary ``-x``, the builtin ``abs(x)`` and ``pt.abs(x)`` (NaN and infinities included)."""

    def negative_absolute(
        x: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (N,)], z: pt.Tensor[dt, (N,)], w: pt.Tensor[dt, (N,)]
    ):
        i = pt.axis(0)
        y[i] = -x[i]
        z[i] = abs(x[i])
        w[i] = pt.abs(x[i])

    return negative_absolute


COMPARE_VALUES = {
    "a": with_specials(choice([-2.5, -1, 0, 0.5, 1, 3, 7]), 0.1),
    "b": with_specials(choice([-2.5, -1, 0, 0.5, 1, 3, 7]), 0.1),
}


@case(
    dtypes=NUMERIC + SMALL_INTS,
    sizes=SIZES_1D,
    values=COMPARE_VALUES,
    reference=lambda a, b: {"o": np.stack([a < b, a <= b, a > b, a >= b, a == b, a != b])},
)
def comparisons(dt):
    """``< <= > >= == !=`` into a bool output; every comparison with NaN is false except ``!=``."""

    def comparisons(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], o: pt.Tensor[pt.bool_, (6, N)]):
        i = pt.axis(0)
        o[0, i] = a[i] < b[i]
        o[1, i] = a[i] <= b[i]
        o[2, i] = a[i] > b[i]
        o[3, i] = a[i] >= b[i]
        o[4, i] = a[i] == b[i]
        o[5, i] = a[i] != b[i]

    return comparisons


@case(
    dtypes=INTS + SMALL_INTS,
    sizes=SIZES_1D,
    values={"a": span(-(2**30), 2**30), "b": span(-(2**30), 2**30)},
    reference=lambda a, b: {"o": np.stack([a & b, a | b, a ^ b, ~a, (a & 127) ^ 21])},
)
def bitwise(dt):
    """``& | ^ ~`` on integers (two's complement), also with Python integer constants."""

    def bitwise(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], o: pt.Tensor[dt, (5, N)]):
        i = pt.axis(0)
        o[0, i] = a[i] & b[i]
        o[1, i] = a[i] | b[i]
        o[2, i] = a[i] ^ b[i]
        o[3, i] = ~a[i]
        o[4, i] = (a[i] & 127) ^ 21

    return bitwise


def _shifts_ref(a, c):
    with np.errstate(over="ignore"):
        small = (c % 8).astype(c.dtype)
        return {
            "o": np.stack([a << c, a >> c, (a << small) ^ (a >> small), a << a.dtype.type(3), a >> a.dtype.type(2)])
        }


@case(
    dtypes=INTS + SMALL_INTS,
    sizes=SIZES_1D,
    values={"a": span(-(2**62), 2**62), "c": span(-4, 70)},
    reference=_shifts_ref,
)
def shifts(dt):
    """``<<`` and ``>>`` of integers as NumPy's: the bits beyond the type dropped, the sign copied right; a count
    below zero or not below the type's width gives 0 (-1 shifting a negative value right), where C's is
    undefined; counts of every type, constants too."""

    def shifts(a: pt.Tensor[dt, (N,)], c: pt.Tensor[dt, (N,)], o: pt.Tensor[dt, (5, N)]):
        i = pt.axis(0)
        o[0, i] = a[i] << c[i]
        o[1, i] = a[i] >> c[i]
        o[2, i] = (a[i] << c[i] % 8) ^ (a[i] >> c[i] % 8)
        o[3, i] = a[i] << 3
        o[4, i] = a[i] >> 2

    return shifts


@case(
    dtypes=INTS + SMALL_INTS,
    sizes=SIZES_1D,
    values={"a": span(-(2**40), 2**40), "b": span(-(2**40), 2**40)},
    reference=lambda a, b: {"hi": np.maximum(a, b), "lo": np.minimum(a, b), "clamp": np.minimum(np.maximum(a, 3), 100)},
)
def integer_maximum_minimum(dt):
    """``pt.maximum`` / ``pt.minimum`` of integers over their whole range (signed and unsigned compare apart)."""

    def integer_maximum_minimum(
        a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], hi: pt.Tensor[dt, (N,)], lo: pt.Tensor[dt, (N,)],
        clamp: pt.Tensor[dt, (N,)],
    ):  # fmt: skip
        i = pt.axis(0)
        hi[i] = pt.maximum(a[i], b[i])
        lo[i] = pt.minimum(a[i], b[i])
        clamp[i] = pt.minimum(pt.maximum(a[i], 3), 100)

    return integer_maximum_minimum


@case(
    dtypes=("bool",),
    sizes=SIZES_1D,
    values={"p": bools(), "q": bools(0.3)},
    reference=lambda p, q, x: {"o": np.stack([p & q, p | q, p ^ q, ~p, (x > 0) & ~q | (x < -1)])},
)
def logical(dt):
    """``& | ^ ~`` on booleans, and combined comparisons as used in ``pt.where`` conditions."""

    def logical(p: pt.Tensor[dt, (N,)], q: pt.Tensor[dt, (N,)], x: pt.Tensor[float, (N,)], o: pt.Tensor[dt, (5, N)]):
        i = pt.axis(0)
        o[0, i] = p[i] & q[i]
        o[1, i] = p[i] | q[i]
        o[2, i] = p[i] ^ q[i]
        o[3, i] = ~p[i]
        o[4, i] = (x[i] > 0) & ~q[i] | (x[i] < -1)

    return logical


def _weak_ref(x):
    if floating(x.dtype):
        v = x.astype(x.dtype)  # weak Python scalars take x's float type
        s = x.dtype.type
        return {"y": v * s(2.5) + s(1), "z": v * s(0.5), "q": v / s(4), "w": s(3) - v}
    v32 = x.astype(np.float32)  # a Python float meeting an integer gives float32
    return {
        "y": x.astype(np.int64) * 3 + 1,
        "z": v32 * np.float32(0.5),
        "q": v32 / np.float32(4),
        "w": 3 - x.astype(np.int64),
    }


@case(dtypes=NUMERIC, sizes=SIZES_1D, values={"x": normal(int_range=10**4)}, reference=_weak_ref)
def weak_scalars(dt):
    """Python scalars are weak: ``x * 2.5`` keeps float32; with an integer ``x`` a float scalar gives float32."""
    if dt.is_float:

        def weak_scalars(
            x: pt.Tensor[dt, (N,)],
            y: pt.Tensor[dt, (N,)],
            z: pt.Tensor[dt, (N,)],
            q: pt.Tensor[dt, (N,)],
            w: pt.Tensor[dt, (N,)],
        ):
            i = pt.axis(0)
            y[i] = x[i] * 2.5 + 1
            z[i] = x[i] * 0.5
            q[i] = x[i] / 4
            w[i] = 3.0 - x[i]

        return weak_scalars

    def weak_scalars_int(
        x: pt.Tensor[dt, (N,)],
        y: pt.Tensor[dt, (N,)],
        z: pt.Tensor[pt.float32, (N,)],
        q: pt.Tensor[pt.float32, (N,)],
        w: pt.Tensor[dt, (N,)],
    ):
        i = pt.axis(0)
        y[i] = x[i] * 3 + 1
        z[i] = x[i] * 0.5
        q[i] = x[i] / 4
        w[i] = 3 - x[i]

    return weak_scalars_int


def _integer_promotion_ref(s8, u8, s16, u16, u32, s64, u64, h):
    w = {k: v.astype(np.int64) for k, v in dict(s8=s8, u8=u8, s16=s16, u16=u16, u32=u32, s64=s64).items()}
    return {
        "a": w["s8"] + w["u8"],  # int8 + uint8 -> int16
        "b": w["u8"] * w["s16"],  # uint8 * int16 -> int16 (wrapping around)
        "c": w["u16"] - w["s16"],  # uint16 - int16 -> int32
        "d": w["u32"] + w["s8"],  # uint32 + int8 -> int64
        "e": u64.astype(np.float64) + s64.astype(np.float64),  # uint64 + int64 -> float64 (NumPy 2)
        "g": u8.astype(np.float32) * h.astype(np.float32),  # uint8 * float16 -> float16 (computed in float32)
        "k": floor_div_ref(w["u16"], w["s8"]),  # uint16 // int8 -> int32
        "l": w["s8"] < w["u8"],  # compared in int16
    }


@case(
    dtypes=("mixed",),
    sizes=SIZES_1D,
    values={name: span(-1000, 1000) for name in ("s8", "u8", "s16", "u16", "u32", "s64", "u64")} | {"h": normal()},
    reference=_integer_promotion_ref,
)
def integer_promotion(dt):
    """Mixing signed and unsigned integers (NumPy 2's table): the narrowest signed type holding both, float64 for
    int64 with uint64; an integer with a 16-bit float gives that float."""

    def integer_promotion(
        s8: pt.Tensor[pt.int8, (N,)],
        u8: pt.Tensor[pt.uint8, (N,)],
        s16: pt.Tensor[pt.int16, (N,)],
        u16: pt.Tensor[pt.uint16, (N,)],
        u32: pt.Tensor[pt.uint32, (N,)],
        s64: pt.Tensor[pt.int64, (N,)],
        u64: pt.Tensor[pt.uint64, (N,)],
        h: pt.Tensor[pt.float16, (N,)],
        a: pt.Tensor[pt.int16, (N,)],
        b: pt.Tensor[pt.int16, (N,)],
        c: pt.Tensor[pt.int32, (N,)],
        d: pt.Tensor[pt.int64, (N,)],
        e: pt.Tensor[pt.float64, (N,)],
        g: pt.Tensor[pt.float16, (N,)],
        k: pt.Tensor[pt.int32, (N,)],
        l: pt.Tensor[pt.bool_, (N,)],  # noqa: E741
    ):
        i = pt.axis(0)
        a[i] = s8[i] + u8[i]
        b[i] = u8[i] * s16[i]
        c[i] = u16[i] - s16[i]
        d[i] = u32[i] + s8[i]
        e[i] = u64[i] + s64[i]
        g[i] = u8[i] * h[i]
        k[i] = u16[i] // s8[i]
        l[i] = s8[i] < u8[i]

    return integer_promotion


def _promotion_ref(f, d, n, m, flag):
    return {
        "fd": f64(f) + f64(d),  # float32 + float64 -> float64
        "nm": n.astype(np.int64) + m.astype(np.int64),  # int32 + int64 -> int64
        "nf": n.astype(np.float32).astype(np.float64) * f64(f),  # int32 * float32 -> float32
        "mf": m.astype(np.float32).astype(np.float64) - f64(f),  # int64 - float32 -> float32 (never float64)
        "bn": flag.astype(np.int32) + n,  # bool + int32 -> int32
    }


@case(
    dtypes=("mixed",),
    sizes=SIZES_1D,
    values={"n": span(-1000, 1000), "m": span(-1000, 1000), "flag": bools()},
    reference=_promotion_ref,
)
def promotion(dt):
    """Mixing array types: wider wins within a kind, floats beat integers, nothing becomes float64 silently."""

    def promotion(
        f: pt.Tensor[pt.float32, (N,)],
        d: pt.Tensor[pt.float64, (N,)],
        n: pt.Tensor[pt.int32, (N,)],
        m: pt.Tensor[pt.int64, (N,)],
        flag: pt.Tensor[pt.bool_, (N,)],
        fd: pt.Tensor[pt.float64, (N,)],
        nm: pt.Tensor[pt.int64, (N,)],
        nf: pt.Tensor[pt.float32, (N,)],
        mf: pt.Tensor[pt.float32, (N,)],
        bn: pt.Tensor[pt.int32, (N,)],
    ):
        i = pt.axis(0)
        fd[i] = f[i] + d[i]
        nm[i] = n[i] + m[i]
        nf[i] = n[i] * f[i]
        mf[i] = m[i] - f[i]
        bn[i] = flag[i] + n[i]

    return promotion
