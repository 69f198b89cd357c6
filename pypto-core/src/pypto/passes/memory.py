"""The ``plan_memory`` pass: scratch arrays whose lifetimes do not overlap share one buffer.

A ``@pt.jit`` program's temporaries (a contraction's result, an activation a gradient reads again) are
parameters of its kernel whose contents the caller never sees: the kernel's ``scratch``. Each used to be
allocated for the whole call, so a deep network's gradient held every one of them at once. Nests run one
after the other (each completes before the next starts, on every target), so once the last nest that touches
a scratch array has run, its memory is free: a later scratch array of the same type and shape, first
touched in a later nest, is written and read there instead. The pass renames it in every store, load, gather
and scatter (first fit, in the order the nests touch them) and records the pairs as ``KernelIR.shares``
(``kernel.ir("plan_memory")`` prints them); the renamed parameter stays in the signature unread, and the
runtime passes the owner's array for it, so one allocation serves both (``pt.check_memory`` counts it once).

Only the stages after this one see the sharing: the NumPy reference (which evaluates the program as traced)
gets separate arrays.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.ir.kernel import KernelIR, TensorParam
from pypto.ir.nodes import Expr, Gather, Load, Node, Scatter, Store, postorder, transform


def _touched(stmt: Store | Scatter) -> set[str]:
    """The buffers a store or scatter writes or reads."""
    out = {stmt.tensor}
    for part in (stmt.value, *getattr(stmt, "index", ())):
        if isinstance(part, Expr):
            out |= {n.tensor for n in postorder(part) if isinstance(n, (Load, Gather))}
    return out


def _rename_expr(e: Expr, names: dict[str, str], memo: dict) -> Expr:
    def fn(n: Node) -> Node | None:
        if isinstance(n, (Load, Gather)) and n.tensor in names:
            return replace(n, tensor=names[n.tensor])
        return None

    r = transform(e, fn, memo)
    assert isinstance(r, Expr)
    return r


def _rename(s: Store | Scatter, names: dict[str, str], memo: dict) -> Store | Scatter:
    changes: dict = {"value": _rename_expr(s.value, names, memo)}
    if s.tensor in names:
        changes["tensor"] = names[s.tensor]
    if isinstance(s, Scatter):
        changes["index"] = tuple(_rename_expr(ix, names, memo) for ix in s.index)
    return replace(s, **changes)


def _bytes(p: TensorParam) -> int:
    """A buffer's size for comparing plans: its bytes, a symbolic dimension counted as 1024."""
    n = p.dtype.itemsize
    for e in p.shape:
        n *= e.const if e.is_const else 1024
    return n


class _Nests:
    """The nests of a kernel (its groups, then each scatter) with what each reads and writes."""

    def __init__(self, k: KernelIR):
        assert k.groups is not None
        self.units: list[tuple[Store | Scatter, ...]] = [g.stores for g in k.groups] + [(c,) for c in k.scatters]
        self.n_groups = len(k.groups)
        self.writes = [{s.tensor for s in u} for u in self.units]
        self.touches = [set().union(*(_touched(s) for s in u)) for u in self.units]
        self.params = {p.name: p for p in k.tensor_params}
        self.scratch = {n for n in k.scratch if n in self.params}

    def after(self) -> list[set[int]]:
        """For each nest, the earlier nests it must follow: it reads what they write, or writes what they touch.
        (Which output may be passed as the very same array as an input, ``out=x``, is decided on the order
        chosen: :func:`~pypto.ir.contract.alias_safe_pairs` runs on the result.)"""
        deps: list[set[int]] = [set() for _ in self.units]
        for j in range(len(self.units)):
            for i in range(j):
                if self.writes[i] & self.touches[j] or self.touches[i] & self.writes[j]:
                    deps[j].add(i)
        return deps

    def ordered(self) -> list[int]:
        """The groups in an order that ends each scratch array's life early: of the nests whose inputs are ready,
        the one that frees the most scratch bytes less the bytes it starts using (first in program order on a
        tie). Scatters stay last, in order."""
        deps, size = self.after(), {n: _bytes(self.params[n]) for n in self.scratch}
        uses = {n: sum(n in t for t in self.touches) for n in self.scratch}
        done: set[int] = set()
        live: set[str] = set()
        order: list[int] = []
        while len(order) < self.n_groups:
            best, best_score = -1, 0
            for u in range(self.n_groups):
                if u in done or not deps[u] <= done:
                    continue
                mine = self.touches[u] & self.scratch
                score = sum(size[n] for n in mine if uses[n] == 1) - sum(size[n] for n in mine - live)
                if best < 0 or score > best_score:
                    best, best_score = u, score
            order.append(best)
            done.add(best)
            for n in self.touches[best] & self.scratch:
                live.add(n)
                uses[n] -= 1
        return order + list(range(self.n_groups, len(self.units)))

    def shares(self, order: list[int]) -> tuple[dict[str, str], int]:
        """First fit in ``order``: each scratch array into the memory of an earlier one of its type and shape
        that no nest touches any more; with the bytes allocated."""
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for pos, u in enumerate(order):
            for n in self.touches[u] & self.scratch:
                first.setdefault(n, pos)
                last[n] = pos
        owners: list[tuple[str, int]] = []  # (a buffer that owns memory, the last nest using it so far)
        names: dict[str, str] = {}
        for n in sorted(first, key=lambda n: (first[n], n)):
            p = self.params[n]
            for j, (owner, busy) in enumerate(owners):
                q = self.params[owner]
                if busy < first[n] and q.dtype == p.dtype and q.shape == p.shape:
                    names[n] = owner
                    owners[j] = (owner, last[n])
                    break
            else:
                owners.append((n, last[n]))
        return names, sum(_bytes(self.params[o]) for o, _ in owners)


def plan_memory(k: KernelIR) -> KernelIR:
    """``k`` with its nests in an order that shortens scratch lifetimes (when that allocates less) and later
    scratch arrays renamed to earlier ones whose nests have all run (see the module docstring)."""
    if not k.scratch or k.groups is None:
        return k
    nests = _Nests(k)
    program = list(range(len(nests.units)))
    names, allocated = nests.shares(program)
    order = nests.ordered()
    if order != program:
        names2, allocated2 = nests.shares(order)
        if allocated2 < allocated:
            names, program = names2, order
    groups = [k.groups[u] for u in program[: nests.n_groups]]
    if not names:
        return k if program == list(range(len(nests.units))) else k.replace(groups=tuple(groups))
    memo: dict = {}  # (one rewrite of each node: an online softmax's reductions stay the ones its stores hold)
    renamed = []
    for g in groups:
        changes: dict = {"stores": tuple(_rename(s, names, memo) for s in g.stores)}
        if g.online is not None:
            pairs = tuple((_rename_expr(m, names, memo), _rename_expr(t, names, memo)) for m, t in g.online.pairs)
            changes["online"] = replace(g.online, pairs=pairs)
        renamed.append(replace(g, **changes))
    return k.replace(
        groups=tuple(renamed),
        stores=tuple(_rename(s, names, memo) for s in k.stores),
        scatters=tuple(_rename(c, names, memo) for c in k.scatters),
        shares=tuple(sorted(names.items())),
    )


def unread(k: KernelIR) -> frozenset[str]:
    """The parameters ``plan_memory`` renamed away: the kernel neither reads nor writes them."""
    return frozenset(b for b, _ in k.shares)
