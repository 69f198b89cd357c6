"""Views of arrays inside ``@pt.jit``: indexing and slicing, transposes, broadcasts and reshapes.

A view is an affine map from the output's index to the input's: ``x.T[i, j]`` reads ``x[j, i]``,
``x[1:9:2][i]`` reads ``x[1 + 2 i]``, ``x[:, None][i, 0]`` reads ``x[i]``. Lowered, it is only the
index of the loads it leads to: no copy is made. A reshape that only splits axes (or adds and
removes axes of size 1) is a view too; one that merges axes writes its input to a contiguous
buffer first (the lowering does, where needed).
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from typing import Any

from pypto.array import sizes
from pypto.array.graph import STRUCTURAL, Array, normalize_axes
from pypto.array.sizes import Size
from pypto.errors import ShapeError, TracingError
from pypto.lang.location import user_loc

# A view's attrs: for every input axis, (constant, ((output axis, coefficient), ...)).
ViewMap = tuple[tuple[int, tuple[tuple[int, int], ...]], ...]


def view(x: Array, shape: tuple[int, ...], index: ViewMap) -> Array:
    if x.op == "view":  # a view of a view: compose the maps
        inner: ViewMap = x.attrs
        composed = []
        for const, terms in inner:
            c = const
            acc: dict[int, int] = {}
            for o, k in terms:
                c2, t2 = index[o]
                c += k * c2
                for o2, k2 in t2:
                    acc[o2] = acc.get(o2, 0) + k * k2
            composed.append((c, tuple(sorted((o, k) for o, k in acc.items() if k))))
        return Array("view", x.args, tuple(composed), shape, x.dtype)
    return Array("view", (x,), index, shape, x.dtype)


def getitem(x: Array, key: Any) -> Array:
    items = list(key) if isinstance(key, tuple) else [key]
    for it in items:
        if isinstance(it, Array) or hasattr(it, "__array_interface__") or isinstance(it, list):
            raise TracingError(
                "indexing an array with an array (NumPy's advanced indexing) is not supported inside @pt.jit",
                user_loc(),
                "use slices with constant steps, integers, None and ..., or pt.where for masks",
            )
        if not (it is None or it is Ellipsis or isinstance(it, slice) or isinstance(it, numbers.Integral)):
            raise TracingError(f"index {it!r} of type {type(it).__name__} is not supported", user_loc())
    if sum(it is Ellipsis for it in items) > 1:
        raise TracingError("an index can only have a single ellipsis ('...')", user_loc())
    used = sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > x.ndim:
        raise ShapeError(
            f"too many indices: the array has {x.ndim} dimension(s), {used} were indexed",
            param="index",
            expected=f"at most {x.ndim} indices",
            got=key,
        )
    if Ellipsis in items:
        k = items.index(Ellipsis)
        items[k : k + 1] = [slice(None)] * (x.ndim - used)
    else:
        items += [slice(None)] * (x.ndim - used)
    shape: list[int] = []
    index: list[tuple[int, tuple[tuple[int, int], ...]]] = []
    d = 0
    for it in items:
        if it is None:
            shape.append(1)
            continue
        n = x.shape[d]
        if isinstance(n, Size) and (isinstance(it, slice) and it == slice(None) or not isinstance(it, slice) and
                                    0 <= int(it) < n.value):  # fmt: skip
            # the whole symbolic axis, or a non-negative index into it (checked against the size at each call)
            index.append((0, ((len(shape), 1),)) if isinstance(it, slice) else (int(it), ()))
            if isinstance(it, slice):
                shape.append(n)
            d += 1
            continue
        if isinstance(n, Size):
            sizes.depends(f"a slice or a negative index of symbolic axis {n.name}")
            n = n.value
        if isinstance(it, slice):
            start, stop, step = it.indices(n)
            length = len(range(start, stop, step))
            index.append((start if length else 0, ((len(shape), step),)))
            shape.append(length)
        else:
            k = int(it)
            if not -n <= k < n:
                raise ShapeError(
                    f"index {k} is out of bounds for axis {d} of size {n}",
                    param="index",
                    expected=f"an int in [{-n}, {n})",
                    got=k,
                )
            index.append((k % n, ()))
        d += 1
    return view(x, tuple(shape), tuple(index))


def transpose(x: Array, axes: Any = None) -> Array:
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(axes)
    if sorted(normalize_axes(perm, x.ndim, "transpose")) != list(range(x.ndim)) or len(perm) != x.ndim:
        raise ShapeError(
            f"transpose: axes {perm} are not a permutation of the array's {x.ndim} axes",
            param="axes",
            expected=f"a permutation of {tuple(range(x.ndim))}",
            got=axes,
        )
    perm = tuple(int(a) % x.ndim for a in perm)
    index = [(0, ())] * x.ndim
    for k, a in enumerate(perm):
        index[a] = (0, ((k, 1),))
    return view(x, tuple(x.shape[a] for a in perm), tuple(index))


def swapaxes(x: Array, a: int, b: int) -> Array:
    a, b = normalize_axes((a,), x.ndim, "swapaxes")[0], normalize_axes((b,), x.ndim, "swapaxes")[0]
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def broadcast_to(x: Array, shape: tuple[int, ...]) -> Array:
    shape = tuple(s if isinstance(s, Size) else int(s) for s in shape)
    off = len(shape) - x.ndim
    if off < 0 or any(s not in (1, shape[off + k]) for k, s in enumerate(x.shape)):
        raise ShapeError(
            f"cannot broadcast an array of shape {x.shape} to {shape}",
            param="shape",
            expected="sizes equal to the array's, or any size where the array's is 1",
            got=shape,
        )
    index = tuple((0, ()) if s == 1 and shape[off + k] != 1 else (0, ((off + k, 1),)) for k, s in enumerate(x.shape))
    return view(x, shape, index)


def _resolve_shape(x: Array, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    out = [s if isinstance(s, Size) else int(s) for s in shape]
    free = [k for k, s in enumerate(out) if s == -1]
    if len(free) > 1 or any(s < -1 for s in out):
        raise ShapeError("reshape: at most one size may be -1, and none below", param="shape", expected="sizes >= 0",
                         got=tuple(shape))  # fmt: skip
    symbolic = _symbolic_reshape(x, out, free)
    if symbolic is not None:
        return symbolic
    out = [sizes.value(s) for s in out]
    known = math.prod(s for s in out if s != -1)
    if free:
        if known == 0 or x.size % known:
            raise ShapeError(f"reshape: cannot reshape an array of size {x.size} into {tuple(shape)}",
                             param="shape", expected=f"sizes whose product is {x.size}", got=tuple(shape))  # fmt: skip
        out[free[0]] = x.size // known
    if math.prod(out) != x.size:
        raise ShapeError(
            f"reshape: cannot reshape an array of shape {x.shape} (size {x.size}) into {tuple(out)}",
            param="shape",
            expected=f"sizes whose product is {x.size}",
            got=tuple(shape),
        )
    return tuple(out)


def _symbolic_reshape(x: Array, out: list[Any], free: list[int]) -> tuple[Any, ...] | None:
    """The new shape of a reshape of a shape with symbolic sizes that moves each of them whole (the static
    sizes may be regrouped; ``-1`` stands for what is left); None where no Size is involved. Any other
    reshape of a symbolic size needs its value (recorded, see :mod:`pypto.array.sizes`)."""
    if not any(isinstance(s, Size) for s in (*x.shape, *out)):
        return None
    have_syms, have_static = sizes.factors(x.shape)
    want_syms, want_static = sizes.factors(tuple(s for s in out if s != -1))
    if free and Counter(want_syms) <= Counter(have_syms) and want_static and have_static % want_static == 0:
        left = list((Counter(have_syms) - Counter(want_syms)).elements())
        rest = have_static // want_static
        if not left:
            out[free[0]] = rest
        elif len(left) == 1 and rest == 1:
            out[free[0]] = next(s for s in x.shape if isinstance(s, Size) and s.index == left[0])
        free = free if isinstance(out[free[0]], int) and out[free[0]] == -1 else []
    if not free and sizes.factors(tuple(out)) == (have_syms, have_static):
        return tuple(out)
    sizes.depends("a reshape that merges or splits a symbolic axis")
    return None


def _split_only(old: tuple[int, ...], new: tuple[int, ...]) -> ViewMap | None:
    """The view map when ``new`` only splits ``old``'s axes (and adds or drops axes of size 1)."""
    index = []
    j = 0
    for s in old:
        if s == 1:
            index.append((0, ()))
            continue
        if isinstance(s, Size):  # kept whole: the same size in ``new``, after any axes of size 1
            while j < len(new) and not isinstance(new[j], Size) and new[j] == 1:
                j += 1
            if j == len(new) or not sizes.same(new[j], s):
                return None
            index.append((0, ((j, 1),)))
            j += 1
            continue
        if any(isinstance(n, Size) for n in new[j : j + 1]):
            return None
        group: list[int] = []
        p = 1
        while j < len(new) and p < s:
            group.append(j)
            p *= new[j]
            j += 1
        if p != s or s == 0:
            return None
        terms = []
        stride = 1
        for g in reversed(group):
            if new[g] != 1:
                terms.append((g, stride))
            stride *= new[g]
        index.append((0, tuple(sorted(terms))))
    if any(n != 1 for n in new[j:]):
        return None
    return tuple(index)


def reshape(x: Array, shape: Any) -> Array:
    new = _resolve_shape(x, shape)
    if new == x.shape:
        return x
    m = _split_only(x.shape, new)
    if m is not None:
        return view(x, new, m)
    return Array("reshape", (x,), None, new, x.dtype)


def expand_dims(x: Array, axis: int) -> Array:
    nd = x.ndim + 1
    a = normalize_axes((axis,), nd, "expand_dims")[0]
    return reshape(x, x.shape[:a] + (1,) + x.shape[a:])


def squeeze(x: Array, axis: Any = None) -> Array:
    axes = (
        tuple(k for k, s in enumerate(x.shape) if s == 1) if axis is None else normalize_axes(axis, x.ndim, "squeeze")
    )
    for a in axes:
        if x.shape[a] != 1:
            raise ShapeError(f"squeeze: axis {a} has size {x.shape[a]}, not 1", param="axis", expected="axes of size 1",
                             got=axis)  # fmt: skip
    return reshape(x, tuple(s for k, s in enumerate(x.shape) if k not in axes))


STRUCTURAL.update(getitem=getitem, transpose=transpose, reshape=reshape)  # Array's [], .transpose, .reshape
