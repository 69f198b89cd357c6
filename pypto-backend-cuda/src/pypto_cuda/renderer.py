"""CUDA C rendering: the core's SIMT renderer with CUDA's spellings, warp shuffles and dynamic shared memory."""

from __future__ import annotations

from pypto.dtypes import INTEGER_DTYPES, DType, bfloat16, bool_, float16, float32, float64, int8, integer_spellings
from pypto.ir.loops import Update
from pypto.ir.reducers import identity
from pypto.targets.simt.analysis import Unsupported
from pypto.targets.simt.plan import LocalBuffer
from pypto.targets.simt.render import SimtRenderer

WARP = 32

_SI = "static __device__ __forceinline__"
CUDA_HALF_HELPERS = {
    "pt_f16_f32": f"#include <cuda_fp16.h>\n{_SI} float pt_f16_f32(unsigned short h) {{ return __half2float(__ushort_as_half(h)); }}",
    "pt_f32_f16": f"#include <cuda_fp16.h>\n{_SI} unsigned short pt_f32_f16(float x) {{ return __half_as_ushort(__float2half_rn(x)); }}",
    "pt_bf16_f32": f"{_SI} float pt_bf16_f32(unsigned short h) {{ return __uint_as_float((unsigned int)h << 16); }}",
    "pt_f32_bf16": f"""{_SI} unsigned short pt_f32_bf16(float x) {{
    const unsigned int u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  /* NaN stays a quiet NaN */
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  /* nearest, ties to even */
}}""",
}
"""The CUDA C of the 16-bit float conversions (the same names and meaning as OpenCL's)."""


