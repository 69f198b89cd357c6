"""Input value generators for catalogue cases: ``(rng, shape, dtype) -> array``.

Each generator keeps values in the domain a case needs (no division by zero where that is not the
point of the case) and works for every dtype it makes sense for. Integers are drawn in int64 and
converted to the case's type, wrapping around in the narrow types (the references wrap the same
way); unsigned types get the magnitudes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

ValueGen = Callable[[np.random.Generator, tuple[int, ...], np.dtype], np.ndarray]

SPECIALS = (np.nan, np.inf, -np.inf)


def floating(dt: np.dtype) -> bool:
    """Whether ``dt`` is a float type (bfloat16, ml_dtypes' NumPy type, has NumPy's kind 'V')."""
    d = np.dtype(dt)
    return d.kind == "f" or d.name == "bfloat16"


_is_float = floating


def integers(v: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Integer values ``v`` in type ``dt``: their magnitudes for an unsigned type, wrapped around in a narrow one."""
    v = np.asarray(v)
    if np.dtype(dt).kind == "u":
        v = np.abs(v)
    return v.astype(np.int64).astype(dt) if v.dtype.kind == "f" else v.astype(dt)


def span(lo: float, hi: float) -> ValueGen:
    """Uniform floats in [lo, hi), or integers in [lo, hi] for integer dtypes."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        if _is_float(dt):
            return rng.uniform(lo, hi, shape).astype(dt)
        return integers(rng.integers(int(lo), int(hi), shape, endpoint=True), dt)

    return gen


def normal(scale: float = 1.0, *, int_range: int = 100) -> ValueGen:
    """Normal floats (``scale`` standard deviation); integers uniform in [-int_range, int_range]."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        if _is_float(dt):
            return (rng.standard_normal(shape) * scale).astype(dt)
        return integers(rng.integers(-int_range, int_range, shape, endpoint=True), dt)

    return gen


def signed_magnitude(lo: float, hi: float) -> ValueGen:
    """Values with |v| in [lo, hi] and a random sign: safe divisors, safe negative powers."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        sign = rng.choice(np.array([-1, 1]), shape)
        if _is_float(dt):
            return (sign * rng.uniform(lo, hi, shape)).astype(dt)
        return integers(sign * rng.integers(int(lo), int(hi), shape, endpoint=True), dt)

    return gen


def choice(values: Sequence[float]) -> ValueGen:
    """Values drawn from ``values``."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        v = rng.choice(np.asarray(values, dtype=np.float64), shape)
        return v.astype(dt) if _is_float(dt) else integers(v, dt)

    return gen


def bools(p: float = 0.5) -> ValueGen:
    """Booleans, true with probability ``p``."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        return (rng.random(shape) < p).astype(dt)

    return gen


def quarters(lo: int, hi: int, *, nonzero: bool = False) -> ValueGen:
    """Multiples of 1/4 in [lo, hi] (integers for integer dtypes).

    Quotients of such values are never within rounding distance of an integer unless they are one,
    so floor division and remainder have a single right answer in any precision.
    """

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        scale = 4 if _is_float(dt) else 1
        v = rng.integers(lo * scale, hi * scale, shape, endpoint=True)
        if nonzero:
            v = np.where(v == 0, scale, v)
        return (v / scale).astype(dt) if scale > 1 else integers(v, dt)

    return gen


def with_specials(base: ValueGen, fraction: float = 0.1, specials: Sequence[float] = SPECIALS) -> ValueGen:
    """``base`` with a ``fraction`` of the elements replaced by NaN and infinities (floats only)."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        v = base(rng, shape, dt)
        if _is_float(dt) and v.size:
            pick = rng.random(shape) < fraction
            v[pick] = rng.choice(np.asarray(specials, dtype=np.float64), int(pick.sum())).astype(dt)
        return v

    return gen


def with_values(base: ValueGen, values: Sequence[float]) -> ValueGen:
    """``base`` with its first elements set to ``values`` (edge cases always present)."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        v = base(rng, shape, dt)
        flat = v.reshape(-1)
        n = min(len(values), flat.size)
        edge = np.asarray(values[:n], dtype=np.float64)
        flat[:n] = edge.astype(dt) if _is_float(dt) else integers(edge, dt)
        return v

    return gen


def sparse(base: ValueGen, value: float, count: int) -> ValueGen:
    """``base`` with at most ``count`` elements set to ``value`` (a product of ±1 and a few 2s)."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        v = base(rng, shape, dt)
        flat = v.reshape(-1)
        if flat.size:
            flat[rng.choice(flat.size, min(count, flat.size), replace=False)] = value
        return v

    return gen


def rows(patterns: Sequence[Sequence[float]], rest: ValueGen) -> ValueGen:
    """A 2-D array whose first rows follow ``patterns`` (cycled along the row), the rest from ``rest``."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        v = rest(rng, shape, dt)
        for r, pattern in enumerate(patterns[: shape[0]]):
            if shape[1]:
                v[r] = np.resize(np.asarray(pattern, dtype=np.float64), shape[1]).astype(dt)
        return v

    return gen


def by_kind(floats: ValueGen, ints: ValueGen) -> ValueGen:
    """``floats`` for float dtypes, ``ints`` for integer (and boolean) ones."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        return (floats if _is_float(dt) else ints)(rng, shape, dt)

    return gen


def complex_normal(scale: float = 1.0) -> ValueGen:
    """Complex values with normal real and imaginary parts (``scale`` standard deviation each)."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
        return (scale * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))).astype(dt)

    return gen


def default_for(dt: np.dtype) -> ValueGen:
    """The generator used when a case names none: normal floats (and complex parts), integers in [-100, 100],
    coin flips."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return bools()
    if dt.kind == "c":
        return complex_normal()
    if floating(dt):
        return normal()
    return normal(int_range=100)
