"""OpenCL C 1.2 rendering: the core's SIMT renderer, whose default spellings are OpenCL's."""

from __future__ import annotations

from pypto.dtypes import float64
from pypto.targets.simt.render import SimtRenderer


class OpenCLRenderer(SimtRenderer):
    """OpenCL C 1.2 kernels; ``cl_khr_fp64`` is enabled when the kernel uses float64.

    Loops over contiguous points are written with vector types where the target's ``vector_lanes`` pass
    says so (CPU devices; :mod:`pypto_opencl.target`).
    """

    def prelude(self) -> list[str]:
        if float64 in self.dtypes_used:
            return ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable"]
        return []
