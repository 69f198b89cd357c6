"""Reverse-mode automatic differentiation of array programs: ``pt.grad``, ``pt.value_and_grad``, ``pt.vjp``.

    loss = lambda w, x, y: ((x @ w - y) ** 2).mean()
    dw = pt.grad(loss)(w, x, y)          # one compiled kernel computing the gradient

The gradient of a traced program is another array program: :func:`backward` walks the graph from
the result to the inputs, and every operation's adjoint rule builds the operations that carry the
cotangent back (``exp`` multiplies it by its result, a sum broadcasts it, a matrix product
contracts it with the other operand, a view scatters it back). The backward program is traced,
lowered, fused and scheduled like any ``@pt.jit`` program, forward and backward together in one
kernel: values the backward pass needs are recomputed where they are cheap elementwise expressions
and stored once where they hold a reduction (the lowering's rule for temporaries), so what is kept
between the passes is decided by the compiler, not saved wholesale.

Rules where the derivative is not unique, stated once:

- ``maximum``/``minimum`` at a tie give half of the cotangent to each operand (as ``jax.grad``);
- ``max``/``min`` reductions share the cotangent equally between the tied maxima (as ``jax.grad`` and
  ``torch.amax``);
- ``abs`` has derivative 0 at 0, ``relu`` (``maximum(x, 0)``) 0.5 at 0 by the tie rule above;
- ``prod`` is differentiated exactly through zeros: with one zero, its element gets the product of
  the others; with two or more, every element gets 0;
- comparisons, integer and boolean values, ``//`` (piecewise constant) and ``where``'s condition
  carry no gradient;
- complex values follow JAX's convention: the gradient of a real result ``L`` with respect to a complex
  ``z = x + iy`` is ``dL/dx - i dL/dy`` (the conjugate of PyTorch's; a step of gradient descent is
  ``z - lr * conj(grad)``); the rules of holomorphic operations (``*``, ``/``, ``exp``, ``log``, ``sqrt``,
  contractions) are the real ones, unchanged; ``abs``, ``angle``, ``real``, ``imag`` and ``conj`` have their
  own; a real operand of a complex result gets the real part of its cotangent. The differentiated function
  must return a real value.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import threading
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.array import views
from pypto.array.graph import Array, binary, cast, reduce, scatter_add, substitute, unary, walk, where
from pypto.errors import ArgumentError, TracingError
from pypto.ir.nodes import Binary, Carry, Combine, Const, Where
from pypto.ir.nodes import Cast as IRCast
from pypto.ir.nodes import Unary as IRUnary
from pypto.ir.ops import BINARY, CAST, FUNCTIONS, LOOP, REDUCERS, SCANS, USER_SCAN, scan_name
from pypto.lang.control import rewrite
from pypto.lang.location import user_loc

# -- switching gradients off --------------------------------------------------------------------------------

_state = threading.local()


def is_grad_enabled() -> bool:
    """Whether gradients may be taken in this thread (``pt.no_grad()`` switches them off)."""
    return getattr(_state, "enabled", True)


class grad_enabled(contextlib.ContextDecorator):  # noqa: N801 - a context manager spelled like a function
    """Switch gradients on or off in this thread: ``with pt.grad_enabled(False):`` or as a decorator.

    While off, :func:`vjp` runs the function forward only (nothing is traced or compiled for the
    backward pass) and its pullback raises; :func:`grad` and :func:`value_and_grad` raise.
    """

    def __new__(cls, mode: Any = True) -> Any:
        if callable(mode):  # bare @pt.grad_enabled: the function runs with gradients on
            return cls(True)(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise ArgumentError("pt.grad_enabled(mode): mode must be True or False", param="mode",
                                expected="a bool", got=repr(mode))  # fmt: skip
        self.mode = mode
        self._saved: list[bool] = []

    def __enter__(self) -> grad_enabled:
        self._saved.append(is_grad_enabled())
        _state.enabled = self.mode
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.enabled = self._saved.pop()


def no_grad() -> grad_enabled:
    """``with pt.no_grad():`` — gradients off in this block (see :class:`grad_enabled`)."""
    return grad_enabled(False)


def _require_grad(what: str) -> None:
    if not is_grad_enabled():
        raise TracingError(
            f"{what}: gradients are switched off here (pt.no_grad() or pt.grad_enabled(False))",
            None,
            "take the gradient outside the no_grad block",
        )


# -- the backward program ------------------------------------------------------------------------------------


def full(shape: tuple[int, ...], value: float, dtype: dtypes.DType) -> Array:
    """A constant array (every element ``value``)."""
    return Array("fill", (), value, shape, dtype)


def _differentiable(x: Any) -> bool:
    return isinstance(x, Array) and x.dtype.is_inexact  # floats and complex values


def unbroadcast(g: Array, shape: tuple[int, ...]) -> Array:
    """``g`` summed over the axes NumPy's broadcasting added or stretched to reach it from ``shape``."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead:
        g = reduce("sum", g, tuple(range(lead)), False)
    stretched = tuple(k for k, n in enumerate(shape) if n == 1 and g.shape[k] != 1)
    if stretched:
        g = reduce("sum", g, stretched, True)
    return g


def _expand(g: Array, axes: tuple[int, ...], keepdims: bool, shape: tuple[int, ...]) -> Array:
    """A reduction's cotangent ``g`` broadcast back over the reduced ``axes`` of an array of ``shape``."""
    kept = tuple(1 if k in axes else n for k, n in enumerate(shape))
    if not keepdims:
        g = views.reshape(g, kept)
    return views.broadcast_to(g, shape)


def _zeros_like(x: Array) -> Array:
    return full(x.shape, 0.0, x.dtype)


def _pad(g: Array, axis: int, before: int, after: int) -> Array:
    """``g`` with ``before`` and ``after`` zeros along ``axis``."""
    from pypto.array.ops import concat

    parts = []
    if before:
        parts.append(full(g.shape[:axis] + (before,) + g.shape[axis + 1 :], 0.0, g.dtype))
    parts.append(g)
    if after:
        parts.append(full(g.shape[:axis] + (after,) + g.shape[axis + 1 :], 0.0, g.dtype))
    return parts[0] if len(parts) == 1 else concat(parts, axis)


