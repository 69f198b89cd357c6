"""The functions of the kernel language: ``pt.exp``, ``pt.where``, ``pt.reduce_sum`` and friends."""

from __future__ import annotations

import builtins
import math
import numbers
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.errors import TracingError
from pypto.ir.affine import Affine
from pypto.ir.nodes import (
    Binary,
    Carry,
    Cast,
    Combine,
    Const,
    Extent,
    Gather,
    Index,
    Load,
    Reduce,
    Scan,
    Sort,
    Unary,
    Where,
    free_axes,
    substitute_axes,
)
from pypto.ir.ops import ARG_REDUCERS, COMPLEX_PARTS, FUNCTIONS, FUNCTIONS2, MATH, ORDERINGS, REDUCERS, SCANS, USER_SCAN
from pypto.ir.ops import logaddexp as _logaddexp
from pypto.lang.context import active_tracer
from pypto.lang.location import user_loc
from pypto.lang.values import NUMPY_UFUNCS, Axis, Dim, ExprProxy, to_node


def axis(k: int) -> Axis:
    """Iteration axis ``k``; its extent is inferred from the tensors it indexes."""
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < 16:
        raise TracingError(f"pt.axis({k!r}): the axis number must be an int in 0..15", user_loc())
    return Axis(k)


def dim(name: str) -> Dim:
    """A symbolic dimension named ``name``; its size is read from the arrays at each call."""
    return Dim(name)


def dims(*names: str) -> tuple[Dim, ...]:
    """Several symbolic dimensions: ``M, N = pt.dims("M N")`` (commas also separate names)."""
    split: list[str] = []
    for n in names:
        split.extend(n.replace(",", " ").split())
    return tuple(Dim(n) for n in split)


def _is_array(x: Any) -> bool:
    """Whether ``x`` is an array of a ``@pt.jit`` function (the functions then apply to whole arrays)."""
    return getattr(type(x), "__pypto_array__", False)


def _arrays(*xs: Any) -> bool:
    return any(_is_array(x) for x in xs)


def _in_kernel() -> bool:
    return active_tracer() is not None


def _unary(op: str, doc: str):
    def fn(x: Any) -> ExprProxy:
        if _is_array(x):
            from pypto.array.graph import unary

            return unary(op, x)  # type: ignore[return-value]
        if isinstance(x, numbers.Number) and not isinstance(x, (bool, np.generic)) and not _in_kernel():
            if op == "abs":
                return builtins.abs(x)  # type: ignore[return-value]
            with np.errstate(all="ignore"):  # a Python number outside a kernel body: a Python number
                if op in COMPLEX_PARTS:
                    return np.asarray(COMPLEX_PARTS[op].numpy(x)).item()  # type: ignore[return-value]
                r = MATH[op].numpy(np.complex128(x) if isinstance(x, complex) else np.float64(x))
                return complex(r) if isinstance(x, complex) else float(r)  # type: ignore[return-value]
        return ExprProxy(Unary(op, to_node(x, what=f"pt.{name}"), loc=user_loc()))

    name = {"abs": "abs"}.get(op, op)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


# one function per entry of the op table: pt.exp, pt.log, ..., pt.log1p (see pypto.ir.ops)
for _f in FUNCTIONS:
    globals()[_f.name] = _unary(_f.name, _f.doc)
del _f
arcsin, arccos, arctan = asin, acos, atan  # noqa: F821 - NumPy's names of six of them
arcsinh, arccosh, arctanh = asinh, acosh, atanh  # noqa: F821
abs = _unary(
    "abs",
    "Elementwise absolute value (same as the builtin abs on a traced value); of a complex value its "  # noqa: A001
    "magnitude, hypot(real, imag).",
)
# the complex part functions: pt.real, pt.imag, pt.conj, pt.angle
for _c in COMPLEX_PARTS.values():
    globals()[_c.name] = _unary(_c.name, _c.doc)
del _c
conjugate = conj  # type: ignore[name-defined]  # noqa: F821 - NumPy's other spelling


