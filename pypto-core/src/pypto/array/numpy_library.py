"""More of NumPy's functions on traced arrays: statistics that skip NaN, quantiles, interpolation, convolution,
polynomials, and the functions that build arrays from others (stacks, splits, diagonals, grids).

Each is written with the array layer's operations (:mod:`pypto.array.graph`, :mod:`pypto.array.views`,
:mod:`pypto.array.ops`), so it runs on every backend and differentiates where its parts do; each keeps NumPy's
signature, and an argument pypto does not take is a :class:`~pypto.errors.TracingError` naming it. Shapes must
not depend on traced values: quantiles ``q``, split points, polynomial degrees and filter lengths are Python
numbers (or the static shapes of arrays). They join :data:`pypto.array.numpy_api.FUNCTIONS` when this module
loads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.array import ops, views
from pypto.array.graph import NUMPY_FUNCTIONS, Array, _operand, binary, cast, reduce, unary, where
from pypto.array.numpy_api import FUNCTIONS, _array, _axes, _refuse
from pypto.errors import ShapeError, TracingError
from pypto.lang.location import user_loc

# -- reductions that skip NaN ------------------------------------------------------------------------------------


def _isnan(a: Array) -> Array:
    return binary("ne", a, a)


def _count(mask: Array, axis: Any, keepdims: bool) -> Array:
    """How many elements of ``mask`` are true along ``axis``, as a float (a divisor)."""
    return reduce("sum", where(mask, 1.0, 0.0), axis, keepdims)


def _nan_reduction(op: str) -> Callable[..., Any]:
    """``np.nansum``, ``np.nanprod``, ``np.nanmax``, ``np.nanmin``: NaN left out (a slice of NaN only: 0 for the
    sum, 1 for the product, NaN for the extremes, as NumPy)."""

    def fn(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Array:  # fmt: skip  # noqa: A002
        _refuse(f"nan{op}", dtype=dtype, out=out, initial=initial, where=where)
        a = _array(a, f"nan{op}")
        if not a.dtype.is_float:
            return reduce(op, a, axis, bool(keepdims))
        nan = _isnan(a)
        fill = {"sum": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}[op]
        r = reduce(op, _where(nan, fill, a), axis, bool(keepdims))
        if op in ("max", "min"):
            r = _where(binary("eq", _count(unary("invert", nan), axis, bool(keepdims)), 0), math.nan, r)
        return r

    fn.__name__ = f"nan{op}"
    return fn


def _where(cond: Any, a: Any, b: Any) -> Array:
    return where(cond, a, b)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, *,
            where: Any = None) -> Array:  # fmt: skip  # noqa: A002
    """The mean of the elements that are not NaN (NaN where there are none, as NumPy)."""
    _refuse("nanmean", dtype=dtype, out=out, where=where)
    a = _array(a, "nanmean")
    if not a.dtype.is_float:
        return reduce("mean", a, axis, bool(keepdims))
    nan = _isnan(a)
    return reduce("sum", _where(nan, 0.0, a), axis, bool(keepdims)) / _count(unary("invert", nan), axis, bool(keepdims))


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
           *, where: Any = None, mean: Any = None, correction: Any = None) -> Array:  # fmt: skip  # noqa: A002
    """The variance of the elements that are not NaN, divided by their count minus ``ddof``."""
    _refuse("nanvar", dtype=dtype, out=out, where=where, mean=mean, correction=correction)
    a = _array(a, "nanvar")
    nan = _isnan(a)
    centered = _where(nan, 0.0, a - nanmean(a, axis, keepdims=True))
    n = _count(unary("invert", nan), axis, bool(keepdims))
    return reduce("sum", centered * centered, axis, bool(keepdims)) / (n - ddof)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
           *, where: Any = None, mean: Any = None, correction: Any = None) -> Array:  # fmt: skip  # noqa: A002
    """The square root of :func:`nanvar`."""
    _refuse("nanstd", dtype=dtype, out=out, where=where, mean=mean, correction=correction)
    return unary("sqrt", nanvar(a, axis, ddof=ddof, keepdims=keepdims))


def _float_info(dt: dtypes.DType) -> Any:
    if dt == dtypes.bfloat16:
        import ml_dtypes

        return ml_dtypes.finfo(ml_dtypes.bfloat16)
    return np.finfo(dt.numpy)


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Array:
    """NaN replaced by ``nan``, infinities by ``posinf`` / ``neginf`` (the type's largest finite values by
    default), as NumPy."""
    x = _array(x, "nan_to_num")
    if not x.dtype.is_float:
        return x
    info = _float_info(x.dtype)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    out = _where(binary("eq", x, math.inf), hi, _where(binary("eq", x, -math.inf), lo, x))
    return _where(_isnan(x), nan, out)


# -- comparisons and counts ---------------------------------------------------------------------------------------


def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Array:
    """``|a - b| <= atol + rtol * |b|`` for finite ``b``, or ``a == b`` (infinities of one sign), as NumPy; NaN
    equal to NaN with ``equal_nan=True``."""
    near = binary("le", abs(binary("sub", a, b)), atol + rtol * abs(_operand(b, "numpy.isclose")))
    finite = binary("lt", abs(_operand(b, "numpy.isclose")), math.inf)
    out = binary("or", binary("and", near, finite), binary("eq", a, b))
    if equal_nan:
        out = binary("or", out, binary("and", binary("ne", a, a), binary("ne", b, b)))
    return out


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Array:
    """Whether :func:`isclose` holds everywhere (a traced bool: ``if np.allclose(...)`` is a traced condition)."""
    return binary("eq", reduce("sum", where(isclose(a, b, rtol, atol, equal_nan), 0, 1), None, False), 0)


def count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Array:
    """How many elements are nonzero (true) along ``axis``, as int64."""
    a = _array(a, "count_nonzero")
    truth = a if a.dtype.is_bool else binary("ne", a, 0)
    return cast(reduce("sum", truth, axis, bool(keepdims)), dtypes.int64)


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """The range of the values (maximum minus minimum) along ``axis``."""
    _refuse("ptp", out=out)
    a = _array(a, "ptp")
    return reduce("max", a, axis, bool(keepdims)) - reduce("min", a, axis, bool(keepdims))


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *, keepdims: bool = False) -> Any:
    """The weighted mean along ``axis`` (``sum(a * w) / sum(w)``; 1-D weights lie along ``axis``), and the sum of
    the weights with ``returned=True``, as NumPy."""
    a = _array(a, "average")
    if weights is None:
        avg = reduce("mean", a, axis, bool(keepdims))
        n = math.prod(a.shape[k] for k in _axes(axis, a.ndim))
        return (avg, Array("fill", (), float(n), avg.shape, avg.dtype)) if returned else avg
    w = _operand(weights, "numpy.average weights")
    if not isinstance(w, Array):
        raise TracingError("numpy.average: weights must be an array", user_loc(3))
    if w.shape != a.shape:
        if axis is None or w.ndim != 1:
            raise ShapeError(f"numpy.average: weights of shape {w.shape} for an array of shape {a.shape}",
                             param="weights", expected="the array's shape, or 1-D along axis", got=w.shape)  # fmt: skip
        (ax,) = _axes(axis, a.ndim)
        w = views.reshape(w, tuple(w.shape[0] if k == ax else 1 for k in range(a.ndim)))
    total = reduce("sum", views.broadcast_to(w, a.shape) if w.shape != a.shape else w, axis, bool(keepdims))
    avg = reduce("sum", a * w, axis, bool(keepdims)) / total
    return (avg, total) if returned else avg


def _extreme_sign(sign: float) -> Callable[..., Any]:
    def fn(x: Any, out: Any = None) -> Array:
        _refuse("isposinf" if sign > 0 else "isneginf", out=out)
        return binary("eq", _array(x, "isposinf"), sign * math.inf)

    return fn


# -- quantiles ------------------------------------------------------------------------------------------------------


def _static_q(q: Any, fname: str, scale: float) -> tuple[list[float], bool]:
    if isinstance(q, Array):
        raise TracingError(f"numpy.{fname}: q is a traced array; the quantiles must be numbers", user_loc(4),
                           "pass q as a Python number or list")  # fmt: skip
    arr = np.asarray(q, dtype=np.float64) / scale
    if arr.ndim > 1 or (arr < 0).any() or (arr > 1).any():
        raise TracingError(f"numpy.{fname}: q must be in [0, {int(scale)}] (one value or a list), got {q!r}",
                           user_loc(4))  # fmt: skip
    return [float(v) for v in arr.reshape(-1)], arr.ndim == 1


def _quantiles(fname: str, scale: float) -> Callable[..., Any]:
    """``np.quantile`` (``scale=1``) and ``np.percentile`` (100) with the default ``method="linear"``: the
    sorted values along ``axis``, interpolated between the two around ``q * (n - 1)``; a slice with a NaN gives
    NaN, as NumPy."""

    def fn(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           method: str = "linear", keepdims: bool = False, *, weights: Any = None, interpolation: Any = None) -> Array:  # fmt: skip
        _refuse(fname, out=out, weights=weights, interpolation=interpolation)
        if method != "linear":
            raise TracingError(f"numpy.{fname}: method={method!r} is not supported", user_loc(3),
                               "use the default method='linear'")  # fmt: skip
        qs, listed = _static_q(q, fname, scale)
        return _quantile(_array(a, fname), qs, listed, axis, bool(keepdims))

    fn.__name__ = fname
    return fn


def _quantile(a: Array, qs: list[float], listed: bool, axis: Any, keepdims: bool, middle: bool = False) -> Array:
    """The quantiles ``qs`` of ``a`` along ``axis`` (``middle``: the median, the mean of the two middle values for
    an even count, as ``np.median``)."""
    if axis is None:
        flat = views.reshape(a, (-1,))
        r = _quantile(flat, qs, listed, 0, False, middle)
        return views.reshape(r, (len(qs),) * listed + (1,) * a.ndim) if keepdims else r
    if isinstance(axis, (tuple, list)):
        raise TracingError("numpy quantiles: one axis or None", user_loc(4), "reshape the axes into one first")
    (ax,) = _axes(axis, a.ndim)
    n = int(a.shape[ax])
    if n == 0:
        raise ShapeError("numpy quantiles of an empty axis", param="a", expected="at least one element", got=a.shape)
    x = a if a.dtype.is_float else cast(a, dtypes.float64)
    s = ops.ordering("sort", x, ax, False, None)

    def at(k: int) -> Array:
        key = [slice(None)] * a.ndim
        key[ax] = slice(k, k + 1) if keepdims else k
        return views.getitem(s, tuple(key))

    has_nan = _isnan(at(n - 1))  # NaN sorts last
    results = []
    for q in qs:
        pos = q * (n - 1)
        lo = min(int(math.floor(pos)), n - 1)
        hi = min(lo + 1, n - 1)
        t = pos - lo
        if middle and t:  # (a + b) / 2: infinities of one sign stay, where the interpolation gives NaN
            v = (at(lo) + at(hi)) / 2
        else:
            v = (
                at(lo)
                if t == 0
                else at(lo) + (at(hi) - at(lo)) * t
                if t < 0.5
                else at(hi) - (at(hi) - at(lo)) * (1 - t)
            )
        results.append(_where(has_nan, math.nan, v))
    return ops.stack(results, 0) if listed else results[0]


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False) -> Array:
    """The middle value along ``axis`` (the mean of the two middle ones for an even count; NaN if any is NaN)."""
    _refuse("median", out=out)
    return _quantile(_array(a, "median"), [0.5], False, axis, bool(keepdims), middle=True)


# -- interpolation, integration, polynomials, convolution ---------------------------------------------------------


def _as_array(x: Any, what: str) -> Array:
    x = _operand(np.asarray(x) if isinstance(x, (list, tuple)) else x, what)
    if not isinstance(x, Array):
        raise TracingError(f"{what}: expected an array, got {type(x).__name__}", user_loc(4))
    return x


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Array:
    """``np.interp``: the piecewise linear interpolant through ``(xp, fp)`` (``xp`` increasing) at ``x``;
    ``fp[0]`` (or ``left``) below ``xp[0]``, ``fp[-1]`` (or ``right``) above ``xp[-1]``. The interval of each
    value comes from ``np.searchsorted``."""
    _refuse("interp", period=period)
    xp, fp = _as_array(xp, "numpy.interp xp"), _as_array(fp, "numpy.interp fp")
    if xp.ndim != 1 or fp.shape != xp.shape:
        raise ShapeError(f"numpy.interp: xp {xp.shape} and fp {fp.shape} must be 1-D of one length", param="xp",
                         expected="two 1-D arrays of one length", got=(xp.shape, fp.shape))  # fmt: skip
    n = int(xp.shape[0])
    x = _as_array(x, "numpy.interp x") if not isinstance(x, (int, float)) else x
    first, last = views.getitem(fp, 0), views.getitem(fp, n - 1)
    lo_value = first if left is None else left
    hi_value = last if right is None else right
    if n == 1:
        y = binary("add", binary("mul", x, 0.0), first)
    else:
        j = binary("minimum", binary("maximum", FUNCTIONS[np.searchsorted](xp, x, "right") - 1, 0), n - 2)
        x0, x1 = views.take(xp, j), views.take(xp, j + 1)
        f0, f1 = views.take(fp, j), views.take(fp, j + 1)
        slope = (f1 - f0) / (x1 - x0)
        y = _where(binary("eq", x, x1), f1, f0 + slope * (x - x0))
    y = _where(binary("lt", x, views.getitem(xp, 0)), lo_value, y)
    return _where(binary("gt", x, views.getitem(xp, n - 1)), hi_value, y)


def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Array:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule (spacing ``dx``, or the points ``x``)."""
    y = _array(y, "trapezoid")
    (ax,) = _axes(axis, y.ndim)

    def part(a: Array, lo: int | None, hi: int | None) -> Array:
        key = [slice(None)] * a.ndim
        key[ax if a.ndim == y.ndim else 0] = slice(lo, hi)
        return views.getitem(a, tuple(key))

    mids = (part(y, 1, None) + part(y, None, -1)) * 0.5
    if x is None:
        return reduce("sum", mids, ax, False) * dx
    xs = _as_array(x, "numpy.trapezoid x")
    d = part(xs, 1, None) - part(xs, None, -1)
    if xs.ndim == 1 and y.ndim > 1:
        d = views.reshape(d, tuple(d.shape[0] if k == ax else 1 for k in range(y.ndim)))
    return reduce("sum", mids * d, ax, False)


