"""C++17 + oneTBB rendering: the core's SIMD C renderer with parallel loops as ``tbb::parallel_for``.

A parallel loop becomes a lambda over a chunk ``[begin, end)`` of its iterations, capturing by
reference but taking the buffers and sizes it reads as parameters (see :mod:`pypto.targets.cpu.captures`),
that runs either directly, for problems too small to be worth tasks, or under ``pt_parallel_for``
(see :mod:`pypto_tbb.runtime`). Inner loops are vectorised exactly as in
the OpenMP backend: ``#pragma omp simd`` (``-fopenmp-simd``), libmvec vector math, NaN-safe
max/min reductions. Large one-dimensional outputs are written with streaming stores, block by
block inside each task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from pypto.dtypes import int64
from pypto.ir.loops import Loop, LoopKernel, Var
from pypto.targets.cpu.render import SimdCRenderer

from .runtime import INCLUDES, TASK_MIN_WORK, support_source


class TBBRenderer(SimdCRenderer):
    """C++17 with oneTBB: ``tbb::parallel_for`` outside, ``omp simd`` inside."""

    includes = INCLUDES
    function_prefix = 'extern "C" '  # called from C (the fast entry) and through cffi
    restrict = "__restrict__"
    vector_math_linkage = 'extern "C" '

    def __init__(
        self,
        vector_math: Iterable[str] = (),
        task_min_work: int = TASK_MIN_WORK,
        own_math: bool = True,
    ):
        super().__init__(vector_math, own_math)
        self.task_min_work = task_min_work
        self.counter = 0

    def render(self, k: LoopKernel) -> str:
        self.counter = 0
        return super().render(k)

    def extra_declarations(self, k: LoopKernel) -> list[str]:
        return [*support_source(self.task_min_work), "", *self.vector_math_declarations()]

    def body(self, k: LoopKernel) -> list[str]:
        # an exception must not cross the C boundary (it would abort the interpreter): the only one
        # TBB can raise here is an allocation failure, reported like a failed temporary allocation
        self.emit(1, f"{self.status_type} pt_status = 0;")
        self.emit(1, "try {")
        self.stmt(k.body, 2)
        self.emit(1, "} catch (...) {")
        self.emit(2, "pt_status = 1;")
        self.emit(1, "}")
        self.emit(1, "return pt_status;")
        return self.lines

    # -- loops --------------------------------------------------------------------------------------
    def loop(self, s: Loop, ind: int) -> None:
        if s.kind not in ("parallel", "parallel_vector") or s.reductions:
            super().loop(s, ind)  # serial and vector loops; a reducing loop stays in one task
            return
        if s.streaming is not None:
            self.streamed_loop(s, ind)
        else:
            self.parallel_loop(s, ind)

    def fresh(self) -> int:
        self.counter += 1
        return self.counter

    def chunk_lambda(self, s: Loop, ind: int, n: int, render_chunk: Callable[[int, str, str], None]) -> str:
        """``auto pt_chunk<n> = [&](begin, end, values...) {...};``; returns the values to call it with.

        The buffers and sizes the body reads are parameters, not captures (see :mod:`pypto.targets.cpu.captures`).
        """
        begin, end = f"pt_begin{n}", f"pt_end{n}"
        params, values = self.chunk_parameters(s, begin, end)
        self.emit(ind, f"auto pt_chunk{n} = [&]({', '.join(params)}) {{")
        render_chunk(ind + 1, begin, end)
        self.emit(ind, "};")
        return ", ".join(values)

    def parallel_loop(self, s: Loop, ind: int) -> None:
        """``s`` as a chunk lambda, run by ``pt_parallel_for`` when the nest is large enough."""
        n = self.fresh()
        lo, hi = f"pt_lo{n}", f"pt_hi{n}"
        self.emit(ind, "{")
        i = ind + 1
        self.emit(i, f"const int64_t {lo} = {self.expr(s.start)}, {hi} = {self.expr(s.stop)};")

        def chunk(at: int, begin: str, end: str) -> None:
            super(TBBRenderer, self).loop(replace(s, start=Var(begin, dtype=int64), stop=Var(end, dtype=int64)), at)

        values = self.chunk_lambda(s, i, n, chunk)
        work = self.expr(s.work, 13) if s.work is not None else f"({hi} - {lo})"
        cond = f"{hi} - {lo} > 1"
        if s.threads_if is not None:  # decided by the cpu-simd target's parallel_threshold pass
            cond = f"{self.expr(s.threads_if, 6)} && {cond}"
        self.emit(i, f"if ({cond})")
        self.emit(i + 1, f"pt_parallel_for({lo}, {hi}, pt_grain({work}, {hi} - {lo}), "
                         f"[&](int64_t pt_b, int64_t pt_e) {{ pt_chunk{n}(pt_b, pt_e, {values}); }});")  # fmt: skip
        self.emit(i, "else")
        self.emit(i + 1, f"pt_chunk{n}({lo}, {hi}, {values});")
        self.emit(ind, "}")

    def streamed_loop(self, s: Loop, ind: int) -> None:
        """Large outputs: blocks computed into L1 buffers and streamed out; otherwise a plain parallel loop."""
        assert s.streaming is not None
        B = s.streaming.block
        n = self.fresh()
        lo, hi = f"pt_lo{n}", f"pt_hi{n}"
        self.emit(ind, f"if ({self.stream_condition(s)}) {{")
        i = ind + 1
        self.emit(i, f"const int64_t {lo} = {self.expr(s.start)}, {hi} = {self.expr(s.stop)};")

        def chunk(j: int, b0: str, b1: str) -> None:  # [b0, b1) are block numbers
            self.streamed_blocks(s, j, f"{lo} + {b0} * {B}", f"pt_blk < {lo} + {b1} * {B} && pt_blk < {hi}", hi)
            self.emit(j, "pt_stream_fence();  /* this task's streaming stores are complete before it ends */")

        values = self.chunk_lambda(s, i, n, chunk)
        # tasks own whole blocks, so every streamed block starts on a 64-byte boundary
        self.emit(i, f"pt_parallel_for(0, ({hi} - {lo} + {B - 1}) / {B}, 1, "
                     f"[&](int64_t pt_b, int64_t pt_e) {{ pt_chunk{n}(pt_b, pt_e, {values}); }});")  # fmt: skip
        self.emit(ind, "} else {")
        self.parallel_loop(s, ind + 1)
        self.emit(ind, "}")
