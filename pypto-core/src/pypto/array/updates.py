"""Functional updates inside ``@pt.jit``: ``x.at[idx].set(v)`` (JAX's spelling) and NumPy's ``x[idx] = v``.

A traced array is a value, never a buffer: an update makes a new array equal to ``x`` except at ``x[idx]``.
``x[idx] = v`` and ``x[idx] += v`` on a local variable of a jit function are rewritten by the front end's AST
pass (:mod:`pypto.lang.control`) into ``x = <update>``, so NumPy code runs as written; the caller's arrays are
never changed (a function that updates its argument returns the result instead). A function of the user's code
that the jit function calls and that updates an array it is given (``set_boundary(u)``) is rewritten too, and the
caller's variable rebound to the result (:func:`pypto.lang.control.callee`).

The update is built from operations the rest of the pipeline already knows, so gradients, every backend,
Dask and the reference all follow without a new node:

* along an axis where the values vary and the index is a slice with step 1 (or -1), the result is cut into
  pieces: ``concat(x[:s], <block>, x[s + m:])`` (the lowering stores nested concatenations straight into one
  buffer, so ``a[1:-1, 1:-1] = f(b)`` writes every element once);
* along an axis where the values are the same for every index (a scalar, a broadcast axis, an integer index)
  or the step is not 1, the block is ``where(mask, v, x)`` with the mask built from the position along the
  axis (elementwise: fused into what reads it); values that vary along a strided slice are first spread to
  their positions (``v[k]`` at ``s + k * step``).

Runtime positions (a number passed at the call: ``u.at[t].set(v)``, ``u[t, s:s + 4] = v``) are selects too: the
positions are found at the call (gathered from the axis's own, so a position outside it is a ``pt.IndexError``),
values along a window are moved to them, and ``where(mask, new, x)`` keeps the rest; one program serves every
value.

Integer-array indices are NumPy's scatter: ``x.at[idx].add(v)`` adds at every index, repeated ones adding up
(``np.add.at``); setting through integer arrays (whose repeated indices NumPy resolves by order) is refused.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.array import sizes, views
from pypto.array.graph import STRUCTURAL, Array, _operand, binary, broadcast_shapes, cast, where
from pypto.array.sizes import Size
from pypto.errors import ShapeError, TracingError
from pypto.lang.location import user_loc

# the update operations (JAX's names) and how the new value is made from the old one
APPLY: dict[str, Any] = {
    "set": None,
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "divide": operator.truediv,
    "floor_divide": operator.floordiv,
    "remainder": operator.mod,
    "power": operator.pow,
    "min": lambda a, b: binary("minimum", a, b),
    "max": lambda a, b: binary("maximum", a, b),
    "bitwise_and": operator.and_,
    "bitwise_or": operator.or_,
    "bitwise_xor": operator.xor,
    "left_shift": operator.lshift,
    "right_shift": operator.rshift,
    "matmul": operator.matmul,
}

# a region along one axis of the target: (start, step, count)
Region = tuple[int, int, int]


def update(x: Array, key: Any, values: Any, op: str = "set", what: str = "x.at[idx].set") -> Array:
    """``x`` with ``x[key]`` replaced by ``values`` (``op == "set"``) or by ``APPLY[op](x[key], values)``."""
    if op not in APPLY:
        raise TracingError(f"{what}: unknown update {op!r}", user_loc(), f"use one of {', '.join(APPLY)}")
    items = list(key) if isinstance(key, tuple) else [key]
    for j, it in enumerate(items):  # a runtime slice not of the form t:t + c: specific to its values, as in x[...]
        if isinstance(it, slice) and views._runtime(it) and views._window(it) is None:
            items[j] = slice(*(int(b) if isinstance(b, Array) else b for b in (it.start, it.stop, it.step)))
    dynamic = [j for j, it in enumerate(items) if views._dynamic(it)]
    if dynamic and not any(isinstance(it, (Array, list)) or hasattr(it, "__array_interface__")
                           for j, it in enumerate(items) if j not in dynamic):  # fmt: skip
        return _dynamic_update(x, items, dynamic, values, op, what)
    if any(isinstance(it, (Array, list)) or hasattr(it, "__array_interface__") for it in items):
        return _indexed(x, items, values, op, what)
    picked = views.getitem(x, key)  # checks the index (bounds, rank) and gives the shape the values fill
    regions, picked_axes = _regions(x, items)
    v = _operand(values, what)
    if op != "set":  # (the new values are made where they are placed: here only their type is checked)
        new = APPLY[op](picked, v)
        if picked.ndim and not _same_kind(new.dtype, x.dtype):  # (one element: NumPy converts, as in a set)
            raise TracingError(
                f"{what}: the result of the update has type {new.dtype}, which cannot be stored in the "
                f"{x.dtype} array without losing its kind (NumPy refuses this in-place operation too)",
                user_loc(),
                f"convert the array first (x = x.astype({new.dtype.name})), or the values",
            )
    if isinstance(v, Array):
        _fits(v, picked, what)
        if v.dtype != x.dtype and op == "set":
            v = cast(v, x.dtype)
        v = views.reshape(v, (1,) * (picked.ndim - v.ndim) + tuple(v.shape)) if v.ndim < picked.ndim else v
        # the values' shape along the target's axes: 1 where an integer indexed it, its own along a slice
        along = {a: p for p, a in enumerate(picked_axes) if a is not None}
        shape = tuple(v.shape[along[d]] if d in along else 1 for d in range(x.ndim))
        v = views.reshape(v, shape) if v.ndim != len(shape) or tuple(v.shape) != shape else v
    elif op == "set":
        v = Array("fill", (), _scalar(v, x.dtype, what), (1,) * x.ndim, x.dtype)
    if any(m == 0 for _, _, m in regions):  # nothing is indexed: x as it was
        return x
    for d, (start, step, m) in enumerate(regions):  # every step made positive: the same positions, ascending
        if step < 0:
            if _size(v, d) != 1:
                v = views.getitem(v, _cut(d, x.ndim, None, None, -1))
            regions[d] = (start + (m - 1) * step, -step, m)
        if m == 1:
            regions[d] = (regions[d][0], 1, 1)
    if x.ndim == 0:
        return _combine(x, views.reshape(v, ()) if isinstance(v, Array) else v, op)
    return _place(x, v, regions, op)


def _fits(v: Array, picked: Array, what: str) -> None:
    """Refuse values that do not broadcast to the indexed shape."""
    try:
        ok = broadcast_shapes(v.shape, picked.shape, what=what) == tuple(picked.shape)
    except ShapeError:
        ok = False
    if not ok:
        raise ShapeError(
            f"{what}: values of shape {v.shape} cannot be broadcast to the indexed shape {picked.shape}",
            param="values",
            expected=f"an array broadcastable to {picked.shape}, or a number",
            got=v.shape,
        )


def _same_kind(new: dtypes.DType, old: dtypes.DType) -> bool:
    """Whether NumPy's ``same_kind`` casting rule stores a ``new`` value in an ``old`` array."""
    return bool(np.can_cast(new.numpy, old.numpy, casting="same_kind"))


