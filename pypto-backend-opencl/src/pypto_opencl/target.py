"""The ``simt-opencl`` target: the core's ``simt`` passes with ``vector_lanes`` before ``place_barriers``.

OpenCL runs on GPUs and on CPU devices (PoCL). CPU drivers vectorise across work-items only for
straight-line code without calls, so on a CPU device the loops ``plan_launch`` found to have a vector
form are printed over vector types (``float8``); ``vector_lanes`` records their width on the kernel's
device split (shown by ``kernel.ir("vector_lanes", backend="opencl")``), 1 on GPUs. The renderer prints
what it records.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.ir.loops import Alloc, Assign, Declare, If, Let, Loop, LoopKernel, Var, Write, walk
from pypto.ir.nodes import postorder
from pypto.targets import Target

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


def device_is_cpu() -> bool:
    """Whether the OpenCL device kernels run on is a CPU (False when there is none: GPU-style code)."""
    from pypto.targets.simt.backend import DeviceUnavailable

    from .plugin import BACKEND

    try:
        return bool(BACKEND.device().is_cpu)
    except DeviceUnavailable:
        return False


def vector_lanes(k: LoopKernel) -> LoopKernel:
    """Record the vector width of ``k``'s vector loops: :func:`cpu_lanes` on a CPU device, else 1."""
    assert k.device is not None, "vector_lanes runs after the simt passes"
    lanes = cpu_lanes(k) if device_is_cpu() else 1
    return replace(k, device=replace(k.device, lanes=lanes))


def simt_opencl() -> Target:
    from pypto.targets.simt import SIMT

    return SIMT.extend(
        "simt-opencl",
        ("vector_lanes", vector_lanes),
        description="device kernels over work-groups (OpenCL): vector types on CPU devices",
        before="place_barriers",  # where a thread's points lie depends on the vector width
    )