def polyval(p: Any, x: Any) -> Array:
    """``p[0] * x**(n-1) + ... + p[n-1]`` by Horner's rule (the coefficients a list, a NumPy array or a traced 1-D
    array: their number is the program's)."""
    coeffs = p if isinstance(p, Array) else np.asarray(p)
    n = coeffs.shape[0] if coeffs.ndim else 1
    take = (
        (lambda k: views.getitem(coeffs, k)) if isinstance(coeffs, Array) else (lambda k: coeffs.reshape(-1)[k].item())
    )
    y = binary("add", binary("mul", x, 0), take(0))
    for k in range(1, n):
        y = y * x + take(k)
    return y


def sinc(x: Any) -> Array:
    """``sin(pi x) / (pi x)``, 1 at 0 (the normalised sinc, as NumPy's)."""
    x = _array(x, "sinc")
    y = binary("mul", x if x.dtype.is_inexact else cast(x, dtypes.float64), math.pi)
    return _where(binary("eq", y, 0), 1.0, unary("sin", y) / y)


_SLICED_TAPS = 32
"""Filters up to this length are sums of shifted slices (gradients flow); longer ones one contraction over a sliding
window of the signal (no gradient through the window view)."""


def _full_convolution(a: Array, v: Array) -> Array:
    """``np.convolve(a, v, "full")`` of 1-D arrays: ``out[i] = sum_k a[i - k] v[k]``."""
    n, m = int(a.shape[0]), int(v.shape[0])
    zeros = Array("fill", (), 0, (m - 1,), a.dtype)
    padded = ops.concat([zeros, a, zeros], 0) if m > 1 else a
    length = n + m - 1
    if m <= _SLICED_TAPS:
        out = None
        for k in range(m):  # v[k] meets a[i - k]: the padded signal from m - 1 - k
            term = views.getitem(padded, slice(m - 1 - k, m - 1 - k + length)) * views.getitem(v, k)
            out = term if out is None else out + term
        return out  # type: ignore[return-value]
    window = views.view(padded, (length, m), ((0, ((0, 1), (1, 1))),))  # window[i, k] = padded[i + k]
    return ops.einsum("ik,k->i", window, views.getitem(v, slice(None, None, -1)))


