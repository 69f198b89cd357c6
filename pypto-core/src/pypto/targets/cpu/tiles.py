"""The ``cpu-simd`` target's ``tile_transposes`` pass: strided reads in square tiles.

A transpose (``y[j, i] = x[i, j]``), or any nest whose inner loop writes memory contiguously while
it reads some input a whole row apart at every step, touches a new cache line of that input at every
point; once the inner loop is longer than the cache holds lines, each line is fetched again for each
of its elements. This pass walks such a nest in square tiles of :data:`TILE` x :data:`TILE` points:

    parallel for each tile row a0:
        for each tile column b0:
            for a in a0 .. a0 + TILE:
                for b in b0 .. b0 + TILE:        (vector loop: contiguous writes)
                    y[a, b] = x[b, a]

so the lines of a tile are read once and used for all their elements while they stay in L1.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.dtypes import int64
from pypto.ir.loops import Block, Comment, Let, Loop, LoopKernel, Stmt, Var, Write, walk
from pypto.ir.nodes import Expr
from pypto.targets.cpu.rewrite import (
    PARALLEL,
    Names,
    ceil_div,
    extent,
    flat,
    i64,
    ibin,
    reads_a_row_apart,
    rewrite_parallel_loops,
    var_names,
)

TILE = 32  # points per tile side: a 32 x 32 tile of float64 in and out is 16 KiB, within L1


def _contiguous_write(inner: Loop) -> bool:
    return any(isinstance(s, Write) and s.index and inner.var in var_names(s.index[-1]) for s in walk(inner.body))


def _tiled(outer: Loop, names: Names) -> Stmt | None:
    body = flat(outer.body)
    loops = [s for s in body if isinstance(s, Loop)]
    if len(loops) != 1 or body[-1] is not loops[0]:
        return None
    inner = loops[0]
    if inner.reductions or inner.kind in PARALLEL or outer.var in var_names(inner.start) | var_names(inner.stop):
        return None
    if any(not isinstance(s, (Let, Comment)) for s in body[:-1]):
        return None
    if any(not isinstance(s, (Let, Write, Comment)) for s in flat(inner.body)):
        return None
    if not (reads_a_row_apart(inner, outer.var) and _contiguous_write(inner)):
        return None

    fresh = names.fresh
    ta, tb, na, nb = fresh("_ta"), fresh("_tb"), fresh("_ntiles_a"), fresh("_ntiles_b")
    alo, ahi, blo, bhi = fresh("_alo"), fresh("_ahi"), fresh("_blo"), fresh("_bhi")

    def count(lp: Loop) -> Expr:
        return ceil_div(extent(lp), i64(TILE))

    v = {n: Var(n, dtype=int64) for n in (ta, tb, alo, ahi, blo, bhi)}
    points = Loop(
        outer.var,
        v[alo],
        v[ahi],
        Block((*body[:-1], replace(inner, start=v[blo], stop=v[bhi], kind="vector"))),
        "serial",
    )
    tile_col = Loop(tb, i64(0), Var(nb, dtype=int64), Block((
        Let(blo, ibin("add", inner.start, ibin("mul", v[tb], i64(TILE)))),
        Let(bhi, ibin("minimum", inner.stop, ibin("add", v[blo], i64(TILE)))),
        points,
    )), "serial")  # fmt: skip
    tile_row = Loop(ta, i64(0), Var(na, dtype=int64), Block((
        Let(alo, ibin("add", outer.start, ibin("mul", v[ta], i64(TILE)))),
        Let(ahi, ibin("minimum", outer.stop, ibin("add", v[alo], i64(TILE)))),
        tile_col,
    )), "parallel" if outer.kind in PARALLEL else "serial", (), outer.work)  # fmt: skip
    return Block((
        Comment(f"tiles of {TILE} x {TILE} points over {outer.var} and {inner.var}: strided reads stay in L1"),
        Let(na, count(outer)),
        Let(nb, count(inner)),
        tile_row,
    ))  # fmt: skip


def tile_transposes(k: LoopKernel) -> LoopKernel:
    """Walk nests that write contiguously but read a row apart at every step in square tiles."""
    return rewrite_parallel_loops(k, _tiled)
