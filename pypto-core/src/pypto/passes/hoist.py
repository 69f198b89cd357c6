"""Broadcast values computed once: what a nest would compute again for every step of an outer loop gets a nest of its own.

A value that depends on some of a nest's loops is computed at every point of the nest unless the C
compiler lifts it out of the loops it does not depend on, which it does only for the innermost ones.
``pt.tanh(b)[None, :] * w`` (a row vector broadcast down the rows of ``w``) computes ``tanh(b[j])`` for
every ``i``: ``M`` times the work of its ``N`` values; so does ``exp(x[k])`` inside a maximum over ``k``
taken for every row ``i``. This pass stores such a value in a temporary ``_t[j]`` computed by a nest of
its own before the nest that reads it, when the work saved outweighs the temporary, by this estimate
(work in multiply-adds per point from the op table, ``work``; a load or store of a temporary is one):

    inline:  E x W            E: the value's evaluations in the nest (the product of the extents of the
                                 nest's loops down to the innermost loop it depends on)
    stored:  I x (W + 2) + E  I: the points of the value (the extents of the loops it depends on); each is
                                 computed, stored and loaded back once, then read E times

A value of work below :data:`MIN_WORK` (a few additions) stays inline: its arithmetic hides under the
nest's memory traffic. Sizes known only at run time count as large. Each decision, taken or not, is
printed with its estimate under the nest it concerns (``kernel.ir("hoist_broadcasts")`` and every later
tensor stage, ``schedule`` included). A value an earlier nest already stored, whose inputs no nest has written
since, is read from there (a layer norm's ``rsqrt(var + eps)``, needed by three nests of its gradient, is
computed once).
"""

from __future__ import annotations

from dataclasses import replace

from pypto.ir.affine import Affine
from pypto.ir.kernel import Group, KernelIR
from pypto.ir.nodes import (
    Binary,
    Cast,
    Const,
    Expr,
    Gather,
    Index,
    Load,
    Reduce,
    Scalar,
    Scan,
    Sort,
    Store,
    Unary,
    Where,
    children,
    free_axes,
    loads,
    postorder,
)
from pypto.ir.ops import BINARY, MATH
from pypto.passes.materialize import _replace, _Temps

MIN_WORK = 4  # multiply-adds per point below which recomputing is kept (one division or transcendental is more)


def work(e: Expr) -> int:
    """Estimated multiply-adds per point of computing ``e`` (each distinct subexpression once; loads free)."""
    total = 0
    for n in postorder(e):
        if isinstance(n, Unary):
            f = MATH.get(n.op)
            total += f.work if f is not None else 1
        elif isinstance(n, Binary):
            total += BINARY[n.op].work
        elif isinstance(n, Where):
            total += 1
    return total


def _computed(e: Expr) -> bool:
    """Whether ``e`` computes something (not a load, a constant, an index, or a conversion of one)."""
    while isinstance(e, Cast):
        e = e.x
    return not isinstance(e, (Load, Const, Index, Scalar))


def _top(e: Expr) -> str:
    """The name of the operation ``e`` ends with."""
    while isinstance(e, Cast):
        e = e.x
    return e.op if isinstance(e, (Unary, Binary)) else "where"


def _has_reduce(e: Expr) -> bool:
    return any(isinstance(n, (Reduce, Scan, Sort)) for n in postorder(e))


def _count(axes, extents: dict) -> tuple[int, list[str]]:
    """The product of the known extents of ``axes``, and the names of the unknown ones."""
    known, unknown = 1, []
    for a in axes:
        ext: Affine | None = extents.get(a)
        if ext is not None and ext.is_const:
            known *= ext.const
        else:
            unknown.append(str(ext) if ext is not None else f"axis {a}")
    return known, unknown


def _fmt(n: int, unknown: list[str]) -> str:
    return " x ".join(([f"{n:,}"] if n != 1 or not unknown else []) + unknown)