def _view_adjoint(node: Array, g: Array) -> Array:
    """The cotangent of a view's input: ``g`` summed over broadcast axes and scattered back through
    transposes, slices (steps too), integer indices and reshapes that split axes."""
    (x,) = node.args
    if views._split_only(x.shape, node.shape) == node.attrs:  # a reshape that splits axes
        return views.reshape(g, x.shape)
    index = node.attrs
    used = [o for _, terms in index for o, _ in terms]
    if len(used) != len(set(used)) or any(len(terms) > 1 for _, terms in index):
        raise TracingError(
            "the gradient of this view (a reshape combined with slicing or a diagonal) is not supported",
            node.loc,
            "write the reshape and the slice as separate steps, or reshape the result instead",
        )
    # 1. sum over the output axes no input axis reads (broadcasts, new axes)
    free = tuple(o for o in range(node.ndim) if o not in used)
    if free:
        g = reduce("sum", g, free, False)
    remaining = [o for o in range(node.ndim) if o not in free]
    # 2. put the remaining axes in the input's order: axis d of the result is input axis d's output axis
    order = [remaining.index(terms[0][0]) for _, terms in index if terms]
    if order != sorted(order):
        g = views.transpose(g, tuple(order))
    # 3. per input axis: scatter along it (steps, offsets), or add it back where an integer indexed it
    for d, (const, terms) in enumerate(index):
        n = x.shape[d]
        if not terms:  # an integer index (or a size-1 axis read at 0)
            g = views.reshape(g, g.shape[:d] + (1,) + g.shape[d:])
            g = _pad(g, d, const, n - const - 1)
            continue
        _, step = terms[0]
        length = g.shape[d]
        if step < 0:  # read backwards: reverse, then it is a forward slice from its last element
            g = views.getitem(g, (slice(None),) * d + (slice(None, None, -1),))
            step = -step
            const = const - step * (length - 1)
        if step > 1:  # interleave step - 1 zeros after each element, then drop the trailing ones
            g = views.reshape(
                _stack_after(g, _zeros_like(g), d, step), g.shape[:d] + (length * step,) + g.shape[d + 1 :]
            )
            g = views.getitem(g, (slice(None),) * d + (slice(0, (length - 1) * step + 1),)) if length else g
        span = g.shape[d]
        g = _pad(g, d, const if length else 0, n - (const if length else 0) - span)
    return g


def _stack_after(g: Array, z: Array, axis: int, step: int) -> Array:
    """``g`` with ``step - 1`` copies of ``z`` stacked after it along a new axis ``axis + 1``."""
    from pypto.array.ops import stack

    return stack([g] + [z] * (step - 1), axis + 1)


def _contract_adjoint(node: Array, g: Array, k: int) -> Array:
    """The cotangent of operand ``k`` of a contraction: ``g`` contracted with the other operands."""
    from pypto.array.ops import _as_letters, _einsum

    subscripts, out, sizes, _ = node.attrs
    size = dict(sizes)
    x, sub = node.args[k], subscripts[k]
    if len(set(sub)) != len(sub):
        raise TracingError(
            f"the gradient of an einsum operand with a repeated index ('{sub}') is not supported",
            node.loc,
            "take the diagonal with an explicit einsum first and differentiate that",
        )
    others = [(a, s) for j, (a, s) in enumerate(zip(node.args, subscripts)) if j != k]
    present = set(out) | {c for _, s in others for c in s}
    avail = "".join(c for c in sub if c in present)
    r = _einsum([g] + [a for a, _ in others], [out] + [s for _, s in others], avail)
    full_sizes = {c: size[c] for c in sub}
    r = _as_letters(r, avail, sub, full_sizes) if avail != sub else r
    stretched = tuple(d for d, (c, n) in enumerate(zip(sub, x.shape)) if n == 1 and size[c] != 1)
    if stretched:
        r = reduce("sum", r, stretched, True)
    return r


_ARRAY_OPS = SimpleNamespace(where=where, binary=binary, cast=cast, unary=unary)  # what the op table's adjoints use

# The cotangent of a complex operand z of the functions that are not holomorphic, in JAX's convention: the
# cotangent c of z pairs with a change dz as Re(c * dz), so a holomorphic f has c_z = c_y * f'(z) (the real
# formulas of the op table, unchanged) and a real result L of z = x + iy gets dL/dx - i dL/dy.
_COMPLEX_ADJOINTS: dict[str, Any] = {
    "abs": lambda g, x, y: where(y == 0, 0.0, g * unary("conj", x) / y),  # d|z| = Re(conj(z) dz) / |z|
    "conj": lambda g, x, y: unary("conj", g),
    "real": lambda g, x, y: cast(g, x.dtype),
    "imag": lambda g, x, y: g * -1j,  # Im(dz) = Re(-i dz)
    "angle": lambda g, x, y: g * -1j / x,  # d angle = Im(dz / z) = Re(-i dz / z)
}


def _shifted(x: Array, axis: int, step: int, fill: float) -> Array:
    """``x`` moved ``step`` (1 or -1) places along ``axis``: ``out[j] = x[j - step]``, ``fill`` where that is
    outside."""
    from pypto.array.ops import concat

    n = x.shape[axis]
    if n == 0:
        return x
    edge = full(x.shape[:axis] + (1,) + x.shape[axis + 1 :], fill, x.dtype)
    keep = (slice(None),) * axis + ((slice(None, -1),) if step == 1 else (slice(1, None),))
    body = views.getitem(x, keep)
    return concat([edge, body] if step == 1 else [body, edge], axis)


