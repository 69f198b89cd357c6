"""The ``simt`` target (CUDA, OpenCL): device kernels over work-groups of threads.

The SIMT renderer (:mod:`pypto.targets.simt.render`) splits the loop IR into device kernels and a host
launch plan. It adds no loop-IR passes yet.
"""

from __future__ import annotations

from pypto.targets import Target

SIMT = Target("simt", (), "device kernels over work-groups of threads (CUDA, OpenCL)")