def _scalar(v: Any, dt: dtypes.DType, what: str) -> Any:
    """A Python number stored as ``dt`` (as NumPy's assignment converts it: a float into an integer array is
    truncated)."""
    if isinstance(v, complex) and not dt.is_complex:
        raise TracingError(f"{what}: a complex value cannot be stored in a {dt} array", user_loc(),
                           "store its real part (v.real), or make the array complex")  # fmt: skip
    if dt.is_bool:
        return bool(v)
    if dt.is_int:
        if isinstance(v, float) and not np.isfinite(v):
            raise TracingError(f"{what}: {v} cannot be stored in a {dt} array", user_loc())
        return int(v)
    return v


def _regions(x: Array, items: list[Any]) -> tuple[list[Region], list[int | None]]:
    """Per axis of ``x``: the indexed (start, step, count); and per axis of ``x[items]`` the axis of ``x`` it
    comes from (None for a new axis from ``None``)."""
    used = sum(1 for it in items if it is not None and it is not Ellipsis)
    if Ellipsis in items:
        k = items.index(Ellipsis)
        items = items[:k] + [slice(None)] * (x.ndim - used) + items[k + 1 :]
    else:
        items = items + [slice(None)] * (x.ndim - used)
    regions: list[Region] = []
    picked: list[int | None] = []
    d = 0
    for it in items:
        if it is None:
            picked.append(None)
            continue
        n = x.shape[d]
        if isinstance(n, Size):
            if isinstance(it, slice) and it == slice(None):
                regions.append((0, 1, n))
                picked.append(d)
                d += 1
                continue
            sizes.depends(f"an update of part of symbolic axis {n.name}")
            n = n.value
        if isinstance(it, slice):
            start, stop, step = it.indices(n)
            regions.append((start, step, len(range(start, stop, step))))
            picked.append(d)
        else:
            regions.append((int(it) % n, 1, 1))
        d += 1
    return regions, picked