def _linear_scan(a: Array, b: Array, axis: int, reverse: bool) -> Array:
    """``s`` with ``s = b`` at the scan's first point and ``s = b + a * s_previous`` after it: the scan of (a, b)
    pairs whose second component carries ``s``."""
    total, factor, value = Carry(1), Carry(2), Carry(3)  # slots: (running a, s), (element a, b); a's unused
    combine = Combine((factor, Binary("add", value, Binary("mul", factor, total))))
    wide = b.dtype.compute  # (16-bit floats: the scan runs in float32, as their arithmetic does)
    a, b = cast(a, wide), cast(b, wide)
    return Array("scan", (a, b), (USER_SCAN, axis, reverse, combine, 1), b.shape, wide)


def _combine_on(e: Any, slots: Sequence[Any], what: Any) -> Any:
    """The expression ``e`` of a loop's combine function (:class:`~pypto.ir.nodes.Carry` leaves, numbers,
    arithmetic, functions, selects, casts) evaluated on arrays: ``slots[s]`` for ``Carry(s)``."""
    if isinstance(e, Carry):
        return slots[e.slot]
    if isinstance(e, Const):
        return e.value
    if isinstance(e, IRUnary):
        return unary(e.op, _combine_on(e.x, slots, what))
    if isinstance(e, Binary):
        a, b = _combine_on(e.a, slots, what), _combine_on(e.b, slots, what)
        if not isinstance(a, Array) and not isinstance(b, Array):
            a = full((), a, e.a.dtype)
        return binary(e.op, a, b)
    if isinstance(e, Where):
        c, a, b = (_combine_on(x, slots, what) for x in (e.cond, e.a, e.b))
        return where(c, a, b)
    if isinstance(e, IRCast):
        x = _combine_on(e.x, slots, what)
        return cast(x, e.dtype) if isinstance(x, Array) else x
    raise TracingError(f"pt.grad: a sequential loop whose step holds {type(e).__name__} has no gradient yet",
                       what.loc, "write the step with arithmetic, functions and selects of its values")  # fmt: skip


def _sequential_adjoints(node: Array, g: Array) -> list[tuple[Array, Array]]:
    """The adjoint of one component of a scan run step by step: a sequential loop (op ``LOOP``: operands the
    step values, then each variable's value before the loop; the node is variable ``which`` after each step) or
    ``pt.associative_scan`` (op ``USER_SCAN``: its first point is the first element, each later one
    ``fn(previous, element)``).

    With ``s_t = F(s_{t-1}, v_t)`` (``s`` the float components, ``v`` the step's values), the cotangent ``g`` of
    component ``which`` gives the adjoint state ``l_t = g_t e_which + J_{t+1}^T l_{t+1}`` (``J_t = dF/ds`` at
    step ``t``): a scan of ``(J_{t+1}, g_t)`` in the other direction, each step's Jacobian computed elementwise
    from the states (the combine function differentiated by this module, on the states before each step). The
    step values then get ``(dF/dv_t)^T l_t`` and the values before a loop ``J_0^T l_0`` (an associative scan's
    first element ``l_0``). The forward states are recomputed (the pullback runs the scan again, storing every
    step's state), not kept from the forward call. An associative combine gives the sequential result whatever
    the order the forward scan combined in, so this is its gradient too."""
    from pypto.array.ops import concat

    kind, axis, reverse, combine, which = node.attrs
    k = len(combine.exprs)
    loop = kind == LOOP
    steps = node.args[: len(node.args) - k] if loop else node.args
    starts = node.args[len(node.args) - k :] if loop else node.args  # (a scan's first state: its first element)
    n = node.shape[axis]
    floats = [j for j in range(k) if starts[j].dtype.is_inexact]
    if n == 0 or which not in floats:
        return []
    if any(starts[j].dtype.is_complex for j in floats):
        raise TracingError("pt.grad: a sequential loop carrying a complex variable has no gradient yet", node.loc,
                           "carry the real and imaginary parts as two float variables")  # fmt: skip
    wd = starts[floats[0]].dtype
    for j in floats[1:]:
        wd = dtypes.promote(wd, starts[j].dtype)
    wd = wd.compute  # (16-bit floats: the adjoint scan runs in float32, as their arithmetic does)
    states = [node if j == which else Array("scan", node.args, (kind, axis, reverse, combine, j), node.shape,
                                             starts[j].dtype, loc=node.loc) for j in range(k)]  # fmt: skip
    cut = (slice(None),) * axis
    first = (*cut, slice(n - 1, n) if reverse else slice(0, 1))  # the scan's first point in its order
    drop = (*cut, slice(1, None) if reverse else slice(None, -1))  # the states a later step reads

    def before(j: int) -> Array:  # the state each step starts from
        if n == 1:
            return views.getitem(starts[j], first)
        parts = [views.getitem(starts[j], first), views.getitem(states[j], drop)]
        return concat(parts[::-1] if reverse else parts, axis)

    prev = [before(j) for j in range(k)]
    leaves = [*prev, *steps]
    step = [_combine_on(combine.exprs[i], [*prev, *steps], node) for i in floats]
    live = [(i, f) for i, f in zip(floats, step) if isinstance(f, Array)]
    # J[i][j] = dF_i / ds_j at each step (a function of the step's values and the states before it)
    jac = {}
    for i, f in live:
        parts = backward([f], [full(f.shape, 1.0, f.dtype)], [prev[j] for j in floats], leaves)
        for j, d in zip(floats, parts):
            if not (d.op == "fill" and d.attrs == 0):  # (a variable the step of variable i does not read)
                jac[i, j] = cast(d, wd)
    zero = full(node.shape, 0.0, wd)
    m = len(floats)
    ahead = 1 if reverse else -1  # J_{t+1} of the scan's order at each t
    factors = [_shifted(jac[i, j], axis, ahead, 0.0) if (i, j) in jac else zero for i in floats for j in floats]
    seeds = [cast(g, wd) if j == which else zero for j in floats]
    nargs = m * m + m  # the scan's values: J_{t+1} (m x m) and g_t (m); running slots first, then the step's
    exprs: list[Any] = [Carry(nargs + q) for q in range(m * m)]
    for jj in range(m):
        total: Any = Carry(nargs + m * m + jj)
        for ii in range(m):
            total = Binary("add", total, Binary("mul", Carry(nargs + ii * m + jj), Carry(m * m + ii)))
        exprs.append(total)
    adjoint_combine = Combine(tuple(exprs))
    lam = {i: Array("scan", (*factors, *seeds), (USER_SCAN, axis, not reverse, adjoint_combine, m * m + q),
                    node.shape, wd, loc=node.loc) for q, i in enumerate(floats)}  # fmt: skip
    cts = backward([f for _, f in live], [cast(lam[i], f.dtype) for i, f in live], [*steps, *prev], leaves)
    out: list[tuple[Array, Array]] = []
    if loop:
        for x, gx in zip(steps, cts[: len(steps)]):
            if _differentiable(x):
                out.append((x, gx))
        for j, (x, gx) in enumerate(zip(starts, cts[len(steps) :])):
            if _differentiable(x) and j in floats:  # (broadcast along the loop: its first step's only)
                out.append((x, _pad(views.getitem(gx, first), axis, n - 1 if reverse else 0, 0 if reverse else n - 1)))
        return out
    at_first = views._iota(n, axis, node.ndim) == (n - 1 if reverse else 0)
    for j, (x, gx) in enumerate(zip(steps, cts[: len(steps)])):
        if _differentiable(x):  # the first element is the first state: its cotangent is l there
            out.append((x, where(at_first, cast(lam[j], x.dtype), gx) if j in lam else where(at_first, 0.0, gx)))
    return out


