"""SIMT contractions: one work-group per tile of outputs, the factors staged in local memory.

A step the ``schedule`` pass marked as a ``contraction`` (a matmul, a batched matmul, a dense layer,
with any epilogue) runs as a ``tiles`` kernel: work-groups of :data:`TILE` x :data:`TILE` threads,
each thread computing one output of the group's tile (a batched contraction takes one batch per
group in the third dimension; several batch loops, as in an einsum over batch and head axes, share it). The group walks ``k`` in steps of :data:`TILE`:

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

A renderer whose ``register_tile`` is above 1 (CUDA) prints floating-point contractions with register
tiles instead (:class:`RegisterTilesWriter`): the same 16 x 16 threads cover ``16 R`` x ``16 R`` outputs,
each thread ``R`` x ``R`` of them in registers (``R`` = 8 for 4-byte values, 4 for 8-byte ones). For each
step of :data:`KSTEP` along ``k``, the group stages ``16 R`` x :data:`KSTEP` elements of each factor in
local memory (``k``-major, so a thread reads its ``R`` values of a column as one contiguous run), loading
them along whichever index is contiguous in the factor's memory; then every thread does ``R`` x ``R``
multiply-adds per ``k`` from ``2 R`` values read from local memory. Each element of a factor is read from
global memory once per block of ``16 R`` rows or columns instead of once per 16, and local memory serves
``R / 2`` multiply-adds per value read instead of one half.
"""

from __future__ import annotations

from pypto.dtypes import bool_, int64
from pypto.ir.loops import Assign, Block, Comment, Declare, If, Let, Loop, Read, Stmt, Var, Write
from pypto.ir.nodes import Binary, Const, Expr
from pypto.ir.reducers import identity
from pypto.targets.contraction import ContractionNest
from pypto.targets.rewrite import flat, var_names

TILE = 16  # threads per side of a work-group: 256 threads (outputs per side without register tiles)
KSTEP = 16  # k values staged per step by register-tiled contractions


def contraction_rows(loop: Loop) -> tuple[tuple[Loop, ...], ContractionNest] | None:
    """``(batch loops, the matched nest)`` when the step's loop is a contraction the tiles kernel can run:
    its loop over rows, or batch loops (outermost first) each holding nothing but the next, then that loop.
    Batch loops share the third dimension of the grid (their bounds may not depend on one another)."""
    sched = loop.schedule
    if sched is None or sched.pattern != "contraction" or len(sched.order) < 2:
        return None
    batches: list[Loop] = []
    rows = loop
    for _ in range(len(sched.order) - 2):
        body = [s for s in flat(rows.body) if not isinstance(s, Comment)]
        if len(body) != 1 or not isinstance(body[0], Loop) or body[0].reductions:
            return None
        batches.append(rows)
        rows = body[0]
    nest = ContractionNest(rows)
    if not nest.match():
        return None
    names = {b.var for b in batches}
    bounds = [rows.start, rows.stop, nest.cols.start, nest.cols.stop, nest.red.start, nest.red.stop]
    bounds += [e for b in batches for e in (b.start, b.stop)]
    if any(names & var_names(e) for e in bounds):  # no bound may depend on a batch index
        return None
    return tuple(batches), nest


def batch_indices(r, batches: tuple[Loop, ...], ind: int) -> None:
    """The batch loops' indices from the group's third grid index (the innermost batch varying fastest)."""
    if not batches:
        return
    it = r.index_type
    r.emit(ind, f"{it} pt_z = {r.group_id_dim.format(d=2, c='z')};")
    for b in reversed(batches[1:]):
        ext = f"({r.index_expr(b.stop, 12)} - {r.index_expr(b.start, 13)})"
        r.emit(ind, f"const {it} {b.var} = {r.index_expr(b.start, 12)} + pt_z % {ext};")
        r.emit(ind, f"pt_z /= {ext};")
    r.emit(ind, f"const {it} {batches[0].var} = {r.index_expr(batches[0].start, 12)} + pt_z;")


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

    def __init__(self, r, batches: tuple[Loop, ...], nest: ContractionNest):
        self.r, self.batches, self.nest = r, batches, nest

    def body(self, ind: int) -> None:
        r, n, T = self.r, self.nest, TILE
        it = r.index_type
        rows, cols, red = n.rows, n.cols, n.red
        tx, ty = Var("pt_tx", dtype=int64), Var("pt_ty", dtype=int64)
        r.emit(ind, f"const {it} pt_tx = {r.local_id_dim.format(d=0, c='x')};")
        r.emit(ind, f"const {it} pt_ty = {r.local_id_dim.format(d=1, c='y')};")
        batch_indices(r, self.batches, ind)
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