def _binary_function(op: str):
    def fn(a: Any, b: Any) -> ExprProxy:
        if _arrays(a, b):
            from pypto.array.graph import binary

            return binary(op, a, b)  # type: ignore[return-value]
        real = (numbers.Real, np.generic)
        if isinstance(a, real) and isinstance(b, real) and not isinstance(a, bool) and not _in_kernel():
            return float(FUNCTIONS2[op].numpy(np.float64(a), np.float64(b)))  # type: ignore[return-value]
        return ExprProxy(Binary(op, to_node(a, what=f"pt.{op}"), to_node(b, what=f"pt.{op}"), loc=user_loc()))

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = FUNCTIONS2[op].doc
    return fn


# the two-operand functions of the op table: pt.atan2, pt.hypot
for _b in FUNCTIONS2.values():
    globals()[_b.name] = _binary_function(_b.name)
del _b
arctan2 = atan2  # type: ignore[name-defined]  # noqa: F821 - NumPy's spelling


def maximum(a: Any, b: Any) -> ExprProxy:
    """Elementwise maximum; NaN if either operand is NaN (like numpy.maximum)."""
    if _arrays(a, b):
        from pypto.array.graph import binary

        return binary("maximum", a, b)  # type: ignore[return-value]
    return ExprProxy(Binary("maximum", to_node(a, what="pt.maximum"), to_node(b, what="pt.maximum"), loc=user_loc()))


def minimum(a: Any, b: Any) -> ExprProxy:
    """Elementwise minimum; NaN if either operand is NaN (like numpy.minimum)."""
    if _arrays(a, b):
        from pypto.array.graph import binary

        return binary("minimum", a, b)  # type: ignore[return-value]
    return ExprProxy(Binary("minimum", to_node(a, what="pt.minimum"), to_node(b, what="pt.minimum"), loc=user_loc()))


def where(cond: Any, a: Any, b: Any) -> ExprProxy:
    """``a`` where ``cond`` holds, else ``b`` (elementwise; ``cond`` must be boolean)."""
    if _arrays(cond, a, b):
        from pypto.array.graph import where as array_where

        return array_where(cond, a, b)  # type: ignore[return-value]
    return ExprProxy(
        Where(
            to_node(cond, what="pt.where condition"),
            to_node(a, what="pt.where"),
            to_node(b, what="pt.where"),
            loc=user_loc(),
        )
    )


def _concrete(x: Any) -> bool:
    """A number or NumPy array (not traced): the predicates below answer with NumPy's own."""
    return not isinstance(x, (ExprProxy, Axis, Dim)) and not _is_array(x)


def isnan(x: Any) -> Any:
    """Elementwise: whether ``x`` is NaN (``x != x``; never for integers), as ``np.isnan``."""
    if _concrete(x):
        return np.isnan(x)
    return x != x


def isinf(x: Any) -> Any:
    """Elementwise: whether ``x`` is an infinity (never for integers), as ``np.isinf``."""
    if _concrete(x):
        return np.isinf(x)
    return abs(x) == math.inf  # noqa: F821 - pt.abs (defined above)


def isfinite(x: Any) -> Any:
    """Elementwise: whether ``x`` is neither NaN nor an infinity (always for integers), as ``np.isfinite``."""
    if _concrete(x):
        return np.isfinite(x)
    return abs(x) < math.inf  # noqa: F821


def sign(x: Any) -> Any:
    """Elementwise -1, 0 or 1 by the sign of ``x``, in its type (NaN stays NaN, zeros keep theirs), as ``np.sign``."""
    if _concrete(x):
        return np.sign(x)
    return where(x > 0, 1, where(x < 0, -1, x))


def signbit(x: Any) -> Any:
    """Elementwise: whether the sign bit of ``x`` is set (-0.0 and a negative NaN included; ``x < 0`` for
    integers), as ``np.signbit``: ``pt.copysign(1.0, x) < 0``."""
    if _concrete(x):
        return np.signbit(x)
    return copysign(1.0, x) < 0  # noqa: F821 - pt.copysign (the op table's)


