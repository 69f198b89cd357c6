"""Fusion: group consecutive stores over the same iteration domain into one loop nest.

A store's domain is the set of axes in its output index; its loops run in the order the output
index names them (so writes are contiguous). A store joins the previous group when the domains
match and no memory hazard forbids it: every tensor that one store writes and another reads or
writes must be accessed at the very same index, outside reductions, so each point of the nest
only sees its own values. Values written earlier in a group are forwarded to later reads
(no reload from memory).
"""

from __future__ import annotations

from pypto.ir.affine import Affine
from pypto.ir.kernel import Group, KernelIR
from pypto.ir.nodes import (
    Binary,
    Cast,
    Expr,
    Gather,
    Load,
    Node,
    Reduce,
    Scan,
    Sort,
    Store,
    children,
    free_axes,
    load_accesses,
    postorder,
    scans,
    sorts,
    top_reduces,
    transform,
)


def scan_of(s: Store) -> tuple[int, bool] | None:
    """``(axis, reverse)`` of the outermost scan a store computes in its nest (in no reduction's or other scan's
    body), or None: the nest carries its accumulator along that axis, whose loop runs last, in order."""
    stack, seen = [s.value], set()
    while stack:  # from the root down: the first scan met is in no other scan's body
        n = stack.pop()
        if id(n) in seen or isinstance(n, Reduce):
            continue
        seen.add(id(n))
        if isinstance(n, Scan):
            return n.axis, n.reverse
        stack.extend(reversed(children(n)))
    return None


def sort_of(s: Store) -> Sort | None:
    """The sort a store computes whole (its value a :class:`Sort`, through casts), or None."""
    v = s.value
    while isinstance(v, Cast):
        v = v.x
    return v if isinstance(v, Sort) else None


def sort_key(c: Sort) -> tuple:
    """What the orderings of one row share: a nest computes them together (``pt.topk``'s values and indices)."""
    return (c.body, c.axis, c.out, c.descending, c.top)


def store_loops(s: Store) -> tuple[int, ...]:
    """The axes of a store's domain, in the order its output index mentions them, those of one index by
    decreasing stride (the axis it scans along, if any, last: see :func:`scan_of`)."""
    order: list[int] = []
    for ix in s.index:  # within one index (a flattened one: i1 + 32768*i3 + 512*i4), the largest stride first
        for a, _ in sorted(ix.axes, key=lambda t: -abs(t[1])):
            if a not in order:
                order.append(a)
    scan = scan_of(s)
    if scan is not None and scan[0] in order:
        order.remove(scan[0])
        order.append(scan[0])
    return tuple(order)


def accesses(s: Store) -> list[tuple[str, tuple[Affine, ...] | None, bool]]:
    """(tensor, index, inside a reduction) for every load in the store's value; a gather reads anywhere (its
    index None: never pointwise, so a store gathering from a tensor never joins the nest writing it)."""
    out: list[tuple[str, tuple[Affine, ...] | None, bool]] = list(load_accesses(s.value))
    out += [(n.tensor, None, True) for n in postorder(s.value) if isinstance(n, Gather)]
    return out


def _pointwise(reads, tensor: str, index) -> bool:
    return all(idx == index and not red for t, idx, red in reads if t == tensor)


def is_contraction(s: Store) -> bool:
    """Whether ``s`` stores ``f(reduce_sum(a * b, axis=k))``: a product summed over one axis (a matmul)."""
    reds = top_reduces(s.value)
    if len(reds) != 1 or reds[0].op != "sum" or len(reds[0].axes) != 1 or scans(s.value):
        return False
    if any(isinstance(n, Gather) for n in postorder(reds[0].body)):  # operands read at computed indices: a loop
        return False
    body = reds[0].body
    while isinstance(body, Cast):
        body = body.x
    if not (isinstance(body, Binary) and body.op == "mul"):
        return False
    out = {a for ix in s.index for a in ix.axis_set()}
    fa, fb = free_axes(body.a) & out, free_axes(body.b) & out
    return bool(fa - fb) and bool(fb - fa)  # each factor has an output axis the other lacks (not x * x)


def can_join(group: list[Store], s: Store) -> bool:
    """Whether ``s`` may run in the same loop nest as the stores of ``group``."""
    if set(store_loops(group[0])) != set(store_loops(s)) or not store_loops(s):
        return False
    if scan_of(s) != scan_of(group[0]):  # a nest carries one scan axis, in one direction
        return False
    if sorts(s.value) or any(sorts(g.value) for g in group):  # a sort runs alone (with the others of its row)
        mine, first = sort_of(s), sort_of(group[0])
        if mine is None or first is None or sort_key(mine) != sort_key(first):
            return False
    if is_contraction(s) or any(is_contraction(g) for g in group):
        return False  # a contraction runs alone in its nest, where its schedule tiles it
    reads_s = accesses(s)
    for g in group:
        if g.tensor == s.tensor and g.index != s.index:
            return False
        # s reads what g wrote / g reads what s writes: both must be pointwise at the same index
        if any(t == g.tensor for t, _, _ in reads_s) and not _pointwise(reads_s, g.tensor, g.index):
            return False
        reads_g = accesses(g)
        if any(t == s.tensor for t, _, _ in reads_g) and not _pointwise(reads_g, s.tensor, s.index):
            return False
    return True


def _forward(group: list[Store], s: Store) -> Store:
    """Replace loads of values written earlier in the group by the written values."""
    written = {(g.tensor, g.index): g.value for g in group}

    def fn(n: Node) -> Node | None:
        if isinstance(n, Load) and (n.tensor, n.index) in written:
            v = written[(n.tensor, n.index)]
            return v if v.dtype == n.dtype else Cast(v, dtype=n.dtype, loc=n.loc)
        return None

    if not any(t for t, _, _ in accesses(s) if any(t == g.tensor for g in group)):
        return s
    v = transform(s.value, fn)
    assert isinstance(v, Expr)
    return Store(s.tensor, s.index, v, loc=s.loc)


def fuse(k: KernelIR) -> KernelIR:
    """Group stores into loop nests (see module docstring)."""
    groups: list[list[Store]] = []
    for s in k.stores:
        if groups and can_join(groups[-1], s):
            groups[-1].append(_forward(groups[-1], s))
        else:
            groups.append([s])
    return k.replace(groups=tuple(Group(tuple(g), store_loops(g[0])) for g in groups))
