"""The core's targets, declared through the ``pypto_targets`` hook like a third-party plugin's."""

from __future__ import annotations

from pypto.hookspecs import hookimpl
from pypto.targets import Target


@hookimpl
def pypto_targets() -> list[Target]:
    from pypto.targets.cpu import CPU_SIMD  # the passes' modules load when pypto first needs a backend
    from pypto.targets.simt import SIMT

    return [CPU_SIMD, SIMT]
