"""OpenCL C 1.2 rendering: the core's SIMT renderer, whose default spellings are OpenCL's."""

from __future__ import annotations

from pypto.dtypes import float64
from pypto.targets.simt.render import SimtRenderer


class OpenCLRenderer(SimtRenderer):
    """OpenCL C 1.2 kernels; ``cl_khr_fp64`` is enabled when the kernel uses float64.

    Loops over contiguous points are written with vector types where the target's ``vector_lanes`` pass
    says so (CPU devices; :mod:`pypto_opencl.target`).
    """

    # barriers through macros: a CPU device's groups of one work-item run the program built with PT_ONE_ITEM,
    # without them (pypto_opencl.launcher: PoCL took minutes to compile kernels of many group reductions)
    barrier = "PT_BARRIER();"
    barrier_global = "PT_BARRIER_GLOBAL();"

    def prelude(self) -> list[str]:
        out = ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable"] if float64 in self.dtypes_used else []
        return [*out, *ONE_ITEM_MACROS]


ONE_ITEM_MACROS = [
    "#ifdef PT_ONE_ITEM  /* built for groups of one work-item: no barrier to wait at */",
    "#define PT_BARRIER()",
    "#define PT_BARRIER_GLOBAL()",
    "#else",
    "#define PT_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)",
    "#define PT_BARRIER_GLOBAL() barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE)",
    "#endif",
]