def _running_position(kind: str, x: Array, axis: int, reverse: bool) -> Array:
    """Where the running maximum (``kind`` "max") or minimum of ``x`` along ``axis`` is: a scan of (value,
    position) pairs keeping the first position of the extreme in the scan's order, a NaN's from the first NaN on
    (int64)."""
    value, best, pos, at = Carry(0), Carry(2), Carry(1), Carry(3)  # (running value, position), (element, its)
    beats = Binary("gt" if kind == "max" else "lt", best, value)
    nan = Binary("and", Binary("ne", best, best), Binary("eq", value, value))
    better = Binary("or", beats, nan)
    combine = Combine((Where(better, best, value), Where(better, at, pos)))
    positions = views.broadcast_to(views._iota(x.shape[axis], axis, x.ndim), x.shape)  # (the scanned arrays: one shape)
    return Array("scan", (x, positions), (USER_SCAN, axis, reverse, combine, 1), x.shape, dtypes.int64)


def _adjoints(node: Array, g: Array) -> list[tuple[Array, Array]]:
    """``(operand, its cotangent)`` for each differentiable operand of ``node``, given ``node``'s ``g``."""
    op, args = node.op, node.args
    out: list[tuple[Array, Array]] = []
    if op == "unary":
        (x,) = args
        y = node
        rule = {
            "neg": lambda: -g,
            "abs": lambda: where(x > 0, g, where(x < 0, -g, 0.0)),
            **{f.name: (lambda f=f: f.adjoint(g, x, y, unary)) for f in FUNCTIONS},  # the op table's adjoints
            "real": lambda: g,
            "conj": lambda: g,
        }.get(node.attrs)
        if x.dtype.is_complex:  # JAX's convention (module docstring)
            rule = _COMPLEX_ADJOINTS.get(node.attrs, rule)
            if rule is not None:
                return [(x, rule(g, x, y) if node.attrs in _COMPLEX_ADJOINTS else rule())]
        if rule is not None and _differentiable(x):
            out.append((x, rule()))
        return out
    if op == "binary":
        a, b = args
        rule = BINARY[node.attrs].adjoint  # the op table's rule (pypto.ir.ops); None: no gradient
        if rule is None:
            return out
        ga, gb = rule(g, a, b, node, _ARRAY_OPS)
        for x, gx in ((a, ga), (b, gb)):
            if gx is not None and _differentiable(x):
                out.append((x, unbroadcast(_as_array(gx, node), x.shape)))
        return out
    if op == "where":
        _, a, b = args
        c = args[0]
        for x, gx in ((a, where(c, g, 0.0)), (b, where(c, 0.0, g))):
            if _differentiable(x):
                out.append((x, unbroadcast(gx, x.shape)))
        return out
    if op == "cast":
        (x,) = args
        gx = CAST.adjoint(g, x, _ARRAY_OPS)  # the op table's rule: None into an integer or boolean x
        if gx is not None and _differentiable(x):
            out.append((x, gx))
        return out
    if op == "reduce":
        (x,) = args
        kind, axes, keepdims = node.attrs
        if not _differentiable(x):
            return out
        ge = _expand(g, axes, keepdims, x.shape)
        if kind == "mean":  # the array layer's sum / count
            gx = ge / math.prod(x.shape[d] for d in axes)
        else:  # the op table's rule (pypto.ir.ops.REDUCERS)
            ops = SimpleNamespace(
                where=where, binary=binary, cast=cast, int32=dtypes.int32,
                over=lambda name, a: _expand(reduce(name, a, axes, keepdims), axes, keepdims, x.shape),
            )  # fmt: skip
            gx = REDUCERS[kind].adjoint(ge, x, _expand(node, axes, keepdims, x.shape), ops)
        out.append((x, gx))
        return out
    if op == "scan" and node.attrs[0] in (LOOP, USER_SCAN):
        return _sequential_adjoints(node, g)
    if op == "scan":
        x = args[0]
        kind, axis, reverse = node.attrs[:3]
        if not any(_differentiable(a) for a in args):
            return out
        entry = SCANS.get(kind)
        if entry is None or entry.adjoint is None:
            raise TracingError(f"pt.grad: the gradient of {scan_name(kind)} is not supported yet", node.loc,
                               "differentiate a cumsum (supported), or stop the gradient: pt.stop_gradient(...)")  # fmt: skip
        ops = SimpleNamespace(
            scan=lambda k, a, ax, rev: Array("scan", (a,), (k, ax, rev, None, 0), a.shape, a.dtype),
            running_position=lambda a, ax, rev: _running_position(kind, a, ax, rev),
            shift=_shifted,
            linear_scan=_linear_scan,
            to_positions=lambda gy, pos, ax, like: _adjoints(views.take_along_axis(like, pos, ax), gy)[0][1],
        )  # fmt: skip
        out.append((x, entry.adjoint(g, x, node, axis, reverse, ops)))
        return out
    if op == "contract":
        for k, x in enumerate(args):
            if _differentiable(x):
                out.append((x, _contract_adjoint(node, g, k)))
        return out
    if op == "view":
        (x,) = args
        if _differentiable(x):
            out.append((x, _view_adjoint(node, g)))
        return out
    if op == "reshape":
        (x,) = args
        if _differentiable(x):
            out.append((x, views.reshape(g, x.shape)))
        return out
    if op == "concat":
        axis = node.attrs
        offset = 0
        for x in args:
            n = x.shape[axis]
            if _differentiable(x):
                out.append((x, views.getitem(g, (slice(None),) * axis + (slice(offset, offset + n),))))
            offset += n
        return out
    if op == "custom":
        return _custom_adjoints(node, g)
    if op == "scatter_add":  # base + the values scattered: the base's cotangent is g, the values' a gather of g
        base, values, *indices = args
        if _differentiable(base):
            out.append((base, g))
        if _differentiable(values):
            out.append((values, Array("gather", (g, *indices), node.attrs, values.shape, g.dtype)))
        return out
    if op == "gather" and _differentiable(args[0]):
        source = args[0]
        out.append((source, scatter_add(_zeros_like(source), g, tuple(args[1:]), node.attrs)))
        return out
    if op == "sort" and node.attrs[1] == "values" and _differentiable(args[0]):
        # the ordered values are the row gathered at the positions an argsort gives: the gather's rule (a
        # scatter of g to those positions, computed by an earlier step of the program: pypto.array.lower)
        (x,) = args
        axis, _, flag, top = node.attrs
        positions = Array("sort", (x,), (axis, "indices", flag, top), node.shape, dtypes.int64)
        return _adjoints(views.take_along_axis(x, positions, axis), g)
    if op == "stop" and node.attrs == "keep":  # a value stored in its own layout (graph.laid_out): unchanged
        return [(args[0], g)] if _differentiable(args[0]) else out
    if op in (
        "input",
        "fill",
        "iota",
        "stop",
        "gather",
        "sort",
    ):  # nothing to pass on (a gather's indices are integers)
        return out
    raise TracingError(f"pt.grad: no gradient rule for the operation {op!r}", node.loc)  # never silently zero


