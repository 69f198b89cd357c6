"""The ``cpu-simd`` target's ``block_contractions`` pass: contractions in register tiles.

A contraction (``c[i, j] = f(pt.reduce_sum(a[i, k] * b[k, j], axis=k))``: a matmul, a batched
matmul, a dense layer ``x[i, k] * w[j, k]``, with any epilogue ``f``) is lowered as one dot product
per output element, down a column of ``b``: a stride of a whole row at every step, one multiply-add
per element loaded. This pass rewrites the nest into the schedule of BLAS micro-kernels:

    parallel for each panel of NR columns j0:           (NR = 128 bytes of the result type)
        for each block of MR rows i0:                   (MR = 8)
            local acc[MR * NR] = 0                      (a register tile: 16 vectors for float32)
            for k:
                a_r = a[i0 + r, k] for r < MR           (broadcast scalars)
                for jj < NR:                            (vector loop, contiguous in b)
                    acc[r * NR + jj] += a_r * b[k, j0 + jj]     for r < MR
            c[i0 + r, j0 + jj] = f(acc[r * NR + jj])    (the epilogue, fused: c written once)

Every value of ``b`` loaded is used MR times and every ``a_r`` NR times; the tile stays in
registers. Each panel of ``b`` (K x NR values: the factor without ``i``, whatever its layout or
expression, ``w[j, k]`` included) is first *packed*, computed once into contiguous memory laid out as
the micro-kernel reads it, where all the row blocks reuse it from L2 without a TLB miss per row.
Rows left over (fewer than MR) take a one-row tile, a last narrower panel a tile of its width. Each element's products are summed in ``k`` order, as in the loop it replaces.

Left for later (see ``docs/performance.md``): packing ``a`` and blocking ``k`` for L1 (GotoBLAS), which
large ``K`` needs to keep the row block of ``a`` in L1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pypto.dtypes import DType, bool_, int64
from pypto.ir.loops import Alloc, Assign, Block, Comment, Declare, If, Let, Loop, LoopKernel, Read, Stmt, Var, Write
from pypto.ir.nodes import Binary, Expr, map_children
from pypto.ir.reducers import identity
from pypto.targets.cpu.rewrite import PARALLEL, Names, ceil_div, extent, flat, i64, ibin, var_names, walk_loops

MR = 8  # rows of a register tile
TILE_BYTES = 128  # width of a register tile's rows: two 512-bit vectors (32 float32, 16 float64)


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


class _Contraction:
    """One matched nest: ``rows`` (i) holding ``cols`` (j) holding ``acc``'s reduction loop ``red`` (k)."""

    def __init__(self, rows: Loop, names: Names):
        self.rows, self.fresh = rows, names.fresh

    def match(self) -> bool:
        body = [s for s in flat(self.rows.body) if not isinstance(s, Comment)]
        if len(body) != 1 or not isinstance(body[0], Loop):
            return False
        self.cols = cols = body[0]
        i, j = self.rows.var, cols.var
        if cols.reductions or cols.kind in PARALLEL or (var_names(cols.start) | var_names(cols.stop)) & {i}:
            return False
        inner = flat(cols.body)
        if len(inner) < 3 or not isinstance(inner[0], Declare) or not isinstance(inner[1], Loop):
            return False
        decl, red = inner[0], inner[1]
        self.acc, self.red, self.tail = decl, red, inner[2:]
        if red.reductions != ((decl.name, "sum"),) or decl.init != identity("sum", decl.dtype):
            return False
        if (var_names(red.start) | var_names(red.stop)) & {i, j}:
            return False
        if any(not isinstance(s, (Let, Write, Comment)) for s in self.tail):
            return False
        fold = flat(red.body)
        if len(fold) != 1 or not isinstance(fold[0], Assign) or fold[0].name != decl.name:
            return False
        v = fold[0].value
        if not (isinstance(v, Binary) and v.op == "add" and v.a == Var(decl.name, dtype=decl.dtype)):
            return False
        prod = v.b
        if not (isinstance(prod, Binary) and prod.op == "mul"):
            return False
        k = red.var
        for a, b in ((prod.a, prod.b), (prod.b, prod.a)):
            na, nb = var_names(a), var_names(b)
            if j not in na and i not in nb and decl.name not in na | nb:
                self.a, self.b = a, b
                break
        else:
            return False
        self.k = k
        self.dtype: DType = decl.dtype
        return True

    def tile(self, i0: Expr, j0: Expr, nrows: int, width: Expr, b_at: Callable[[Expr, Expr], Expr]) -> Stmt:
        """A register tile of ``nrows`` x ``width`` results at (i0, j0) (``width`` <= NR)."""
        nr = TILE_BYTES // self.dtype.itemsize
        acc = self.fresh("_acc")
        jj = self.fresh("_jj")
        jjv = Var(jj, dtype=int64)
        jv = ibin("add", j0, jjv)
        dt = self.dtype
        lanes = [ibin("add", i64(r * nr), jjv) for r in range(nrows)]
        zero = Loop(jj, i64(0), width, Block(tuple(Write(acc, (ix,), identity("sum", dt)) for ix in lanes)), "vector")
        a_names = [self.fresh("_a") for _ in range(nrows)]
        i_at = [ibin("add", i0, i64(r)) if r else i0 for r in range(nrows)]
        a_lets = [Let(a_names[r], _subst(self.a, {self.rows.var: i_at[r]})) for r in range(nrows)]
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
            self.red.start,
            self.red.stop,
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
        return Alloc(acc, dt, (i64(nrows * nr),), Block((zero, k_loop, *out)), local=True)

    def run(self) -> Stmt | None:
        if not self.match():
            return None
        rows, cols = self.rows, self.cols
        nr = TILE_BYTES // self.dtype.itemsize
        jb, ib, j0, i0, w, ri = (self.fresh(n) for n in ("_jb", "_ib", "_j0", "_i0", "_jw", "_ri"))
        pk, base = self.fresh("_bpack"), self.fresh("_pbase")
        j0v, i0v, wv, basev = (Var(n, dtype=int64) for n in (j0, i0, w, base))
        kk = ibin("sub", Var(self.k, dtype=int64), self.red.start)
        panel_size = ibin("mul", extent(self.red), i64(nr))

        def b_at(jv: Expr, jjv: Expr) -> Expr:  # the panel of b, packed [k][jj]
            return Read(pk, (ibin("add", basev, ibin("add", ibin("mul", kk, i64(nr)), jjv)),), dtype=self.b.dtype)

        jj = self.fresh("_jj")
        jjv = Var(jj, dtype=int64)
        fill = Loop(self.k, self.red.start, self.red.stop, Loop(jj, i64(0), wv, Write(
            pk, (ibin("add", basev, ibin("add", ibin("mul", kk, i64(nr)), jjv)),),
            _subst(self.b, {cols.var: ibin("add", j0v, jjv)})), "vector"), "serial")  # fmt: skip
        full_rows = ibin("floordiv", extent(rows), i64(MR))
        panel = Block((
            Let(j0, ibin("add", cols.start, ibin("mul", Var(jb, dtype=int64), i64(nr)))),
            Let(w, ibin("minimum", i64(nr), ibin("sub", cols.stop, j0v))),
            Let(base, ibin("mul", Var(jb, dtype=int64), panel_size)),
            fill,
            Loop(ib, i64(0), full_rows, Block((
                Let(i0, ibin("add", rows.start, ibin("mul", Var(ib, dtype=int64), i64(MR)))),
                If(Binary("eq", wv, i64(nr), dtype=bool_),
                   self.tile(i0v, j0v, MR, i64(nr), b_at), self.tile(i0v, j0v, MR, wv, b_at)),
            )), "serial"),
            Loop(ri, ibin("add", rows.start, ibin("mul", full_rows, i64(MR))), rows.stop,
                 self.tile(Var(ri, dtype=int64), j0v, 1, wv, b_at), "serial"),
        ))  # fmt: skip
        kind = "parallel" if rows.kind in PARALLEL else "serial"
        panels = ceil_div(extent(cols), i64(nr))
        main = Loop(jb, i64(0), panels, panel, kind, (), rows.work, dynamic=True)
        note = Comment(
            f"{self.acc.name}: contraction over {self.k} in register tiles of {MR} x {nr} ({rows.var} x {cols.var}), "
            f"each panel of {nr} columns of the factor without {rows.var} packed first"
        )
        return Block((note, Alloc(pk, self.b.dtype, (ibin("mul", panels, panel_size),), main)))


def block_contractions(k: LoopKernel) -> LoopKernel:
    """Rewrite contractions into register-tiled micro-kernels (see the module docstring)."""
    return walk_loops(k, lambda loop, names: _Contraction(loop, names).run())
