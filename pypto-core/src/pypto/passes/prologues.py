"""Contraction operands computed once: an elementwise producer of a contraction's factor gets a nest of its own.

A contraction ``reduce_sum(f(a[i, k]) * b[k, j], axis=k)`` written as it reads (``pt.silu(x) @ w``, a
causal mask applied to the scores before ``@ v``, a scaled operand) would evaluate ``f`` once per
multiply-add: M·N·K evaluations of a function of M·K values, in a loop no contraction kernel takes (the
register-tiled CPU kernel and the SIMT tiles kernels read plain operands). This pass stores the factor
``f(a[i, k])`` in a temporary ``_t[i, k]`` computed in a nest before the contraction's, which then reads
it like any operand: M·K evaluations, one extra write and read of M·K values, and the contraction at its
kernel's speed. A factor that is a load (or a conversion of one) is left alone. A store that combines several
contractions over the same outputs (SwiGLU's ``silu(x @ w1) * (x @ w3)``) gets each contraction in a nest
of its own, writing a temporary, and a nest that combines them; so does a contraction used by a nest of
several stores (a gradient storing a value and its flat copy), which no contraction kernel takes as it is.

A reduction is never computed twice. Fusion gives each contraction store a nest of its own, so a kernel
storing two values of one contraction (``t = pt.tanh(x @ w)`` stored in ``h``, and ``2 * t`` in ``h2``) had two
nests that each computed it. Now a later nest whose stores use the whole value an earlier nest stored, a
reduction among it, reads that output instead (``h2 = 2 * h[i, j]``; a column softmax's sums no longer
recompute the column max); one that shares only a contraction gets it through a temporary that a nest of
its own computes, read by both.

``kernel.ir("contraction_operands")`` shows the new nests; the schedule then treats the one it feeds as
a plain contraction.
"""

from __future__ import annotations

from pypto.ir.affine import Affine
from pypto.ir.kernel import Group, KernelIR
from pypto.ir.nodes import Cast, Expr, Load, Store, load_accesses, top_reduces
from pypto.passes.materialize import _replace, _Temps
from pypto.passes.schedule import _axes, _factors, contraction


def _plain(e: Expr) -> bool:
    """A load, possibly converted: what a contraction kernel reads as it is. A value converted to another type
    of its kind is not (bfloat16 to float32; float32 rounded to bfloat16 and widened again under
    ``pt.set_precision("mixed")``; float32 to float64 under ``"highest"``; int8 to int32): it is converted once,
    into a temporary, not once per multiply-add, and the contraction reads its own type."""
    while isinstance(e, Cast):
        src = e.x.dtype
        if src is not None and e.dtype is not None and src.kind == e.dtype.kind:
            return False
        e = e.x
    return isinstance(e, Load)


def _separate_contractions(g: Group, temps: _Temps, extents: dict) -> tuple[list[Group], Group] | None:
    """A nest whose stores combine contractions over its two inner loops with other work (``silu(x @ w1) *
    (x @ w3)``; a gradient that recomputes ``x @ w1`` next to ``dy @ w2.T`` and stores the result twice) as
    nests of their own, each into a temporary, and the nest combining the temporaries; None otherwise. A single
    store of a single contraction (its epilogue applied to it) is the contraction kernels' own case."""
    if len(g.loops) < 2:
        return None
    reds: list = []
    for s in g.stores:
        reds += [r for r in top_reduces(s.value) if r not in reds]
    if len(g.stores) == 1 and len(reds) < 2:
        return None
    index = tuple(Affine.axis(a) for a in g.loops)
    s0 = g.stores[0]
    apart = [r for r in reds if contraction(Group((Store(s0.tensor, index, r, loc=s0.loc),), g.loops)) is not None]
    if not apart:
        return None
    values, before = [s.value for s in g.stores], []
    for r in apart:
        assert r.dtype is not None
        name = temps.new(r.dtype, tuple(extents[a] for a in g.loops))
        before.append(Group((Store(name, index, r, loc=r.loc),), g.loops))
        values = [_replace(v, r, Load(name, index, dtype=r.dtype, loc=r.loc)) for v in values]
    stores = tuple(Store(s.tensor, s.index, v, loc=s.loc) for s, v in zip(g.stores, values))
    return before, Group(stores, g.loops)


