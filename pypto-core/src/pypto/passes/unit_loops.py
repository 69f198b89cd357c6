"""The ``unit_loops`` pass: loops of one iteration leave their nests.

An axis of constant extent 1 (a batch of one sequence, a single head, a size-1 dimension kept for
broadcasting) is a loop of one iteration. As the outermost loop of a nest it is the loop the schedule
runs on threads, so the whole nest ran on one thread: a Llama block on one sequence used one core.
Its index is 0 at every point, so the pass writes 0 for it in every index of the nest and drops the
loop; the next loop becomes the outermost. A nest whose loops all have one iteration keeps its
innermost; the loop a scan is carried along stays. Reductions over such an axis are left as they are (they cost one iteration).
"""

from __future__ import annotations

from dataclasses import replace

from pypto.ir.affine import Affine
from pypto.ir.kernel import Group, KernelIR
from pypto.ir.nodes import Store, scans, sorts, substitute_axes


def _without(g: Group, axes: set[int]) -> Group:
    zero = {a: Affine.constant(0) for a in axes}
    memo: dict = {}
    stores = tuple(
        Store(
            s.tensor, tuple(ix.substitute_axes(zero) for ix in s.index), substitute_axes(s.value, zero, memo), loc=s.loc
        )  # fmt: skip
        for s in g.stores
    )
    return replace(g, stores=stores, loops=tuple(a for a in g.loops if a not in axes))


def drop_unit_loops(k: KernelIR) -> KernelIR:
    """Every nest without its loops of constant extent 1 (see the module docstring)."""
    if k.groups is None:
        return k
    unit = {a.index for a in k.axes if a.extent is not None and a.extent.is_const and a.extent.const == 1}
    if not unit:
        return k
    groups = []
    for g in k.groups:
        carried = {n.axis for s in g.stores for n in scans(s.value)}  # a scan's loop stays (it carries the scan)
        carried |= {n.out for s in g.stores for n in sorts(s.value)}  # and a sort's positions' loop
        drop = [a for a in g.loops if a in unit and a not in carried]
        if len(drop) == len(g.loops):
            drop = drop[:-1]
        groups.append(_without(g, set(drop)) if drop and g.split is None and g.online is None else g)
    return k.replace(groups=tuple(groups))
