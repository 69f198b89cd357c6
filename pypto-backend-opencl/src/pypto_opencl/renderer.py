"""OpenCL C 1.2 rendering: the core's SIMT renderer, whose default spellings are OpenCL's."""

from __future__ import annotations

from pypto.dtypes import float64
from pypto.ir.loops import Alloc, Assign, Declare, If, Let, Loop, LoopKernel, Var, Write, walk
from pypto.ir.nodes import postorder
from pypto.targets.simt.render import LaunchPlan, SimtRenderer

# Vectors of 256 bits at most (float8, double4, long4): PoCL 3.0's LLVM aborts ("Cannot select", "Do not
# know how to scalarize") or silently miscompiles 512-bit vector code (float16, double8, long8) on AVX-512
# CPUs such as AMD Zen 4. Measured there (2 threads): float8 instead of float4 halves the time of vector add
# 16M (11.0 -> 6.4 ms) and softmax 4096^2 (34.6 -> 14.9 ms).
CPU_VECTOR_BYTES = 32


def cpu_lanes(k: LoopKernel) -> int:
    """Lanes for ``k``'s vector loops: 256 bits of the widest type a vectorised loop computes with
    (the loop variable counts as an int64 value when it is used as one, not only as an index)."""
    widest = 4
    for loop in walk(k.body):
        if not isinstance(loop, Loop) or any(isinstance(s, Loop) for s in walk(loop.body)):
            continue
        for st in walk(loop.body):
            if isinstance(st, (Declare, Alloc)):
                widest = max(widest, st.dtype.itemsize)
            values = (
                [st.value] if isinstance(st, (Let, Assign, Write)) else [st.cond] if isinstance(st, If) else []
            )  # indices of reads and writes stay scalar: postorder does not enter them
            for e in values:  # the value itself is computed (and stored) on every lane, whatever it is
                if e.dtype is not None:
                    widest = max(widest, e.dtype.itemsize)
                for n in postorder(e):
                    if n.dtype is not None and not (isinstance(n, Var) and n.name != loop.var and n.dtype.is_int):
                        widest = max(widest, n.dtype.itemsize)
    return max(1, CPU_VECTOR_BYTES // widest)


class OpenCLRenderer(SimtRenderer):
    """OpenCL C 1.2 kernels; ``cl_khr_fp64`` is enabled when the kernel uses float64.

    For CPU devices (``cpu=True``) loops over contiguous points are written with vector types:
    CPU drivers vectorise across work-items only for straight-line code without calls.
    """

    def __init__(self, cpu: bool = False):
        super().__init__()
        self.cpu = cpu

    def render_device(self, k: LoopKernel) -> tuple[str, LaunchPlan]:
        if self.cpu:
            self.lanes = cpu_lanes(k)
        return super().render_device(k)

    def prelude(self) -> list[str]:
        if float64 in self.dtypes_used:
            return ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable"]
        return []
