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
from pypto.array.graph import STRUCTURAL, Array, captured, normalize_axes
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
    for j, it in enumerate(items):  # an index array from outside the function (or a list): an input it reads
        if hasattr(it, "__array_interface__") or isinstance(it, list):
            got = captured(it, "an index")
            items[j] = got if got is not None else it
    for j, it in enumerate(items):  # a runtime slice not of the form t:t + c: the program is specific to its values
        if isinstance(it, slice) and _runtime(it) and _window(it) is None:
            items[j] = slice(*(int(b) if isinstance(b, Array) else b for b in (it.start, it.stop, it.step)))
    dynamic = [j for j, it in enumerate(items) if _dynamic(it)]
    if dynamic and not any(isinstance(it, Array) and not _dynamic(it) for it in items):
        return _dynamic_items(x, items, dynamic)
    if any(isinstance(it, Array) for it in items):
        return _advanced(x, items)
    for it in items:
        if hasattr(it, "__array_interface__") or isinstance(it, list):
            raise TracingError(
                "indexing with a NumPy array or a list outside a @pt.jit function's trace",
                user_loc(),
                "index inside a @pt.jit function (an integer array), or use slices",
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


def _runtime(it: slice) -> bool:
    return any(isinstance(b, Array) for b in (it.start, it.stop, it.step))


def _window(it: slice) -> tuple[Array, int] | None:
    """``(t, c)`` of a slice ``t:t + c`` with a runtime integer start and a static size (step 1), or None."""
    start, stop = it.start, it.stop
    plus = (isinstance(stop, Array) and stop.op == "binary" and stop.attrs == "add" and stop.args[0] is start
            and isinstance(stop.args[1], int) and not isinstance(stop.args[1], bool))  # fmt: skip
    if isinstance(start, Array) and start.weak and start.dtype.is_int and plus and it.step in (None, 1):
        return start, stop.args[1]
    return None


def _dynamic(it: Any) -> bool:
    """A runtime index: a runtime integer (``x[t]``) or a window ``t:t + c`` at a runtime position."""
    if isinstance(it, slice):
        return _runtime(it)
    return isinstance(it, Array) and it.weak and it.ndim == 0 and it.dtype.is_int


def _dynamic_items(x: Array, items: list[Any], dynamic: list[int]) -> Array:
    """``x[...]`` with runtime integers (``x[t]``) and windows (``x[t:t + c]``, a static size ``c``) among basic
    indices, each at its own axis as NumPy's basic indexing places it (``x[t, :, s:s + 4]`` has shape
    ``(n1, 4)``): the static part first (a view), then each runtime index along its axis, from the last, as an
    index array checked at every call (a position out of bounds, or a window that does not fit, is a
    ``pt.IndexError``: the size may not change)."""
    from pypto.array.graph import binary, where

    static = [slice(None) if j in dynamic else it for j, it in enumerate(items)]
    used = sum(1 for it in static if it is not None and it is not Ellipsis)
    if any(it is Ellipsis for it in static):  # (by identity: '==' on an Array is traced)
        k = next(k for k, it in enumerate(static) if it is Ellipsis)
        fill = x.ndim - used
        static[k : k + 1] = [slice(None)] * fill
        items = [*items[:k], *[slice(None)] * fill, *items[k + 1 :]]
        dynamic = [j if j < k else j + fill - 1 for j in dynamic]
    y = getitem(x, tuple(static))
    places = []  # (output position, input axis, runtime index)
    out_pos = in_axis = 0
    for j, it in enumerate(static):
        if it is None:
            out_pos += 1
            continue
        if j in dynamic:
            places.append((out_pos, in_axis, items[j]))
        if isinstance(it, slice):
            out_pos += 1
        in_axis += 1
    for pos, axis, it in reversed(places):
        if isinstance(it, slice):
            start, size = _window(it)  # type: ignore[misc]
            n = int(x.shape[axis])
            if size < 0 or size > n:
                raise ShapeError(f"a slice of {size} elements of an axis of {n}", param="index",
                                 expected=f"t:t + c with 0 <= c <= {n}", got=size)  # fmt: skip
            first = where(binary("lt", start, 0), n, start)  # a negative start: out of bounds (as the end would be)
            it = binary("add", _iota(size, 0, 1), first)
        y = _advanced(y, [*(slice(None),) * pos, it])
    return y


def _advanced(x: Array, items: list[Any]) -> Array:
    """NumPy's integer-array indexing: ``x[idx]``, ``x[:, idx]``, ``x[i0, i1]``, mixed with slices and ints.

    The index arrays (and ints among them) broadcast together; their shape replaces the indexed axes where
    those are adjacent, else it comes first (NumPy's rule). Slices apply first, as a view; the result is a
    ``gather`` node, lowered to a read at computed indices (checked against the sizes on every call).
    """
    for it in items:
        if isinstance(it, Array) and it.dtype.is_bool:
            raise TracingError(
                "indexing with a boolean mask inside @pt.jit: the result's size would depend on the data",
                user_loc(),
                "keep the shape and select: pt.where(mask, x, 0) (or x * mask), then reduce",
            )
        if isinstance(it, Array) and not it.dtype.is_int:
            raise TracingError(f"an index array has type {it.dtype}, expected an integer type", user_loc(),
                               "convert it: idx.astype(pt.int64)")  # fmt: skip
        if it is None or (hasattr(it, "__array_interface__") and not isinstance(it, Array)) or isinstance(it, list):
            raise TracingError(
                "integer-array indexing inside @pt.jit takes arrays, ints, slices and '...' (not None or lists)",
                user_loc(),
                "index in two steps: x[idx][:, None], or pass list indices as an array argument",
            )
    if sum(it is Ellipsis for it in items) > 1:
        raise TracingError("an index can only have a single ellipsis ('...')", user_loc())
    used = sum(1 for it in items if it is not Ellipsis)
    if used > x.ndim:
        raise ShapeError(f"too many indices: the array has {x.ndim} dimension(s), {used} were indexed",
                         param="index", expected=f"at most {x.ndim} indices", got=tuple(items))  # fmt: skip
    dots = [k for k, it in enumerate(items) if it is Ellipsis]  # by identity: '==' on an Array is traced
    if dots:
        items[dots[0] : dots[0] + 1] = [slice(None)] * (x.ndim - used)
    else:
        items += [slice(None)] * (x.ndim - used)
    basic = [it for it in items if isinstance(it, slice)]
    whole = all(it == slice(None) for it in basic)  # no slicing: gather from x itself (an input is not copied)
    sliced = x if whole else getitem(x, tuple(it if isinstance(it, slice) else slice(None) for it in items))
    positions = tuple(d for d, it in enumerate(items) if not isinstance(it, slice))
    indices = tuple(it if isinstance(it, Array) else int(it) for it in items if not isinstance(it, slice))
    from pypto.array.graph import broadcast_shapes

    bshape = broadcast_shapes(*(i.shape for i in indices if isinstance(i, Array)), what="index arrays")
    adjacent = positions == tuple(range(positions[0], positions[-1] + 1))
    rest = [sliced.shape[d] for d in range(sliced.ndim) if d not in positions]
    first = positions[0] if adjacent else 0
    shape = (*rest[:first], *bshape, *rest[first:])
    return Array("gather", (sliced, *indices), (positions, first, len(bshape)), shape, sliced.dtype)


def take(x: Array, indices: Array, axis: int | None = None) -> Array:
    """``np.take``: elements of ``x`` at ``indices`` along ``axis`` (of the flattened array when None); a
    negative index counts from the end, and every index is checked against the size on each call."""
    if axis is None:
        return _advanced(reshape(x, (-1,)), [indices])
    (a,) = normalize_axes((axis,), x.ndim, "take")
    return _advanced(x, [slice(None)] * a + [indices])


def take_along_axis(x: Array, indices: Array, axis: int) -> Array:
    """``np.take_along_axis``: ``out[..., j, ...] = x[..., indices[..., j, ...], ...]`` along ``axis``, the
    other axes of ``indices`` broadcasting against ``x``'s."""
    (a,) = normalize_axes((axis,), x.ndim, "take_along_axis")
    if indices.ndim != x.ndim:
        raise ShapeError(f"take_along_axis: indices have {indices.ndim} dimension(s), the array {x.ndim}",
                         param="indices", expected=f"{x.ndim} dimensions", got=indices.shape)  # fmt: skip
    from pypto.array.graph import broadcast_shapes

    shape = list(broadcast_shapes(x.shape[:a] + (1,) + x.shape[a + 1 :], indices.shape, what="take_along_axis"))
    grids = []
    for d in range(x.ndim):
        if d == a:
            grids.append(indices)
        else:  # the position along axis d, shaped to broadcast there
            grids.append(_iota(shape[d], d, x.ndim))
    return _advanced(x, grids)


def _iota(n: int, axis: int, ndim: int) -> Array:
    """0 .. n-1 along ``axis`` of an ``ndim``-dimensional array (size 1 elsewhere), as int64."""
    from pypto import dtypes

    shape = [1] * ndim
    shape[axis] = n
    return Array("iota", (), axis, tuple(shape), dtypes.int64)


def _scatter_of(x: Array, items: list[Any], values: Any, what: str) -> Array:
    """``x`` with ``values`` added at ``x[items]`` (a scatter-add node; ``values`` broadcast to ``x[items]``'s shape)."""
    from pypto.array.graph import _operand, binary, scatter_add

    picked = _advanced(x, list(items))
    if picked.args[0] is not x:
        raise TracingError(f"{what}: only integer arrays, ints and whole slices (':') may index the target",
                           user_loc(), "slice the target before or after the update instead")  # fmt: skip
    v = _operand(values, what)
    v = binary("add", v, full_like(picked)) if not isinstance(v, Array) or v.shape != picked.shape else v
    if v.dtype != x.dtype:
        from pypto.array.graph import cast

        v = cast(v, x.dtype)
    return scatter_add(x, v, picked.args[1:], picked.attrs)


def full_like(x: Array, value: float = 0.0) -> Array:
    return Array("fill", (), value, x.shape, x.dtype)


def index_add(x: Array, index: Array, source: Any, axis: int = 0) -> Array:
    """``torch.index_add``: ``x`` with ``source`` added at positions ``index`` (1-D) along ``axis``; repeated
    indices add up. The result is a scatter: return it from the function."""
    (a,) = normalize_axes((axis,), x.ndim, "pt.index_add")
    if index.ndim != 1:
        raise ShapeError("pt.index_add: index must be 1-D", param="index", expected="1 dimension",
                         got=index.shape)  # fmt: skip
    return _scatter_of(x, [slice(None)] * a + [index], source, "pt.index_add")


def bincount(x: Array, weights: Any = None, *, length: int) -> Array:
    """``np.bincount(x, weights, minlength=length)`` with a fixed ``length`` (the result's size may not depend
    on the data): counts (or summed weights) of each value in ``[0, length)``; a value outside is a
    ``pt.IndexError`` at the call (a negative one is reported as ``length``). The result is a scatter: return it
    from the function."""
    from pypto import dtypes
    from pypto.array.graph import binary, where

    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise ShapeError("pt.bincount: length must be a non-negative int", param="length", expected="an int >= 0",
                         got=length)  # fmt: skip
    if x.ndim != 1 or not x.dtype.is_int:
        raise TracingError(f"pt.bincount: x must be a 1-D integer array, got {x.dtype}{list(x.shape)}", user_loc())
    dt = dtypes.int64 if weights is None else dtypes.promote(getattr(weights, "dtype", dtypes.float32), dtypes.float32)
    base = Array("fill", (), 0, (length,), dt)
    safe = where(binary("lt", x, 0), length, x)  # a negative value: out of bounds, not counted from the end
    return _scatter_of(base, [safe], 1 if weights is None else weights, "pt.bincount")


def histogram(x: Array, bins: int = 10, range: tuple[float, float] | None = None, weights: Any = None,
              density: bool = False) -> Array:  # fmt: skip
    """``np.histogram(x, bins, range, weights)[0]`` for ``bins`` equal bins over a fixed ``range=(lo, hi)``: the
    count (or summed weights) of the values in each bin ``[lo + k * w, lo + (k + 1) * w)``, the last bin closed
    (``hi`` counts in it); values outside the range and NaN are left out. Bins are assigned as NumPy assigns
    them (in float64, with its correction at the edges), so the counts are NumPy's. The edges are
    ``np.linspace(lo, hi, bins + 1)``. The result is a scatter: return it from the function."""
    from pypto import dtypes
    from pypto.array.graph import binary, cast, where

    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ShapeError("pt.histogram: bins must be a positive int (equal bins)", param="bins",
                         expected="an int >= 1 (bin edges as an array are not supported)", got=bins)  # fmt: skip
    if range is None:
        raise TracingError("pt.histogram: pass range=(lo, hi); a range taken from the data's minimum and maximum "
                           "would make the bins depend on the data", user_loc(),
                           "compute the range first (e.g. with NumPy) and pass it")  # fmt: skip
    try:
        lo, hi = (float(v) for v in range)
    except (TypeError, ValueError):
        raise ShapeError("pt.histogram: range must be two numbers (lo, hi)", param="range",
                         expected="(lo, hi) with lo <= hi", got=range) from None  # fmt: skip
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ShapeError("pt.histogram: range must be finite with lo <= hi", param="range",
                         expected="(lo, hi) with lo <= hi, both finite", got=range)  # fmt: skip
    if density:
        raise TracingError("pt.histogram: density=True is not supported", user_loc(),
                           "divide the counts by counts.sum() * (hi - lo) / bins")  # fmt: skip
    if lo == hi:  # NumPy widens an empty range by 0.5 on each side
        lo, hi = lo - 0.5, hi + 0.5
    if x.dtype.is_complex:
        raise TracingError(f"pt.histogram: x must be real, got {x.dtype}", user_loc())
    flat = reshape(x, (-1,)) if x.ndim != 1 else x
    v = cast(flat, dtypes.float64)
    step, norm = (hi - lo) / bins, bins / (hi - lo)
    valid = binary("and", binary("ge", v, lo), binary("le", v, hi))
    k = cast(binary("floordiv", where(valid, binary("mul", binary("sub", v, lo), norm), 0.0), 1.0), dtypes.int64)
    k = where(binary("eq", k, bins), bins - 1, k)

    def edge(i: Array) -> Array:  # np.linspace(lo, hi, bins + 1)[i]: i * step + lo, the last one hi exactly
        # the product is rounded before lo is added, as NumPy does: adding 0.0 (not foldable: -0.0 + 0.0 is
        # +0.0) makes a fused multiply-add of it the rounded product, and the sum cannot fuse with it
        product = binary("add", binary("mul", cast(i, dtypes.float64), step), 0.0)
        return where(binary("eq", i, bins), hi, binary("add", product, lo))

    k = where(binary("lt", v, edge(k)), binary("sub", k, 1), k)
    up = binary("and", binary("ge", v, edge(binary("add", k, 1))), binary("ne", k, bins - 1))
    k = where(valid, where(up, binary("add", k, 1), k), 0)
    if weights is None:
        dt, one = dtypes.int64, where(valid, 1, 0)
    else:
        w = reshape(weights, (-1,)) if getattr(weights, "ndim", 1) != 1 else weights
        dt = dtypes.promote(getattr(w, "dtype", dtypes.float64), dtypes.float32)
        one = where(valid, w, 0)
    base = Array("fill", (), 0, (bins,), dt)
    return _scatter_of(base, [k], one, "pt.histogram")


def embedding(indices: Array, table: Array) -> Array:
    """An embedding lookup: row ``indices[...]`` of ``table`` (``table[indices]``), shaped ``indices.shape +
    table.shape[1:]``; its gradient scatters into ``table``'s rows."""
    return _advanced(table, [indices])


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
