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

from pypto.array import linalg, ops, views
from pypto.array.graph import NUMPY_FUNCTIONS, UFUNC_METHODS, Array, _operand, binary, cast, reduce, unary, where
from pypto.array.graph import where as graph_where
from pypto.errors import ShapeError, TracingError
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
    """``np.sum``, ``np.prod``, ``np.max``, ``np.min``, ``np.mean`` with NumPy's ``dtype=`` (the type computed in),
    ``initial=`` (a value combined with the result) and ``where=`` (a mask of the elements reduced; the extremes
    need ``initial=`` with it, as NumPy's)."""

    def fn(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:  # fmt: skip
        _refuse(op, out=out)
        a = _array(a, op)
        if dtype is not None:
            a = cast(a, dtype)
        mask = None if where is None or where is True else where
        if op == "mean":
            _refuse(op, initial=initial)
            if mask is None:
                return reduce("mean", a, axis, bool(keepdims))
            count = reduce("sum", views.broadcast_to(graph_where(mask, 1.0, 0.0), a.shape), axis, bool(keepdims))
            return reduce("sum", graph_where(mask, a, 0), axis, bool(keepdims)) / count
        if mask is not None:
            if op in ("max", "min") and initial is None:
                raise TracingError(f"numpy.{op}: where= needs initial= (the result where every element is masked)",
                                   user_loc(3), f"np.{op}(x, where=mask, initial=...)")  # fmt: skip
            identity = {"sum": 0, "prod": 1}.get(op, initial)
            a = graph_where(mask, a, identity)
        r = reduce(op, a, axis, bool(keepdims))
        if initial is not None:
            r = binary({"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}[op], r, initial)
        return r

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


def _array(a: Any, fname: str) -> Array:
    if not isinstance(a, Array):
        raise TracingError(f"numpy.{fname}: expected a traced array, got {type(a).__name__}", user_loc(3))
    return a


def _flip(m: Any, axis: Any = None) -> Array:
    m = _array(m, "flip")
    axes = _axes(axis, m.ndim)
    return views.getitem(m, tuple(slice(None, None, -1) if k in axes else slice(None) for k in range(m.ndim)))


def _roll(a: Any, shift: Any, axis: Any = None) -> Array:
    """``np.roll``: the elements moved by ``shift`` along ``axis`` (of the flattened array when None), those
    leaving one end coming back at the other: two slices joined."""
    a = _array(a, "roll")
    if axis is None:
        return views.reshape(_roll(views.reshape(a, (-1,)), shift, 0), a.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,) * len(_axes(axis, a.ndim))
    for ax, sh in zip(_axes(axis, a.ndim), shifts):
        n = a.shape[ax]
        k = int(sh) % n if n else 0
        if k:
            cut = [slice(None)] * a.ndim
            head, tail = list(cut), list(cut)
            head[ax], tail[ax] = slice(n - k, None), slice(None, n - k)
            a = ops.concat([views.getitem(a, tuple(head)), views.getitem(a, tuple(tail))], ax)
    return a


def _counts(fname: str, what: str, value: Any) -> np.ndarray:
    """Repeat counts given as Python or NumPy integers (not traced: the result's shape depends on them)."""
    if isinstance(value, Array):
        raise TracingError(f"numpy.{fname}: {what} is a traced array; the result's shape would depend on its values",
                           user_loc(4), f"pass {what} as Python ints (or mark the argument static)")  # fmt: skip
    counts = np.asarray(value)
    if counts.dtype.kind not in "iu" or counts.ndim > 1 or (counts < 0).any():
        raise TracingError(f"numpy.{fname}: {what} must be non-negative integers (one, or one per element), got "
                           f"{value!r}", user_loc(4), f"pass {what} as an int or a sequence of ints")  # fmt: skip
    return counts.astype(np.int64)


def _repeat(a: Any, repeats: Any, axis: Any = None) -> Array:
    """``np.repeat``: each element repeated ``repeats`` times along ``axis`` (of the flattened array when None).
    One count: a broadcast view reshaped (no copy until used); one count per element: a gather at the positions
    ``np.repeat(np.arange(n), repeats)`` (a constant of the program)."""
    a = _array(a, "repeat")
    counts = _counts("repeat", "repeats", repeats)
    if axis is None:
        a, axis = views.reshape(a, (-1,)), 0
    (ax,) = _axes(axis, a.ndim)
    n = int(a.shape[ax])
    if counts.ndim == 1 and counts.size not in (1, n):
        raise ShapeError(f"numpy.repeat: {counts.size} repeat counts for an axis of {n} elements", param="repeats",
                         expected=f"1 or {n} counts", got=counts.size)  # fmt: skip
    if counts.size == 1:
        r = int(counts.reshape(-1)[0])
        wide = list(a.shape[: ax + 1]) + [r] + list(a.shape[ax + 1 :])
        out = list(a.shape)
        out[ax] = n * r
        return views.reshape(views.broadcast_to(views.expand_dims(a, ax + 1), tuple(wide)), tuple(out))
    positions = _operand(np.repeat(np.arange(n, dtype=np.int64), counts), "numpy.repeat")
    return views.take(a, positions, ax)


def _tile(A: Any, reps: Any) -> Array:  # noqa: N803 - NumPy's name
    """``np.tile``: ``A`` repeated ``reps`` times along each axis (as a whole): a broadcast view reshaped."""
    a = _array(A, "tile")
    r = _counts("tile", "reps", reps).reshape(-1)
    d = max(a.ndim, r.size)
    shape = (1,) * (d - a.ndim) + tuple(int(s) for s in a.shape)
    r = (1,) * (d - r.size) + tuple(int(k) for k in r)
    interleaved = tuple(v for s in shape for v in (1, s))
    wide = tuple(v for k, s in zip(r, shape) for v in (k, s))
    out = views.broadcast_to(views.reshape(a, interleaved), wide)
    return views.reshape(out, tuple(k * s for k, s in zip(r, shape)))


def _searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Array:
    """``np.searchsorted``: where each value of ``v`` would go in the sorted 1-D ``a`` to keep it sorted (the first
    such position with ``side="left"``, the last with ``"right"``; NaN sorts last, as in ``np.sort``), as int64.

    In a sorted array the position is a count: of the elements before ``v`` (``"left"``), or not after it. Up to
    :data:`SEARCH_ROW` elements, each value counts them all (one vectorised reduction); a longer ``a`` is cut into
    blocks of about ``sqrt(n)``: a first step counts the blocks whose last element comes before the value, a second
    counts inside the block found (read by a gather): ``2 sqrt(n)`` comparisons per value instead of ``n``."""
    a = _array(a, "searchsorted")
    if a.ndim != 1:
        raise ShapeError("numpy.searchsorted: the sorted array must be one-dimensional", param="a",
                         expected="a 1-D array", got=a.shape)  # fmt: skip
    if side not in ("left", "right"):
        raise TracingError(f"numpy.searchsorted: side must be 'left' or 'right', got {side!r}", user_loc(3))
    if sorter is not None:
        a = views.take(a, sorter if isinstance(sorter, Array) else _operand(sorter, "numpy.searchsorted sorter"))
    from pypto import dtypes

    if not isinstance(v, Array) and np.ndim(v):  # values from NumPy or a list: an input of the program
        v = _operand(np.asarray(v), "numpy.searchsorted")
    floats = a.dtype.is_float or (v.dtype.is_float if isinstance(v, Array) else isinstance(v, float))

    def less(x: Any, y: Any) -> Any:  # NumPy's order: NaN after every number
        lt = binary("lt", x, y)
        return binary("or", lt, binary("and", binary("ne", y, y), binary("eq", x, x))) if floats else lt

    def before(x: Any) -> Any:  # whether x comes before the value's place
        return less(x, vv) if side == "left" else unary("invert", less(vv, x))

    n = int(a.shape[0])
    vv = views.expand_dims(v, -1) if isinstance(v, Array) else v  # each value against a row of a
    if n <= SEARCH_ROW:
        return cast(reduce("sum", before(a), -1), dtypes.int64)
    block = math.isqrt(n - 1) + 1
    nb = -(-n // block)
    # the last element of each block but the last block
    last = views.getitem(a, (slice(block - 1, (nb - 1) * block, block),))
    j = reduce("sum", before(last), -1)  # the block holding the place (the blocks before it come before the value)
    padded = ops.concat([a, Array("fill", (), 0, (nb * block - n,), a.dtype)], 0) if nb * block > n else a
    rows = views.take(views.reshape(padded, (nb, block)), j, 0)  # that block of each value
    start = cast(j, dtypes.int64) * block
    inside = binary("lt", views.expand_dims(start, -1) + views._iota(block, rows.ndim - 1, rows.ndim), n)
    return start + cast(reduce("sum", binary("and", before(rows), inside), -1), dtypes.int64)


SEARCH_ROW = 128
"""The longest sorted array ``np.searchsorted`` compares every value with every element of (beyond: blocks)."""


def _diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Array:
    _refuse("diff", prepend=prepend, append=append)
    a = _array(a, "diff")
    (ax,) = _axes(axis, a.ndim)
    for _ in range(n):
        hi, lo = [slice(None)] * a.ndim, [slice(None)] * a.ndim
        hi[ax], lo[ax] = slice(1, None), slice(None, -1)
        a = views.getitem(a, tuple(hi)) - views.getitem(a, tuple(lo))
    return a


def _pad(array: Any, pad_width: Any, mode: str = "constant", *, constant_values: Any = 0) -> Array:
    """``np.pad`` with ``mode="constant"`` (one value) or ``"edge"``: the array joined with its borders."""
    a = _array(array, "pad")
    if mode not in ("constant", "edge"):
        raise TracingError(f"numpy.pad: mode={mode!r} is not supported", user_loc(3),
                           "use mode='constant' or 'edge', or join slices with np.concatenate")  # fmt: skip
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (a.ndim, 2))
    if isinstance(constant_values, (tuple, list, np.ndarray)) and np.ndim(constant_values):
        values = np.unique(np.asarray(constant_values))
        if values.size != 1:
            raise TracingError("numpy.pad: one constant value only", user_loc(3), "pad with each value in turn")
        constant_values = values.item()
    for ax in range(a.ndim):
        before, after = (int(w) for w in widths[ax])
        if before < 0 or after < 0:
            raise TracingError("numpy.pad: pad widths must be >= 0", user_loc(3))
        parts = []
        for width, at in ((before, 0), (None, None), (after, -1)):
            if width is None:
                parts.append(a)
            elif width:
                shape = tuple(width if k == ax else n for k, n in enumerate(a.shape))
                if mode == "constant":
                    parts.append(Array("fill", (), constant_values, shape, a.dtype))
                else:  # the edge element repeated
                    idx = tuple(
                        slice(at, at + 1 if at == 0 else None) if k == ax else slice(None) for k in range(a.ndim)
                    )
                    parts.append(views.broadcast_to(views.getitem(a, idx), shape))
        a = ops.concat(parts, ax) if len(parts) > 1 else a
    return a


def _take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: Any = None) -> Array:
    """``np.take``: the elements at ``indices`` along ``axis`` (of the flattened array when None), bounds-checked
    (NumPy's ``mode="raise"``)."""
    _refuse("take", out=out, mode=None if mode == "raise" else mode)
    a = _array(a, "take")
    if axis is None:
        return a.ravel()[indices]
    return a[(slice(None),) * (axis % a.ndim) + (indices,)]  # NumPy's integer-array indexing (lists captured)


def _outer(a: Any, b: Any, out: Any = None) -> Array:
    _refuse("outer", out=out)
    a, b = views.reshape(_array(a, "outer"), (-1,)), views.reshape(_array(b, "outer"), (-1,))
    return views.reshape(a, (-1, 1)) * views.reshape(b, (1, -1))


def _inner(a: Any, b: Any) -> Array:
    a, b = _array(a, "inner"), _array(b, "inner")
    if b.ndim > 1:
        b = views.swapaxes(b, -1, -2)
    return ops.matmul(a, b) if a.ndim and b.ndim else a * b


def _tensordot(a: Any, b: Any, axes: Any = 2) -> Array:
    """``np.tensordot`` as one einsum: the last ``axes`` axes of ``a`` against the first of ``b`` (or the given
    lists of axes)."""
    a, b = _array(a, "tensordot"), _array(b, "tensordot")
    if isinstance(axes, int):
        ax_a, ax_b = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        ax_a, ax_b = ([x] if isinstance(x, int) else list(x) for x in axes)
    ax_a, ax_b = [x % a.ndim for x in ax_a], [x % b.ndim for x in ax_b]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    sa = [next(letters) for _ in range(a.ndim)]
    sb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in ax_a] + [c for k, c in enumerate(sb) if k not in ax_b]
    return ops.einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b)