def _convolve_mode(full: Array, n: int, m: int, mode: str, fname: str) -> Array:
    if mode == "full":
        return full
    if mode == "same":
        start = (min(n, m) - 1) // 2
        return views.getitem(full, slice(start, start + max(n, m)))
    if mode == "valid":
        return views.getitem(full, slice(min(n, m) - 1, max(n, m)))
    raise TracingError(f"numpy.{fname}: mode must be 'full', 'same' or 'valid', got {mode!r}", user_loc(4))


def convolve(a: Any, v: Any, mode: str = "full") -> Array:
    """The discrete linear convolution of two 1-D arrays (``mode`` ``"full"``, ``"same"``, ``"valid"``)."""
    a, v = _as_array(a, "numpy.convolve a"), _as_array(v, "numpy.convolve v")
    if a.ndim != 1 or v.ndim != 1 or not a.shape[0] or not v.shape[0]:
        raise ShapeError("numpy.convolve: two non-empty 1-D arrays", param="a", expected="1-D arrays",
                         got=(a.shape, v.shape))  # fmt: skip
    n, m = int(a.shape[0]), int(v.shape[0])
    full = _full_convolution(a, v) if m <= n else _full_convolution(v, a)
    return _convolve_mode(full, n, m, mode, "convolve")


def correlate(a: Any, v: Any, mode: str = "valid") -> Array:
    """The cross-correlation of two 1-D arrays, ``c[k] = sum_n a[n + k] conj(v[n])`` (``mode`` as
    :func:`convolve`'s)."""
    a, v = _as_array(a, "numpy.correlate a"), _as_array(v, "numpy.correlate v")
    if a.ndim != 1 or v.ndim != 1 or not a.shape[0] or not v.shape[0]:
        raise ShapeError("numpy.correlate: two non-empty 1-D arrays", param="a", expected="1-D arrays",
                         got=(a.shape, v.shape))  # fmt: skip
    n, m = int(a.shape[0]), int(v.shape[0])
    rv = views.getitem(v.conj() if v.dtype.is_complex else v, slice(None, None, -1))
    if m <= n:
        return _convolve_mode(_full_convolution(a, rv), n, m, mode, "correlate")
    # a shorter a: correlate(a, v) is correlate(v, a) conjugated and reversed
    vc = v.conj() if v.dtype.is_complex else v
    swapped = _convolve_mode(_full_convolution(vc, views.getitem(a, slice(None, None, -1))), n, m, mode, "correlate")
    return views.getitem(swapped, slice(None, None, -1))


