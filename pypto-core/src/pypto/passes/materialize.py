"""Temporaries: compute into a scratch buffer what cannot be computed inside its loop nest.

Three cases need one:

* a store that reads its own output at another index or inside a reduction (``x[i] = x[i + 1]``):
  the value goes to a temporary first, then is copied, as if the right-hand side were evaluated
  completely before the assignment (NumPy semantics);
* a reduction whose free axes are not the outer loops of its nest (a column maximum used inside a
  row-major nest), or that has no free axes at all inside a nest with loops: it is computed once
  in a nest of its own instead of once per point. Full reductions computed this way are split
  into parallel blocks later;
* a scan its nest cannot carry (inside a reduction, or along another axis than the nest's scan axis);
* a sort that is not the whole value of a store at plain axes (a nest computes a sort alone, from a row of
  scratch), and the row a sort reads when computing it needs a reduction, a scan or another sort.
"""

from __future__ import annotations

from pypto.ir.affine import Affine
from pypto.ir.kernel import Group, KernelIR, Temp
from pypto.ir.nodes import (
    Expr,
    Load,
    Node,
    Reduce,
    Scan,
    Sort,
    Store,
    free_axes,
    postorder,
    sorts,
    top_reduces,
    transform,
)
from pypto.ir.ops import LAST
from pypto.passes.fuse import accesses, scan_of, sort_of, store_loops


def _replace(e: Expr, old: Expr, new: Expr) -> Expr:
    def fn(n: Node) -> Node | None:
        return new if n == old else None

    r = transform(e, fn)
    assert isinstance(r, Expr)
    return r


class _Temps:
    def __init__(self, k: KernelIR):
        self.k = k
        self.temps: list[Temp] = list(k.temps)

    def new(self, dtype, shape: tuple[Affine, ...]) -> str:
        name = f"_t{len(self.temps)}"
        self.temps.append(Temp(name, dtype, shape))
        return name


def _self_dependent(s: Store) -> bool:
    return any(t == s.tensor and (idx != s.index or red) for t, idx, red in accesses(s))


def _misplaced_scans(value: Expr, g: Group) -> list[Scan]:
    """The scans of ``value`` its nest cannot carry: one inside a reduction's body (each step of the reduction
    would need the scan at another point), or along another axis or direction than the nest's (its axis is not
    the nest's last loop). Each is computed into a temporary first, in a nest of its own."""
    sig = scan_of(g.stores[0])
    if sig is None:  # (a store whose every scan is inside a reduction)
        sig = (-1, False)
    inside = {id(n) for r in top_reduces(value) for n in postorder(r.body)}
    # a loop's result reads its scan at the last step: the reduction's own nest carries it
    results = {id(r.body) for r in top_reduces(value) if r.op == LAST}
    return [
        n for n in postorder(value)
        if isinstance(n, Scan) and id(n) not in results
        and (id(n) in inside or (n.axis, n.reverse) != sig or n.axis not in g.loops[-1:])
    ]  # fmt: skip


def _sort_rows(s: Store, g: Group, temps: _Temps, extents: dict) -> tuple[Store, list[Group]]:
    """A store whose value has a sort: as it is when it stores one sort whole at plain axes, reading a row that
    needs nothing computed along it; otherwise with a temporary for the first sort that is not so placed (or for
    the row of the one that is), in a nest of its own before it."""
    whole = sort_of(s)
    plain = [ix.plain_axis() for ix in s.index]
    if whole is not None and None not in plain and whole.out in plain:
        body = whole.body
        if not any(isinstance(n, (Reduce, Scan, Sort)) for n in postorder(body)):
            return s, []
        axes = tuple(sorted(free_axes(body) - {whole.axis}, key=lambda a: (a not in g.loops, a))) + (whole.axis,)
        name = temps.new(body.dtype, tuple(extents[a] for a in axes))
        tindex = tuple(Affine.axis(a) for a in axes)
        row = Group((Store(name, tindex, body, loc=whole.loc),), axes)
        value = _replace(s.value, body, Load(name, tindex, dtype=body.dtype, loc=whole.loc))
        return Store(s.tensor, s.index, value, loc=s.loc), [row]
    c = next(n for n in postorder(s.value) if isinstance(n, Sort))  # inner ones first
    axes = tuple(sorted(free_axes(c) - {c.out}, key=lambda a: (a not in g.loops, a))) + (c.out,)
    name = temps.new(c.dtype, tuple(extents[a] for a in axes))
    tindex = tuple(Affine.axis(a) for a in axes)
    nest = Group((Store(name, tindex, c, loc=c.loc),), axes)
    value = _replace(s.value, c, Load(name, tindex, dtype=c.dtype, loc=c.loc))
    return Store(s.tensor, s.index, value, loc=s.loc), [nest]


def materialize_temporaries(k: KernelIR) -> KernelIR:
    """Introduce temporaries for self-dependent stores and misplaced reductions."""
    assert k.groups is not None
    temps = _Temps(k)
    extents = {a.index: a.extent for a in k.axes}
    out: list[Group] = []
    work = list(k.groups)
    while work:
        g = work.pop(0)
        new_before: list[Group] = []
        stores: list[Store] = []
        for s in g.stores:
            if _self_dependent(s):
                loops = store_loops(s)
                name = temps.new(s.value.dtype, tuple(extents[a] for a in loops) or (Affine.constant(1),))
                tindex = tuple(Affine.axis(a) for a in loops) or (Affine.constant(0),)
                new_before.append(Group((Store(name, tindex, s.value, loc=s.loc),), loops))
                s = Store(s.tensor, s.index, Load(name, tindex, dtype=s.value.dtype, loc=s.loc), loc=s.loc)
            value = s.value
            if sorts(value):
                s, before = _sort_rows(s, g, temps, extents)
                if before:
                    new_before += before
                    stores.append(s)
                    continue
                value = s.value
            for r in top_reduces(value):
                free = free_axes(r)
                prefix = set(g.loops[: len(free)])
                if g.loops and (not free or free != prefix):
                    loops = tuple(a for a in g.loops if a in free)
                    name = temps.new(r.dtype, tuple(extents[a] for a in loops) or (Affine.constant(1),))
                    tindex = tuple(Affine.axis(a) for a in loops) or (Affine.constant(0),)
                    new_before.append(Group((Store(name, tindex, r, loc=r.loc),), loops))
                    value = _replace(value, r, Load(name, tindex, dtype=r.dtype, loc=r.loc))
            for c in _misplaced_scans(value, g):
                # over every axis it depends on: the nest's, then those of the reductions it is inside (a scan in
                # the body of a sum over rows varies along the rows too), its own last
                free = free_axes(c) - {c.axis}
                loops = (*(a for a in g.loops if a in free), *sorted(free - set(g.loops)), c.axis)
                name = temps.new(c.dtype, tuple(extents[a] for a in loops))
                tindex = tuple(Affine.axis(a) for a in loops)
                new_before.append(Group((Store(name, tindex, c, loc=c.loc),), loops))
                value = _replace(value, c, Load(name, tindex, dtype=c.dtype, loc=c.loc))
                break  # the others are found again in the rewritten value
            stores.append(Store(s.tensor, s.index, value, loc=s.loc) if value is not s.value else s)
        g = Group(tuple(stores), g.loops)
        if new_before:
            # the new nests may need temporaries of their own: process them before ``g``
            work[:0] = new_before + [g]
            continue
        out.append(g)
    return k.replace(groups=tuple(out), temps=tuple(temps.temps))
