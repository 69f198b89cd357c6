"""The ``cpu-simd`` target's ``block_contractions`` pass: contractions in register tiles.

A contraction (``c[i, j] = f(pt.reduce_sum(a[i, k] * b[k, j], axis=k))``: a matmul, a batched
matmul, a dense layer ``x[i, k] * w[j, k]``, with any epilogue ``f``) is lowered as one dot product
per output element, down a column of ``b``: a stride of a whole row at every step, one multiply-add
per element loaded. The ``schedule`` pass classifies such a nest as a ``contraction`` and gives it a
register tile of MR x NR (two vectors wide: 8 x 32 float32 with AVX-512, 6 x 16 with AVX2), tasks
of NC columns (NR unless the user's ``@pt.tile(j=...)`` says) and, with ``@pt.tile(i=...)``, blocks
of MC rows. This pass rewrites the nest into that schedule, the one of BLAS micro-kernels:

    parallel for each task of NC columns j0:             (handed to the next free thread)
        [for each block of KC points of k:]              (with @pt.tile(k=KC))
        pack b[:, j0 : j0 + NC] into panels of NR columns, [k][jj]
        for each block of MC rows (all rows by default):
            [pack a[block, :] into slivers of MR rows]   (when NC > NR: several panels read it)
            for each panel of NR columns jp:
                for each block of MR rows i0:
                    local acc[MR * NR] = 0               (a register tile: 16 vectors for float32)
                                                         (or the partial sums of the k blocks so far)
                    for k:
                        a_r = a[i0 + r, k] for r < MR    (broadcast scalars, from the sliver if packed)
                        for jj < NR:                     (vector loop, contiguous in the panel)
                            acc[r * NR + jj] += a_r * panel[k, jj]     for r < MR
                    c[i0 + r, jp + jj] = f(acc[r * NR + jj])   (the epilogue, fused: c written once)

Every value of ``b`` loaded is used MR times and every ``a_r`` NR times; the tile stays in
registers. The panels of ``b`` (the factor without ``i``, whatever its layout or expression,
``w[j, k]`` included) are *packed*, computed once into contiguous memory laid out as the micro-kernel
reads them, where all the row blocks reuse them from L2 without a TLB miss per row. When a task
spans several panels, each block of rows of ``a`` (the factor with ``i``) is packed too, once per
task and block of ``k``: slivers of MR rows, each row's points of ``k`` contiguous (the layout that
keeps the tile in registers with gcc: a [k][r] interleave made it spill), which every panel of the
task then reads from L2. Rows left over (fewer than MR) take a one-row tile, read in place, and a
last narrower panel a tile of its width. Each element's products are summed in ``k`` order, as in
the loop it replaces, whatever the blocks.

Blocks of rows are hint-only; ``k`` is walked in blocks of 1024 points by default (on this machine, 1 MiB
of L2 per core, one panel per task measured fastest up to 2048 x 2048 x 2048, see ``docs/performance.md``).
The panels are filled in the order the factor lies in memory: a block's rows across all the task's panels for
``b[k, j]``, each column's points of ``k`` for ``w[j, k]`` (``x @ w.T``), so that the reads are contiguous.

With few rows (the schedule's ``few_rows``: at most 128 rows of the factor with ``i`` at run time, a small
batch through a dense layer, and columns for at least eight wide tasks), every packed value is used by one or
a few register tiles, so the product runs at the speed of reading ``b``: the task width and the block of
``k`` are then chosen at run time (tasks of a kilobyte of columns, blocks of 128 points), so that each block
of ``b`` is read as long contiguous runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pypto.dtypes import bool_, int64
from pypto.ir.loops import Alloc, Block, Comment, If, Let, Loop, LoopKernel, Read, Stmt, Var, Write
from pypto.ir.nodes import Binary, Expr, Where, map_children, postorder
from pypto.ir.reducers import identity
from pypto.ir.schedule import NestSchedule
from pypto.passes.schedule import FEW_ROWS_TASKS
from pypto.targets.contraction import ContractionNest
from pypto.targets.rewrite import PARALLEL, Names, Nest, ceil_div, extent, i64, ibin, var_names, walk_loops


def _subst(e: Expr, env: dict[str, Expr]) -> Expr:
    if isinstance(e, Var) and e.name in env:
        return env[e.name]
    if isinstance(e, Read):
        return replace(e, index=tuple(_subst(ix, env) for ix in e.index))
    return map_children(e, lambda c: _subst(c, env))  # type: ignore[return-value]


def _subst_stmt(s: Stmt, env: dict[str, Expr]) -> Stmt:
    if isinstance(s, Let):
        return Let(s.name, _subst(s.value, env))
    if isinstance(s, Write):
        return Write(s.buffer, tuple(_subst(ix, env) for ix in s.index), _subst(s.value, env))
    return s


class _Contraction(ContractionNest):
    """One matched nest (see :class:`~pypto.targets.contraction.ContractionNest`), rewritten into register tiles."""

    def __init__(self, rows: Loop, names: Names):
        super().__init__(rows)
        self.fresh = names.fresh

    def tile(
        self,
        i0: Expr,
        j0: Expr,
        nrows: int,
        width: Expr,
        b_at: Callable[[Expr, Expr], Expr],
        a_at: Callable[[int], Expr] | None = None,
    ) -> Stmt:
        """A register tile of ``nrows`` x ``width`` results at (i0, j0) (``width`` <= NR), reading row ``r``
        of the factor with ``i`` from ``a_at(r)`` (its packed sliver) when given."""
        nr = self.nr
        acc = self.fresh("_acc")
        jj = self.fresh("_jj")
        jjv = Var(jj, dtype=int64)
        jv = ibin("add", j0, jjv)
        dt = self.dtype
        lanes = [ibin("add", i64(r * nr), jjv) for r in range(nrows)]
        zero: Stmt = Loop(jj, i64(0), width, Block(tuple(Write(acc, (ix,), identity("sum", dt)) for ix in lanes)),
                          "vector")  # fmt: skip
        i_rel = [ibin("sub", ibin("add", i0, i64(r)) if r else i0, self.rows.start) for r in range(nrows)]
        kb = self.kblocks
        if kb is not None:  # a block of k after the first: the tile's partial sums so far
            part, first, _, task_j0, nc = kb
            at_part = [ibin("add", ibin("mul", i_rel[r], nc), ibin("add", ibin("sub", j0, task_j0), jjv))
                       for r in range(nrows)]  # fmt: skip
            load = Loop(jj, i64(0), width, Block(tuple(
                Write(acc, (lanes[r],), Read(part, (at_part[r],), dtype=dt)) for r in range(nrows))), "vector")  # fmt: skip
            zero = If(first, zero, load)
        a_names = [self.fresh("_a") for _ in range(nrows)]
        i_at = [ibin("add", i0, i64(r)) if r else i0 for r in range(nrows)]
        a_lets = [
            Let(a_names[r], a_at(r) if a_at is not None else _subst(self.a, {self.rows.var: i_at[r]}))
            for r in range(nrows)
        ]
        b_name = self.fresh("_b")
        bv = Var(b_name, dtype=self.b.dtype)
        fold: list[Stmt] = [Let(b_name, b_at(jv, jjv))]
        for r in range(nrows):
            prev = Read(acc, (lanes[r],), dtype=dt)
            fold.append(
                Write(
                    acc,
                    (lanes[r],),
                    Binary("add", prev, Binary("mul", Var(a_names[r], dtype=self.a.dtype), bv, dtype=dt), dtype=dt),
                )
            )
        k_loop = Loop(
            self.k,
            self.k_start,
            self.k_stop,
            Block((*a_lets, Loop(jj, i64(0), width, Block(tuple(fold)), "vector"))),
            "serial",
        )
        out: list[Stmt] = []
        for r in range(nrows):
            env = {self.rows.var: i_at[r], self.cols.var: jv, self.acc.name: Read(acc, (lanes[r],), dtype=dt)}
            out.append(
                Loop(
                    jj,
                    i64(0),
                    width,
                    Block(tuple(_subst_stmt(s, env) for s in self.tail if not isinstance(s, Comment))),
                    "vector",
                )
            )
        finish: Stmt = Block(tuple(out))
        if kb is not None:  # not the last block of k: keep the partial sums for the next
            part, _, last, _, _ = kb
            keep = Loop(jj, i64(0), width, Block(tuple(
                Write(part, (at_part[r],), Read(acc, (lanes[r],), dtype=dt)) for r in range(nrows))), "vector")  # fmt: skip
            finish = If(last, finish, keep)
        return Alloc(acc, dt, (i64(nrows * nr),), Block((zero, k_loop, finish)), local=True)

    def along_k(self) -> bool:
        """Whether the factor without ``i`` is read contiguously along ``k`` (``w[j, k]``: ``x @ w.T``)."""
        reads = [n for n in postorder(self.b) if isinstance(n, Read)]
        j = self.cols.var
        return bool(reads) and all(self.k in var_names(r.index[-1]) and j not in var_names(r.index[-1]) for r in reads)

    def run(self, sched: NestSchedule) -> Stmt | None:
        if not self.match():
            return Block((Comment(f"schedule: the contraction over {self.rows.var} was not rewritten (its lowered "
                                  "nest is not one sum of a product)"), self.rows))  # fmt: skip
        rows, cols = self.rows, self.cols
        assert sched.register is not None
        mr, nr = self.mr, self.nr = sched.register
        i_axis, j_axis = sched.order[-2], sched.order[-1]
        mc = sched.tile(i_axis)
        nc_tile = sched.tile(j_axis) or nr
        kc_tile = next((n for a, n in sched.tiles if a not in sched.order), None)  # points of k per block
        lets: list[Stmt] = []
        few = sched.few_rows
        if few is not None and kc_tile is not None:
            # few rows at run time: wide tasks, short blocks of k (see pypto.passes.schedule.FEW_ROWS)
            few_rows, few_nc, few_kc = few
            # and enough columns for FEW_ROWS_TASKS wide tasks: fewer would leave threads idle (and a small
            # factor stays in cache anyway)
            small = Binary("and", Binary("le", extent(rows), i64(few_rows), dtype=bool_),
                           Binary("ge", extent(cols), i64(FEW_ROWS_TASKS * few_nc), dtype=bool_), dtype=bool_)  # fmt: skip
            ncn, kcn = self.fresh("_nc"), self.fresh("_kc")
            lets = [Let(ncn, Where(small, i64(few_nc), i64(nc_tile), dtype=int64)),
                    Let(kcn, Where(small, i64(few_kc), i64(kc_tile), dtype=int64))]  # fmt: skip
            nc: Expr = Var(ncn, dtype=int64)
            kc: Expr | None = Var(kcn, dtype=int64)
            several = True  # a task may span several panels
        else:
            nc, kc = i64(nc_tile), (i64(kc_tile) if kc_tile is not None else None)
            several = nc_tile > nr
        micro = ceil_div(nc, i64(nr))  # register-tile panels per task
        jb, ib, j0, i0, w, ri = (self.fresh(n) for n in ("_jb", "_ib", "_j0", "_i0", "_jw", "_ri"))
        pk, base, mp = self.fresh("_bpack"), self.fresh("_pbase"), self.fresh("_mp")
        jp, wp, r0, r1 = self.fresh("_jp"), self.fresh("_pw"), self.fresh("_r0"), self.fresh("_r1")
        j0v, i0v, wv, basev, mpv = (Var(n, dtype=int64) for n in (j0, i0, w, base, mp))
        jpv, wpv, r0v, r1v = (Var(n, dtype=int64) for n in (jp, wp, r0, r1))
        if not several:  # one register-tile panel per task: it starts at the task's first column
            jpv, wpv = j0v, wv
        self.kblocks = None
        self.k_start, self.k_stop = self.red.start, self.red.stop
        if kc is not None:
            kb, nkb, klo, khi, part = (self.fresh(n) for n in ("_kb", "_nkb", "_klo", "_khi", "_cpart"))
            kbv, nkbv = Var(kb, dtype=int64), Var(nkb, dtype=int64)
            self.k_start, self.k_stop = Var(klo, dtype=int64), Var(khi, dtype=int64)
            first = Binary("eq", kbv, i64(0), dtype=bool_)
            last = Binary("eq", kbv, ibin("sub", nkbv, i64(1)), dtype=bool_)
            self.kblocks = (part, first, last, j0v, nc)
        kk = ibin("sub", Var(self.k, dtype=int64), self.k_start)
        # one packed panel of nr columns: [k][jj] (a block of k of it when k is blocked)
        k_points = extent(self.red) if kc is None else kc
        panel_size = ibin("mul", k_points, i64(nr))
        at = ibin("add", basev, ibin("mul", mpv, panel_size)) if several else basev

        def b_at(jv: Expr, jjv: Expr) -> Expr:  # the panel of b, packed [k][jj]
            return Read(pk, (ibin("add", at, ibin("add", ibin("mul", kk, i64(nr)), jjv)),), dtype=self.b.dtype)

        jj = self.fresh("_jj")
        jjv = Var(jj, dtype=int64)

        def per_panel(body: Stmt) -> Stmt:
            """``body`` for each register-tile panel of the task's columns (``_jp``, ``_pw`` wide)."""
            if not several:
                return body
            return Loop(mp, i64(0), ceil_div(wv, i64(nr)), Block((
                Let(jp, ibin("add", j0v, ibin("mul", mpv, i64(nr)))),
                Let(wp, ibin("minimum", i64(nr), ibin("sub", ibin("add", j0v, wv), jpv))),
                body,
            )), "serial")  # fmt: skip

        put = Write(pk, (ibin("add", at, ibin("add", ibin("mul", kk, i64(nr)), jjv)),),
                    _subst(self.b, {cols.var: ibin("add", jpv, jjv)}))  # fmt: skip
        if self.along_k():  # w[j, k]: each column's points of k read contiguously, written a panel row apart
            fill = per_panel(Loop(jj, i64(0), wpv, Loop(self.k, self.k_start, self.k_stop, put, "vector"), "serial"))
        else:  # w[k, j]: each row of the block read contiguously across the task's panels
            fill = Loop(self.k, self.k_start, self.k_stop, per_panel(Loop(jj, i64(0), wpv, put, "vector")), "serial")

        # the factor with i, packed when a task of the hinted width spans several panels: slivers of mr rows
        pack_a = nc_tile > nr
        apk = self.fresh("_apack")
        sliver = ibin("mul", k_points, i64(mr))  # one sliver's size
        ibv = Var(ib, dtype=int64)

        def a_at(r: int) -> Expr:
            return Read(apk, (ibin("add", ibin("mul", ibv, sliver), ibin("add", ibin("mul", i64(r), k_points), kk)),),
                        dtype=self.a.dtype)  # fmt: skip

        def full_slivers(lo: Expr, hi: Expr) -> Expr:
            return ibin("floordiv", ibin("sub", hi, lo), i64(mr))

        def pack_rows(lo: Expr, hi: Expr) -> Stmt:
            """Pack the full slivers of mr rows of the factor with i, rows lo to hi, this block of k."""
            rr = self.fresh("_pr")
            rrv = Var(rr, dtype=int64)
            row = ibin("add", lo, ibin("add", ibin("mul", ibv, i64(mr)), rrv))
            at = ibin("add", ibin("mul", ibv, sliver), ibin("add", ibin("mul", rrv, k_points), kk))
            return Loop(ib, i64(0), full_slivers(lo, hi), Loop(rr, i64(0), i64(mr), Loop(
                self.k, self.k_start, self.k_stop, Write(apk, (at,), _subst(self.a, {rows.var: row})), "vector"),
                "serial"), "serial")  # fmt: skip

        def row_tiles(lo: Expr, hi: Expr) -> Stmt:
            full = full_slivers(lo, hi)
            at = a_at if pack_a else None
            return Block((
                Loop(ib, i64(0), full, Block((
                    Let(i0, ibin("add", lo, ibin("mul", ibv, i64(mr)))),
                    If(Binary("eq", wpv, i64(nr), dtype=bool_),
                       self.tile(i0v, jpv, mr, i64(nr), b_at, at), self.tile(i0v, jpv, mr, wpv, b_at, at)),
                )), "serial"),
                Loop(ri, ibin("add", lo, ibin("mul", full, i64(mr))), hi,
                     self.tile(Var(ri, dtype=int64), jpv, 1, wpv, b_at), "serial"),
            ))  # fmt: skip

        def rows_block(lo: Expr, hi: Expr) -> Stmt:
            if not pack_a:
                return per_panel(row_tiles(lo, hi))
            return Block((pack_rows(lo, hi), per_panel(row_tiles(lo, hi))))

        if mc is None:
            compute = rows_block(rows.start, rows.stop)
        else:
            rb = self.fresh("_rb")
            compute = Loop(rb, i64(0), ceil_div(extent(rows), i64(mc)), Block((
                Let(r0, ibin("add", rows.start, ibin("mul", Var(rb, dtype=int64), i64(mc)))),
                Let(r1, ibin("minimum", rows.stop, ibin("add", r0v, i64(mc)))),
                rows_block(r0v, r1v),
            )), "serial")  # fmt: skip
        head = (
            Let(j0, ibin("add", cols.start, ibin("mul", Var(jb, dtype=int64), nc))),
            Let(w, ibin("minimum", nc, ibin("sub", cols.stop, j0v))),
            Let(base, i64(0)),  # each task packs into a buffer of its own (reused from the allocator's cache)
        )
        if kc is None:
            panel = Block((*head, fill, compute))
        else:  # each block of k packed and applied to every row in turn, partial sums kept in between
            blocks = Block((
                Let(nkb, ibin("maximum", i64(1), ceil_div(extent(self.red), kc))),
                Loop(kb, i64(0), nkbv, Block((
                    Let(klo, ibin("add", self.red.start, ibin("mul", kbv, kc))),
                    Let(khi, ibin("minimum", self.red.stop, ibin("add", self.k_start, kc))),
                    fill,
                    compute,
                )), "serial"),
            ))  # fmt: skip
            panel = Block((*head, Alloc(part, self.dtype, (ibin("mul", extent(rows), nc),), blocks)))
        if pack_a:  # one row block of the factor with i, one block of k, per task
            block_rows = extent(rows) if mc is None else ibin("minimum", i64(mc), extent(rows))
            panel = Alloc(apk, self.a.dtype, (ibin("mul", block_rows, k_points),), panel)
        # the task's panels: one block of k of them (the same memory for every block, warm in L2)
        panel = Alloc(pk, self.b.dtype, (ibin("mul", panel_size, micro),), panel)
        kind = "parallel" if rows.kind in PARALLEL else "serial"
        tasks = ceil_div(extent(cols), nc)
        main = Loop(jb, i64(0), tasks, panel, kind, (), rows.work, dynamic=True)
        blocks = f", blocks of {mc} rows" if mc is not None else ""
        blocks += f", blocks of {kc_tile} points of {self.k} (partial sums kept between them)" if kc_tile else ""
        blocks += f", slivers of {mr} rows of the factor with {rows.var} packed per block" if pack_a else ""
        if lets:
            blocks += (f"; with at most {few[0]} rows and {FEW_ROWS_TASKS * few[1]} columns or more, tasks of "
                       f"{few[1]} columns and blocks of {few[2]} points of {self.k}")  # fmt: skip
        note = Comment(
            f"{self.acc.name}: contraction over {self.k} in register tiles of {mr} x {nr} ({rows.var} x {cols.var}), "
            f"tasks of {nc_tile} columns of the factor without {rows.var}, packed first{blocks}"
        )
        return Block((note, *lets, main))


def block_contractions(k: LoopKernel) -> LoopKernel:
    """Rewrite contractions into register-tiled micro-kernels (see the module docstring)."""

    def fn(loop: Loop, names: Names, nest: Nest) -> Stmt | None:
        if nest.schedule is None or nest.schedule.pattern != "contraction" or nest.schedule.register is None:
            return None
        if not nest.at(1):  # the loop over rows holds the loop over columns
            return None
        return _Contraction(loop, names).run(nest.schedule)

    return walk_loops(k, fn)
