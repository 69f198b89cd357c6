"""Shape inference: axis extents, the runtime checks on sizes and indices, and store validity.

An axis's extent is the size of a dimension it indexes *plainly* (``x[i]``, not ``x[i + 1]``),
outputs first. Other plain uses must be at least as large: sizes declared with different dims
become a :class:`DimEqual` check at call time, ``N + 1`` against ``N`` needs none. Every other index
gets an :class:`IndexInBounds` check, so generated code never reads or writes out of bounds. A gather's
affine indices count as loads' do; each index it computes from data gets a :class:`GatherInBounds` check
on the arguments' values.
"""

from __future__ import annotations

from pypto.errors import TracingError
from pypto.ir.affine import Affine
from pypto.ir.kernel import AxisInfo, AxisNotEmpty, DimAtMost, DimEqual, GatherInBounds, IndexInBounds, KernelIR
from pypto.ir.nodes import Expr, Extent, Gather, Index, Load, Scatter, Sort, Store, free_axes, postorder, transform


def _describe(tensor: str, pos: int) -> str:
    return f"{tensor}.shape[{pos}]"


def infer_shapes(k: KernelIR) -> KernelIR:
    """Infer axis extents, validate stores, and record the runtime size and bounds checks."""
    # (axis) -> list of (size, "x.shape[0]", loc) for each plain use, stores first
    plain: dict[int, list[tuple[Affine, str, object]]] = {a.index: [] for a in k.axes}
    accesses: list[tuple[str, tuple[Affine, ...], object]] = []
    for s in k.stores:
        accesses.append((s.tensor, s.index, s.loc))
    # (tensor, position, affine index, loc) of every affine index of a gather
    partial: list[tuple[str, int, Affine, object]] = []
    for c in k.scatters:  # a scatter's affine indices count as a gather's
        partial += [(c.tensor, pos, ix.affine, c.loc) for pos, ix in enumerate(c.index) if isinstance(ix, Index)]
    for s in (*k.stores, *k.scatters):
        for e in postorder(s):
            if isinstance(e, Load):
                accesses.append((e.tensor, e.index, e.loc))
            elif isinstance(e, Gather):
                partial += [
                    (e.tensor, pos, ix.affine, e.loc) for pos, ix in enumerate(e.index) if isinstance(ix, Index)
                ]
    entries = [(tensor, pos, ix, loc) for tensor, index, loc in accesses for pos, ix in enumerate(index)] + partial
    for tensor, pos, ix, loc in entries:
        a = ix.plain_axis()
        if a is not None:
            plain[a].append((k.buffer(tensor).shape[pos], _describe(tensor, pos), loc))

    checks: list = [c for c in k.checks if isinstance(c, AxisNotEmpty)]  # (the tracer's: pt.argmax)
    axes = []
    for info in k.axes:
        uses = plain[info.index]
        if info.extent is not None:  # declared by whoever built the kernel (the array API knows its sizes)
            uses = [(info.extent, info.extent_source or "its declared extent", k.loc), *uses]
        if not uses:
            raise TracingError(
                f"cannot infer the extent of axis '{info.name}' (pt.axis({info.index})): it never indexes a tensor "
                "dimension on its own",
                k.loc,
                f"index some tensor with '{info.name}' alone (e.g. x[{info.name}]) so its size is known",
            )
        size, source, _ = uses[0]
        seen = {size}
        for other, other_src, loc in uses[1:]:
            if other in seen:
                continue
            seen.add(other)
            diff = other - size
            if diff.is_const:
                if diff.const >= 0:
                    continue  # e.g. x: (N + 1,) indexed by an axis of extent N: always in bounds
                raise TracingError(
                    f"axis '{info.name}' runs over {source} = {size} but also indexes {other_src} = {other}, "
                    "which is smaller",
                    loc,  # type: ignore[arg-type]
                    "index the smaller tensor with an offset or a different axis, or fix the declared shapes",
                )
            checks.append(DimEqual(size, source, other, other_src, info.name))
        axes.append(AxisInfo(info.index, info.name, size, source))
    k = k.replace(axes=tuple(axes))
    extents = {a.index: a.extent for a in axes}
    checks += _sort_checks(k, extents)

    def subst_extent(n):
        if isinstance(n, Extent):
            return Index(extents[n.axis], dtype=n.dtype, loc=n.loc)
        return None

    stores = []
    memo: dict = {}
    for s in k.stores:
        value = transform(s.value, subst_extent, memo)
        assert isinstance(value, Expr)
        _validate_store(k, s, value, extents)
        stores.append(Store(s.tensor, s.index, value, loc=s.loc))
    scatters = [transform(c, subst_extent, memo) for c in k.scatters]

    seen_checks = set()
    for tensor, pos, ix, loc in entries:
        shape = k.buffer(tensor).shape
        if ix.plain_axis() is not None:
            continue
        key = (tensor, pos, ix)
        if key in seen_checks:
            continue
        seen_checks.add(key)
        if not ix.has_axes and ix.is_const and shape[pos].is_const:
            if not 0 <= ix.const < shape[pos].const:
                raise TracingError(
                    f"index {ix.const} is out of bounds for {_describe(tensor, pos)} = {shape[pos].const}", loc
                )  # type: ignore[arg-type]
            continue
        checks.append(IndexInBounds(tensor, pos, ix, shape[pos], loc))  # type: ignore[arg-type]
    gathered = set()
    for s in (*stores, *scatters):
        for e in (*postorder(s), s):
            if isinstance(e, (Gather, Scatter)):
                for pos, ix in enumerate(e.index):
                    if not isinstance(ix, Index) and (e.tensor, pos, ix) not in gathered:
                        gathered.add((e.tensor, pos, ix))
                        checks.append(GatherInBounds(e.tensor, pos, ix, k.buffer(e.tensor).shape[pos], e.loc))
    return k.replace(stores=tuple(stores), checks=tuple(checks), scatters=tuple(scatters))