def _as_array(gx: Any, like: Array) -> Array:
    return gx if isinstance(gx, Array) else full(like.shape, float(gx), like.dtype)


def _custom_adjoints(node: Array, g: Array) -> list[tuple[Array, Array]]:
    """A custom op with a user's backward: its ``vjp(g, *args)`` gives the cotangents of its array arguments."""
    _body, *_ = node.args
    op, call_args = node.attrs
    arrays = [a for a in call_args if isinstance(a, Array)]
    got = op.vjp_fn(g, *call_args)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    if len(got) != len(arrays):
        raise TracingError(
            f"the vjp of custom op '{op.op_name}' returned {len(got)} cotangent(s) for {len(arrays)} array argument(s)",
            None,
            "return one cotangent per array argument, in order (None for one that has no gradient)",
        )
    out = []
    for x, gx in zip(arrays, got):
        if gx is None or not _differentiable(x):
            continue
        if not isinstance(gx, Array):
            gx = full(x.shape, float(gx), x.dtype)
        if gx.shape != x.shape:
            try:
                gx = unbroadcast(gx, x.shape) if gx.ndim >= x.ndim else views.broadcast_to(gx, x.shape)
            except Exception:
                raise TracingError(
                    f"the vjp of custom op '{op.op_name}' returned a cotangent of shape {gx.shape} for an "
                    f"argument of shape {x.shape}",
                    None,
                    "return cotangents shaped like the arguments",
                ) from None
        out.append((x, cast(gx, x.dtype)))
    return out


def backward(outputs: Sequence[Array], cotangents: Sequence[Array], wrt: Sequence[Array],
             leaves: Sequence[Array] = ()) -> list[Array]:  # fmt: skip
    """The cotangents of ``wrt`` given those of ``outputs``: the vector-Jacobian product, as array operations.
    Nothing flows past ``leaves`` (the cotangents of a function of them, as :func:`_sequential_adjoints` needs)."""
    adj: dict[int, Array] = {}
    for y, g in zip(outputs, cotangents):
        adj[id(y)] = adj[id(y)] + g if id(y) in adj else g
    stop = frozenset(id(x) for x in leaves)
    for node in reversed(walk(list(outputs), stop)):
        g = adj.get(id(node))
        if g is None or not node.dtype.is_inexact or id(node) in stop:
            continue
        for x, gx in _adjoints(node, g):
            if gx.dtype.is_complex and not x.dtype.is_complex:  # a real operand of a complex result: Re(c * dx)
                gx = unary("real", gx)
            if gx.dtype != x.dtype:
                gx = cast(gx, x.dtype)
            adj[id(x)] = adj[id(x)] + gx if id(x) in adj else gx
    return [adj.get(id(x), _zeros_like(x)) for x in wrt]


# -- the API ----------------------------------------------------------------------------------------------------


def _function_of(f: Any, what: str) -> tuple[Callable, dict[str, Any]]:
    """The Python function of arrays behind ``f`` and the jit options to compile its gradient with."""
    from pypto.array.custom import CustomOp
    from pypto.array.function import JitFunction

    if isinstance(f, JitFunction):
        return f.fn, dict(f.options)
    if isinstance(f, (CustomOp, GradFunction)):
        return f, {}
    if callable(f) and not isinstance(f, type):
        return f, {}
    raise ArgumentError(f"{what}: expected a function of arrays, got {f!r}", param="fn",
                        expected="a @pt.jit function or a Python function of arrays", got=type(f).__name__)  # fmt: skip