def logaddexp(a: Any, b: Any) -> Any:
    """Elementwise ``log(exp(a) + exp(b))`` without overflow or underflow on the way, as ``np.logaddexp``:
    ``maximum(a, b) + log1p(exp(-|a - b|))`` (equal operands, infinities included, give ``a + log(2)``);
    its gradient is ``sigmoid(a - b)`` and ``sigmoid(b - a)`` (half each where they are equal)."""
    if _concrete(a) and _concrete(b):
        return np.logaddexp(a, b)
    return _logaddexp(a, b, maximum, where, log1p, exp)  # noqa: F821 - the op table's functions


def _scatter(fname: str, op: str, target: Any, value: Any) -> None:
    tracer = active_tracer()
    node = target.node if isinstance(target, ExprProxy) else None
    if tracer is None or not isinstance(node, (Gather, Load)):
        raise TracingError(
            f"{fname}: the first argument must be an element of a tensor parameter, inside a kernel",
            user_loc(2),
            f"write {fname}(counts[bins[i]], 1): the element (at indices computed or affine) the value goes to",
        )
    index = node.index if isinstance(node, Gather) else tuple(Index(a, loc=node.loc) for a in node.index)
    tracer.record_scatter(node.tensor, index, to_node(value, what=fname), op, user_loc(2))


def scatter_add(target: Any, value: Any) -> None:
    """In a kernel: add ``value`` to the element ``target`` (``y[idx[i]]``) for every point, several points
    accumulating into the same element (``y[idx[i]] += value`` says the same). Runs after the kernel's stores,
    in order, so the result does not depend on threads; the indices are checked before anything is written."""
    _scatter("pt.scatter_add", "add", target, value)


def scatter_max(target: Any, value: Any) -> None:
    """In a kernel: ``target = maximum(target, value)`` at computed indices, accumulating (see :func:`scatter_add`)."""
    _scatter("pt.scatter_max", "max", target, value)


def scatter_min(target: Any, value: Any) -> None:
    """In a kernel: ``target = minimum(target, value)`` at computed indices, accumulating (see :func:`scatter_add`)."""
    _scatter("pt.scatter_min", "min", target, value)


def scatter(target: Any, value: Any, *, unique: bool = False) -> None:
    """In a kernel: store ``value`` into ``target`` at computed indices, with ``unique=True`` declaring that no
    two points share an element (a permutation, for example); a store that may collide is refused, since its
    result would depend on the order of the writes: accumulate with :func:`scatter_add` and its kin instead."""
    if unique is not True:
        raise TracingError(
            "pt.scatter stores at computed indices only when they are declared unique (unique=True)",
            user_loc(),
            "pass unique=True if no two points share an element; otherwise accumulate with pt.scatter_add, "
            "pt.scatter_max or pt.scatter_min",
        )
    _scatter("pt.scatter", "set", target, value)


def cast(x: Any, dtype: Any) -> ExprProxy:
    """``x`` converted to ``dtype`` (float to int truncates toward zero, like C and NumPy)."""
    if _is_array(x):
        from pypto.array.graph import cast as array_cast

        return array_cast(x, dtype)  # type: ignore[return-value]
    return ExprProxy(
        Cast(to_node(x, what="pt.cast"), dtype=dtypes.as_dtype(dtype, what="pt.cast dtype"), loc=user_loc())
    )


def _reduce_axes(fname: str, axis: Any) -> tuple[int, ...]:
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    if not items:
        raise TracingError(f"pt.{fname}: 'axis' is empty", user_loc(3), "pass the axes to reduce over, e.g. axis=col")
    out: list[int] = []
    for a in items:
        if not isinstance(a, Axis):
            raise TracingError(
                f"pt.{fname}: axis={a!r} is not an iteration axis",
                user_loc(3),
                "pass the axis object the tensor is indexed with, e.g. col = pt.axis(1); ...; axis=col",
            )
        if a.index in out:
            raise TracingError(f"pt.{fname}: axis {a!r} is listed twice", user_loc(3))
        out.append(a.index)
    return tuple(out)