class CudaRenderer(SimtRenderer):
    """CUDA C kernels (``extern "C"`` so they are found by name in the cubin).

    Map kernels use grid-stride loops; a group's reduction combines each warp with
    ``__shfl_down_sync``, then the warps' results through 32 words of shared memory (blocks are a
    whole number of warps). Cached rows live in dynamic shared memory sized at launch.
    """

    includes = ("<math.h>",)
    kernel_prefix = 'extern "C" __global__ void '
    restrict = "__restrict__"
    buffer_qualifier = ""
    local_qualifier = "__shared__ "
    static_inline = "static __device__ __forceinline__"
    math_suffix_f32 = "f"
    index_type = "long long"
    types = {
        float32: "float",
        float64: "double",
        bool_: "bool",
        float16: "unsigned short",
        bfloat16: "unsigned short",
        **integer_spellings({8: "char", 16: "short", 32: "int", 64: "long long"}, "unsigned "),
        int8: "signed char",  # (whether a plain char is signed is the compiler's choice)
    }  # fmt: skip  (16-bit floats: their bits)
    half_helpers = CUDA_HALF_HELPERS
    buffer_types: dict[DType, str] = {}
    scalar_types = {bool_: "unsigned char"}  # passed as one byte by the launcher
    unsigned_types = {d: "unsigned long long" if d.bits == 64 else "unsigned int" for d in INTEGER_DTYPES}
    reinterpret: dict[DType, str] = {}  # a C cast: nvcc converts unsigned to signed modulo 2^n
    int64_suffix = "LL"
    local_id = "(long long)threadIdx.x"
    local_size = "(long long)blockDim.x"
    group_id = "(long long)blockIdx.x"
    num_groups = "(long long)gridDim.x"
    global_id = "((long long)blockIdx.{c} * blockDim.{c} + threadIdx.{c})"
    local_id_dim = "(long long)threadIdx.{c}"
    group_id_dim = "(long long)blockIdx.{c}"
    global_size = "((long long)gridDim.{c} * blockDim.{c})"
    barrier = "__syncthreads();"
    barrier_global = "__syncthreads();"
    grid_stride = True
    register_tile_bounds = "__launch_bounds__(256, 2)"  # two blocks per multiprocessor: at most 128 registers
    strided_loop_pragma = "#pragma unroll 4"  # memory-bound loops: four loads of a thread in flight
    local_scratch_param = False

    def group_reduce_source(self, op: str, dt: DType, fn: str) -> str:
        t = self.ctype(dt)
        ident = self.literal(identity(op, dt).value, dt)
        shuffled = "__shfl_down_sync(0xffffffffu, v, o)"
        if dt.is_narrow_int or dt.is_bool:  # shuffles move 32-bit words at least
            shuffled = f"({t})__shfl_down_sync(0xffffffffu, (int)v, o)"
        fold = self.combine_text(op, dt, "v", shuffled)
        return (
            f"{self.static_inline} {t} {fn}({t} v) {{\n"
            f"    __shared__ {t} pt_w[{WARP}];\n"
            f"    const unsigned int lane = threadIdx.x & {WARP - 1}u, warp = threadIdx.x / {WARP}u;\n"
            f"    for (int o = {WARP // 2}; o > 0; o >>= 1) v = {fold};\n"
            f"    __syncthreads();  /* pt_w may still be read by the previous reduction */\n"
            f"    if (lane == 0) pt_w[warp] = v;\n"
            f"    __syncthreads();\n"
            f"    v = threadIdx.x < (blockDim.x + {WARP - 1}u) / {WARP}u ? pt_w[threadIdx.x] : {ident};\n"
            f"    if (warp == 0)\n"
            f"        for (int o = {WARP // 2}; o > 0; o >>= 1) v = {fold};\n"
            f"    if (threadIdx.x == 0) pt_w[0] = v;\n"
            f"    __syncthreads();\n"
            f"    return pt_w[0];\n}}"
        )

    def group_scan_source(self, op: str, dt: DType, fn: str) -> str:
        """An inclusive prefix over the block: each warp's by ``__shfl_up_sync`` doubling steps, then the warps'
        totals (a prefix over them by the first warp, through 32 words of shared memory) start each warp's
        values. The same order at every call: deterministic for a given block size."""
        t = self.ctype(dt)
        ident = self.literal(identity(op, dt).value, dt)

        def up(v: str) -> str:
            if dt.is_narrow_int or dt.is_bool:  # shuffles move 32-bit words at least
                return f"({t})__shfl_up_sync(0xffffffffu, (int){v}, o)"
            return f"__shfl_up_sync(0xffffffffu, {v}, o)"

        return (
            f"{self.static_inline} {t} {fn}({t} v, {t} *total) {{\n"
            f"    __shared__ {t} pt_w[{WARP}];\n"
            f"    const unsigned int lane = threadIdx.x & {WARP - 1}u, warp = threadIdx.x / {WARP}u;\n"
            f"    const unsigned int warps = (blockDim.x + {WARP - 1}u) / {WARP}u;\n"
            f"    for (int o = 1; o < {WARP}; o <<= 1) {{\n"
            f"        const {t} u = {up('v')};\n"
            f"        if (lane >= (unsigned int)o) v = {self.combine_text(op, dt, 'u', 'v')};\n"
            f"    }}\n"
            f"    __syncthreads();  /* pt_w may still be read by the previous call */\n"
            f"    if (lane == {WARP - 1}u) pt_w[warp] = v;\n"
            f"    __syncthreads();\n"
            f"    if (warp == 0) {{\n"
            f"        {t} w = lane < warps ? pt_w[lane] : {ident};\n"
            f"        for (int o = 1; o < {WARP}; o <<= 1) {{\n"
            f"            const {t} u = {up('w')};\n"
            f"            if (lane >= (unsigned int)o) w = {self.combine_text(op, dt, 'u', 'w')};\n"
            f"        }}\n"
            f"        pt_w[lane] = w;\n"
            f"    }}\n"
            f"    __syncthreads();\n"
            f"    if (warp > 0) v = {self.combine_text(op, dt, 'pt_w[warp - 1]', 'v')};\n"
            f"    *total = pt_w[warps - 1];\n"
            f"    return v;\n}}"
        )

    def group_scan_call(self, op: str, dt: DType, value: str, total: str) -> str:
        return f"{self.helper(f'groupscan_{op}', dt)}({value}, &{total})"

    def atomic_update(self, s: Update, ind: int) -> None:
        """CUDA's atomics where it has them (``atomicAdd`` on 32- and 64-bit integers, float and double;
        ``atomicMax``/``atomicMin`` on integers), else a compare-and-swap loop on the element's bits."""
        dt = self.buffers[s.buffer][0]
        if dt.bits not in (32, 64):
            raise Unsupported(f"an atomic update of a {dt.bits}-bit element")
        word = "unsigned int" if dt.bits == 32 else "unsigned long long"
        fn = {"add": "atomicAdd", "max": "atomicMax", "min": "atomicMin"}[s.op]
        if dt.is_int or (s.op == "add" and dt.is_float):
            native, ref = self.ctype(dt), f"{s.buffer}[{self.offset(s.buffer, s.index)}]"
            if dt.is_int and dt.bits == 64:  # atomicAdd has no long long overload; max/min have both
                native = "unsigned long long" if s.op == "add" or dt.is_unsigned else "long long"
            self.emit(ind, f"{fn}(({native} *)&{ref}, ({native})({self.expr(s.value)}));")
            return
        if dt.bits == 32:
            self.cas_loop(s, ind, word, "__uint_as_float({})", "__float_as_uint({})", "atomicCAS")
        else:
            self.cas_loop(s, ind, word, "__longlong_as_double((long long){})",
                          "(unsigned long long)__double_as_longlong({})", "atomicCAS")  # fmt: skip

    def group_reduce_call(self, op: str, dt: DType, value: str) -> str:
        return f"{self.helper(f'group_{op}', dt)}({value})"

    def local_declarations(self, local: tuple[LocalBuffer, ...]) -> list[str]:
        """Cached rows, one after the other in the block's dynamic shared memory (16-byte aligned)."""
        rows = [b for b in local if not b.per_thread]
        if not rows:
            return []
        ind = self.indent_unit
        out = [ind + "extern __shared__ __align__(16) unsigned char pt_dyn[];", ind + "long long pt_at = 0;"]
        for b in rows:
            t = self.ctype(self.cache_dtype(b.name))
            out.append(ind + f"{t} *__restrict__ {b.name} = ({t} *)(pt_dyn + pt_at);")
            out.append(ind + f"pt_at += ((long long)({self.st.row_count}) * {b.itemsize} + 15) / 16 * 16;")
        return out