def _cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: Any = None, fweights: Any = None,
         aweights: Any = None, *, dtype: Any = None) -> Array:  # fmt: skip
    """``np.cov``: the covariance of the variables (rows, or columns with ``rowvar=False``)."""
    _refuse("cov", y=y, fweights=fweights, aweights=aweights, dtype=dtype)
    x = _array(m, "cov")
    if x.ndim == 1:
        x = views.reshape(x, (1, -1))
    if not rowvar:
        x = views.transpose(x, None)
    n = x.shape[1]
    d = (0 if bias else 1) if ddof is None else int(ddof)
    xc = x - reduce("mean", x, 1, True)
    c = ops.matmul(xc, views.transpose(xc.conj() if x.dtype.is_complex else xc, None)) / max(n - d, 0)
    return views.squeeze(c) if m.ndim == 1 else c  # type: ignore[union-attr]


def _corrcoef(x: Any, y: Any = None, rowvar: bool = True, *, dtype: Any = None) -> Array:
    """``np.corrcoef``: the covariance divided by the product of the standard deviations, clipped to [-1, 1]
    as NumPy clips it."""
    c = _cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = views.squeeze(reduce("sum", c * ops.eye(c.shape[0], dtype=c.dtype), 1, True), 1)
    s = unary("sqrt", d)
    r = c / views.reshape(s, (-1, 1)) / views.reshape(s, (1, -1))
    return clip(r, -1, 1)


