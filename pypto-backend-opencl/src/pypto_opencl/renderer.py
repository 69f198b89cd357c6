"""OpenCL C 1.2 rendering: the core's SIMT renderer, whose default spellings are OpenCL's."""

from __future__ import annotations

from pypto.dtypes import float64
from pypto.targets.simt.render import SimtRenderer

# 256-bit vectors at most (float4 .. double4, long4 indices): PoCL 3.0's LLVM aborts ("Cannot select",
# "Do not know how to scalarize") or silently miscompiles 512-bit vector code (float16, double8, long8)
# on AVX-512 CPUs such as AMD Zen 4; the driver still vectorises across work-items.
CPU_LANES = 4


class OpenCLRenderer(SimtRenderer):
    """OpenCL C 1.2 kernels; ``cl_khr_fp64`` is enabled when the kernel uses float64.

    For CPU devices (``cpu=True``) loops over contiguous points are written with vector types:
    CPU drivers vectorise across work-items only for straight-line code without calls.
    """

    def __init__(self, cpu: bool = False):
        super().__init__()
        if cpu:
            self.lanes = CPU_LANES

    def prelude(self) -> list[str]:
        if float64 in self.dtypes_used:
            return ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable"]
        return []