def _make_reduce(op: str, fname: str, doc: str):
    def fn(expr: Any, axis: Any) -> ExprProxy:
        node = to_node(expr, what=f"pt.{fname}")
        axes = _reduce_axes(fname, axis)
        missing = [a for a in axes if a not in free_axes(node)]
        if missing:
            raise TracingError(
                f"pt.{fname}: the expression does not depend on axis {', '.join(f'pt.axis({a})' for a in missing)}",
                user_loc(),
                "reduce over an axis the expression is indexed with",
            )
        loc = user_loc()
        if op == "mean":
            total = Reduce("sum", node, axes, loc=loc)
            count = Extent(axes[0], loc=loc)
            for a in axes[1:]:
                count = Binary("mul", count, Extent(a, loc=loc), loc=loc)
            return ExprProxy(Binary("div", total, count, loc=loc))
        return ExprProxy(Reduce(op, node, axes, loc=loc))

    fn.__name__ = fn.__qualname__ = fname
    fn.__doc__ = doc
    return fn


# one function per reducer of the op table: pt.reduce_sum, pt.reduce_prod, pt.reduce_max, pt.reduce_min
reduce_sum, reduce_prod, reduce_max, reduce_min = (
    _make_reduce(r.name, f"reduce_{r.name}", r.doc) for r in (REDUCERS[n] for n in ("sum", "prod", "max", "min"))
)
reduce_mean = _make_reduce(
    "mean", "reduce_mean", "Mean over ``axis`` (sum / count, in floating point); NaN when empty."
)