def _whole(region: Region, n: Any) -> bool:
    start, step, m = region
    return start == 0 and step == 1 and (m is n or m == n)


def _cut(d: int, ndim: int, start: int | None, stop: int | None, step: int | None = None) -> tuple[slice, ...]:
    return tuple(slice(start, stop, step) if k == d else slice(None) for k in range(ndim))


def _size(v: Array | Any, d: int) -> int:
    return v.shape[d] if isinstance(v, Array) else 1


def _combine(x: Array, v: Array | Any, op: str) -> Array:
    """The new values where ``v`` meets the old ``x`` (broadcast together), of ``x``'s type."""
    new = v if op == "set" else APPLY[op](x, v)
    return new if new.dtype == x.dtype else cast(new, x.dtype)


def _place(x: Array, v: Array | Any, regions: list[Region], op: str) -> Array:
    """``x`` with the values ``v`` (shaped as the regions' counts, or 1 along an axis where they do not vary;
    a number for an update other than a set) placed at ``regions``."""
    for d, (start, step, m) in enumerate(regions):
        if _whole(regions[d], x.shape[d]) or _size(v, d) == 1 or step != 1:
            continue
        n = int(x.shape[d])
        inner = regions[:d] + [(0, 1, m)] + regions[d + 1 :]
        block = _place(views.getitem(x, _cut(d, x.ndim, start, start + m)), v, inner, op)
        parts = [views.getitem(x, _cut(d, x.ndim, 0, start))] if start else []
        parts.append(block)
        if start + m < n:
            parts.append(views.getitem(x, _cut(d, x.ndim, start + m, n)))
        return _concat(parts, d)
    mask = None
    for d, region in enumerate(regions):
        if _whole(region, x.shape[d]):
            continue
        n = int(x.shape[d])
        inside = _inside(views._iota(n, d, x.ndim), region, n)
        mask = inside if mask is None else binary("and", mask, inside)
        if _size(v, d) != 1:  # values along a strided slice: v[k] moved to start + k * step
            v = _spread(v, d, n, region)
    new = _combine(x, v, op)
    if mask is None:  # every element is replaced
        return new if tuple(new.shape) == tuple(x.shape) else views.broadcast_to(new, x.shape)
    return where(mask, new, x)


def _inside(i: Array, region: Region, n: int) -> Array:
    """Whether the position ``i`` (along an axis of size ``n``) is one of ``region``'s."""
    start, step, m = region
    if m == 1:
        return binary("eq", i, start)
    lo, hi = start, start + (m - 1) * step
    tests = [binary("ge", i, lo)] if lo > 0 else []
    if hi < n - 1:
        tests.append(binary("le", i, hi))
    if abs(step) > 1:
        tests.append(binary("eq", binary("mod", binary("sub", i, lo) if lo else i, abs(step)), 0))
    inside = tests[0]
    for t in tests[1:]:
        inside = binary("and", inside, t)
    return inside


def _spread(v: Array, d: int, n: int, region: Region) -> Array:
    """``v`` (``m`` values along axis ``d``) made ``n`` long with ``v[k]`` at ``start + k * step`` (``step > 1``)."""
    start, step, m = region
    shape = list(v.shape)
    if step > 1:  # interleave step - 1 zeros after every value: (m, step) merged into m * step
        wide = views.reshape(v, (*shape[: d + 1], 1, *shape[d + 1 :]))
        gap = _zeros((*shape[: d + 1], step - 1, *shape[d + 1 :]), v.dtype)
        merged = views.reshape(_concat([wide, gap], d + 1), (*shape[:d], m * step, *shape[d + 1 :]))
        v = views.getitem(merged, _cut(d, v.ndim, 0, (m - 1) * step + 1))
    span = (m - 1) * step + 1
    parts = [_zeros((*shape[:d], start, *shape[d + 1 :]), v.dtype)] if start else []
    parts.append(v)
    if start + span < n:
        parts.append(_zeros((*shape[:d], n - start - span, *shape[d + 1 :]), v.dtype))
    return _concat(parts, d)


