"""The ``simt-cuda`` target: the core's ``simt`` passes, then ``register_tiles``.

NVIDIA GPUs have registers enough for a thread to keep an 8 x 8 block of a contraction's outputs
(4 x 4 in float64): ``register_tiles`` records that on each ``tiles`` kernel of the split (shown by
``kernel.ir("register_tiles", backend="cuda")``), with the grid that then covers the outputs; the
renderer prints the register-tiled kernel it records.
"""

from __future__ import annotations

from pypto.ir.loops import LoopKernel
from pypto.targets import Target

OUTPUTS_PER_THREAD = 8
"""Rows and columns of a contraction's outputs one thread keeps (128 x 128 per block of 256 threads)."""


def register_tiles(k: LoopKernel) -> LoopKernel:
    """Record :data:`OUTPUTS_PER_THREAD` x :data:`OUTPUTS_PER_THREAD` outputs per thread on ``k``'s tiles kernels
    (:func:`pypto.targets.simt.launch.register_tiles`)."""
    from pypto.targets.simt.launch import register_tiles as record

    return record(k, OUTPUTS_PER_THREAD)


def simt_cuda() -> Target:
    from pypto.targets.simt import SIMT

    return SIMT.extend(
        "simt-cuda",
        ("register_tiles", register_tiles),
        description="device kernels over thread blocks (CUDA): register-tiled contractions",
    )
