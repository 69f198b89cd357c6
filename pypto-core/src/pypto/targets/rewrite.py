"""What the loop rewrites of the targets share: integer expressions, fresh names, the loops they rewrite."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pypto.dtypes import int64
from pypto.ir.loops import Alloc, Block, If, Loop, LoopKernel, Read, Stmt, Var, stmt_exprs, walk
from pypto.ir.nodes import Binary, Const, Expr, postorder
from pypto.ir.schedule import NestSchedule

PARALLEL = ("parallel", "parallel_vector")


def i64(v: int) -> Const:
    return Const(v, dtype=int64)


def ibin(op: str, a: Expr, b: Expr) -> Expr:
    """An int64 ``Binary``."""
    return Binary(op, a, b, dtype=int64)


def extent(lp: Loop) -> Expr:
    """The loop's trip count."""
    return lp.stop if isinstance(lp.start, Const) and lp.start.value == 0 else ibin("sub", lp.stop, lp.start)


def ceil_div(a: Expr, b: Expr) -> Expr:
    return ibin("floordiv", ibin("add", a, ibin("sub", b, i64(1))), b)


def flat(s: Stmt) -> list[Stmt]:
    """The statements of ``s`` with nested blocks spliced in."""
    return [x for b in s.body for x in flat(b)] if isinstance(s, Block) else [s]


def var_names(e: Expr) -> set[str]:
    """The variables ``e`` reads, those in the indices of its buffer reads included."""
    out: set[str] = set()
    for n in postorder(e):
        if isinstance(n, Var):
            out.add(n.name)
        elif isinstance(n, Read):
            for ix in n.index:
                out |= var_names(ix)
    return out


def reads_a_row_apart(loop: Loop, along: str) -> bool:
    """Whether ``loop``'s body reads a buffer at ``[..., loop var, ..., along + c]``: contiguous in
    ``along``, a row apart from one step of ``loop`` to the next."""
    for st in walk(loop.body):
        for e in stmt_exprs(st):
            for n in postorder(e):
                if isinstance(n, Read) and len(n.index) >= 2:
                    last = var_names(n.index[-1])
                    if along in last and loop.var not in last and any(loop.var in var_names(ix) for ix in n.index[:-1]):
                        return True
    return False


_KNOWN = "_pt_names_taken"  # attribute of a rewritten kernel: the names its rewrite knew taken (a superset)


class Names:
    """Fresh names for a kernel: none that its arguments, statements or expressions use (collected on the
    first request: most kernels have nothing to rewrite)."""

    def __init__(self, k: LoopKernel):
        self.kernel = k
        known = getattr(k, _KNOWN, None)  # left by the rewrite that made ``k``: no walk over it again
        self._taken: set[str] | None = set(known) if known is not None else None
        self._next: dict[str, int] = {}  # per stem, the suffix to try first (those below are all taken)

    @property
    def taken(self) -> set[str]:
        if self._taken is None:
            k = self.kernel
            self._taken = {a.name for a in k.args}
            for st in walk(k.body):
                for attr in ("name", "var", "buffer"):
                    v = getattr(st, attr, None)
                    if isinstance(v, str):
                        self._taken.add(v)
                for e in stmt_exprs(st):
                    self._taken |= var_names(e)
        return self._taken

    def fresh(self, base: str) -> str:
        """``base``, else ``base2``, ``base3``...: the first not taken (names are only ever added, so the search
        resumes where the last one for ``base`` stopped)."""
        taken = self.taken
        n = self._next.get(base, 1)
        name = base if n == 1 else f"{base}{n}"
        while name in taken:
            n += 1
            name = f"{base}{n}"
        taken.add(name)
        self._next[base] = n + 1
        return name


@dataclass(frozen=True)
class Nest:
    """Where a loop sits: the schedule of its nest (set by lowering on the nest's outermost loop) and
    its depth in the nest (0 for the outermost loop)."""

    schedule: NestSchedule | None = None
    depth: int = 0

    def at(self, depth_from_inner: int) -> bool:
        """Whether the loop is the nest's ``depth_from_inner``-th loop counted from the innermost (0)."""
        s = self.schedule
        return s is not None and self.depth == len(s.order) - 1 - depth_from_inner


def walk_loops(
    k: LoopKernel, fn: Callable[[Loop, Names, Nest], Stmt | None], *, outer_parallel_only: bool = False
) -> LoopKernel:
    """``k`` with loops replaced by ``fn(loop, names, nest)``, outermost first; a loop ``fn`` keeps (returns
    None for) is searched inside, unless ``outer_parallel_only``: then only parallel loops outside other
    loops are offered."""
    names = Names(k)

    def visit(s: Stmt, nest: Nest | None) -> Stmt:
        if isinstance(s, Block):
            return Block(tuple(visit(b, nest) for b in s.body))
        if isinstance(s, Alloc):
            return replace(s, body=visit(s.body, nest))
        if isinstance(s, If):
            return replace(s, then=visit(s.then, nest), orelse=None if s.orelse is None else visit(s.orelse, nest))
        if not isinstance(s, Loop) or s.reductions:
            return s
        here = Nest(s.schedule) if s.schedule is not None else Nest(nest.schedule, nest.depth + 1) if nest else Nest()
        if outer_parallel_only:
            return (fn(s, names, here) if s.kind in PARALLEL else None) or s
        return fn(s, names, here) or replace(s, body=visit(s.body, here))

    out = replace(k, body=visit(k.body, None))
    if names._taken is not None:  # the next rewrite of ``out`` starts from these instead of walking it
        object.__setattr__(out, _KNOWN, frozenset(names._taken))
    return out
