"""SIMT reductions down columns: a work-group per block of columns, its threads splitting the rows.

A step the ``schedule`` pass marked as a ``columns`` nest (``y[j] = f(reduce(x[i, j], axis=i))``,
several reductions over the same rows allowed, as in batch-norm statistics or a bias gradient) runs
as a ``columns`` kernel: work-groups of :data:`COLS` x :data:`SLICES` threads. The threads of a
group's row ``ty`` reduce rows ``ty, ty + SLICES, ...`` of the group's :data:`COLS` columns (a row's
consecutive columns are read by consecutive threads, so reads are coalesced); the partial results go
to local memory, and after a barrier the threads of row 0 combine the :data:`SLICES` partials of
their column in slice order and run what follows the reductions (the epilogue). A tall matrix with
few columns thus keeps :data:`SLICES` times as many threads busy as one thread per column would.
The combine order is fixed, so results do not depend on the device.

Nests whose reductions feed one another down a column (a column softmax) stay ``map`` kernels.
"""

from __future__ import annotations

from pypto.ir.loops import Block, Comment, Declare, Let, Loop, Stmt, Write, stmt_exprs, walk
from pypto.targets.rewrite import var_names

COLS = 32  # columns per work-group: one warp reads 128 contiguous bytes of float32 per row
SLICES = 8  # threads per column, each reducing every SLICES-th row


class ColumnNest:
    """A loop over columns whose body is accumulators, reduction loops down the same rows, then an epilogue."""

    def __init__(self, loop: Loop):
        self.loop = loop
        self.decls: list[Declare] = []
        self.reds: list[Loop] = []
        self.tail: list[Stmt] = []

    def match(self) -> bool:
        body = self.loop.body.body if isinstance(self.loop.body, Block) else (self.loop.body,)
        stage = 0  # 0: head and reductions, 1: tail
        for s in body:
            if isinstance(s, Comment):
                continue
            if stage == 0 and isinstance(s, Declare):
                self.decls.append(s)
            elif stage == 0 and isinstance(s, Loop) and s.reductions:
                self.reds.append(s)
            elif isinstance(s, (Let, Write)) and self.reds:
                stage = 1
                self.tail.append(s)
            else:
                return False
        if not self.reds:
            return False
        accs = {d.name for d in self.decls}
        ops = {acc: op for lp in self.reds for acc, op in lp.reductions}
        if set(ops) != accs:
            return False
        first = self.reds[0]
        col = self.loop.var
        for lp in self.reds:
            if (lp.start, lp.stop) != (first.start, first.stop) or (var_names(lp.start) | var_names(lp.stop)) & (
                accs | {col}
            ):
                return False
            own = {acc for acc, _ in lp.reductions}
            for st in walk(lp.body):
                if isinstance(st, Loop):
                    return False  # nested loops: not a plain reduction down the rows
                if isinstance(st, Write):
                    return False
                reads: set[str] = set()
                for e in stmt_exprs(st):
                    reads |= var_names(e)
                if reads & (accs - own):
                    return False  # one reduction reads another's partial value: not separable
        self.ops = ops
        return True


def column_nest(loop: Loop) -> ColumnNest | None:
    """The step's loop as a :class:`ColumnNest` when its schedule says ``columns`` and it has the form."""
    sched = loop.schedule
    if sched is None or sched.pattern != "columns" or len(sched.order) != 1:
        return None
    nest = ColumnNest(loop)
    return nest if nest.match() else None


class ColumnsWriter:
    """Prints one ``columns`` kernel's body with a :class:`~pypto.targets.simt.render.SimtRenderer`."""

    def __init__(self, r, nest: ColumnNest):
        self.r, self.nest = r, nest

    def body(self, ind: int) -> None:
        r, n = self.r, self.nest
        it = r.index_type
        col = n.loop
        r.emit(ind, f"const {it} pt_tx = {r.local_id_dim.format(d=0, c='x')};")
        r.emit(ind, f"const {it} pt_ty = {r.local_id_dim.format(d=1, c='y')};")
        gid = r.group_id_dim.format(d=0, c="x")
        r.emit(ind, f"const {it} {col.var} = {r.index_expr(col.start, 12)} + {gid} * {COLS} + pt_tx;")
        for d in n.decls:
            r.emit(ind, f"{r.local_qualifier}{r.ctype(d.dtype)} pt_part_{d.name}[{COLS * SLICES}];")
        for d in n.decls:
            r.stmt(d, ind)
        stop = r.index_expr(col.stop, 10)
        r.emit(ind, f"if ({col.var} < {stop}) {{")
        for lp in n.reds:
            start, rstop = r.index_expr(lp.start, 12), r.index_expr(lp.stop, 10)
            r.emit(ind + 1, f"for ({it} {lp.var} = {start} + pt_ty; {lp.var} < {rstop}; {lp.var} += {SLICES}) {{")
            r.stmt(lp.body, ind + 2)
            r.emit(ind + 1, "}")
        r.emit(ind, "}")
        for d in n.decls:
            r.emit(ind, f"pt_part_{d.name}[pt_ty * {COLS} + pt_tx] = {d.name};")
        r.emit(ind, r.barrier)
        r.emit(ind, f"if (pt_ty == 0 && {col.var} < {stop}) {{")
        for d in n.decls:
            r.emit(ind + 1, f"for ({it} pt_s = 1; pt_s < {SLICES}; pt_s++) {{")
            part = f"pt_part_{d.name}[pt_s * {COLS} + pt_tx]"
            r.emit(ind + 2, f"{d.name} = {r.combine_text(n.ops[d.name], d.dtype, d.name, part)};")
            r.emit(ind + 1, "}")
        for s in n.tail:
            r.stmt(s, ind + 1)
        r.emit(ind, "}")


__all__ = ["COLS", "SLICES", "ColumnNest", "ColumnsWriter", "column_nest"]