def _make_arg_reduce(entry: Any):
    op, fname = entry.reducer, entry.name

    def fn(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        if _is_array(x):  # @pt.jit: over an int axis (or all of them), NumPy's signature
            from pypto.array.ops import arg_reduce

            return arg_reduce(op, x, axis, keepdims, f"pt.{fname}")
        if keepdims:
            raise TracingError(f"pt.{fname}: keepdims applies to arrays (in @pt.jit)", user_loc(),
                               "in a kernel, store the index where you want it")  # fmt: skip
        node = to_node(x, what=f"pt.{fname}")
        axes = _reduce_axes(fname, axis)
        if len(axes) != 1:
            raise TracingError(f"pt.{fname}: one axis at a time, got {len(axes)}", user_loc(),
                               f"reduce one axis: pt.{fname}(x[r, c], axis=c)")  # fmt: skip
        if axes[0] not in free_axes(node):
            raise TracingError(f"pt.{fname}: the expression does not depend on pt.axis({axes[0]})", user_loc(),
                               "reduce over an axis the expression is indexed with")  # fmt: skip
        loc = user_loc()
        tracer = active_tracer()
        if tracer is not None:  # checked at each call: an empty axis has no argmax (NumPy raises too)
            from pypto.ir.kernel import AxisNotEmpty

            tracer.nonempty.append(AxisNotEmpty(axes[0], f"pt.{fname}", loc))
        return ExprProxy(arg_reduce_expr(op, node, axes[0], loc))

    fn.__name__ = fn.__qualname__ = fname
    fn.__doc__ = (
        f"{entry.doc} (``np.{fname}``): int64; the first NaN's where there is one, as NumPy. In a kernel ``pt.{fname}(x[r, c], axis=c)``, in "
        f"``@pt.jit`` ``pt.{fname}(x, axis=None, keepdims=False)`` (``None``: over the flattened array)."
    ).replace("{fname}", fname)
    return fn


def arg_reduce_expr(op: str, node: Any, a: int, loc: Any) -> Any:
    """``argmax``/``argmin`` of ``node`` along axis ``a`` as two reductions: the extreme value ``m``, then the
    least position holding ``m`` or a NaN (NaN != NaN; an extreme of values with a NaN is NaN, which no value
    equals, so the first NaN wins, as NumPy's)."""
    if node.dtype is not None and node.dtype.is_complex:
        raise TracingError(f"arg{op} of complex values (they have no order)", loc,
                           "take it of the real parts or of the magnitudes (pt.abs)")  # fmt: skip
    if _boolean(node):  # (booleans have no max: False < True as int32)
        node = Cast(node, dtype=dtypes.int32, loc=loc)
    m = Reduce(op, node, (a,), loc=loc)
    hit = Binary("or", Binary("eq", node, m, loc=loc), Binary("ne", node, node, loc=loc), loc=loc)
    pos = Cast(Index(Affine.axis(a), loc=loc), dtype=dtypes.int64, loc=loc)
    past = Const(np.iinfo(np.int64).max, dtype=dtypes.int64, loc=loc)
    return Reduce("min", Where(hit, pos, past, loc=loc), (a,), loc=loc)


def _boolean(node: Any) -> bool:
    """Whether a traced expression is boolean (before type inference: a bool tensor's element, a comparison,
    a logical combination of booleans, a cast to bool)."""
    if node.dtype is not None:
        return node.dtype.is_bool
    if isinstance(node, (Load, Gather)):
        t = active_tracer()
        p = next((p for p in t.params if p.name == node.tensor), None) if t is not None else None
        return p is not None and getattr(p, "dtype", None) is not None and p.dtype.is_bool
    if isinstance(node, Cast):
        return node.dtype is not None and node.dtype.is_bool
    if isinstance(node, Binary):
        if node.op in ("lt", "le", "gt", "ge", "eq", "ne"):
            return True
        return node.op in ("and", "or", "xor") and _boolean(node.a) and _boolean(node.b)
    return False


# one function per positional reduction of the op table: pt.argmax, pt.argmin
argmax, argmin = (_make_arg_reduce(ARG_REDUCERS[n]) for n in ("argmax", "argmin"))


def _make_scan(entry: Any):
    fname = entry.name

    def fn(x: Any, axis: Any = None, *, reverse: bool = False) -> Any:
        if not isinstance(reverse, bool):
            raise TracingError(f"pt.{fname}: reverse must be True or False, got {reverse!r}", user_loc())
        if _is_array(x):  # @pt.jit: along an int axis (None: the flattened array), NumPy's signature
            from pypto.array.ops import scan

            return scan(entry.reducer, x, axis, reverse, f"pt.{fname}")
        node = to_node(x, what=f"pt.{fname}")
        if axis is None:
            raise TracingError(f"pt.{fname}: in a kernel, name the axis to scan along", user_loc(),
                               f"pass the axis the value is indexed with: y[r, c] = pt.{fname}(x[r, c], axis=c)")  # fmt: skip
        axes = _reduce_axes(fname, axis)
        if len(axes) != 1:
            raise TracingError(f"pt.{fname}: one axis at a time, got {len(axes)}", user_loc(),
                               f"scan along one axis: pt.{fname}(x[r, c], axis=c)")  # fmt: skip
        return ExprProxy(Scan(entry.reducer, node, axes[0], reverse, loc=user_loc()))

    fn.__name__ = fn.__qualname__ = fname
    fn.__doc__ = (
        f"{entry.doc} In a kernel ``y[r, c] = pt.{fname}(x[r, c], axis=c)`` (the value at ``c`` combines the "
        f"expression's values at ``0..c``; ``reverse=True``: at ``c..end``); in ``@pt.jit`` ``pt.{fname}(x, "
        "axis=None)`` as NumPy (``None``: along the flattened array)."
    )
    return fn


# one function per scan of the op table: pt.cumsum, pt.cumprod, pt.cummax, pt.cummin
cumsum, cumprod, cummax, cummin = (_make_scan(SCANS[n]) for n in ("sum", "prod", "max", "min"))


def trace_combine(fn: Any, k: int, what: str) -> Combine:
    """``fn(a, b)`` traced once on placeholders (``a`` the running value, ``b`` the next element; tuples of ``k``
    placeholders each for a scan of ``k`` values)."""
    if not callable(fn):
        raise TracingError(f"{what}: fn must be a function of two values, got {fn!r}", user_loc(3),
                           "pass e.g. lambda a, b: pt.maximum(a, b)")  # fmt: skip
    loc = user_loc(3)
    carry = [ExprProxy(Carry(slot, loc=loc)) for slot in range(2 * k)]
    a, b = (carry[0], carry[1]) if k == 1 else (tuple(carry[:k]), tuple(carry[k:]))
    out = fn(a, b)  # (choices in it: pt.where)
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != k or (k > 1) != isinstance(out, (tuple, list)):
        raise TracingError(f"{what}: fn returned {len(outs) if isinstance(out, (tuple, list)) else 'one value'} for "
                           f"{k} scanned value{'s' if k > 1 else ''}", loc,
                           "return as many values as are scanned, in the same order")  # fmt: skip
    return Combine(tuple(to_node(o, what=what) for o in outs))


def associative_scan(fn: Any, x: Any, axis: Any = None, *, reverse: bool = False) -> Any:
    """The running ``fn`` along ``axis``: element ``t`` of the result is ``fn(result[t - 1], x[t])``, element 0
    is ``x[0]`` (``reverse=True``: from the end). ``fn(a, b)`` combines two values of ``x``'s type with
    arithmetic, functions and ``pt.where``; it must be associative (``fn(fn(a, b), c) == fn(a, fn(b, c))``) for
    the result to be the same however the scan is split. ``x`` may be a tuple of values scanned together (``a``
    and ``b`` are then tuples, ``fn`` returns one, and so does the scan): a linear recurrence
    ``h = a * h + b`` is the scan of the pairs ``(a, b)`` with ``fn = lambda p, q: (p[0] * q[0], p[1] * q[0] +
    q[1])``. In a kernel ``y[r, c] = pt.associative_scan(fn, x[r, c], axis=c)``; in ``@pt.jit``
    ``pt.associative_scan(fn, x, axis)`` as ``jax.lax.associative_scan`` (``axis=None``: along the flattened
    array)."""
    if not isinstance(reverse, bool):
        raise TracingError(f"pt.associative_scan: reverse must be True or False, got {reverse!r}", user_loc())
    xs = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    if not xs:
        raise TracingError("pt.associative_scan: nothing to scan (an empty tuple)", user_loc())
    combine = trace_combine(fn, len(xs), "pt.associative_scan")
    if any(_is_array(v) for v in xs):
        from pypto.array.ops import user_scan

        outs = user_scan(xs, axis, reverse, combine, "pt.associative_scan")
        return outs if isinstance(x, (tuple, list)) else outs[0]
    nodes = tuple(to_node(v, what="pt.associative_scan") for v in xs)
    if axis is None:
        raise TracingError("pt.associative_scan: in a kernel, name the axis to scan along", user_loc(),
                           "y[r, c] = pt.associative_scan(fn, x[r, c], axis=c)")  # fmt: skip
    axes = _reduce_axes("associative_scan", axis)
    if len(axes) != 1:
        raise TracingError(f"pt.associative_scan: one axis at a time, got {len(axes)}", user_loc())
    loc = user_loc()
    outs = tuple(ExprProxy(Scan(USER_SCAN, nodes[0], axes[0], reverse, combine, nodes[1:], j, loc=loc))
                 for j in range(len(nodes)))  # fmt: skip
    return outs if isinstance(x, (tuple, list)) else outs[0]


def _order_axis(fname: str, node: Any, axis: Any, example: str) -> int:
    """The kernel axis an ordering runs along (``axis=c``), checked."""
    if axis is None:
        raise TracingError(f"pt.{fname}: in a kernel, name the axis to order along", user_loc(3), example)
    axes = _reduce_axes(fname, axis)
    if len(axes) != 1:
        raise TracingError(f"pt.{fname}: one axis at a time, got {len(axes)}", user_loc(3), example)
    if axes[0] not in free_axes(node):
        raise TracingError(f"pt.{fname}: the expression does not depend on pt.axis({axes[0]})", user_loc(3),
                           example)  # fmt: skip
    return axes[0]


def _kernel_axis(axis: Any) -> Any:
    """A kernel's ordering axis: the jit default (-1) means none was named."""
    return None if type(axis) is int and axis == -1 else axis


def _check_flag(fname: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TracingError(f"pt.{fname}: {name} must be True or False, got {value!r}", user_loc(3))


def _sorted_over_itself(fname: str, which: str, x: Any, axis: Any, descending: bool) -> Any:
    """``pt.sort``/``pt.argsort`` in a kernel: the ordered row indexed by the axis it was read along (``y[r, c] =
    pt.sort(x[r, c], axis=c)``): the row is read along a fresh axis the node binds, ``c`` numbers the result."""
    node = to_node(x, what=f"pt.{fname}")
    a = _order_axis(fname, node, axis, f"y[r, c] = pt.{fname}(x[r, c], axis=c)")
    loc = user_loc(2)
    tracer = active_tracer()
    if tracer is None:
        raise TracingError(f"pt.{fname} outside a kernel or a @pt.jit function", loc)
    inner = tracer.derived_axis(a, "in")
    body = substitute_axes(node, {a: Affine.axis(inner)})
    return ExprProxy(Sort(body, inner, a, which, descending, loc=loc))


def sort(x: Any, axis: Any = -1, *, descending: bool = False) -> Any:
    _check_flag("sort", "descending", descending)
    if _is_array(x):  # @pt.jit: NumPy's signature (axis=-1; None: the flattened array)
        from pypto.array.ops import ordering

        return ordering("sort", x, axis, descending, None)
    return _sorted_over_itself("sort", "values", x, _kernel_axis(axis), descending)


def argsort(x: Any, axis: Any = -1, *, descending: bool = False) -> Any:
    _check_flag("argsort", "descending", descending)
    if _is_array(x):
        from pypto.array.ops import ordering

        return ordering("argsort", x, axis, descending, None)
    return _sorted_over_itself("argsort", "indices", x, _kernel_axis(axis), descending)


def topk(x: Any, k: Any, axis: Any = -1, *, largest: bool = True) -> Any:
    _check_flag("topk", "largest", largest)
    if _is_array(x):  # @pt.jit: torch.topk's signature (k an int, axis=-1)
        from pypto.array.ops import ordering

        return ordering("topk", x, axis, largest, k)
    node = to_node(x, what="pt.topk")
    example = "vals[r, j], idx[r, j] = pt.topk(x[r, c], j, axis=c)  (j's extent, the outputs' size, is k)"
    a = _order_axis("topk", node, _kernel_axis(axis), example)
    if not isinstance(k, Axis):
        raise TracingError(f"pt.topk: in a kernel, k is the axis that numbers the results (its extent, the outputs' "
                           f"size, is k), got {k!r}", user_loc(), example)  # fmt: skip
    if k.index == a or k.index in free_axes(node):
        raise TracingError(f"pt.topk: the results' axis {k!r} must be one the expression is not indexed with",
                           user_loc(), example)  # fmt: skip
    loc = user_loc()
    return tuple(ExprProxy(Sort(node, a, k.index, which, largest, True, loc=loc)) for which in ("values", "indices"))


for _f in (sort, argsort, topk):
    _f.__doc__ = (
        ORDERINGS[_f.__name__].doc
        + {
            "sort": " In a kernel ``y[r, c] = pt.sort(x[r, c], axis=c)``; in ``@pt.jit`` ``pt.sort(x, axis=-1, "
            "descending=False)`` (``axis=None``: the flattened array).",
            "argsort": " In a kernel ``i[r, c] = pt.argsort(x[r, c], axis=c)``; in ``@pt.jit`` ``pt.argsort(x, "
            "axis=-1, descending=False)``.",
            "topk": " In a kernel ``vals[r, j], idx[r, j] = pt.topk(x[r, c], j, axis=c)``: the axis ``j`` numbers the "
            "results, and its extent (the outputs' size) is k; in ``@pt.jit`` ``values, indices = pt.topk(x, k, "
            "axis=-1, largest=True)``.",
        }[_f.__name__]
    )


# NumPy ufuncs applied to traced values inside a kernel: the op table's (np.exp, np.log1p, np.arctan ...), then
NUMPY_UFUNCS.update({f.numpy.__name__: globals()[f.name] for f in FUNCTIONS if isinstance(f.numpy, np.ufunc)})
NUMPY_UFUNCS.update({
    "isnan": isnan, "isinf": isinf, "isfinite": isfinite, "sign": sign, "signbit": signbit, "logaddexp": logaddexp,
    "absolute": abs, "conjugate": conj, "arctan2": atan2, "hypot": hypot,  # noqa: F821
    "maximum": maximum, "minimum": minimum, "negative": lambda x: -ExprProxy(to_node(x)),
    "add": lambda a, b: ExprProxy(to_node(a)) + b, "subtract": lambda a, b: ExprProxy(to_node(a)) - b,
    "multiply": lambda a, b: ExprProxy(to_node(a)) * b, "divide": lambda a, b: ExprProxy(to_node(a)) / b,
    "true_divide": lambda a, b: ExprProxy(to_node(a)) / b,
})  # fmt: skip