def _argnums(argnums: Any, what: str) -> tuple[int, ...]:
    items = argnums if isinstance(argnums, (tuple, list)) else (argnums,)
    if not items or any(isinstance(a, bool) or not isinstance(a, int) or a < 0 for a in items):
        raise ArgumentError(f"{what}: argnums={argnums!r}", param="argnums",
                            expected="a non-negative int or a tuple of them", got=repr(argnums))  # fmt: skip
    return tuple(items)


class GradFunction:
    """``pt.grad(f)`` / ``pt.value_and_grad(f)``: called with arrays, it returns the gradient (and value);
    called inside another traced function, it traces in place (so ``pt.grad(pt.grad(f))`` works)."""

    def __init__(self, f: Any, argnums: Any, with_value: bool, what: str):
        self.what = what
        self.fn, options = _function_of(f, what)
        self.argnums = _argnums(argnums, what)
        self.single = not isinstance(argnums, (tuple, list))
        self.with_value = with_value
        self.__doc__ = getattr(self.fn, "__doc__", None)
        self.__name__ = f"{'value_and_grad' if with_value else 'grad'}_{getattr(self.fn, '__name__', 'f')}"
        from pypto.array.function import JitFunction

        program = _named_like(self._program, self.fn, self.__name__)
        self.jit = JitFunction(program, **{k: v for k, v in options.items() if v is not None})

    def _program(self, *args: Any) -> Any:
        _require_grad(self.what)
        for k in self.argnums:
            if k >= len(args):
                raise ArgumentError(f"{self.what}: argnums has {k}, but only {len(args)} argument(s) were given",
                                    param="argnums", expected=f"ints below {len(args)}", got=k)  # fmt: skip
            if not isinstance(args[k], Array) or not args[k].dtype.is_inexact:
                got = args[k].dtype.name if isinstance(args[k], Array) else type(args[k]).__name__
                raise TracingError(
                    f"{self.what}: argument {k} is {got}; gradients are taken with respect to float arrays",
                    user_loc(),
                    "pass a float32 or float64 array, or leave the argument out of argnums",
                )
        y = rewrite(self.fn, updates=True)(*args)
        if not isinstance(y, Array) or y.shape != ():
            shape = y.shape if isinstance(y, Array) else type(y).__name__
            raise TracingError(
                f"{self.what}: the function must return a scalar (a 0-d array), it returned {shape}",
                user_loc(),
                "reduce the result first (.sum() or .mean()), or use pt.vjp for a non-scalar result",
            )
        if not y.dtype.is_float:
            raise TracingError(
                f"{self.what}: the function returned {y.dtype.name}, not a float",
                user_loc(),
                "gradients are taken of a real result: of a complex value take pt.abs(z) ** 2 or pt.real(z)"
                if y.dtype.is_complex
                else None,
            )
        grads = backward([y], [full((), 1.0, y.dtype)], [args[k] for k in self.argnums])
        return (y, *grads) if self.with_value else tuple(grads)

    def _shape(self, flat: Any) -> Any:
        flat = flat if isinstance(flat, tuple) else (flat,)
        if self.with_value:
            value, grads = flat[0], flat[1:]
            return value, (grads[0] if self.single else tuple(grads))
        return flat[0] if self.single else tuple(flat)

    def __call__(self, *args: Any) -> Any:
        if any(isinstance(a, Array) for a in args):  # inside another traced function
            return self._shape(self._program(*args))
        _require_grad(self.what)
        if any(getattr(type(a), "__pypto_module__", False) for a in args):
            return self._call_with_modules(args)
        # a number differentiated against is a 0-d array (an input), not a constant of the signature
        args = tuple(np.asarray(a) if k in self.argnums and isinstance(a, (float, np.floating)) else a
                     for k, a in enumerate(args))  # fmt: skip
        return self._shape(self.jit(*args))

    def _call_with_modules(self, args: tuple) -> Any:
        """Arguments that are ``pt.Module``\\ s stand for their parameters: the gradient of a module in
        ``argnums`` is the list of its parameters' gradients (the order of ``named_parameters()``, as
        ``pt.optim`` takes them)."""
        from pypto.array.module import bound, constants, parameter_paths

        paths = {k: parameter_paths(a) for k, a in enumerate(args) if getattr(type(a), "__pypto_module__", False)}
        # a module's other attributes are constants of the program: a program per set of their values
        layout = tuple((type(args[k]), tuple(paths[k]), constants(args[k])) if k in paths else None
                       for k in range(len(args)))  # fmt: skip
        cache = self.__dict__.setdefault("_by_layout", {})
        hit = cache.get(layout)
        if hit is None:
            fn, current = self.fn, self.__dict__.setdefault("_modules", threading.local())
            sizes = [len(paths[k]) if k in paths else 1 for k in range(len(args))]
            starts = [sum(sizes[:k]) for k in range(len(args))]

            def flat(*xs: Any) -> Any:
                rebuilt, scopes = [], contextlib.ExitStack()
                with scopes:
                    for k in range(len(args)):
                        part = xs[starts[k] : starts[k] + sizes[k]]
                        if k in paths:
                            module = current.modules[k]
                            scopes.enter_context(bound(module, paths[k], part))
                            rebuilt.append(module)
                        else:
                            rebuilt.append(part[0])
                    return fn(*rebuilt)

            names = [f"m{k}_{i}" if k in paths else f"a{k}" for k in range(len(args)) for i in range(sizes[k])]
            flat.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
                [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
            )
            flat.__name__ = flat.__qualname__ = getattr(fn, "__name__", "f")
            wrt = tuple(starts[k] + i for k in self.argnums for i in range(sizes[k]))
            hit = cache[layout] = (GradFunction(flat, wrt, self.with_value, self.what), current)
        inner, current = hit
        current.modules = {k: args[k] for k in paths}
        flat_args = [p.data if k in paths else a for k, a in enumerate(args)
                     for p in (args[k].parameters() if k in paths else [a])]  # fmt: skip
        out = inner(*[np.asarray(a) if isinstance(a, (float, np.floating)) else a for a in flat_args])
        value, grads = (out[0], list(out[1])) if self.with_value else (None, list(out))
        grouped = []
        for k in self.argnums:
            n = len(paths[k]) if k in paths else 1
            grouped.append(grads[:n] if k in paths else grads[0])
            del grads[:n]
        result = grouped[0] if self.single else tuple(grouped)
        return (value, result) if self.with_value else result

    def get_code(self, *args: Any, backend: str | None = None) -> str:
        """The source of the kernel computing the gradient for these arguments."""
        return self.jit.get_code(*args, backend=backend)

    def ir(self, *args: Any, stage: str | None = None, backend: str | None = None) -> str:
        return self.jit.ir(*args, stage=stage, backend=backend)

    def __repr__(self) -> str:
        return f"<pypto {self.__name__}>"


