"""What every CPU backend's renderer adds to the C-family renderer: SIMD inner loops.

Vector loops get ``#pragma omp simd`` (compile with ``-fopenmp`` or ``-fopenmp-simd``) with
reduction clauses; math functions with vector variants in glibc's libmvec are declared
``declare simd`` so the compiler calls them on whole vectors. Float max/min reductions keep a
"saw NaN" flag per lane, because OpenMP's max/min combiners drop NaN while NumPy propagates it.
``pt_stream_bytes`` (non-temporal stores) writes the outputs the ``stream_outputs`` pass marked.
The thread-level mapping of parallel loops is the backend's: OpenMP pragmas, TBB ``parallel_for``.
"""

from __future__ import annotations

from collections.abc import Iterable

from pypto.dtypes import DType
from pypto.ir.loops import Assign, Loop, LoopKernel, Var, Write, walk
from pypto.ir.nodes import Binary
from pypto.ir.ops import REDUCERS
from pypto.targets.cpu import vmath
from pypto.targets.cpu.captures import free_values
from pypto.targets.cstyle import CRenderer

STREAM_HELPER = """\
#include <string.h>
/* non-temporal stores through the compiler's builtins: <immintrin.h> would take most of the compile time */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__) && (defined(__clang__) || \\
    (defined(__GNUC__) && !defined(__INTEL_COMPILER)))
#if defined(__AVX512F__)
#define PT_NT_BYTES 64
#elif defined(__AVX__)
#define PT_NT_BYTES 32
#else
#define PT_NT_BYTES 16
#endif
typedef long long pt_nt_vec __attribute__((vector_size(PT_NT_BYTES), may_alias));
#if defined(__clang__)
#define PT_NT_STORE(p, v) __builtin_nontemporal_store((v), (p))
#elif PT_NT_BYTES == 64
#define PT_NT_STORE(p, v) __builtin_ia32_movntdq512((p), (v))
#elif PT_NT_BYTES == 32
#define PT_NT_STORE(p, v) __builtin_ia32_movntdq256((p), (v))
#else
#define PT_NT_STORE(p, v) __builtin_ia32_movntdq((p), (v))
#endif
#define PT_NT_FENCE() __builtin_ia32_sfence()
#else
#define PT_NT_BYTES 0
#define PT_NT_FENCE() ((void)0)
#endif
/* copy n bytes from an aligned L1 buffer to memory without reading the destination into the cache */
static inline void pt_stream_bytes(void *PT_RESTRICT dst, const void *PT_RESTRICT src, size_t n) {
    size_t i = 0;
#if PT_NT_BYTES
    if (((uintptr_t)dst & (PT_NT_BYTES - 1)) == 0)
        for (; i + PT_NT_BYTES <= n; i += PT_NT_BYTES)
            PT_NT_STORE((pt_nt_vec *)((char *)dst + i), *(const pt_nt_vec *)((const char *)src + i));
#endif
    if (i < n) memcpy((char *)dst + i, (const char *)src + i, n - i);
}
static inline void pt_stream_fence(void) { PT_NT_FENCE(); }"""

OMP_REDUCTION = {r.name: r.omp for r in REDUCERS.values()}  # the op table's OpenMP reduction identifiers


