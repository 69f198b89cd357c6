"""C + OpenMP rendering: the core's C renderer with pragmas, vector math and NaN-safe reductions."""

from __future__ import annotations

from collections.abc import Iterable

from pypto.ir.loops import Loop, LoopKernel, Write
from pypto.targets.cpu.render import SimdCRenderer


class OpenMPRenderer(SimdCRenderer):
    """C99 with OpenMP pragmas: ``parallel for`` outside, ``simd`` inside."""

    includes = (*SimdCRenderer.includes, "<omp.h>")

    def __init__(self, vector_math: Iterable[str] = ()):
        super().__init__(vector_math)
        self.streaming: set[str] = set()  # buffers whose writes go to an L1 block buffer

    def extra_declarations(self, k: LoopKernel) -> list[str]:
        return [
            "static int pt_num_threads = 0;",
            "void pt_set_num_threads(int n) { pt_num_threads = n > 0 ? n : omp_get_max_threads(); }",
            "#define PT_THREADS (pt_num_threads > 0 ? pt_num_threads : omp_get_max_threads())",
            *self.vector_math_declarations(),
        ]

    def loop_header(self, s: Loop, ind: int) -> None:
        if s.kind in ("parallel", "parallel_vector"):
            simd = " simd" if s.kind == "parallel_vector" else ""
            cond = f" if({self.expr(s.threads_if)})" if s.threads_if is not None else ""
            clauses = "".join(" " + c for c in self.reduction_clauses(s))
            self.emit(ind, f"#pragma omp parallel for{simd} schedule(static) num_threads(PT_THREADS){cond}{clauses}")
        else:
            super().loop_header(s, ind)

    def streamed_loop(self, s: Loop, ind: int) -> None:
        """The loop twice: streaming stores for large outputs, plain stores otherwise."""
        assert s.streaming is not None
        written = s.streaming.buffers
        self.use_stream_helper()
        points = f"({self.expr(s.stop, 12)} - {self.expr(s.start, 13)})"
        bytes_expr = " + ".join(f"{points} * (int64_t)sizeof(*{b})" for b in written)
        aligned = " && ".join(f"((uintptr_t){b} & 63) == 0" for b in written)
        B = s.streaming.block
        self.emit(ind, f"if (({bytes_expr}) >= {s.streaming.min_bytes}LL && {aligned}) {{")
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
        for b in written:
            t = self.buffer_ctype(self.buffers[b][0])
            self.emit(j, f"{t} pt_buf_{b}[{B}] __attribute__((aligned(64)));")
        self.emit(j, f"for (int64_t pt_blk = pt_lo; pt_blk < pt_hi; pt_blk += {B}) {{")
        k = j + 1
        self.emit(k, f"const int64_t pt_m = pt_hi - pt_blk < {B} ? pt_hi - pt_blk : {B};")
        self.emit(k, "#pragma omp simd")
        self.emit(k, "for (int64_t pt_j = 0; pt_j < pt_m; pt_j++) {")
        self.emit(k + 1, f"const int64_t {s.var} = pt_blk + pt_j;")
        self.streaming = set(written)
        self.stmt(s.body, k + 1)
        self.streaming = set()
        self.emit(k, "}")
        for b in written:
            self.emit(k, f"pt_stream_bytes({b} + pt_blk, pt_buf_{b}, (size_t)pt_m * sizeof(*{b}));")
        self.emit(j, "}")
        self.emit(i, "}")
        self.emit(i, "pt_stream_fence();")
        self.emit(ind, "} else {")
        super().loop(s, ind + 1)
        self.emit(ind, "}")

    def loop(self, s: Loop, ind: int) -> None:
        if s.streaming is not None:
            self.streamed_loop(s, ind)
            return
        super().loop(s, ind)

    def stmt(self, s, ind: int) -> None:
        if isinstance(s, Write) and s.buffer in self.streaming:
            self.emit(ind, f"pt_buf_{s.buffer}[pt_j] = {self.expr(s.value)};")
            return
        super().stmt(s, ind)
