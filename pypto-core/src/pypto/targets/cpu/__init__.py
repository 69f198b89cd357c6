"""The ``cpu-simd`` target (OpenMP, TBB): threads over outer loops, SIMD inner loops.

Its passes rewrite and annotate the loop IR:

* ``block_columns`` (:mod:`pypto.targets.cpu.columns`): a parallel loop over columns whose inner
  loops walk down the columns (a column sum) becomes a loop over blocks of columns whose inner loops
  walk along rows, keeping per-column partial results in arrays.
* ``block_contractions`` (:mod:`pypto.targets.cpu.contractions`): a contraction (matmul, batched
  matmul, dense layer) with its epilogue becomes register-tiled micro-kernels over panels of columns.
* ``tile_transposes`` (:mod:`pypto.targets.cpu.tiles`): a nest writing contiguously while reading an
  input a row apart at every step (a transpose) is walked in square tiles that stay in L1.
* ``private_scratch`` (:mod:`pypto.targets.cpu.scratch`): a temporary read and written only at a loop's
  own index (a sort's scratch rows) is allocated in each iteration, one row's worth, not whole.
* ``while_lanes`` (:mod:`pypto.targets.cpu.lanes`): the per-point ``while`` loops of a loop's points (an escape
  loop, Newton iterations) run a block of points at a time in SIMD lanes, each lane's state in a small array.
* ``parallel_threshold``: a parallel loop starts threads only when its nest's estimated cost
  (``Loop.work``: points times a per-point cost) reaches :data:`PARALLEL_MIN_WORK`; below it,
  fork/join (OpenMP) or waking workers (TBB) costs more than it saves.
* ``stream_outputs``: a one-dimensional elementwise loop writing large outputs writes them with
  non-temporal stores (:class:`~pypto.ir.loops.Streaming`): the outputs are not read into the
  cache first, which saves a third of the memory traffic of ``c = a + b``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pypto.dtypes import bool_, int64
from pypto.ir.loops import Alloc, Block, If, Loop, LoopKernel, Read, Stmt, Streaming, Var, Write, stmt_exprs, walk
from pypto.ir.nodes import Binary, Const, postorder
from pypto.targets import Target
from pypto.targets.cpu.columns import block_columns
from pypto.targets.cpu.contractions import block_contractions
from pypto.targets.cpu.lanes import while_lanes
from pypto.targets.cpu.scratch import private_scratch
from pypto.targets.cpu.tiles import tile_transposes
from pypto.targets.machine import host_cpu

# Measured on the benchmark machine (2 threads): an OpenMP fork/join costs ~1.1 us, which a nest of
# this cost repays; the TBB backend uses the same threshold, so both thread the same loops.
PARALLEL_MIN_WORK = 1 << 19
# Outputs of at least this many bytes are written with non-temporal (streaming) stores, which skip
# reading the destination into the cache; smaller outputs are better left in the cache.
STREAM_MIN_BYTES = 16 << 20
# Elements computed into an L1 buffer per streamed block: 512 bytes of float32, a multiple of 64 bytes.
# Measured on the benchmark machine (vector add 16M, 2 threads): 128 elements 0.95-0.97x the hand-written
# intrinsics version, 64 0.98x, 256 1.05x, 1024 1.13x.
STREAM_BLOCK = 128


def map_loops(s: Stmt, fn: Callable[[Loop], Loop]) -> Stmt:
    """``s`` with ``fn`` applied to every loop, innermost first."""
    if isinstance(s, Block):
        return Block(tuple(map_loops(b, fn) for b in s.body))
    if isinstance(s, Loop):
        return fn(replace(s, body=map_loops(s.body, fn)))
    if isinstance(s, Alloc):
        return replace(s, body=map_loops(s.body, fn))
    if isinstance(s, If):
        return replace(s, then=map_loops(s.then, fn), orelse=None if s.orelse is None else map_loops(s.orelse, fn))
    return s


def parallel_threshold(k: LoopKernel, min_work: int = PARALLEL_MIN_WORK) -> LoopKernel:
    """Parallel loops with a cost estimate start threads only when it reaches ``min_work``."""

    def fn(s: Loop) -> Loop:
        if s.kind in ("parallel", "parallel_vector") and s.work is not None:
            return replace(s, threads_if=Binary("ge", s.work, Const(min_work, dtype=int64), dtype=bool_))
        return s

    return replace(k, body=map_loops(k.body, fn))


def streamed_outputs(s: Loop, ranks: dict[str, int]) -> list[str] | None:
    """The buffers a one-dimensional elementwise loop may write with streaming stores, or None.

    That is only correct when the loop writes each output element at the loop point itself, once,
    and never reads an output it writes. ``ranks`` gives the number of dimensions of each buffer.
    """
    if s.kind != "parallel_vector" or s.reductions or s.work is None:
        return None
    point = (Var(s.var, dtype=int64),)
    written: list[str] = []
    for st in walk(s.body):
        if isinstance(st, (Loop, Alloc)):
            return None
        if isinstance(st, Write):
            if st.index != point or ranks.get(st.buffer) != 1 or st.buffer in written:
                return None
            written.append(st.buffer)
    if not written:
        return None
    reads = {n.buffer for st in walk(s.body) for e in stmt_exprs(st) for n in postorder(e) if isinstance(n, Read)}
    return None if reads & set(written) else written


def stream_outputs(k: LoopKernel, min_bytes: int = STREAM_MIN_BYTES, block: int = STREAM_BLOCK) -> LoopKernel:
    """Mark loops whose outputs may be written with streaming stores (see :func:`streamed_outputs`)."""
    ranks = {a.name: len(a.shape) for a in k.args if a.kind == "buffer"}

    def fn(s: Loop) -> Loop:
        written = streamed_outputs(s, ranks)
        return replace(s, streaming=Streaming(tuple(written), min_bytes, block)) if written else s

    return replace(k, body=map_loops(k.body, fn))


CPU_SIMD = Target(
    "cpu-simd",
    (
        ("block_columns", block_columns),            # column loops walk rows: contiguous reads
        ("block_contractions", block_contractions),  # matmuls in register tiles, epilogues fused
        ("tile_transposes", tile_transposes),        # strided reads in tiles that stay in L1
        ("private_scratch", private_scratch),        # a loop's scratch rows allocated per iteration
        ("while_lanes", while_lanes),                # per-point while loops side by side in SIMD lanes
        ("parallel_threshold", parallel_threshold),  # fork threads only for nests worth it
        ("stream_outputs", stream_outputs),          # non-temporal stores for large 1-D outputs
    ),
    "threads over outer loops, SIMD inner loops (OpenMP, TBB)",
    host_cpu,
)  # fmt: skip