def _trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: Any = None) -> Array:
    _refuse("trace", dtype=dtype, out=out)
    a = _array(a, "trace")
    if a.ndim != 2 or (axis1, axis2) != (0, 1):
        raise TracingError("numpy.trace: a 2-D array and the default axes only", user_loc(3))
    return reduce("sum", a * ops.eye(a.shape[0], a.shape[1], offset, dtype=a.dtype), None, False)


def _like(value: Any) -> Callable[..., Any]:
    def call(a: Any, dtype: Any = None, order: Any = "K", subok: Any = True, shape: Any = None, *,
             device: Any = None, fill_value: Any = None) -> Array:  # fmt: skip
        a = _array(a, "zeros_like")
        from pypto import dtypes

        dt = a.dtype if dtype is None else dtypes.as_dtype(dtype, what="dtype")
        v = fill_value if value is None else value
        return Array("fill", (), v, a.shape if shape is None else tuple(shape), dt)

    return call


def _full_like(a: Any, fill_value: Any, dtype: Any = None, order: Any = "K", subok: Any = True, shape: Any = None,
               *, device: Any = None) -> Array:  # fmt: skip
    return _like(None)(a, dtype, shape=shape, fill_value=fill_value)


def _norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Array:
    """``np.linalg.norm`` for the 2-norm of vectors and the Frobenius norm of matrices (``ord=None``)."""
    if ord not in (None, 2, "fro") or (ord == 2 and (axis is None and _array(x, "linalg.norm").ndim != 1)):
        raise TracingError(f"numpy.linalg.norm: ord={ord!r} is not supported", user_loc(3),
                           "use ord=None (the 2-norm of vectors, the Frobenius norm of matrices)")  # fmt: skip
    x = _array(x, "linalg.norm")
    squares = x * x.conj() if x.dtype.is_complex else x * x
    r = unary("sqrt", reduce("sum", squares, axis, bool(keepdims)))
    return unary("real", r) if x.dtype.is_complex else r


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
    np.take_along_axis: lambda arr, indices, axis: views.take_along_axis(arr, indices, axis), np.take: _take,
    np.astype: _astype, np.tril: lambda m, k=0: ops.tril(m, k), np.triu: lambda m, k=0: ops.triu(m, k),
    np.flip: _flip, np.fliplr: lambda m: _flip(m, 1), np.flipud: lambda m: _flip(m, 0), np.roll: _roll,
    np.repeat: _repeat, np.tile: _tile, np.searchsorted: _searchsorted,
    np.diff: _diff, np.pad: _pad, np.outer: _outer, np.inner: _inner, np.tensordot: _tensordot, np.cov: _cov,
    np.corrcoef: _corrcoef, np.trace: _trace, np.zeros_like: _like(0), np.ones_like: _like(1),
    np.empty_like: _like(0), np.full_like: _full_like, np.linalg.norm: _norm, np.copy: lambda a, order="K", subok=False: a,
    np.linalg.cholesky: lambda a, /, *, upper=False: linalg.cholesky(a, upper), np.linalg.solve: linalg.solve,
    np.linalg.inv: linalg.inv, np.linalg.det: linalg.det,
    np.swapaxes: lambda a, axis1, axis2: views.swapaxes(a, axis1, axis2),
    np.expand_dims: lambda a, axis: views.expand_dims(a, axis),
    np.broadcast_to: lambda array, shape, subok=False: views.broadcast_to(array, tuple(shape)),
}  # fmt: skip
"""NumPy's non-ufunc functions on traced arrays, by the NumPy function."""