def _named_like(program: Callable, fn: Callable, name: str) -> Callable:
    """``program`` with ``fn``'s signature (argument names become the kernel's parameter names)."""

    def run(*args: Any) -> Any:
        return program(*args)

    try:
        run.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        pass
    run.__name__ = run.__qualname__ = name
    return run


GRAD_CACHE = 64  # (function, argnums) pairs whose gradient programs pt.grad keeps (least recently used dropped)
_grads: dict[tuple, tuple[Any, GradFunction]] = {}
_grads_lock = threading.Lock()


def _grad_function(fn: Any, argnums: Any, with_value: bool, what: str) -> GradFunction:
    """The :class:`GradFunction` of ``fn``, the same object for the same function and arguments, so that
    ``pt.grad(loss)(w, x)`` written inline traces and compiles once, as a stored ``pt.grad(loss)`` does."""
    shape = tuple(argnums) if isinstance(argnums, (tuple, list)) else argnums
    try:
        key = (id(fn), shape, isinstance(argnums, (tuple, list)), with_value)
        hash(key)
    except TypeError:  # unhashable argnums: refused by GradFunction with the reason
        return GradFunction(fn, argnums, with_value, what)
    with _grads_lock:
        hit = _grads.pop(key, None)
    if hit is None or hit[0] is not fn:  # a new function, or another one at a reused address
        hit = (fn, GradFunction(fn, argnums, with_value, what))
    with _grads_lock:
        _grads[key] = hit  # most recently used last
        while len(_grads) > GRAD_CACHE:
            del _grads[next(iter(_grads))]
    return hit[1]


def grad(fn: Any, argnums: int | Sequence[int] = 0) -> GradFunction:
    """The gradient of a scalar-valued function of arrays with respect to argument(s) ``argnums``.

    ``pt.grad(f)(x, y)`` returns ``df/dx`` shaped like ``x``; with ``argnums=(0, 1)`` a tuple. The
    gradient is one compiled kernel (see :meth:`GradFunction.get_code`), kept per function: ``pt.grad(f)``
    written inline in a loop compiles once."""
    return _grad_function(fn, argnums, False, "pt.grad")


def value_and_grad(fn: Any, argnums: int | Sequence[int] = 0) -> GradFunction:
    """Like :func:`grad`, returning ``(f(x, ...), gradient)`` from one kernel."""
    return _grad_function(fn, argnums, True, "pt.value_and_grad")


class _Pullbacks:
    """The compiled pullback programs of one function, shared by its :func:`vjp` calls."""

    def __init__(self, fn: Callable, options: dict[str, Any]):
        from pypto.array.function import JitFunction

        self.fn = fn
        self.forward = JitFunction(_named_like(fn, fn, getattr(fn, "__name__", "f")), **_clean(options))
        self.backward: dict[int, Any] = {}
        self.options = options

    def pullback_jit(self, n_args: int, n_out: int) -> Any:
        from pypto.array.function import JitFunction

        key = (n_args, n_out)
        hit = self.backward.get(key)  # type: ignore[call-overload]
        if hit is None:
            fn = rewrite(self.fn, updates=True)

            def program(*xs: Any) -> Any:
                args, cts = xs[:n_args], xs[n_args:]
                ys = fn(*args)
                ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
                wrt = [a for a in args if isinstance(a, Array) and a.dtype.is_inexact]
                return tuple(backward(ys, list(cts), wrt))

            params = [inspect.Parameter(f"x{k}", inspect.Parameter.POSITIONAL_ONLY) for k in range(n_args)]
            params += [inspect.Parameter(f"ct{k}", inspect.Parameter.POSITIONAL_ONLY) for k in range(n_out)]
            program.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
            program.__name__ = program.__qualname__ = f"vjp_{getattr(fn, '__name__', 'f')}"
            hit = self.backward[key] = JitFunction(program, **_clean(self.options))  # type: ignore[index]
        return hit

    # -- keeping the forward's values for the backward (pt.torch.op in training) ---------------------------------
    def residual_jits(self, n_args: int, n_out: int, n_res: int | None = None) -> Any:
        """The forward program that also returns its *residuals* (``(*ys, *residuals)``), or, with ``n_res``, the
        backward program that reads them (``(*xs, *ys, *residuals, *cotangents) -> cotangents of xs``): the
        backward of :meth:`pullback_jit` with the forward's costly values (contractions, reductions, scans,
        sorts, gathers its adjoints read) given instead of computed again. The residuals are found once per
        signature, while the forward program is traced (the backward is built there on stand-in cotangents to
        see what it reads), and named by their place in the forward graph, which a second trace of the same
        function on arrays of the same signature builds alike; a value the backward reads that is not there
        (the function traced differently) is computed again, never taken from the wrong place."""
        from pypto.array.function import JitFunction

        key = ("residuals", n_args, n_out, n_res)
        hit = self.backward.get(key)  # type: ignore[call-overload]
        if hit is not None:
            return hit
        fn = rewrite(self.fn, updates=True)
        kept: dict[tuple, list[tuple[int, str, tuple, Any]]] = self.__dict__.setdefault("_kept", {})

        def signature(args: tuple) -> tuple:
            return tuple((a.shape, a.dtype.name) if isinstance(a, Array) else repr(a) for a in args)

        def traced(args: tuple) -> tuple[list[Array], list[Array], list[Array]]:
            ys = fn(*args)
            ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
            return ys, [a for a in args if isinstance(a, Array) and a.dtype.is_inexact], walk(ys)

        def forward(*xs: Any) -> Any:
            ys, wrt, order = traced(xs)
            stand_ins = [full(y.shape, 1.0, y.dtype) for y in ys]  # (never computed: not an output)
            res = [r for r in _residuals(order, backward(ys, stand_ins, wrt)) if all(r is not y for y in ys)]
            place = {id(n): k for k, n in enumerate(order)}
            kept[signature(xs)] = [(place[id(r)], r.op, r.shape, r.dtype) for r in res]
            return (*ys, *res)

        def back(*zs: Any) -> Any:
            assert n_res is not None
            xs, given = zs[:n_args], zs[n_args:]
            outs, res, cts = given[:n_out], given[n_out : n_out + n_res], given[n_out + n_res :]
            ys, wrt, order = traced(xs)
            mapping = {id(y): o for y, o in zip(ys, outs) if y.shape == o.shape and y.dtype == o.dtype}
            for (k, op, shape, dtype), r in zip(kept.get(signature(xs), []), res):
                node = order[k] if k < len(order) else None
                if node is not None and node.op == op and node.shape == shape == r.shape and node.dtype == dtype:
                    mapping[id(node)] = r
            return tuple(substitute(backward(ys, list(cts), wrt), mapping))

        program = forward if n_res is None else back
        names = [f"x{k}" for k in range(n_args)]
        if n_res is not None:
            names += (
                [f"y{k}" for k in range(n_out)] + [f"r{k}" for k in range(n_res)] + [f"ct{k}" for k in range(n_out)]
            )
        program.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
        )
        base = getattr(self.fn, "__name__", "f")
        program.__name__ = program.__qualname__ = f"{base}_keeping" if n_res is None else f"vjp_{base}_kept"
        hit = self.backward[key] = JitFunction(program, **_clean(self.options))  # type: ignore[index]
        return hit