def _computed_factors(g: Group, temps: _Temps, extents: dict) -> tuple[list[Group], Group] | None:
    """A contraction's factors that are computed (not loads) as nests of their own; None if there are none."""
    c = contraction(g)
    if c is None:
        return None
    (s,) = g.stores
    (r,) = top_reduces(s.value)
    pair = _factors(r.body)
    assert pair is not None
    value, before = s.value, []
    for f in pair:
        if _plain(f):
            continue
        axes = _axes(f)
        batch = [a for a in g.loops if a in axes and a not in (c.rows, c.cols)]
        own = (c.rows, c.red) if c.rows in axes else (c.red, c.cols)  # the operand's rows x columns
        loops = tuple(batch) + tuple(a for a in own if a in axes)
        if set(loops) != axes:  # reads an axis the contraction does not iterate as expected
            continue
        assert f.dtype is not None
        name = temps.new(f.dtype, tuple(extents[a] for a in loops))
        index = tuple(Affine.axis(a) for a in loops)
        before.append(Group((Store(name, index, f, loc=s.loc),), loops))
        value = _replace(value, f, Load(name, index, dtype=f.dtype, loc=f.loc))
    if not before:
        return None
    return before, Group((Store(s.tensor, s.index, value, loc=s.loc),), g.loops, g.split, g.online, g.schedule)


def _uses(g: Group, e: Expr) -> bool:
    """Whether a store of ``g`` computes ``e`` (an equal subtree)."""
    return any(_replace(s.value, e, _MARK) != s.value for s in g.stores)


_MARK = Load("_pt_mark", (), dtype=None)


def _computed_once(groups: list[Group], temps: _Temps, extents: dict) -> bool:
    """Nests that recompute a reduction an earlier nest computes read it instead (module docstring): the
    earlier nest's stored value when the later one uses all of it, else (for a contraction) a temporary both
    read. In place; whether anything changed."""
    changed = False
    j = 0
    while j < len(groups):
        g = groups[j]
        for i in range(j):
            e = groups[i]
            if len(e.stores) != 1 or set(e.loops) != set(g.loops):
                continue
            (s,) = e.stores
            index = tuple(Affine.axis(a) for a in e.loops)
            reads = {t for t, _, _ in load_accesses(s.value)}
            between = {st.tensor for h in groups[i + 1 : j + 1] for st in h.stores}
            if s.index != index or s.tensor in reads or between & (reads | {s.tensor}):
                continue  # a value that cannot be read back as it was computed
            if s.value.dtype == _dtype(temps, s.tensor) and top_reduces(s.value) and _uses(g, s.value):
                load = Load(s.tensor, index, dtype=s.value.dtype, loc=s.loc)
                groups[j] = g = _rewrite(g, s.value, load)
                changed = True
                continue
            for r in top_reduces(s.value):
                if contraction(Group((Store(s.tensor, index, r, loc=s.loc),), e.loops)) is None or not _uses(g, r):
                    continue
                assert r.dtype is not None
                name = temps.new(r.dtype, tuple(extents[a] for a in e.loops))
                load = Load(name, index, dtype=r.dtype, loc=r.loc)
                groups[i : i + 1] = [Group((Store(name, index, r, loc=r.loc),), e.loops), _rewrite(e, r, load)]
                j += 1
                groups[j] = g = _rewrite(g, r, load)
                changed = True
                break
        j += 1
    return changed


def _dtype(temps: _Temps, tensor: str):
    """The dtype of a parameter or temporary (the stored value's is the one a load gives back)."""
    for t in temps.temps:
        if t.name == tensor:
            return t.dtype
    return temps.k.buffer(tensor).dtype


def _rewrite(g: Group, old: Expr, new: Expr) -> Group:
    stores = tuple(Store(s.tensor, s.index, _replace(s.value, old, new), loc=s.loc) for s in g.stores)
    return Group(stores, g.loops, g.split, g.online, g.schedule)


def contraction_operands(k: KernelIR) -> KernelIR:
    """Give each computed factor of a contraction, and each of several contractions one store combines, a
    nest and a temporary of their own; compute each contraction once (module docstring)."""
    assert k.groups is not None
    temps = _Temps(k)
    extents = {a.index: a.extent for a in k.axes}
    out: list[Group] = []
    work = list(k.groups)
    changed = _computed_once(work, temps, extents)
    while work:
        g = work.pop(0)
        parts = _separate_contractions(g, temps, extents) or _computed_factors(g, temps, extents)
        if parts is None:
            out.append(g)
            continue
        before, rest = parts
        work[:0] = [*before, rest]  # the new nests may have computed factors of their own
        changed = True
    if not changed:
        return k
    return k.replace(groups=tuple(out), temps=tuple(temps.temps))
