"""The ``simt`` target (CUDA, OpenCL): device kernels over work-groups of threads.

Its pass ``split_kernels`` (:mod:`pypto.targets.simt.split`) records which top-level statements
become which device kernel, under which host condition, and what lives between kernels (device
buffers, scalars passed on in one-element buffers). The SIMT renderer
(:mod:`pypto.targets.simt.render`) prints each kernel (``map``, ``groups`` or ``single``) and the
host's launch plan, which backends receive as data.
"""

from __future__ import annotations

from pypto.targets import Target


def _split_kernels(k):  # imported on use: loading the target list stays cheap
    from pypto.targets.simt.split import split_kernels

    return split_kernels(k)


_split_kernels.__name__ = "split_kernels"
_split_kernels.__module__ = "pypto.targets.simt.split"

SIMT = Target(
    "simt",
    (("split_kernels", _split_kernels),),  # device kernels in launch order, host conditions, slots
    "device kernels over work-groups of threads (CUDA, OpenCL)",
)
