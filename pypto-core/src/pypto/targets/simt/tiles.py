"""SIMT contractions: one work-group per tile of outputs, the factors staged in local memory.

A step the ``schedule`` pass marked as a ``contraction`` (a matmul, a batched matmul, a dense layer,
with any epilogue) runs as a ``tiles`` kernel: work-groups of :data:`TILE` x :data:`TILE` threads,
each thread computing one output of the group's tile (a batched contraction takes one batch per
group in the third dimension). The group walks ``k`` in steps of :data:`TILE`:

    for k0 in k_start .. k_stop step TILE:
        ta[ty][tx] = a[i, k0 + tx]        (0 outside the matrix)   every thread loads one element
        tb[ty][tx] = b[k0 + ty, j]        (0 outside the matrix)   of each factor
        barrier
        acc += ta[ty][kk] * tb[kk][tx]    for kk < min(TILE, k_stop - k0)
        barrier
    if (i, j) inside: the epilogue with acc, c written once

so each element of ``a`` and ``b`` loaded from global memory is used :data:`TILE` times from local
memory. Each output's products are summed in ``k`` order, as in the loop it replaces. The tiles are
one row longer than they are wide, so that the threads reading a column of ``tb`` hit different
local-memory banks.
"""

from __future__ import annotations

from pypto.dtypes import bool_, int64
from pypto.ir.loops import Assign, Block, Comment, Declare, If, Let, Loop, Read, Stmt, Var, Write
from pypto.ir.nodes import Binary, Const, Expr
from pypto.ir.reducers import identity
from pypto.targets.contraction import ContractionNest
from pypto.targets.rewrite import flat, var_names

TILE = 16  # outputs per side of a work-group's tile: 256 threads, 2 x 16 x 17 elements of local memory


def contraction_rows(loop: Loop) -> tuple[Loop | None, ContractionNest] | None:
    """``(batch loop or None, the matched nest)`` when the step's loop is a contraction the tiles
    kernel can run: its loop over rows, or a batch loop holding nothing but that loop."""
    sched = loop.schedule
    if sched is None or sched.pattern != "contraction" or len(sched.order) not in (2, 3):
        return None
    batch, rows = None, loop
    if len(sched.order) == 3:
        body = [s for s in flat(loop.body) if not isinstance(s, Comment)]
        if len(body) != 1 or not isinstance(body[0], Loop) or body[0].reductions:
            return None
        batch, rows = loop, body[0]
    nest = ContractionNest(rows)
    if not nest.match():
        return None
    if batch is not None:  # the rows' and columns' bounds may not depend on the batch index
        bounds = (rows.start, rows.stop, nest.cols.start, nest.cols.stop, nest.red.start, nest.red.stop)
        if any(batch.var in var_names(e) for e in bounds):
            return None
    return batch, nest


def _i(v: int) -> Const:
    return Const(v, dtype=int64)


def _add(a: Expr, b: Expr) -> Expr:
    return Binary("add", a, b, dtype=int64)


def _lt(a: Expr, b: Expr) -> Expr:
    return Binary("lt", a, b, dtype=bool_)


def _and(a: Expr, b: Expr) -> Expr:
    return Binary("and", a, b, dtype=bool_)


class TilesWriter:
    """Prints one ``tiles`` kernel's body with a :class:`~pypto.targets.simt.render.SimtRenderer`."""

    def __init__(self, r, batch: Loop | None, nest: ContractionNest):
        self.r, self.batch, self.nest = r, batch, nest

    def body(self, ind: int) -> None:
        r, n, T = self.r, self.nest, TILE
        it = r.index_type
        rows, cols, red = n.rows, n.cols, n.red
        tx, ty = Var("pt_tx", dtype=int64), Var("pt_ty", dtype=int64)
        r.emit(ind, f"const {it} pt_tx = {r.local_id_dim.format(d=0, c='x')};")
        r.emit(ind, f"const {it} pt_ty = {r.local_id_dim.format(d=1, c='y')};")
        if self.batch is not None:
            b = self.batch
            r.emit(ind, f"const {it} {b.var} = {r.index_expr(b.start, 12)} + {r.group_id_dim.format(d=2, c='z')};")
        for lp, d, c, t in ((rows, 1, "y", "pt_ty"), (cols, 0, "x", "pt_tx")):
            gid = r.group_id_dim.format(d=d, c=c)
            r.emit(ind, f"const {it} {lp.var} = {r.index_expr(lp.start, 12)} + {gid} * {T} + {t};")
        a_dt, b_dt = n.a.dtype, n.b.dtype
        for name, dt in (("pt_ta", a_dt), ("pt_tb", b_dt)):
            r.buffers[name] = (dt, (_i(T), _i(T + 1)))
            r.emit(ind, f"{r.local_qualifier}{r.ctype(dt)} {name}[{T * (T + 1)}];")
        r.stmt(Declare(n.acc.name, n.dtype, identity("sum", n.dtype)), ind)
        k0 = Var("pt_k0", dtype=int64)
        r.emit(
            ind, f"for ({it} pt_k0 = {r.index_expr(red.start)}; pt_k0 < {r.index_expr(red.stop, 10)}; pt_k0 += {T}) {{"
        )
        inside_i, inside_j = _lt(Var(rows.var, dtype=int64), rows.stop), _lt(Var(cols.var, dtype=int64), cols.stop)
        kv = Var(n.k, dtype=int64)
        for buf, kx, inside, value, dt in (("pt_ta", tx, inside_i, n.a, a_dt), ("pt_tb", ty, inside_j, n.b, b_dt)):
            r.emit(ind + 1, "{")
            r.stmt(Let(n.k, _add(k0, kx)), ind + 2)
            cond = _and(inside, _lt(kv, red.stop))
            zero = identity("sum", dt)
            r.stmt(If(cond, Write(buf, (ty, tx), value), Write(buf, (ty, tx), zero)), ind + 2)
            r.emit(ind + 1, "}")
        r.emit(ind + 1, r.barrier)
        left = Binary("sub", red.stop, k0, dtype=int64)
        r.stmt(Let("pt_kn", Binary("minimum", left, _i(T), dtype=int64)), ind + 1)
        kk = Var("pt_kk", dtype=int64)
        acc = Var(n.acc.name, dtype=n.dtype)
        prod = Binary("mul", Read("pt_ta", (ty, kk), dtype=a_dt), Read("pt_tb", (kk, tx), dtype=b_dt), dtype=n.dtype)
        fold = Assign(n.acc.name, Binary("add", acc, prod, dtype=n.dtype))
        r.stmt(Loop("pt_kk", _i(0), Var("pt_kn", dtype=int64), fold, "serial"), ind + 1)
        r.emit(ind + 1, r.barrier)
        r.emit(ind, "}")
        tail: list[Stmt] = [s for s in n.tail if not isinstance(s, Comment)]
        r.stmt(If(_and(inside_i, inside_j), Block(tuple(tail))), ind)