def _reshape(a: Any, *args: Any, **kwargs: Any) -> Array:
    shape = kwargs.pop("newshape", kwargs.pop("shape", args[0] if args else None))
    order = kwargs.pop("order", args[1] if len(args) > 1 else "C")
    if order != "C" or kwargs:
        raise TracingError("numpy.reshape: only the C order and a shape are supported", user_loc(3))
    return views.reshape(a, shape if isinstance(shape, (tuple, list)) else (shape,))


NUMPY_FUNCTIONS.update(FUNCTIONS)

_UFUNC_REDUCERS = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}
"""The ufuncs whose ``reduce`` and ``accumulate`` methods are a reduction and a scan (``np.maximum.accumulate``)."""


def _ufunc_method(name: str, op: str, method: str) -> Callable[..., Any]:
    """``np.<name>.reduce(x, axis)`` (a reduction, ``keepdims=`` as NumPy's; axis 0 by default) or
    ``np.<name>.accumulate(x, axis)`` (a scan: ``np.maximum.accumulate`` is ``pt.cummax``), typed as the pt.*
    reductions and scans are."""

    def fn(x: Any, axis: Any = 0, dtype: Any = None, out: Any = None, keepdims: bool = False, **rest: Any) -> Array:
        _refuse(f"{name}.{method}", dtype=dtype, out=out, **rest)
        if method == "reduce":
            return reduce(op, x, axis, bool(keepdims))
        _refuse(f"{name}.{method}", keepdims=keepdims or None)
        return ops.scan(op, x, axis, False, f"numpy.{name}.accumulate")

    return fn


