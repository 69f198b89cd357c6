"""Helpers the generated NumPy code calls (NumPy itself has no ``erf``)."""

from __future__ import annotations

import math

import numpy as np

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf(x: np.ndarray) -> np.ndarray:
    """Vectorised error function, accurate to a few ulp of float64.

    Uses the series ``erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n x (2x^2)^n / (1*3*...*(2n+1))``,
    whose terms are all positive (no cancellation); beyond |x| = 6, erf(x) is +-1 in float64.
    """
    a = np.asarray(x)
    out_dtype = a.dtype if a.dtype.kind == "f" else np.dtype(np.float32)
    v = np.abs(a.astype(np.float64))
    big = v > 6.0
    v = np.where(big | np.isnan(v), 0.0, v)
    two_x2 = 2.0 * v * v
    term = v.copy()
    total = v.copy()
    n = 0
    while n < 400:
        n += 1
        term = term * two_x2 / (2 * n + 1)
        total += term
        if not np.any(term > 1e-17 * total):
            break
    r = _TWO_OVER_SQRT_PI * np.exp(-v * v) * total
    r = np.where(big, 1.0, r)
    r = np.where(np.isnan(a), np.nan, np.copysign(r, a))
    return np.asarray(r).astype(out_dtype)


def saturate(x: np.ndarray, dtype: type) -> np.ndarray:
    """Floats to the integer type ``dtype`` as ``pt.cast`` converts them: toward zero, the values beyond the
    type's range to its bounds, NaN to 0 (NumPy's own conversion gives whatever the machine's instruction does)."""
    x = np.asarray(x)
    info = np.iinfo(dtype)
    low, high = x <= info.min, x >= info.max  # the bounds rounded to x's type, as the C backends compare
    inside = np.where(np.isnan(x) | low | high, 0, x)
    out = inside.astype(dtype)
    out[...] = np.where(low, info.min, np.where(high, info.max, out))
    return out


def full(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` broadcast to cover ``shape`` (where ``shape`` has 1, ``a`` keeps its own size)."""
    a = np.asarray(a)
    return np.broadcast_to(a, np.broadcast_shapes(a.shape, shape))


def bounds(index, size: int, kernel: str, tensor: str, pos: int, source: str, axes: dict, where: str) -> None:
    """Raise :class:`pypto.IndexError` for the first element of ``index`` (an array over the kernel's axes)
    outside ``[-size, size)``, naming the tensor, the point and the value."""
    v = np.asarray(index)
    if v.size == 0:
        return
    if v.dtype.kind in "iub" and v.max() < size and (v.dtype.kind != "i" or v.min() >= -size):
        return  # two passes without temporaries: the usual case
    bad = v >= size if v.dtype.kind == "u" else (v < -size) | (v >= size)
    if not bad.any():
        return
    from pypto.errors import IndexError as IndexOutOfBounds

    at = np.unravel_index(int(np.argmax(bad)), bad.shape)
    value = v[at].item()
    point = ", ".join(f"{axes[d]}={at[d]}" for d in range(v.ndim) if v.shape[d] > 1)
    raise IndexOutOfBounds(
        f"{where + ': ' if where else ''}{kernel}(): index {value} (from {source}"
        f"{' at ' + point if point else ''}) is out of bounds for {tensor}.shape[{pos}] = {size}; nothing was "
        "written",
        param=tensor,
        expected=f"indices in [{-size}, {size}) (negative ones count from the end)",
        got=value,
        fix=f"pass indices that are valid positions along {tensor}.shape[{pos}]",
    )


def scatter(buffer: np.ndarray, index: tuple, value, op: str) -> None:
    """A scatter over the broadcast of its indices and value, point by point in C order (``np.add.at`` and its
    kin: several points landing on one element all count)."""
    *idx, v = np.broadcast_arrays(*index, value)
    if op == "set":
        buffer[tuple(idx)] = v
    else:
        {"add": np.add, "max": np.maximum, "min": np.minimum}[op].at(buffer, tuple(idx), v)


def sort_along(x: np.ndarray, axis: int, out: int, descending: bool, k: int | None, which: int) -> np.ndarray:
    """A ``Sort`` node over a broadcast grid: ``x`` ordered along position ``axis`` (the op table's NumPy meaning,
    :func:`pypto.ir.ops.ordered`), the first ``k`` kept, its values (``which`` 0) or positions (1) moved to position
    ``out`` (where ``x`` has size 1)."""
    from pypto.ir.ops import ordered

    r = ordered(x, axis, descending, k)[which]
    return np.swapaxes(r, axis, out)


NAMESPACE = {
    "_np": np,
    "_erf": erf,
    "_full": full,
    "_sort": sort_along,
    "_saturate": saturate,
    "_bounds": bounds,
    "_scatter": scatter,
}


def namespace(source: str) -> dict:
    """The globals a reference kernel's ``source`` runs in (bfloat16, ml_dtypes' NumPy type, where it is used)."""
    out = dict(NAMESPACE)
    if "_bfloat16" in source:
        import ml_dtypes

        out["_bfloat16"] = ml_dtypes.bfloat16
    return out