def _sort_checks(k: KernelIR, extents: dict) -> list:
    """A sort numbers as many positions as its row has (``pt.topk``: at most as many): checked here when both
    sizes are known, at each call otherwise."""
    out: list = []
    seen = set()
    for s in k.stores:
        for e in postorder(s.value):
            if not isinstance(e, Sort) or (e.axis, e.out, e.top) in seen:
                continue
            seen.add((e.axis, e.out, e.top))
            n, m = extents[e.axis], extents[e.out]
            src_n, src_m = k.axis(e.axis).extent_source, k.axis(e.out).extent_source
            what = "pt.topk" if e.top else "pt.sort" if e.which == "values" else "pt.argsort"
            diff = n - m
            if diff.is_const and (diff.const >= 0 if e.top else diff.const == 0):
                continue
            if diff.is_const:
                raise TracingError(
                    f"{what}: the results' axis '{k.axis_name(e.out)}' has {m} points ({src_m}) but the row has {n} "
                    f"({src_n})" + (": k is larger than the row" if e.top else ""),
                    e.loc,
                    "keep at most as many values as a row has"
                    if e.top
                    else "store the result in an array whose size along that axis is the row's",
                )
            if e.top:
                out.append(DimAtMost(m, src_m, n, src_n, what, e.loc))
            else:
                out.append(DimEqual(n, src_n, m, src_m, k.axis_name(e.out)))
    return out


def _injective(ix: Affine, extents: dict) -> bool:
    """Whether distinct points of ``ix``'s axes give distinct values (a mixed-radix index such as
    ``12*i + 4*j + k`` with j < 3 and k < 4), judged from static extents."""
    terms = []
    for a, c in ix.axes:
        n = extents.get(a)
        if n is None or not n.is_const:
            return False
        terms.append((abs(c), n.const))
    span = 0  # the largest value the smaller terms reach
    for c, n in sorted(terms):
        if c <= span:
            return False
        span += c * max(n - 1, 0)
    return True


def _validate_store(k: KernelIR, s: Store, value: Expr, extents: dict) -> None:
    lhs_axes: set[int] = set()
    for pos, ix in enumerate(s.index):
        if len(ix.axes) > 1 and not _injective(ix, extents):
            raise TracingError(
                f"store into '{s.tensor}': index {pos} ({ix.format(k.axis_name)}) combines several axes, so several "
                "points would write the same element",
                s.loc,
                "index the output with one axis per dimension (or, with static sizes, a mixed-radix index such as "
                "i * 4 + j with j < 4); accumulate with pt.reduce_sum(...) instead",
            )
        lhs_axes |= ix.axis_set()
    extra = free_axes(value) - lhs_axes
    if extra:
        names = ", ".join(f"'{k.axis_name(a)}'" for a in sorted(extra))
        raise TracingError(
            f"store into '{s.tensor}': axis {names} appears on the right-hand side but not in the output's index",
            s.loc,
            "reduce over it (pt.reduce_sum(expr, axis=...)) or index the output with it",
        )