def _zeros(shape: tuple, dt: dtypes.DType) -> Array:
    return Array("fill", (), False if dt.is_bool else 0, tuple(shape), dt)


def _concat(parts: list[Array], axis: int) -> Array:
    if len(parts) == 1:
        return parts[0]
    shape = tuple(sum(int(p.shape[axis]) for p in parts) if k == axis else n for k, n in enumerate(parts[0].shape))
    return Array("concat", tuple(parts), axis, shape, parts[0].dtype)


def _dynamic_update(x: Array, items: list[Any], dynamic: list[int], values: Any, op: str, what: str) -> Array:
    """An update at runtime positions: ``x.at[t].set(v)``, ``x[t, s:s + 4] += v`` (runtime integers and windows
    ``t:t + c`` of a static size, among ints and slices). Each runtime index is one position (or ``c``) along its
    axis, found at the call (bounds-checked: a gather of the axis's positions); the new values are moved to
    their positions along it and selected where the positions are (``where(mask, new, x)``)."""
    if any(it is None for it in items):
        raise TracingError(f"{what}: None (a new axis) in an update at runtime positions", user_loc(),
                           "leave the None out: the values broadcast")  # fmt: skip
    picked = views.getitem(x, tuple(items))  # (checks the index; its shape is what the values fill)
    used = sum(1 for it in items if it is not Ellipsis)
    if any(it is Ellipsis for it in items):
        k = next(k for k, it in enumerate(items) if it is Ellipsis)
        items = [*items[:k], *[slice(None)] * (x.ndim - used), *items[k + 1 :]]
    items = items + [slice(None)] * (x.ndim - len(items))
    v = _operand(values, what)
    new = v if op == "set" else APPLY[op](picked, v)
    if isinstance(new, Array):
        _fits(new, picked, what)
        if new.dtype != x.dtype:
            if op != "set" and picked.ndim and not _same_kind(new.dtype, x.dtype):
                raise TracingError(f"{what}: the result of the update has type {new.dtype}, which cannot be "
                                   f"stored in the {x.dtype} array", user_loc(),
                                   f"convert the array first (x = x.astype({new.dtype.name}))")  # fmt: skip
            new = cast(new, x.dtype)
        new = views.reshape(new, (1,) * (picked.ndim - new.ndim) + tuple(new.shape)) if new.ndim < picked.ndim else new
        kept = [d for d, it in enumerate(items) if isinstance(it, slice)]  # the axes of x the values run along
        new = views.reshape(new, tuple(new.shape[kept.index(d)] if d in kept else 1 for d in range(x.ndim)))
    else:
        new = Array("fill", (), _scalar(new, x.dtype, what), (1,) * x.ndim, x.dtype)
    mask = None
    for d, it in enumerate(items):
        n = int(x.shape[d])
        i = views._iota(n, d, x.ndim)
        if views._dynamic(it):
            if isinstance(it, slice):
                start, size = views._window(it)  # type: ignore[misc]
            else:
                start, size = it, 1
            first = where(binary("lt", start, 0), start + n if size == 1 else n, start)  # (x[-1]: the last)
            # the positions, gathered from the axis's own: a position outside it is a pt.IndexError at the call
            pos = views._advanced(views._iota(n, 0, 1), [binary("add", views._iota(size, 0, 1), first)])
            lo, hi = views.getitem(pos, 0), views.getitem(pos, size - 1)  # (both ends read: both checked)
            inside = binary("and", binary("ge", i, lo), binary("le", i, hi))
            if new.shape[d] != 1:  # values along the window: the one for position p is new[p - start]
                at = binary("minimum", binary("maximum", binary("sub", views._iota(n, 0, 1), first), 0), size - 1)
                new = views._advanced(new, [*(slice(None),) * d, at])
        elif isinstance(it, slice):
            start, stop, step = it.indices(n)
            region = (start, step, len(range(start, stop, step)))
            if region[2] == 0:
                return x
            if step < 0:
                if new.shape[d] != 1:
                    new = views.getitem(new, _cut(d, x.ndim, None, None, -1))
                region = (start + (region[2] - 1) * step, -step, region[2])
            if _whole(region, n):
                continue
            inside = _inside(i, region, n)
            if new.shape[d] != 1:
                new = _spread(new, d, n, region)
        else:
            inside = binary("eq", i, int(it) % n)
        mask = inside if mask is None else binary("and", mask, inside)
    new = new if op == "set" or new.dtype == x.dtype else cast(new, x.dtype)
    if mask is None:
        return new if tuple(new.shape) == tuple(x.shape) else views.broadcast_to(new, x.shape)
    return where(mask, new, x)