def register_tile(want: int, nest: ContractionNest) -> int:
    """Outputs per thread along each side for ``nest`` when a backend wants ``want`` (1: the plain tiles kernel).

    Register tiles are used for floating-point sums whose factors have the accumulator's type (integer
    sums keep the plain kernel, which prints their wrap-around arithmetic); float64 takes half as many."""
    dt = nest.dtype
    if want <= 1 or not dt.is_float or nest.a.dtype != dt or nest.b.dtype != dt:
        return 1
    return want if dt.itemsize <= 4 else max(1, want // 2)


def _contiguous_along(value: Expr, inner: str, outer: str) -> bool:
    """Whether the buffers ``value`` reads are laid out with ``inner`` as their last (contiguous) index:
    then a group loads the factor along ``inner``; else along ``outer`` (the default when nothing says)."""
    for e in _reads(value):
        last = var_names(e.index[-1]) if e.index else set()
        if inner in last:
            return True
        if outer in last:
            return False
    return True


def _reads(e: Expr):
    if isinstance(e, Read):
        yield e
    for child in getattr(e, "__dataclass_fields__", {}):
        v = getattr(e, child)
        if isinstance(v, Expr):
            yield from _reads(v)
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, Expr):
                    yield from _reads(x)


class RegisterTilesWriter(TilesWriter):
    """Prints a register-tiled ``tiles`` kernel (see the module docstring)."""

    def __init__(self, r, batches: tuple[Loop, ...], nest: ContractionNest, per_thread: int):
        super().__init__(r, batches, nest)
        self.R = per_thread

    def body(self, ind: int) -> None:
        r, n, R, T, KS = self.r, self.nest, self.R, TILE, KSTEP
        it = r.index_type
        rows, cols, red = n.rows, n.cols, n.red
        side = T * R  # outputs per side of the group's tile
        pad = side + 4  # a row of staged values: 16-byte aligned, and a k-major store spreads over banks
        t = r.ctype(n.dtype)
        per = side * KS // (T * T)  # elements of each factor a thread stages per step
        r.emit(ind, f"const {it} pt_tx = {r.local_id_dim.format(d=0, c='x')};")
        r.emit(ind, f"const {it} pt_ty = {r.local_id_dim.format(d=1, c='y')};")
        r.emit(ind, f"const {it} pt_t = pt_ty * {T} + pt_tx;")
        batch_indices(r, self.batches, ind)
        r.emit(
            ind, f"const {it} pt_row0 = {r.index_expr(rows.start, 12)} + {r.group_id_dim.format(d=1, c='y')} * {side};"
        )
        r.emit(
            ind, f"const {it} pt_col0 = {r.index_expr(cols.start, 12)} + {r.group_id_dim.format(d=0, c='x')} * {side};"
        )
        for name in ("pt_ta", "pt_tb"):
            r.buffers[name] = (n.dtype, (_i(KS), _i(pad)))
            r.emit(ind, f"{r.local_qualifier}{t} {name}[{KS * pad}];")
        zero = r.literal(identity("sum", n.dtype).value, n.dtype)
        r.emit(ind, f"{t} pt_acc[{R * R}];")
        r.emit(ind, "#pragma unroll")
        r.emit(ind, f"for (int pt_q = 0; pt_q < {R * R}; pt_q++) pt_acc[pt_q] = {zero};")
        r.emit(
            ind, f"for ({it} pt_k0 = {r.index_expr(red.start)}; pt_k0 < {r.index_expr(red.stop, 10)}; pt_k0 += {KS}) {{"
        )
        i64 = lambda name: Var(name, dtype=int64)  # noqa: E731
        k0, e_s, e_o = i64("pt_k0"), i64("pt_s"), i64("pt_o")
        for buf, value, outer, base, stop in (("pt_ta", n.a, rows, "pt_row0", rows.stop),
                                              ("pt_tb", n.b, cols, "pt_col0", cols.stop)):  # fmt: skip
            along_k = _contiguous_along(value, n.k, outer.var)
            r.emit(ind + 1, "#pragma unroll")
            r.emit(ind + 1, f"for (int pt_r = 0; pt_r < {per}; pt_r++) {{")
            r.emit(ind + 2, f"const {it} pt_e = ({it})pt_r * {T * T} + pt_t;")
            if along_k:  # consecutive threads read consecutive k of one row (column) of the factor
                r.emit(ind + 2, f"const {it} pt_s = pt_e % {KS}, pt_o = pt_e / {KS};")
            else:  # consecutive threads read consecutive rows (columns) at one k
                r.emit(ind + 2, f"const {it} pt_o = pt_e % {side}, pt_s = pt_e / {side};")
            r.stmt(Let(outer.var, _add(i64(base), e_o)), ind + 2)
            r.stmt(Let(n.k, _add(k0, e_s)), ind + 2)
            cond = _and(_lt(i64(outer.var), stop), _lt(i64(n.k), red.stop))
            r.stmt(If(cond, Write(buf, (e_s, e_o), value), Write(buf, (e_s, e_o), identity("sum", n.dtype))), ind + 2)
            r.emit(ind + 1, "}")
        r.emit(ind + 1, r.barrier)
        r.emit(ind + 1, "#pragma unroll")
        r.emit(ind + 1, f"for (int pt_kk = 0; pt_kk < {KS}; pt_kk++) {{")
        r.emit(ind + 2, f"{t} pt_fa[{R}], pt_fb[{R}];")
        r.emit(ind + 2, "#pragma unroll")
        r.emit(
            ind + 2,
            f"for (int pt_m = 0; pt_m < {R}; pt_m++) pt_fa[pt_m] = pt_ta[pt_kk * {pad} + (int)pt_ty * {R} + pt_m];",
        )
        r.emit(ind + 2, "#pragma unroll")
        r.emit(
            ind + 2,
            f"for (int pt_m = 0; pt_m < {R}; pt_m++) pt_fb[pt_m] = pt_tb[pt_kk * {pad} + (int)pt_tx * {R} + pt_m];",
        )
        r.emit(ind + 2, "#pragma unroll")
        r.emit(ind + 2, f"for (int pt_m = 0; pt_m < {R}; pt_m++)")
        r.emit(ind + 3, "#pragma unroll")
        r.emit(
            ind + 3, f"for (int pt_n = 0; pt_n < {R}; pt_n++) pt_acc[pt_m * {R} + pt_n] += pt_fa[pt_m] * pt_fb[pt_n];"
        )
        r.emit(ind + 1, "}")
        r.emit(ind + 1, r.barrier)
        r.emit(ind, "}")
        # the epilogue, once per output of the thread's tile
        r.emit(ind, "#pragma unroll")
        r.emit(ind, f"for (int pt_m = 0; pt_m < {R}; pt_m++) {{")
        r.emit(ind + 1, "#pragma unroll")
        r.emit(ind + 1, f"for (int pt_n = 0; pt_n < {R}; pt_n++) {{")
        r.emit(ind + 2, f"const {it} {rows.var} = pt_row0 + pt_ty * {R} + pt_m;")
        r.emit(ind + 2, f"const {it} {cols.var} = pt_col0 + pt_tx * {R} + pt_n;")
        r.emit(ind + 2, f"{t} {n.acc.name} = pt_acc[pt_m * {R} + pt_n];")
        inside = _and(_lt(i64(rows.var), rows.stop), _lt(i64(cols.var), cols.stop))
        tail: list[Stmt] = [s for s in n.tail if not isinstance(s, Comment)]
        r.stmt(If(inside, Block(tuple(tail))), ind + 2)
        r.emit(ind + 1, "}")
        r.emit(ind, "}")
