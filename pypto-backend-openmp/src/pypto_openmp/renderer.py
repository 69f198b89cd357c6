"""C + OpenMP rendering: the core's C renderer with pragmas, vector math and NaN-safe reductions."""

from __future__ import annotations

from collections.abc import Iterable

from pypto.codegen.cstyle import CRenderer
from pypto.dtypes import DType
from pypto.ir.loops import Assign, Loop, LoopKernel, Var, walk
from pypto.ir.nodes import Binary

# A parallel loop forks threads only when its nest computes at least this many points: below it,
# the ~1 us fork/join costs more than it saves.
PARALLEL_MIN_WORK = 32768

_OMP_REDUCTION = {"sum": "+", "prod": "*", "max": "max", "min": "min"}


class OpenMPRenderer(CRenderer):
    """C99 with OpenMP pragmas: ``parallel for`` outside, ``simd`` inside."""

    includes = (*CRenderer.includes, "<omp.h>")

    def __init__(self, vector_math: Iterable[str] = (), parallel_min_work: int = PARALLEL_MIN_WORK):
        super().__init__()
        self.vector_math = set(vector_math)
        self.parallel_min_work = parallel_min_work
        self.used_math: dict[str, DType] = {}
        self.nan_flags: dict[str, tuple[str, str]] = {}  # accumulator -> (flag variable, "max" | "min")

    def math_fn(self, name: str, dt: DType) -> str:
        fn = super().math_fn(name, dt)
        self.used_math[fn] = dt
        return fn

    def extra_declarations(self, k: LoopKernel) -> list[str]:
        out = [
            "static int pt_num_threads = 0;",
            "void pt_set_num_threads(int n) { pt_num_threads = n > 0 ? n : omp_get_max_threads(); }",
            "#define PT_THREADS (pt_num_threads > 0 ? pt_num_threads : omp_get_max_threads())",
        ]
        simd = sorted(f for f in self.used_math if f in self.vector_math)
        if simd:
            out.append("/* vector variants from glibc's libmvec */")
        for f in simd:
            t = self.ctype(self.used_math[f])
            out += ["#pragma omp declare simd notinbranch", f"{t} {f}({t});"]
        return out

    def loop_header(self, s: Loop, ind: int) -> None:
        clauses = []
        for acc, op in s.reductions:
            clauses.append(f"reduction({_OMP_REDUCTION[op]}:{acc})")
            if acc in self.nan_flags:
                clauses.append(f"reduction(|:{self.nan_flags[acc][0]})")
        if s.kind in ("parallel", "parallel_vector"):
            simd = " simd" if s.kind == "parallel_vector" else ""
            cond = ""
            if s.work is not None:
                cond = f" if({self.expr(s.work, 10)} >= {self.parallel_min_work})"
            self.emit(ind, f"#pragma omp parallel for{simd} schedule(static) num_threads(PT_THREADS){cond}"
                      + "".join(" " + c for c in clauses))  # fmt: skip
        elif s.kind == "vector":
            self.emit(ind, "#pragma omp simd" + "".join(" " + c for c in clauses))

    def loop(self, s: Loop, ind: int) -> None:
        # max/min over floats: OpenMP's combiner drops NaN, so lanes keep a "saw NaN" flag on the side
        tracked = []
        for acc, op in s.reductions:
            if op in ("max", "min") and self._acc_dtype(s, acc) is not None and self._acc_dtype(s, acc).is_float:
                flag = f"{acc}_nan"
                self.emit(ind, f"int {flag} = 0;")
                self.nan_flags[acc] = (flag, op)
                tracked.append((acc, flag))
        super().loop(s, ind)
        for acc, flag in tracked:
            dt = self._acc_dtype(s, acc)
            self.emit(ind, f"if ({flag}) {acc} = {self.literal(float('nan'), dt)};")  # type: ignore[arg-type]
            del self.nan_flags[acc]

    def _acc_dtype(self, s: Loop, acc: str) -> DType | None:
        for st in walk(s.body):
            if isinstance(st, Assign) and st.name == acc:
                return st.value.dtype
        return None

    def stmt(self, s, ind: int) -> None:
        if isinstance(s, Assign) and s.name in self.nan_flags:
            v = s.value
            if (isinstance(v, Binary) and v.op in ("maximum", "minimum") and isinstance(v.a, Var)
                    and v.a.name == s.name):  # fmt: skip
                flag, op = self.nan_flags[s.name]
                cmp = ">" if op == "max" else "<"
                t = self.ctype(v.dtype)  # type: ignore[arg-type]
                val = f"{s.name}_v"
                self.emit(ind, f"const {t} {val} = {self.expr(v.b)};")
                self.emit(ind, f"{s.name} = {val} {cmp} {s.name} ? {val} : {s.name};")
                self.emit(ind, f"{flag} |= ({val} != {val});")
                return
        super().stmt(s, ind)
