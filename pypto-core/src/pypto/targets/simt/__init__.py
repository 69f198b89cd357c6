"""The ``simt`` target (CUDA, OpenCL): device kernels over work-groups of threads.

Its pass ``split_kernels`` (:mod:`pypto.targets.simt.split`) records which top-level statements
become which device kernel, under which host condition, and what lives between kernels (device
buffers, scalars passed on in one-element buffers); ``plan_launch``
(:mod:`pypto.targets.simt.launch`) records how each kernel runs (``map``, ``groups`` or ``single``,
rows kept in local memory, loops with a vector form); ``place_barriers`` where a work-group waits
for its threads' writes, for the vector width a backend's own pass may have set. The SIMT renderer
(:mod:`pypto.targets.simt.render`) prints those kernels and the host's launch plan, which backends
receive as data.
"""

from __future__ import annotations

from pypto.targets import Target
from pypto.targets.machine import SIMT_DEVICE


def _split_kernels(k):  # imported on use: loading the target list stays cheap
    from pypto.targets.simt.split import split_kernels

    return split_kernels(k)


def _plan_launch(k):
    from pypto.targets.simt.launch import plan_launch

    return plan_launch(k)


def _place_barriers(k):
    from pypto.targets.simt.launch import place_barriers

    return place_barriers(k)


_split_kernels.__name__ = "split_kernels"
_split_kernels.__module__ = "pypto.targets.simt.split"
_plan_launch.__name__ = "plan_launch"
_plan_launch.__module__ = "pypto.targets.simt.launch"
_place_barriers.__name__ = "place_barriers"
_place_barriers.__module__ = "pypto.targets.simt.launch"

SIMT = Target(
    "simt",
    (
        ("split_kernels", _split_kernels),  # device kernels in launch order, host conditions, slots
        ("plan_launch", _plan_launch),  # map / groups / single, cached rows, vector loops
        ("place_barriers", _place_barriers),  # where groups wait for one another's writes (for the split's lanes)
    ),
    "device kernels over work-groups of threads (CUDA, OpenCL)",
    lambda: SIMT_DEVICE,
)