UFUNC_METHODS.update({(u, m): _ufunc_method(u, op, m) for u, op in _UFUNC_REDUCERS.items()
                      for m in ("reduce", "accumulate")})  # fmt: skip


def numpy_support() -> dict[str, list[str]]:
    """The NumPy names a traced array takes, for the docs' list (``docs/numpy_support.py``): ``ufuncs`` (``np.exp(x)``:
    the op table's functions and operators), ``functions`` (``np.sum(x)``: :data:`FUNCTIONS`, as ``np.name`` or
    ``np.linalg.name``), ``methods`` (the ``ndarray`` methods and attributes an :class:`Array` has) and
    ``missing_methods`` (the public ``ndarray`` ones it has not)."""
    from pypto.array.graph import _UFUNCS

    def spelled(f: Any) -> str:
        name = getattr(f, "__name__", repr(f))
        if getattr(np.linalg, name, None) is f:
            return f"np.linalg.{name}"
        names = [n for n in dir(np) if getattr(np, n, None) is f]
        return " / ".join(f"np.{n}" for n in sorted(names, key=lambda n: (n != name, n))) or f"np.{name}"

    public = [n for n in dir(np.ndarray) if not n.startswith("_")]
    return {
        "ufuncs": sorted(_UFUNCS),
        "ufunc_methods": sorted(f"{u}.{m}" for u, m in UFUNC_METHODS),
        "functions": sorted({spelled(f) for f in FUNCTIONS}),
        "methods": sorted(n for n in public if hasattr(Array, n)),
        "missing_methods": sorted(n for n in public if not hasattr(Array, n)),
    }