# -- arrays from arrays --------------------------------------------------------------------------------------------


def _atleast(nd: int) -> Callable[..., Any]:
    def fn(*arys: Any) -> Any:
        out = []
        for a in arys:
            a = _array(a, f"atleast_{nd}d")
            if a.ndim < nd:
                shape = a.shape
                if nd == 3 and a.ndim == 2:
                    shape = (*shape, 1)
                elif nd == 3 and a.ndim == 1:
                    shape = (1, *shape, 1)
                else:
                    shape = (1,) * (nd - a.ndim) + shape
                a = views.reshape(a, shape)
            out.append(a)
        return out[0] if len(out) == 1 else tuple(out)

    return fn


def _stacker(fname: str, nd: int, axis: int) -> Callable[..., Any]:
    def fn(tup: Sequence[Any], *, dtype: Any = None, casting: Any = None) -> Array:
        _refuse(fname, dtype=dtype)
        arrays = [_atleast(nd)(_array(a, fname)) for a in tup]
        if fname == "hstack" and arrays and arrays[0].ndim == 1:
            return ops.concat(arrays, 0)
        if fname == "column_stack":
            arrays = [views.reshape(a, (a.shape[0], 1)) if a.ndim == 1 else a for a in (_array(a, fname) for a in tup)]
        return ops.concat(arrays, axis)

    return fn