RESIDUAL_OPS = ("contract", "reduce", "scan", "sort", "gather")
"""The forward values a backward reads that pt.torch.op keeps between its two calls: the costly ones (each a
nest of its own); elementwise values are computed again from them, fused into the backward's nests."""


def _residuals(order: list[Array], grads: list[Array]) -> list[Array]:
    """The forward nodes (``order``: the forward graph) of :data:`RESIDUAL_OPS` that the backward ``grads`` read,
    directly or through elementwise forward nodes, in forward order."""
    place = {id(n): k for k, n in enumerate(order)}
    stack: list[Array] = []
    for node in walk(grads, frozenset(place)):
        if id(node) not in place:
            stack += [a for a in node.args if isinstance(a, Array) and id(a) in place]
    seen: set[int] = set()
    out: list[Array] = []
    while stack:
        n = stack.pop()
        if id(n) in seen or n.op == "input":
            continue
        seen.add(id(n))
        if n.op in RESIDUAL_OPS:
            out.append(n)
        else:
            stack += [a for a in n.args if isinstance(a, Array) and id(a) in place]
    return sorted(out, key=lambda n: place[id(n)])


def _clean(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if v is not None}


def cotangents_for(what: str, given: tuple, results: list[tuple[tuple[int, ...], Any, str]]) -> list[np.ndarray]:
    """A pullback's cotangents (one array per result, or one tuple of them), checked against the results'
    ``(shape, dtype, name)`` and converted to their dtypes."""
    cts = given[0] if len(given) == 1 and isinstance(given[0], (tuple, list)) else given
    if len(cts) != len(results):
        raise ArgumentError(f"{what}: {len(cts)} cotangent(s) for {len(results)} result(s)", param="cotangents",
                            expected=f"{len(results)} arrays", got=len(cts))  # fmt: skip
    out = []
    for k, (c, (shape, dtype, name)) in enumerate(zip(cts, results)):
        c = np.asarray(c)
        if c.shape != tuple(shape):
            raise ArgumentError(f"{what}: cotangent {k} has shape {c.shape}, {name} {tuple(shape)}",
                                param="cotangents", expected=str(tuple(shape)), got=c.shape)  # fmt: skip
        out.append(c.astype(dtype, copy=False))
    return out


PULLBACK_CACHE = 64  # functions whose compiled pullbacks pt.vjp keeps (least recently used dropped first)
_pullbacks: dict[int, tuple[Any, _Pullbacks]] = {}
_pullbacks_lock = threading.Lock()


def vjp(fn: Any, *args: Any) -> tuple[Any, Callable[..., Any]]:
    """``(fn(*args), pullback)``: ``pullback(cotangent)`` returns the cotangents of ``args``' float arrays
    (a tuple, in order) for a cotangent shaped like the result (a tuple of them for several results).

    The pullback is one compiled kernel that recomputes what it needs of the forward pass."""
    from pypto.runtime.kernel import Kernel

    if isinstance(fn, Kernel):  # a destination-passing kernel
        _require_grad("pt.vjp")
        return fn.vjp(*args)
    f, options = _function_of(fn, "pt.vjp")
    with _pullbacks_lock:
        hit = _pullbacks.pop(id(f), None)
        if hit is None or hit[0] is not f:
            hit = (f, _Pullbacks(f, options))
        _pullbacks[id(f)] = hit  # most recently used last
        while len(_pullbacks) > PULLBACK_CACHE:
            del _pullbacks[next(iter(_pullbacks))]
    pb = hit[1]
    out = pb.forward(*args)
    if not is_grad_enabled():

        def off(*_: Any) -> Any:
            _require_grad("pt.vjp pullback")

        return out, off
    outs = out if isinstance(out, tuple) else (out,)

    def pullback(*cotangents: Any) -> tuple[Any, ...]:
        fixed = cotangents_for("pt.vjp pullback", cotangents, [(o.shape, o.dtype, "the result") for o in outs])
        res = pb.pullback_jit(len(args), len(outs))(*args, *fixed)
        return res if isinstance(res, tuple) else (res,)

    return out, pullback
