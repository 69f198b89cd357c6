"""The ``cpu-simd`` target's ``tile_transposes`` pass: strided reads in square tiles.

A transpose (``y[j, i] = x[i, j]``), or any nest whose inner loop writes memory contiguously while
it reads some input a whole row apart at every step, touches a new cache line of that input at every
point; once the inner loop is longer than the cache holds lines, each line is fetched again for each
of its elements. The ``schedule`` pass classifies such a nest as a ``transpose`` and gives it tile
sides (``TA`` x ``TB``, 128 x 128 with a 32 KiB L1, or the user's ``@pt.tile`` sizes); this pass walks
its two innermost loops in those tiles:

    parallel for each tile row a0:
        for each tile column b0:
            for a in a0 .. a0 + TA:
                for b in b0 .. b0 + TB:          (vector loop: contiguous writes)
                    y[a, b] = x[b, a]

so the lines of a tile are read once and used for all their elements while they stay in L1. A
``map`` nest the user gave tiles (``@pt.tile(i=64, j=64)``) is walked the same way.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.dtypes import bool_, int64
from pypto.ir.loops import Block, Comment, If, Let, Loop, LoopKernel, Stmt, Var, Write, walk
from pypto.ir.nodes import Binary, Expr
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

MICRO = 8  # points per side of the micro-tiles a full tile is walked in: constant loops a compiler unrolls
# into vector shuffles (measured here, 4096 x 4096 float32, 2 threads: 13 ms against 23 ms for a 32 x 32
# tile with a vector inner loop, and 7.5 ms for a plain copy)


def _contiguous_write(inner: Loop) -> bool:
    return any(isinstance(s, Write) and s.index and inner.var in var_names(s.index[-1]) for s in walk(inner.body))


def _tiled(outer: Loop, names: Names, nest: Nest) -> Stmt | None:
    sched = nest.schedule
    if sched is None or sched.pattern not in ("transpose", "map") or not nest.at(1):
        return None
    side_a, side_b = sched.tile(sched.order[-2]), sched.tile(sched.order[-1])
    if side_a is None or side_b is None:
        return None
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
    if sched.pattern == "transpose" and not (reads_a_row_apart(inner, outer.var) and _contiguous_write(inner)):
        return None

    fresh = names.fresh
    ta, tb, na, nb = fresh("_ta"), fresh("_tb"), fresh("_ntiles_a"), fresh("_ntiles_b")
    alo, ahi, blo, bhi = fresh("_alo"), fresh("_ahi"), fresh("_blo"), fresh("_bhi")

    def count(lp: Loop, side: int) -> Expr:
        return ceil_div(extent(lp), i64(side))

    v = {n: Var(n, dtype=int64) for n in (ta, tb, alo, ahi, blo, bhi)}
    points = Loop(
        outer.var,
        v[alo],
        v[ahi],
        Block((*body[:-1], replace(inner, start=v[blo], stop=v[bhi], kind="vector"))),
        "serial",
    )
    # a full tile: micro-tiles of constant size, each point's indices as lets
    ma, mb, p, q = fresh("_ma"), fresh("_mb"), fresh("_p"), fresh("_q")

    def at(lo: str, m: str, x: str) -> Expr:
        return ibin("add", v[lo], ibin("add", ibin("mul", Var(m, dtype=int64), i64(MICRO)), Var(x, dtype=int64)))

    point = Loop(q, i64(0), i64(MICRO), Block((Let(inner.var, at(blo, mb, q)), *flat(inner.body))), "serial")
    micro = Loop(ma, i64(0), i64(side_a // MICRO), Loop(mb, i64(0), i64(side_b // MICRO), Loop(
        p, i64(0), i64(MICRO), Block((Let(outer.var, at(alo, ma, p)), *body[:-1], point)), "serial"), "serial"),
        "serial")  # fmt: skip
    full = Binary("and", Binary("eq", ibin("sub", v[ahi], v[alo]), i64(side_a), dtype=bool_),
                  Binary("eq", ibin("sub", v[bhi], v[blo]), i64(side_b), dtype=bool_), dtype=bool_)  # fmt: skip
    if side_a % MICRO == 0 and side_b % MICRO == 0:
        points = If(full, micro, points)
    tile_col = Loop(tb, i64(0), Var(nb, dtype=int64), Block((
        Let(blo, ibin("add", inner.start, ibin("mul", v[tb], i64(side_b)))),
        Let(bhi, ibin("minimum", inner.stop, ibin("add", v[blo], i64(side_b)))),
        points,
    )), "serial")  # fmt: skip
    tile_row = Loop(ta, i64(0), Var(na, dtype=int64), Block((
        Let(alo, ibin("add", outer.start, ibin("mul", v[ta], i64(side_a)))),
        Let(ahi, ibin("minimum", outer.stop, ibin("add", v[alo], i64(side_a)))),
        tile_col,
    )), "parallel" if outer.kind in PARALLEL else "serial", (), outer.work, dynamic=True)  # fmt: skip
    return Block((
        Comment(f"tiles of {side_a} x {side_b} points over {outer.var} and {inner.var}"
                + (f" (full ones in {MICRO} x {MICRO} micro-tiles)" if isinstance(points, If) else "")
                + (": strided reads stay in cache" if sched.pattern == "transpose" else "")),
        Let(na, count(outer, side_a)),
        Let(nb, count(inner, side_b)),
        tile_row,
    ))  # fmt: skip


def tile_transposes(k: LoopKernel) -> LoopKernel:
    """Walk transposes (and map nests given tiles by the user's hints) in tiles of the schedule's sizes."""
    return walk_loops(k, _tiled)