def _split(fname: str) -> Callable[..., Any]:
    def fn(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Array]:
        a = _array(ary, fname)
        (ax,) = _axes(axis, a.ndim)
        n = int(a.shape[ax])
        if isinstance(indices_or_sections, Array):
            raise TracingError(f"numpy.{fname}: the split points are traced; the pieces' shapes would depend on them",
                               user_loc(3), "pass a number of sections or a list of Python ints")  # fmt: skip
        if np.ndim(indices_or_sections) == 0:
            sections = int(indices_or_sections)
            if fname == "split" and n % sections:
                raise ShapeError(f"numpy.split: {n} elements do not split into {sections} equal sections",
                                 param="indices_or_sections", expected=f"a divisor of {n}", got=sections,
                                 fix="use np.array_split for unequal sections")  # fmt: skip
            size, extra = divmod(n, sections)
            bounds = [0]
            for k in range(sections):
                bounds.append(bounds[-1] + size + (1 if k < extra else 0))
        else:
            bounds = [0, *(min(max(int(i) if i >= 0 else n + int(i), 0), n) for i in indices_or_sections), n]
        out = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            key = [slice(None)] * a.ndim
            key[ax] = slice(lo, max(lo, hi))
            out.append(views.getitem(a, tuple(key)))
        return out

    return fn


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """The diagonal of ``a`` over ``axis1`` and ``axis2`` (moved last, as NumPy): a view, no copy."""
    a = _array(a, "diagonal")
    ax1, ax2 = _axes((axis1, axis2), a.ndim)
    n1, n2 = int(a.shape[ax1]), int(a.shape[ax2])
    start1, start2 = (max(-offset, 0), max(offset, 0))
    length = max(0, min(n1 - start1, n2 - start2))
    rest = [k for k in range(a.ndim) if k not in (ax1, ax2)]
    index = []
    for k in range(a.ndim):
        if k == ax1:
            index.append((start1, ((len(rest), 1),)))
        elif k == ax2:
            index.append((start2, ((len(rest), 1),)))
        else:
            index.append((0, ((rest.index(k), 1),)))
    return views.view(a, tuple(a.shape[k] for k in rest) + (length,), tuple(index))


