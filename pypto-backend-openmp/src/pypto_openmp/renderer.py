"""C + OpenMP rendering: the core's C renderer with pragmas, vector math and NaN-safe reductions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from pypto.ir.loops import Loop, LoopKernel
from pypto.targets.cpu.render import SimdCRenderer


class OpenMPRenderer(SimdCRenderer):
    """C99 with OpenMP pragmas: ``parallel for`` outside, ``simd`` inside."""

    includes = (*SimdCRenderer.includes, "<omp.h>")

    def __init__(self, vector_math: Iterable[str] = ()):
        super().__init__(vector_math)

    def extra_declarations(self, k: LoopKernel) -> list[str]:
        return [
            "static int pt_num_threads = 0;",
            "void pt_set_num_threads(int n) { pt_num_threads = n > 0 ? n : omp_get_max_threads(); }",
            "#define PT_THREADS (pt_num_threads > 0 ? pt_num_threads : omp_get_max_threads())",
            "int pt_get_num_threads(void) { return PT_THREADS; }",
            *self.vector_math_declarations(),
        ]

    def loop_header(self, s: Loop, ind: int) -> None:
        if s.kind in ("parallel", "parallel_vector"):
            simd = " simd" if s.kind == "parallel_vector" else ""
            clauses = "".join(" " + c for c in self.reduction_clauses(s))
            # few long iterations go to whichever thread is free (cores of a shared machine run at uneven
            # speeds: measured 1.5x on a 1024^3 matmul here); TBB's work stealing does this by itself
            sched = "dynamic, 1" if s.dynamic else "static"
            self.emit(ind, f"#pragma omp parallel for{simd} schedule({sched}) num_threads(PT_THREADS){clauses}")
        else:
            super().loop_header(s, ind)

    def threaded_loop(self, s: Loop, ind: int) -> None:
        """A parallel loop: on threads when ``threads_if`` holds, else on this thread without entering the
        OpenMP runtime (an ``if(...)`` clause would still cost a parallel region: ~0.4 us per call)."""
        if s.threads_if is None:
            super().loop(s, ind)
            return
        self.emit(ind, f"if ({self.expr(s.threads_if)}) {{")
        super().loop(replace(s, threads_if=None), ind + 1)
        self.emit(ind, "} else {")
        serial = "vector" if s.kind == "parallel_vector" else "serial"
        super().loop(replace(s, kind=serial, threads_if=None), ind + 1)
        self.emit(ind, "}")

    def streamed_loop(self, s: Loop, ind: int) -> None:
        """The loop twice: streaming stores for large outputs (each thread a run of whole blocks), plain
        stores otherwise."""
        assert s.streaming is not None
        B = s.streaming.block
        self.emit(ind, f"if ({self.stream_condition(s)}) {{")
        i = ind + 1
        self.emit(i, "#pragma omp parallel num_threads(PT_THREADS)")
        self.emit(i, "{")
        j = i + 1
        start, stop = self.expr(s.start), self.expr(s.stop, 12)
        self.emit(j, "const int64_t pt_t = omp_get_thread_num(), pt_nt = omp_get_num_threads();")
        self.emit(
            j,
            f"const int64_t pt_per = (({stop} - {self.expr(s.start, 12)} + pt_nt - 1) / pt_nt + {B - 1}) / {B} * {B};",
        )
        self.emit(j, f"const int64_t pt_lo = {start} + pt_t * pt_per;")
        self.emit(j, f"const int64_t pt_hi = pt_lo + pt_per < {stop} ? pt_lo + pt_per : {stop};")
        self.streamed_blocks(s, j, "pt_lo", "pt_blk < pt_hi", "pt_hi")
        self.emit(i, "}")
        self.emit(i, "pt_stream_fence();")
        self.emit(ind, "} else {")
        self.threaded_loop(s, ind + 1)
        self.emit(ind, "}")

    def loop(self, s: Loop, ind: int) -> None:
        if s.streaming is not None:
            self.streamed_loop(s, ind)
        elif s.kind in ("parallel", "parallel_vector"):
            self.threaded_loop(s, ind)
        else:
            super().loop(s, ind)
