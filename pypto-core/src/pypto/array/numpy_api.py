"""NumPy's functions on traced arrays: ``np.exp(x)``, ``np.clip(x, 0, 1)``, ``np.sum(x, axis=1)`` inside ``@pt.jit``.

A traced :class:`~pypto.array.graph.Array` answers NumPy's two dispatch protocols. Ufuncs (``np.exp``,
``np.maximum``, ``np.add`` ...) come from the op table: each math function and binary operator whose NumPy
meaning is a ufunc is that ufunc on arrays (``__array_ufunc__``). Other functions (``np.sum``, ``np.clip``,
``np.where``, ``np.concatenate`` ...) are the entries of :data:`FUNCTIONS` below (``__array_function__``), each
with NumPy's signature; an argument pypto does not take (``out=``, ``dtype=`` of a reduction) and a function
not listed are a :class:`~pypto.errors.TracingError` naming them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pypto.array import ops, views
from pypto.array.graph import NUMPY_FUNCTIONS, Array, binary, cast, reduce, unary, where
from pypto.errors import TracingError
from pypto.lang.location import user_loc


def _refuse(fname: str, **given: Any) -> None:
    """A TracingError for NumPy arguments pypto does not take (those given other than their defaults)."""
    for name, value in given.items():
        if value is not None and value is not np._NoValue:  # type: ignore[attr-defined]
            raise TracingError(f"numpy.{fname}: the argument {name}= is not supported on a traced array "
                               f"(got {value!r})", user_loc(4),
                               "leave it out: results are new arrays of the promoted type; convert with "
                               ".astype(...)")  # fmt: skip


def _reduction(op: str) -> Callable[..., Any]:
    def fn(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:  # fmt: skip
        _refuse(op, dtype=dtype, out=out, initial=initial, where=where)
        return reduce(op, a, axis, bool(keepdims))

    return fn


def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
        *, where: Any = None, mean: Any = None, correction: Any = None) -> Array:  # fmt: skip
    """NumPy's variance: the mean of the squared deviations from the mean, divided by ``n - ddof``."""
    _refuse("var", dtype=dtype, out=out, where=where, mean=mean, correction=correction)
    if not isinstance(a, Array):
        raise TracingError("var(): expected an array", user_loc(3))
    centered = a - reduce("mean", a, axis, True)
    squares = centered * centered.conj() if a.dtype.is_complex else centered * centered
    if ddof == 0:
        return reduce("mean", squares, axis, bool(keepdims))
    n = math.prod(a.shape[k] for k in _axes(axis, a.ndim))
    return reduce("sum", squares, axis, bool(keepdims)) / (n - ddof)


def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
        *, where: Any = None, mean: Any = None, correction: Any = None) -> Array:  # fmt: skip
    """NumPy's standard deviation: the square root of :func:`var`."""
    _refuse("std", dtype=dtype, out=out, where=where, mean=mean, correction=correction)
    return unary("sqrt", var(a, axis, ddof=ddof, keepdims=keepdims))


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    return tuple(int(k) % max(ndim, 1) for k in (axis if isinstance(axis, (tuple, list)) else (axis,)))


def any_(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *, where: Any = None) -> Array:
    """Whether any element along ``axis`` is true (nonzero)."""
    _refuse("any", out=out, where=where)
    return reduce("sum", _truth(a, "any"), axis, bool(keepdims)) > 0


def all_(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *, where: Any = None) -> Array:
    """Whether every element along ``axis`` is true (nonzero); true when there is none."""
    _refuse("all", out=out, where=where)
    return reduce("sum", _truth(a, "all") == False, axis, bool(keepdims)) == 0  # noqa: E712 - elementwise


def _truth(a: Any, fname: str) -> Array:
    if not isinstance(a, Array):
        raise TracingError(f"{fname}(): expected an array", user_loc(4))
    return a if a.dtype.is_bool else a != 0


def clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, *, min: Any = None,
         max: Any = None) -> Array:  # fmt: skip
    """``minimum(maximum(a, a_min), a_max)`` (either bound may be None; NaN in ``a`` stays NaN, as NumPy)."""
    _refuse("clip", out=out)
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    if lo is None and hi is None:
        raise TracingError("clip(): give a lower bound, an upper bound or both", user_loc(3),
                           "np.clip(x, 0.0, 1.0), or np.clip(x, None, 1.0)")  # fmt: skip
    out_ = a
    if lo is not None:
        out_ = binary("maximum", out_, lo)
    if hi is not None:
        out_ = binary("minimum", out_, hi)
    return out_


def round_(a: Any, decimals: int = 0, out: Any = None) -> Array:
    """Rounded to ``decimals`` digits, halves to even (NumPy's: ``rint(a * 10**decimals) / 10**decimals``)."""
    _refuse("round", out=out)
    if not isinstance(a, Array):
        raise TracingError("round(): expected an array", user_loc(3))
    if not a.dtype.is_inexact:
        return a
    if decimals == 0:
        return unary("round", a)
    scale = 10.0**decimals
    return unary("round", a * scale) / scale