def diag(v: Any, k: int = 0) -> Array:
    """The ``k``-th diagonal of a 2-D array, or a 2-D array with the 1-D ``v`` on its ``k``-th diagonal."""
    v = _array(v, "diag")
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ShapeError("numpy.diag: a 1-D or 2-D array", param="v", expected="1-D or 2-D", got=v.shape)
    n = int(v.shape[0]) + abs(k)
    eye = ops.eye(n, n, k, dtype=v.dtype)
    row = views.reshape(v, (1, -1))
    if k >= 0:  # out[i, i + k] = v[i]: v along the columns it lands in
        cols = ops.concat([Array("fill", (), 0, (1, k), v.dtype), row], 1) if k else row
        return eye * cols
    rows = ops.concat([Array("fill", (), 0, (1, -k), v.dtype), row], 1)  # out[i - k, i] = v[i]
    return eye * views.reshape(rows, (-1, 1))


def kron(a: Any, b: Any) -> Array:
    """The Kronecker product: blocks ``a[i, j] * b`` (arrays of any dimensions, padded to the same)."""
    a, b = _array(a, "kron"), _array(b, "kron")
    nd = max(a.ndim, b.ndim)
    a = views.reshape(a, (1,) * (nd - a.ndim) + a.shape)
    b = views.reshape(b, (1,) * (nd - b.ndim) + b.shape)
    wide_a = views.reshape(a, tuple(v for s in a.shape for v in (s, 1)))
    wide_b = views.reshape(b, tuple(v for s in b.shape for v in (1, s)))
    return views.reshape(wide_a * wide_b, tuple(x * y for x, y in zip(a.shape, b.shape)))


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Any = None) -> Array:
    """The cross product of 3-vectors along the last axis (broadcasting over the others)."""
    _refuse("cross", axis=axis)
    a, b = _array(a, "cross"), _array(b, "cross")
    if (axisa, axisb, axisc) != (-1, -1, -1) or a.shape[-1] != 3 or b.shape[-1] != 3:
        raise TracingError("numpy.cross: 3-vectors along the last axis only", user_loc(3),
                           "move the vectors' axis last (np.moveaxis)")  # fmt: skip

    def c(x: Array, k: int) -> Array:
        return views.getitem(x, (Ellipsis, k))

    parts = [c(a, 1) * c(b, 2) - c(a, 2) * c(b, 1), c(a, 2) * c(b, 0) - c(a, 0) * c(b, 2),
             c(a, 0) * c(b, 1) - c(a, 1) * c(b, 0)]  # fmt: skip
    return ops.stack(parts, -1)