class _Hoister:
    def __init__(self, k: KernelIR, temps: _Temps):
        self.k = k
        self.temps = temps
        self.extents = {a.index: a.extent for a in k.axes}
        # values stored by an earlier nest that still hold (no nest since wrote what they read): (value, its
        # loops) -> (the temporary, the tensors it read)
        self.held: dict[tuple[Expr, tuple[int, ...]], tuple[str, frozenset[str]]] = {}

    def written(self, g: Group) -> None:
        """Forget the stored values that read what ``g`` writes."""
        out = {s.tensor for s in g.stores}
        self.held = {key: v for key, v in self.held.items() if not (v[1] & out)}

    def name(self, a: int) -> str:
        return self.k.axis_name(a)

    def candidates(self, g: Group) -> list[tuple[Expr, tuple[int, ...], str, bool]]:
        """(value, its loops in nest order, the decision's note, whether to store it) for each value of ``g``
        that the nest would compute again at every step of a loop outer to one it depends on."""
        written = {s.tensor for s in g.stores}
        found: list[tuple[Expr, tuple[int, ...], str, bool]] = []
        seen: set[Expr] = set()

        def visit(e: Expr, order: tuple[int, ...]) -> None:
            if isinstance(e, Sort):  # its row is read once per point of the nest's other axes
                return
            if isinstance(e, Reduce):
                visit(e.body, order + tuple(a for a in e.axes if a not in order))
                return
            if _computed(e) and not _has_reduce(e) and e not in seen:
                deps = free_axes(e)
                pos = [order.index(a) for a in deps if a in order]
                if deps and len(pos) == len(deps):
                    last = max(pos)
                    outer = [a for a in order[:last] if a not in deps]
                    if outer:  # a loop outside the innermost one it depends on: computed again at each step
                        loops = tuple(a for a in order if a in deps)
                        if not ({ld.tensor for ld in loads(e)} & written):
                            seen.add(e)
                            found.append((e, loops, *self.decide(e, loops, order[: last + 1])))
                            return
            for c in children(e):
                visit(c, order)

        for s in g.stores:
            visit(s.value, g.loops)
        return found

    def decide(self, e: Expr, loops: tuple[int, ...], evaluated: tuple[int, ...]) -> tuple[str, bool]:
        w = work(e)
        points, p_unknown = _count(loops, self.extents)
        evals, e_unknown = _count(evaluated, self.extents)
        again = [a for a in evaluated if a not in loops]
        times = _fmt(*_count(again, self.extents))
        what = f"{_top(e)} over ({', '.join(self.name(a) for a in loops)})"
        each = f"{what}, work {w}/point, evaluated {times} times per point inline"
        if w < MIN_WORK:
            return f"recomputed: {each} (kept inline: below {MIN_WORK} multiply-adds a point)", False
        if not p_unknown and not e_unknown:
            inline, stored = evals * w, points * (w + 2) + evals
            est = f"est. {inline:,} inline vs {stored:,} stored"
            if stored >= inline:
                return f"recomputed: {each} ({est}: kept inline)", False
            return f"computed once: {each} ({est})", True
        return f"computed once: {each} (sizes known at run time: a large saving assumed)", True

    def run(self, g: Group) -> tuple[list[Group], Group]:
        before: list[Group] = []
        notes: list[str] = []
        stores = list(g.stores)
        for e, loops, note, store in self.candidates(g):
            if not store:
                notes.append(note)
                continue
            assert e.dtype is not None
            index = tuple(Affine.axis(a) for a in loops)
            held = self.held.get((e, loops))
            if held is not None:  # the same value, stored by an earlier nest and still valid: read there
                name = held[0]
                notes.append(f"{name}: {_top(e)} over ({', '.join(self.name(a) for a in loops)}) read from the "
                             "nest that computed it for an earlier one")  # fmt: skip
            else:
                name = self.temps.new(e.dtype, tuple(self.extents[a] for a in loops))
                before.append(Group((Store(name, index, e, loc=e.loc),), loops, notes=(f"{name}: {note}",)))
                if not any(isinstance(n, Gather) for n in postorder(e)):  # (its reads: its loads alone)
                    self.held[(e, loops)] = (name, frozenset(ld.tensor for ld in loads(e)))
            load = Load(name, index, dtype=e.dtype, loc=e.loc)
            stores = [Store(s.tensor, s.index, _replace(s.value, e, load), loc=s.loc) for s in stores]
        return before, replace(g, stores=tuple(stores), notes=g.notes + tuple(notes))


def hoist_broadcasts(k: KernelIR) -> KernelIR:
    """Give each value a nest would compute again for every step of an outer loop a nest of its own, where the
    estimate says it pays (module docstring)."""
    assert k.groups is not None
    temps = _Temps(k)
    h = _Hoister(k, temps)
    out: list[Group] = []
    for g in k.groups:
        if not g.loops:
            out.append(g)
            continue
        before, g = h.run(g)
        out += before + [g]
        h.written(g)
    if len(temps.temps) == len(k.temps) and all(a is b for a, b in zip(out, k.groups)) and len(out) == len(k.groups):
        return k
    return k.replace(groups=tuple(out), temps=tuple(temps.temps))


__all__ = ["MIN_WORK", "hoist_broadcasts", "work"]