def squeeze(a: Any, axis: Any = None) -> Array:
    """``a`` without its dimensions of size 1 (those of ``axis`` only, which must have size 1)."""
    drop = _axes(axis, a.ndim) if axis is not None else tuple(k for k, s in enumerate(a.shape) if s == 1)
    for k in drop:
        if a.shape[k] != 1:
            raise TracingError(f"squeeze(): axis {k} has size {a.shape[k]}, not 1", user_loc(3),
                               "squeeze only axes of size 1")  # fmt: skip
    return views.reshape(a, tuple(s for k, s in enumerate(a.shape) if k not in drop))


def ravel(a: Any, order: str = "C") -> Array:
    """The elements in one dimension, in C order."""
    if order not in ("C", "A", "K"):
        raise TracingError(f"ravel(): order {order!r} is not supported", user_loc(3), "use the C order (default)")
    return views.reshape(a, (a.size,))


def _where(condition: Any, x: Any = None, y: Any = None) -> Array:
    if x is None or y is None:
        raise TracingError("numpy.where with one argument (the positions of the true elements) has a "
                           "data-dependent shape", user_loc(3),
                           "use the three-argument form np.where(cond, x, y)")  # fmt: skip
    return where(condition, x, y)


def _along(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        _refuse(name, dtype=dtype, out=out)
        return fn(a, axis)

    return call


def _sorted(which: str) -> Callable[..., Any]:
    def call(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *, stable: Any = None) -> Any:
        _refuse("sort" if which == "values" else "argsort", order=order)
        return ops.ordering("argsort" if which == "indices" else "sort", a, axis, False, None)

    return call


def _arg(op: str) -> Callable[..., Any]:
    def call(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
        _refuse(f"arg{op}", out=out)
        return ops.arg_reduce(op, a, axis, bool(keepdims), f"numpy.arg{op}")

    return call


def _concatenate(arrays: Any, axis: int = 0, out: Any = None, dtype: Any = None, casting: Any = None) -> Array:
    _refuse("concatenate", out=out, dtype=dtype)
    return ops.concat(arrays, axis)


def _stack(arrays: Any, axis: int = 0, out: Any = None, dtype: Any = None, casting: Any = None) -> Array:
    _refuse("stack", out=out, dtype=dtype)
    return ops.stack(arrays, axis)


def _dot(a: Any, b: Any, out: Any = None) -> Array:
    _refuse("dot", out=out)
    return ops.matmul(a, b)


def _astype(x: Any, dtype: Any, copy: bool = True, **_: Any) -> Array:
    return cast(x, dtype)


FUNCTIONS: dict[Any, Callable[..., Any]] = {
    np.sum: _reduction("sum"), np.prod: _reduction("prod"), np.max: _reduction("max"), np.amax: _reduction("max"),
    np.min: _reduction("min"), np.amin: _reduction("min"), np.mean: _reduction("mean"), np.var: var, np.std: std,
    np.any: any_, np.all: all_, np.clip: clip, np.round: round_, np.around: round_, np.where: _where,
    np.squeeze: squeeze, np.ravel: ravel, np.argmax: _arg("max"), np.argmin: _arg("min"),
    np.cumsum: _along("cumsum", lambda a, axis: ops.scan("sum", a, axis, False, "numpy.cumsum")),
    np.cumprod: _along("cumprod", lambda a, axis: ops.scan("prod", a, axis, False, "numpy.cumprod")),
    np.sort: _sorted("values"), np.argsort: _sorted("indices"),
    np.transpose: lambda a, axes=None: views.transpose(a, axes), np.reshape: lambda a, *args, **kw: _reshape(a, *args, **kw),
    np.concatenate: _concatenate, np.stack: _stack, np.dot: _dot, np.einsum: ops.einsum,
    np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim, np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.take_along_axis: lambda arr, indices, axis: views.take_along_axis(arr, indices, axis),
    np.astype: _astype, np.tril: lambda m, k=0: ops.tril(m, k), np.triu: lambda m, k=0: ops.triu(m, k),
}  # fmt: skip
"""NumPy's non-ufunc functions on traced arrays, by the NumPy function."""


def _reshape(a: Any, *args: Any, **kwargs: Any) -> Array:
    shape = kwargs.pop("newshape", kwargs.pop("shape", args[0] if args else None))
    order = kwargs.pop("order", args[1] if len(args) > 1 else "C")
    if order != "C" or kwargs:
        raise TracingError("numpy.reshape: only the C order and a shape are supported", user_loc(3))
    return views.reshape(a, shape if isinstance(shape, (tuple, list)) else (shape,))


NUMPY_FUNCTIONS.update(FUNCTIONS)
