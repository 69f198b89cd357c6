"""The ``cpu-simd`` target's ``block_columns`` pass: loops down columns become loops along rows.

A nest like a column sum (``y[j] = pt.reduce_sum(x[i, j], axis=i)``) is lowered as a parallel loop
over columns whose inner loops walk down a column: every step reads one element of a new row, a
stride of a whole row in memory, so each element read brings in a cache line of which one value is
used. This pass interchanges such nests for the CPU:

    parallel for each block of columns [lo, hi):
        for j in lo..hi: acc[j] = identity              (vector loop)
        for i in rows:
            for j in lo..hi: acc[j] = acc[j] + x[i, j]   (vector loop, contiguous)
        for j in lo..hi: y[j] = acc[j]                  (the store's expression)

Every scalar the column loop computes (accumulators, lets) becomes an array of partial results over
the columns (a temporary); every loop down the columns becomes a loop over rows around a vector
loop over the block's columns. Each column's values are still combined in row order, so results are
the same as the loop down the column gives, with or without threads.

The block's width (a run of columns read contiguously from every row, and the partial results kept
in L1) is :func:`block_width`: about an eighth of the columns, so that threads share the work, at
least :data:`MIN_BLOCK` and at most :data:`MAX_BLOCK_BYTES` of partial results.

GPU-style targets walk such nests their own way (:mod:`pypto.targets.simt.columns`): consecutive
threads read a row's consecutive elements, and each column's rows are split over several threads.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.dtypes import int64
from pypto.ir.loops import Alloc, Assign, Block, Comment, Declare, Let, Loop, LoopKernel, Read, Stmt, Var, Write
from pypto.ir.nodes import Binary, Const, Expr, map_children
from pypto.ir.reducers import combine, identity
from pypto.ir.schedule import NestSchedule
from pypto.targets.rewrite import (
    PARALLEL,
    Names,
    Nest,
    ceil_div,
    extent,
    flat,
    i64,
    ibin,
    reads_a_row_apart,
    var_names,
    walk_loops,
)

MIN_BLOCK = 64  # columns per block at least: 256 bytes of float32 read contiguously from each row
MAX_BLOCK_BYTES = 8 << 10  # partial results per block at most (L1 holds them with the rows' lines)
# Reductions down the columns: rows are split into blocks reduced in parallel (each a whole row wide,
# up to this many bytes of partial results), then the blocks' partials are combined in block order.
MAX_ROW_BYTES = 32 << 10
ROW_BLOCKS = 16  # row blocks at most (each of at least MIN_ROWS rows): the partials stay small
MIN_ROWS = 16


def block_width(n: Expr, partial_bytes: int) -> Expr:
    """Columns per block: ``n / 8`` rounded up to 16, within [MIN_BLOCK, MAX_BLOCK_BYTES / partial_bytes]."""
    cap = max(MIN_BLOCK, MAX_BLOCK_BYTES // max(1, partial_bytes) // 16 * 16)
    rounded = ibin("mul", ceil_div(ceil_div(n, i64(8)), i64(16)), i64(16))
    return ibin("minimum", i64(cap), ibin("maximum", i64(MIN_BLOCK), rounded))


class _Interchange:
    """Rewrites one column loop (see the module docstring); ``None`` from :meth:`run` leaves it as it is."""

    def __init__(self, loop: Loop, names: Names, sched: NestSchedule):
        self.loop = loop
        cols_axis = sched.order[-1]
        self.cols_tile = sched.tile(cols_axis)  # the user's columns per block
        self.rows_tile = next((n for a, n in sched.tiles if a != cols_axis), None)  # and rows per block
        self.kind = "parallel" if loop.kind in PARALLEL else "serial"
        self.fresh = names.fresh
        self.body = flat(loop.body)
        self.arrays: dict[str, tuple[str, object]] = {}  # scalar -> (array name, dtype)
        self.offset: Expr | None = None  # where the arrays are indexed (None: at the column)
        self.rename: dict[str, Expr] = {}  # loop variables renamed while rewriting a loop's body

    def eligible(self) -> bool:
        col = self.loop.var
        rows = [s for s in self.body if isinstance(s, Loop)]
        if not rows or not any(reads_a_row_apart(r, col) for r in rows):
            return False
        scalars = {s.name for s in self.body if isinstance(s, (Declare, Let))}
        for s in self.body:
            if isinstance(s, (Comment, Declare, Let, Assign, Write)):
                continue
            if not isinstance(s, Loop) or s.kind in PARALLEL:
                return False
            if var_names(s.start) & (scalars | {col}) or var_names(s.stop) & (scalars | {col}):
                return False  # rows whose range differs from column to column
            for b in flat(s.body):
                if isinstance(b, Assign) and b.name not in scalars:
                    return False
                if isinstance(b, Write) and b.index and s.var in var_names(b.index[-1]):
                    return False  # written along the rows loop: a transpose (tile_transposes walks it in tiles)
                if not isinstance(b, (Comment, Let, Assign, Write)):
                    return False
        return True

    def reductions(self) -> list[Loop] | None:
        """The rows loops when the body is reductions down the columns and what follows them:
        accumulators declared at their identity, loops over the same rows each folding values into
        its own accumulators (none reading another's), then statements reading the results."""
        loops = [s for s in self.body if isinstance(s, Loop)]
        if not loops or any(
            not lp.reductions or (lp.start, lp.stop) != (loops[0].start, loops[0].stop) for lp in loops
        ):
            return None
        ops = {acc: op for lp in loops for acc, op in lp.reductions}
        last = self.body.index(loops[-1])
        for s in self.body[:last]:
            if isinstance(s, (Comment, Loop)):
                continue
            if not isinstance(s, Declare) or s.name not in ops or s.init != identity(ops[s.name], s.dtype):
                return None
        accs = set(ops)
        for lp in loops:
            for b in flat(lp.body):
                if isinstance(b, (Comment, Let)) and not (isinstance(b, Let) and var_names(b.value) & accs):
                    continue
                if isinstance(b, Assign) and b.name in dict(lp.reductions) and isinstance(b.value, Binary):
                    v = b.value
                    if v == combine(ops[b.name], Var(b.name, dtype=v.dtype), v.b) and not (var_names(v.b) & accs):
                        continue
                return None
        return loops

    def column(self) -> Expr:
        j = Var(self.loop.var, dtype=int64)
        start = self.loop.start
        return j if isinstance(start, Const) and start.value == 0 else ibin("sub", j, start)

    def at(self) -> Expr:
        return self.column() if self.offset is None else self.offset

    def subst(self, e: Expr) -> Expr:
        if isinstance(e, Var) and e.name in self.rename:
            return self.rename[e.name]
        if isinstance(e, Var) and e.name in self.arrays:
            name, dt = self.arrays[e.name]
            return Read(name, (self.at(),), dtype=dt)  # type: ignore[arg-type]
        if isinstance(e, Read):
            return replace(e, index=tuple(self.subst(ix) for ix in e.index))
        return map_children(e, self.subst)  # type: ignore[return-value]

    def per_column(self, s: Stmt) -> Stmt:
        """``s`` as a statement of the vector loop over a block's columns."""
        if isinstance(s, Declare):
            return Write(self.arrays[s.name][0], (self.at(),), self.subst(s.init))
        if isinstance(s, Let) and s.name in self.arrays:
            return Write(self.arrays[s.name][0], (self.at(),), self.subst(s.value))
        if isinstance(s, Let):
            return Let(s.name, self.subst(s.value))
        if isinstance(s, Assign):
            return Write(self.arrays[s.name][0], (self.at(),), self.subst(s.value))
        if isinstance(s, Write):
            return Write(s.buffer, tuple(self.subst(ix) for ix in s.index), self.subst(s.value))
        return s

    def run(self) -> Stmt | None:
        if not self.eligible():
            return None
        loops = self.reductions()
        return self.row_blocks(loops) if loops is not None else self.column_blocks()

    def row_blocks(self, loops: list[Loop]) -> Stmt:
        """Reductions down the columns: blocks of rows reduced in parallel into partial rows (all the
        reductions in one walk along each row), then the partial rows combined in block order, then
        the statements after the reductions."""
        L = self.loop
        rows = loops[0]
        ops = {acc: op for lp in loops for acc, op in lp.reductions}
        dts = {s.name: s.dtype for s in self.body if isinstance(s, Declare)}
        cols = extent(L)
        n_rows = extent(rows)
        partial = sum(dt.itemsize for dt in dts.values())
        cap = max(MIN_BLOCK, MAX_ROW_BYTES // max(1, partial) // 16 * 16)
        names = {n: self.fresh(f"_rowpart_{n}") for n in ops}
        width_v, ncb_v, rows_v, nrb_v = (self.fresh(b) for b in ("_colw", "_ncolblk", "_rowblk", "_nrowblk"))
        t, rb, cb = self.fresh("_t"), self.fresh("_rb"), self.fresh("_cb")
        rlo, rhi, clo, chi = (self.fresh(b) for b in ("_rlo", "_rhi", "_clo", "_chi"))
        W, R = Var(width_v, dtype=int64), Var(rows_v, dtype=int64)
        NCB, NRB = Var(ncb_v, dtype=int64), Var(nrb_v, dtype=int64)
        rbv, cbv = Var(rb, dtype=int64), Var(cb, dtype=int64)
        lov, hiv = Var(clo, dtype=int64), Var(chi, dtype=int64)

        def columns(stmts: list[Stmt]) -> Loop:
            return Loop(L.var, lov, hiv, Block(tuple(stmts)), "vector")

        def block_bounds(block: Expr) -> list[Stmt]:
            return [
                Let(clo, ibin("add", L.start, ibin("mul", block, W))),
                Let(chi, ibin("minimum", L.stop, ibin("add", lov, W))),
            ]

        # phase 1: partial rows, one per block of rows, over blocks of columns
        def part(row: Expr) -> Expr:
            return ibin("add", ibin("mul", row, cols), self.column())

        for n in ops:
            self.arrays[n] = (names[n], dts[n])
        self.offset = part(rbv)
        fill = [Write(names[n], (self.offset,), identity(op, dts[n])) for n, op in ops.items()]
        fold = []
        for lp in loops:  # one walk along the rows: the other loops' variable renamed to the first's
            self.rename = {lp.var: Var(rows.var, dtype=int64)} if lp.var != rows.var else {}
            fold += [self.per_column(b) for b in flat(lp.body) if not isinstance(b, Comment)]
        self.rename = {}
        task = [
            Let(rb, ibin("floordiv", Var(t, dtype=int64), NCB)),
            Let(cb, ibin("sub", Var(t, dtype=int64), ibin("mul", rbv, NCB))),
            Let(rlo, ibin("add", rows.start, ibin("mul", rbv, R))),
            Let(rhi, ibin("minimum", rows.stop, ibin("add", Var(rlo, dtype=int64), R))),
            *block_bounds(cbv),
            columns(fill),
            Loop(rows.var, Var(rlo, dtype=int64), Var(rhi, dtype=int64), columns(fold), "serial"),
        ]
        phase1 = Loop(t, i64(0), ibin("mul", NRB, NCB), Block(tuple(task)), self.kind, (), L.work, dynamic=True)
        # phase 2: each column's partials combined in block order, then the statements after the loop
        self.offset = None
        finals = {n: self.fresh(f"_cols_{n}") for n in ops}
        after = self.body[self.body.index(loops[-1]) + 1 :]
        lets = {s.name: s for s in after if isinstance(s, Let)}
        for s in lets.values():
            self.arrays[s.name] = (self.fresh(f"_cols_{s.name}"), s.value.dtype)
        r2 = self.fresh("_r")
        for n in ops:
            self.arrays[n] = (finals[n], dts[n])
        start = [Write(finals[n], (self.column(),), identity(op, dts[n])) for n, op in ops.items()]
        merge = [
            Write(finals[n], (self.column(),), combine(op, self.subst(Var(n, dtype=dts[n])),
                  Read(names[n], (part(Var(r2, dtype=int64)),), dtype=dts[n])))
            for n, op in ops.items()
        ]  # fmt: skip
        tail = [self.per_column(s) for s in after if not isinstance(s, Comment)]
        combine_work = ibin("mul", ibin("mul", NRB, cols), i64(2))
        phase2: Stmt = Loop(cb, i64(0), NCB, Block((
            *block_bounds(cbv),
            columns(start),
            Loop(r2, i64(0), NRB, columns(merge), "serial"),
            columns(tail),
        )), self.kind, (), combine_work)  # fmt: skip
        for n, dt in reversed([self.arrays[x] for x in (*lets, *ops)]):
            phase2 = Alloc(n, dt, (cols,), phase2)  # type: ignore[arg-type]
        out: Stmt = Block((phase1, phase2))
        for n in reversed(list(ops)):
            out = Alloc(names[n], dts[n], (ibin("mul", NRB, cols),), out)
        comments = [s for s in self.body if isinstance(s, Comment)]
        return Block((
            *comments,
            Comment(f"{rows.var} in blocks of {rows_v} rows reduced in parallel into partial rows of {L.var}, "
                    f"then combined in block order"),
            Let(width_v, i64(self.cols_tile) if self.cols_tile else ibin("maximum", i64(1), ibin("minimum", cols, i64(cap)))),
            Let(ncb_v, ceil_div(cols, W)),
            Let(rows_v, i64(self.rows_tile) if self.rows_tile else
                ibin("maximum", i64(MIN_ROWS), ceil_div(n_rows, i64(ROW_BLOCKS)))),
            Let(nrb_v, ceil_div(n_rows, R)),
            out,
        ))  # fmt: skip

    def column_blocks(self) -> Stmt:
        """Blocks of columns in parallel, every row walked along each block."""
        L = self.loop
        for s in self.body:
            if isinstance(s, Declare):
                self.arrays[s.name] = (self.fresh(f"_cols_{s.name}"), s.dtype)
            elif isinstance(s, Let):
                self.arrays[s.name] = (self.fresh(f"_cols_{s.name}"), s.value.dtype)
        width_v, nblk_v = self.fresh("_colw"), self.fresh("_ncolblk")
        blk, lo, hi = self.fresh("_cb"), self.fresh("_clo"), self.fresh("_chi")
        cols = extent(L)
        partial = sum(dt.itemsize for _, dt in self.arrays.values())  # type: ignore[attr-defined]
        W, lov, hiv = Var(width_v, dtype=int64), Var(lo, dtype=int64), Var(hi, dtype=int64)

        def columns(stmts: list[Stmt]) -> Loop:
            return Loop(L.var, lov, hiv, Block(tuple(stmts)), "vector")

        inner: list[Stmt] = [
            Let(lo, ibin("add", L.start, ibin("mul", Var(blk, dtype=int64), W))),
            Let(hi, ibin("minimum", L.stop, ibin("add", lov, W))),
        ]
        run: list[Stmt] = []
        for s in self.body:
            if isinstance(s, Comment):
                inner.append(s)
            elif isinstance(s, Loop):
                if run:
                    inner.append(columns(run))
                    run = []
                row = [self.per_column(b) for b in flat(s.body) if not isinstance(b, Comment)]
                inner.append(Loop(s.var, s.start, s.stop, columns(row), "serial"))
            else:
                run.append(self.per_column(s))
        if run:
            inner.append(columns(run))
        out: Stmt = Loop(blk, i64(0), Var(nblk_v, dtype=int64), Block(tuple(inner)), self.kind, (), L.work)
        for name, dt in reversed(list(self.arrays.values())):
            out = Alloc(name, dt, (cols,), out)  # type: ignore[arg-type]
        note = Comment(f"columns of {L.var} in blocks of {width_v}, rows walked along each block")
        return Block((
            note,
            Let(width_v, i64(self.cols_tile) if self.cols_tile else block_width(cols, partial)),
            Let(nblk_v, ceil_div(cols, W)),
            out,
        ))  # fmt: skip


def block_columns(k: LoopKernel) -> LoopKernel:
    """Interchange the parallel loops over columns whose inner loops walk down the columns."""

    def fn(loop: Loop, names: Names, nest: Nest) -> Stmt | None:
        if nest.schedule is None or nest.schedule.pattern not in ("columns", "column-scan") or nest.depth != 0:
            return None
        return _Interchange(loop, names, nest.schedule).run()

    return walk_loops(k, fn)
