"""C + OpenMP rendering: the core's C renderer with pragmas, vector math and NaN-safe reductions.

A parallel loop whose nest is too small for threads (the ``parallel_threshold`` pass's condition)
runs on the calling thread without entering the OpenMP runtime, which would cost a parallel region
(~0.4 us) even with an ``if`` clause. So that both ways run one copy of the nest, its loop over
rows is a function of its own, ``pt_nest<n>(begin, end, buffers and sizes...)`` (see
:mod:`pypto.targets.cpu.captures`), called once per thread or directly: a register-tiled
contraction is hundreds of lines of C, and compiling it twice doubled the compile time.

Every parallel region takes its team from ``pt_team()`` and reports how late its threads started
(``pt_region_done``): when other processes hold the cores, a thread of the team waits for its core for
milliseconds while the others wait for it, and the region then runs on fewer threads for a while (see
:mod:`pypto_openmp.load`, which holds the rule, its constants and the state every kernel shares).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from pypto.dtypes import int64
from pypto.ir.loops import Loop, LoopKernel, Var
from pypto.targets.cpu.captures import assigned_outside
from pypto.targets.cpu.render import SimdCRenderer

from .load import load_declarations


class OpenMPRenderer(SimdCRenderer):
    """C99 with OpenMP pragmas: a ``parallel`` region (``omp for`` or a static split) outside, ``simd`` inside."""

    includes = (*SimdCRenderer.includes, "<time.h>", "<omp.h>")

    def __init__(self, vector_math: Iterable[str] = (), own_math: bool = True):
        super().__init__(vector_math, own_math)
        self.nests = 0

    def render(self, k: LoopKernel) -> str:
        self.nests = 0
        return super().render(k)

    def extra_declarations(self, k: LoopKernel) -> list[str]:
        return [
            "static int pt_num_threads = 0;",
            "void pt_set_num_threads(int n) { pt_num_threads = n > 0 ? n : omp_get_max_threads(); }",
            "#define PT_THREADS (pt_num_threads > 0 ? pt_num_threads : omp_get_max_threads())",
            "int pt_get_num_threads(void) { return PT_THREADS; }",
            *load_declarations(),
            *self.vector_math_declarations(),
        ]

    def loop_header(self, s: Loop, ind: int) -> None:
        if s.kind in ("parallel", "parallel_vector"):  # inside the region :meth:`loop_core` opened
            simd = " simd" if s.kind == "parallel_vector" else ""
            clauses = "".join(" " + c for c in self.reduction_clauses(s))
            # few long iterations go to whichever thread is free (cores of a shared machine run at uneven
            # speeds: measured 1.5x on a 1024^3 matmul here); TBB's work stealing does this by itself
            sched = "dynamic, 1" if s.dynamic else "static"
            self.emit(ind, f"#pragma omp for{simd} schedule({sched}){clauses} nowait")
        else:
            super().loop_header(s, ind)

    # -- parallel regions ------------------------------------------------------------------------------------
    def region_open(self, ind: int, scope: bool = True) -> int:
        """Open a parallel region of ``pt_team()`` threads, each noting when it started (in a block of its own
        unless ``scope`` is False: the caller's block holds it); the indent of the region's body. Accumulators
        of reductions stay shared: the ``omp for`` inside reduces into them."""
        if scope:
            self.emit(ind, "{")
            ind += 1
        self.emit(ind, "const int pt_n = pt_team();")
        self.emit(ind, "const int64_t pt_r0 = pt_clock();")
        self.emit(ind, "int64_t pt_lag = 0, pt_busy = 0;")
        self.emit(ind, "#pragma omp parallel num_threads(pt_n)")
        self.emit(ind, "{")
        self.emit(ind + 1, "const int64_t pt_s = pt_clock();")
        return ind + 1

    def region_close(self, ind: int, scope: bool = True) -> None:
        """Close the region :meth:`region_open` opened at ``ind``: each thread reports its start and its work,
        then the team's lateness adjusts the next teams."""
        i = ind + 1 if scope else ind
        self.emit(i + 1, "pt_region_mark(pt_r0, pt_s, &pt_lag, &pt_busy);")
        self.emit(i, "}")
        self.emit(i, "pt_region_done(pt_n, pt_lag, pt_busy);")
        if scope:
            self.emit(ind, "}")

    def loop_core(self, s: Loop, ind: int) -> None:
        """A parallel loop as an ``omp for`` in a region of its own (inside the NaN flags its reductions
        share), any other loop as it is."""
        if s.kind not in ("parallel", "parallel_vector"):
            super().loop_core(s, ind)
            return
        super().loop_core(s, self.region_open(ind))
        self.region_close(ind)

    def threaded_loop(self, s: Loop, ind: int) -> None:
        """A parallel loop: on threads when ``threads_if`` holds, else on this thread without entering the
        OpenMP runtime (an ``if(...)`` clause would still cost a parallel region: ~0.4 us per call)."""
        if s.threads_if is None:
            super().loop(s, ind)
            return
        if s.kind == "parallel" and not s.reductions and not assigned_outside(s):
            self.outlined_loop(s, ind)
            return
        self.emit(ind, f"if ({self.expr(s.threads_if, 6)} && pt_team() > 1) {{")
        super().loop(replace(s, threads_if=None), ind + 1)
        self.emit(ind, "} else {")
        serial = "vector" if s.kind == "parallel_vector" else "serial"
        super().loop(replace(s, kind=serial, threads_if=None), ind + 1)
        self.emit(ind, "}")

    def outlined_loop(self, s: Loop, ind: int) -> None:
        """``s`` as ``pt_nest<n>(begin, end, values...)``: chunks on threads when ``threads_if`` holds (one
        per iteration with ``dynamic``, else OpenMP's static split: one run of iterations per thread),
        the whole range on this thread otherwise."""
        assert s.threads_if is not None
        self.nests += 1
        fn = f"pt_nest{self.nests}"
        params, passed = self.chunk_parameters(s, "pt_begin", "pt_end")
        outer, self.lines = self.lines, []
        self.emit(1, f"{self.status_type} pt_status = 0;")
        chunk = replace(s, kind="serial", threads_if=None, start=Var("pt_begin", dtype=int64),
                        stop=Var("pt_end", dtype=int64))  # fmt: skip
        super().loop(chunk, 1)
        self.emit(1, "return pt_status;")
        body, self.lines = self.lines, outer
        self.functions.append((f"{self.status_type} {fn}({', '.join(params)})", "\n".join(["{", *body, "}", ""])))
        values = "".join(f", {v}" for v in passed)
        start, stop = self.expr(s.start), self.expr(s.stop, 12)
        self.emit(ind, f"if ({self.expr(s.threads_if, 6)} && pt_team() > 1) {{")
        j = self.region_open(ind + 1, scope=False)
        if s.dynamic:
            self.emit(j, "#pragma omp for schedule(dynamic, 1) nowait")
            self.emit(j, f"for ({self.index_type} {s.var} = {start}; {s.var} < {self.expr(s.stop, 10)}; {s.var}++)")
            self.emit(j + 1, f"if ({fn}({s.var}, {s.var} + 1{values})) pt_status = 1;")
        else:
            self.emit(j, "const int64_t pt_t = omp_get_thread_num(), pt_nt = omp_get_num_threads();")
            self.emit(j, f"const int64_t pt_per = ({stop} - {self.expr(s.start, 12)} + pt_nt - 1) / pt_nt;")
            self.emit(j, f"const int64_t pt_lo = {start} + pt_t * pt_per;")
            self.emit(j, f"const int64_t pt_hi = pt_lo + pt_per < {stop} ? pt_lo + pt_per : {stop};")
            self.emit(j, f"if (pt_lo < pt_hi && {fn}(pt_lo, pt_hi{values})) pt_status = 1;")
        self.region_close(ind + 1, scope=False)
        self.emit(ind, f"}} else if ({fn}({start}, {stop}{values})) {{")
        self.emit(ind + 1, "pt_status = 1;")
        self.emit(ind, "}")

    def streamed_loop(self, s: Loop, ind: int) -> None:
        """The loop twice: streaming stores for large outputs (each thread a run of whole blocks), plain
        stores otherwise."""
        assert s.streaming is not None
        B = s.streaming.block
        self.emit(ind, f"if ({self.stream_condition(s)}) {{")
        i = ind + 1
        j = self.region_open(i, scope=False)
        start, stop = self.expr(s.start), self.expr(s.stop, 12)
        self.emit(j, "const int64_t pt_t = omp_get_thread_num(), pt_nt = omp_get_num_threads();")
        self.emit(
            j,
            f"const int64_t pt_per = (({stop} - {self.expr(s.start, 12)} + pt_nt - 1) / pt_nt + {B - 1}) / {B} * {B};",
        )
        self.emit(j, f"const int64_t pt_lo = {start} + pt_t * pt_per;")
        self.emit(j, f"const int64_t pt_hi = pt_lo + pt_per < {stop} ? pt_lo + pt_per : {stop};")
        self.streamed_blocks(s, j, "pt_lo", "pt_blk < pt_hi", "pt_hi")
        self.region_close(i, scope=False)
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