def _indexed(x: Array, items: list[Any], values: Any, op: str, what: str) -> Array:
    """An update through integer arrays: a scatter-add; other updates are refused (saying what to write)."""
    if op == "add":
        return views._scatter_of(x, items, values, what)
    if op == "subtract":
        return views._scatter_of(x, items, -_operand(values, what), what)
    raise TracingError(
        f"{what}: only .add (a scatter-add, np.add.at) may update through integer-array indices; "
        f"'{op}' there would depend on the order of repeated indices",
        user_loc(),
        "for indices without repeats write x.at[idx].add(v - x[idx]); or select with pt.where on a mask "
        "built from the indices",
    )


class At:
    """``x.at[idx]``: functional updates as in JAX. Each method returns the updated array; ``x`` is unchanged.

    ``idx`` is NumPy's: ints, slices (any step), ``...`` and ``None``, or integer arrays (only ``.add``). The
    values broadcast to ``x[idx]``'s shape and are converted to ``x``'s dtype (as NumPy's assignment does)."""

    def __init__(self, x: Array, key: Any = None):
        self.x, self.key = x, key

    def __getitem__(self, key: Any) -> At:
        return At(self.x, key)

    def get(self) -> Array:
        """``x[idx]``."""
        return views.getitem(self.x, self.key)

    def set(self, values: Any) -> Array:
        """``x`` with ``x[idx] = values``."""
        return update(self.x, self.key, values, "set", "x.at[idx].set")

    def add(self, values: Any) -> Array:
        """``x`` with ``values`` added at ``x[idx]``; through integer arrays repeated indices add up
        (``np.add.at``), and the result is a scatter: return it from the function."""
        return update(self.x, self.key, values, "add", "x.at[idx].add")

    def subtract(self, values: Any) -> Array:
        return update(self.x, self.key, values, "subtract", "x.at[idx].subtract")

    def multiply(self, values: Any) -> Array:
        return update(self.x, self.key, values, "multiply", "x.at[idx].multiply")

    def divide(self, values: Any) -> Array:
        return update(self.x, self.key, values, "divide", "x.at[idx].divide")

    def power(self, values: Any) -> Array:
        return update(self.x, self.key, values, "power", "x.at[idx].power")

    def min(self, values: Any) -> Array:
        """``x`` with ``x[idx] = minimum(x[idx], values)``."""
        return update(self.x, self.key, values, "min", "x.at[idx].min")

    def max(self, values: Any) -> Array:
        """``x`` with ``x[idx] = maximum(x[idx], values)``."""
        return update(self.x, self.key, values, "max", "x.at[idx].max")


def setitem(target: Any, key: Any, values: Any, op: str | None) -> Array:
    """``target[key] = values`` (``op`` None) or ``target[key] op= values`` where ``target`` is traced, or is a
    NumPy array made inside the function and the values or the index are traced (it becomes a constant of
    the program): the updated array, which the rewritten code binds to the target's name."""
    if not isinstance(target, Array):
        target = _operand(np.asarray(target), "the updated array")
    what = "x[idx] = v" if op is None else f"x[idx] {_SYMBOL[op]}= v"
    return update(target, key, values, op or "set", what)


_SYMBOL = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "floor_divide": "//", "remainder": "%",
           "power": "**", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "left_shift": "<<",
           "right_shift": ">>", "matmul": "@"}  # fmt: skip

STRUCTURAL["at"] = At
STRUCTURAL["setitem"] = setitem