class SimdCRenderer(CRenderer):
    """A C-family renderer whose vector loops are ``omp simd`` loops calling libmvec math (float32 ``exp`` and
    ``erf``: pypto's own, :mod:`pypto.targets.cpu.vmath`)."""

    def __init__(self, vector_math: Iterable[str] = (), own_math: bool = True):
        super().__init__()
        self.vector_math = set(vector_math)
        # float32 exp/erf generated here (pypto.targets.cpu.vmath); not for fastmath kernels, whose
        # reassociation would undo their range reduction (libmvec's are made for -ffast-math)
        self.own_math = own_math
        self.used_math: dict[str, DType] = {}
        self.nan_flags: dict[str, tuple[str, str]] = {}  # accumulator -> (flag variable, "max" | "min")
        self.streaming: set[str] = set()  # buffers whose writes go to an L1 block buffer
        self.noalias = True
        self.roles: dict[str, str] = {}  # buffer arguments' roles ("in" buffers are const)

    def render(self, k: LoopKernel) -> str:
        self.noalias = k.noalias
        self.roles = {a.name: a.role for a in k.args if a.kind == "buffer"}
        return super().render(k)

    def chunk_parameters(self, s: Loop, begin: str, end: str) -> tuple[list[str], list[str]]:
        """The parameters of the code that runs a chunk ``[begin, end)`` of the parallel loop ``s`` (the
        bounds, then the buffers and sizes its body reads: see :mod:`pypto.targets.cpu.captures`), and the
        values to call it with after the bounds."""
        buffers, scalars = free_values(s, {b: shape for b, (_, shape) in self.buffers.items()})
        params = [f"{self.index_type} {begin}", f"{self.index_type} {end}"]
        for b in buffers:
            const = "const " if self.roles.get(b, "out") == "in" else ""
            ptr = f"*{self.restrict} " if self.noalias and self.restrict else "*"
            params.append(f"{const}{self.buffer_ctype(self.buffers[b][0])} {ptr}{b}")
        params += [f"const {self.ctype(dt)} {name}" for name, dt in scalars]
        return params, [*buffers, *(name for name, _ in scalars)]

    # -- vector math -----------------------------------------------------------------------------
    def math_fn(self, name: str, dt: DType) -> str:
        own = vmath.OWN.get((name, dt)) if self.own_math else None
        if own is not None:  # generated here, of measured accuracy (see pypto.targets.cpu.vmath)
            if own not in self.helpers:
                self.helpers[own] = vmath.source(own, self.static_inline)
            return own
        fn = super().math_fn(name, dt)
        self.used_math[fn] = dt
        return fn

    def vector_math_declarations(self) -> list[str]:
        simd = sorted(f for f in self.used_math if f in self.vector_math)
        out = ["/* vector variants from glibc's libmvec */"] if simd else []
        for f in simd:
            t = self.ctype(self.used_math[f])
            out += ["#pragma omp declare simd notinbranch", f"{self.vector_math_linkage}{t} {f}({t});"]
        return out

    vector_math_linkage = ""  # C++ declares them 'extern "C" '

    def extra_declarations(self, k: LoopKernel) -> list[str]:
        return self.vector_math_declarations()

    def shared_declarations(self, k: LoopKernel) -> list[str]:
        return self.vector_math_declarations()

    # -- vector loops ------------------------------------------------------------------------------
    def reduction_clauses(self, s: Loop) -> list[str]:
        clauses = []
        for acc, op in s.reductions:
            clauses.append(f"reduction({OMP_REDUCTION[op]}:{acc})")
            if acc in self.nan_flags:
                clauses.append(f"reduction(|:{self.nan_flags[acc][0]})")
        return clauses

    def loop_header(self, s: Loop, ind: int) -> None:
        if s.kind in ("vector", "parallel_vector"):
            self.emit(ind, "#pragma omp simd" + "".join(" " + c for c in self.reduction_clauses(s)))

    def loop(self, s: Loop, ind: int) -> None:
        # max/min over floats: OpenMP's combiner drops NaN, so lanes keep a "saw NaN" flag on the side
        tracked = []
        for acc, op in s.reductions:
            dt = _acc_dtype(s, acc)
            if op in ("max", "min") and dt is not None and dt.is_float:
                flag = f"{acc}_nan"
                # an accumulator that is NaN already (from an enclosing loop) must stay NaN: the
                # OpenMP combiner would drop it when merging the lanes with the original value
                self.emit(ind, f"int {flag} = ({acc} != {acc});")
                self.nan_flags[acc] = (flag, op)
                tracked.append((acc, flag, dt))
        self.loop_core(s, ind)
        for acc, flag, dt in tracked:
            self.emit(ind, f"if ({flag}) {acc} = {self.literal(float('nan'), dt)};")
            del self.nan_flags[acc]

    def loop_core(self, s: Loop, ind: int) -> None:
        """The loop itself, inside what :meth:`loop` puts around it (the NaN flags of max/min reductions):
        a backend wraps it in a parallel region here, so that the flags are shared by the region's threads."""
        CRenderer.loop(self, s, ind)

    def stmt(self, s, ind: int) -> None:
        if isinstance(s, Write) and s.buffer in self.streaming:
            self.emit(ind, f"pt_buf_{s.buffer}[pt_j] = {self.expr(s.value)};")
            return
        if isinstance(s, Assign) and s.name in self.nan_flags:
            v = s.value
            if isinstance(v, Binary) and v.op in ("maximum", "minimum") and isinstance(v.a, Var) and v.a.name == s.name:
                flag, op = self.nan_flags[s.name]
                cmp = ">" if op == "max" else "<"
                t = self.ctype(v.dtype)  # type: ignore[arg-type]
                val = f"{s.name}_v"
                self.emit(ind, f"const {t} {val} = {self.expr(v.b)};")
                self.emit(ind, f"{s.name} = {val} {cmp} {s.name} ? {val} : {s.name};")
                self.emit(ind, f"{flag} |= ({val} != {val});")
                return
        super().stmt(s, ind)

    def use_stream_helper(self) -> None:
        """Emit ``pt_stream_bytes`` / ``pt_stream_fence`` into this translation unit."""
        self.helpers.setdefault("pt_stream_bytes", STREAM_HELPER.replace("PT_RESTRICT", self.restrict))

    # -- streamed outputs (marked by the stream_outputs pass; the backend maps them onto threads) --------
    def stream_condition(self, s: Loop) -> str:
        """C condition under which ``s`` streams: its outputs are large enough and 64-byte aligned."""
        assert s.streaming is not None
        self.use_stream_helper()
        points = f"({self.expr(s.stop, 12)} - {self.expr(s.start, 13)})"
        total = " + ".join(f"{points} * (int64_t)sizeof(*{b})" for b in s.streaming.buffers)
        aligned = " && ".join(f"((uintptr_t){b} & 63) == 0" for b in s.streaming.buffers)
        return f"({total}) >= {s.streaming.min_bytes}LL && {aligned}"

    def streamed_blocks(self, s: Loop, ind: int, first: str, more: str, hi: str) -> None:
        """``s``'s body over blocks starting at ``first`` while ``more`` holds (``hi``: the loop's end):
        each block is computed into L1 buffers by a SIMD loop and copied out with streaming stores."""
        assert s.streaming is not None
        B, written = s.streaming.block, s.streaming.buffers
        for b in written:
            self.emit(ind, f"{self.buffer_ctype(self.buffers[b][0])} pt_buf_{b}[{B}] __attribute__((aligned(64)));")
        self.emit(ind, f"for (int64_t pt_blk = {first}; {more}; pt_blk += {B}) {{")
        k = ind + 1
        self.emit(k, f"const int64_t pt_m = {hi} - pt_blk < {B} ? {hi} - pt_blk : {B};")
        self.emit(k, "#pragma omp simd")
        self.emit(k, "for (int64_t pt_j = 0; pt_j < pt_m; pt_j++) {")
        self.emit(k + 1, f"const int64_t {s.var} = pt_blk + pt_j;")
        self.streaming = set(written)
        self.stmt(s.body, k + 1)
        self.streaming = set()
        self.emit(k, "}")
        for b in written:
            self.emit(k, f"pt_stream_bytes({b} + pt_blk, pt_buf_{b}, (size_t)pt_m * sizeof(*{b}));")
        self.emit(ind, "}")


def _acc_dtype(s: Loop, acc: str) -> DType | None:
    for st in walk(s.body):
        if isinstance(st, Assign) and st.name == acc:
            return st.value.dtype
    return None