def vdot(a: Any, b: Any) -> Array:
    """The dot product of the flattened arrays, the first conjugated."""
    a, b = views.reshape(_array(a, "vdot"), (-1,)), views.reshape(_array(b, "vdot"), (-1,))
    return reduce("sum", (a.conj() if a.dtype.is_complex else a) * b, None, False)


def moveaxis(a: Any, source: Any, destination: Any) -> Array:
    """``a`` with the axes ``source`` moved to ``destination`` (the others keep their order): a view."""
    a = _array(a, "moveaxis")
    src = list(_axes(source, a.ndim))
    dst = list(_axes(destination, a.ndim))
    order = [k for k in range(a.ndim) if k not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return views.transpose(a, tuple(order))


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> tuple[Array, ...]:
    """Coordinate arrays from 1-D arrays (``indexing="xy"``: the first two axes swapped, as NumPy); broadcast
    views (``sparse=True``: not broadcast)."""
    arrays = [views.reshape(_array(x, "meshgrid"), (-1,)) for x in xi]
    nd = len(arrays)

    def pos(k: int) -> int:
        return {0: 1, 1: 0}.get(k, k) if indexing == "xy" and nd > 1 else k

    full = [1] * nd
    out = []
    for k, x in enumerate(arrays):
        shape = [1] * nd
        shape[pos(k)] = full[pos(k)] = x.shape[0]
        out.append(views.reshape(x, tuple(shape)))
    return tuple(out if sparse else (views.broadcast_to(o, tuple(full)) for o in out))


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Array:
    """The choice of the first condition that holds, elementwise (``default`` where none does)."""
    if len(condlist) != len(choicelist):
        raise ShapeError("numpy.select: one choice per condition", param="choicelist",
                         expected=f"{len(condlist)} choices", got=len(choicelist))  # fmt: skip
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        out = where(cond, choice, out)
    return _operand(out, "numpy.select") if not isinstance(out, Array) else out


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Array:
    """The differences between consecutive elements of the flattened array."""
    _refuse("ediff1d", to_end=to_end, to_begin=to_begin)
    a = views.reshape(_array(ary, "ediff1d"), (-1,))
    return views.getitem(a, slice(1, None)) - views.getitem(a, slice(None, -1))


FUNCTIONS.update({
    np.nansum: _nan_reduction("sum"), np.nanprod: _nan_reduction("prod"), np.nanmax: _nan_reduction("max"),
    np.nanmin: _nan_reduction("min"), np.nanmean: nanmean, np.nanvar: nanvar, np.nanstd: nanstd,
    np.nan_to_num: nan_to_num, np.isclose: isclose, np.allclose: allclose, np.count_nonzero: count_nonzero,
    np.ptp: ptp, np.average: average, np.isposinf: _extreme_sign(1.0), np.isneginf: _extreme_sign(-1.0),
    np.quantile: _quantiles("quantile", 1.0), np.percentile: _quantiles("percentile", 100.0), np.median: median,
    np.interp: interp, np.polyval: polyval, np.convolve: convolve, np.correlate: correlate,
    np.atleast_1d: _atleast(1), np.atleast_2d: _atleast(2), np.atleast_3d: _atleast(3),
    np.vstack: _stacker("vstack", 2, 0), np.hstack: _stacker("hstack", 1, 1), np.dstack: _stacker("dstack", 3, 2),
    np.column_stack: _stacker("column_stack", 2, 1), np.split: _split("split"), np.array_split: _split("array_split"),
    np.diagonal: diagonal, np.diag: diag, np.kron: kron, np.cross: cross, np.vdot: vdot, np.moveaxis: moveaxis,
    np.meshgrid: meshgrid, np.select: select, np.ediff1d: ediff1d, np.sinc: sinc,
})  # fmt: skip
for _name in ("trapezoid", "trapz"):  # (NumPy 2 renamed trapz)
    if hasattr(np, _name):
        FUNCTIONS[getattr(np, _name)] = trapezoid
NUMPY_FUNCTIONS.update(FUNCTIONS)
