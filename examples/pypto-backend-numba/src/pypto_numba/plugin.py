"""The ``numba`` backend's plugin module (entry point ``numba = "pypto_numba.plugin"``): :data:`BACKEND`.

The module stays light: it imports only pypto. The renderer is imported when a kernel is first
rendered, and Numba itself only when one is loaded (:meth:`NumbaBackend.load`).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from pypto.backend_api import (
    BASE_DTYPES,
    COMPLEX_DTYPES,
    PLUGIN_API_VERSION,
    Artifact,
    Availability,
    Backend,
    BackendSpec,
    Capabilities,
    Launcher,
    Program,
    Source,
)
from pypto.hookspecs import hookimpl

from . import __version__

PYPTO_PLUGIN_API = PLUGIN_API_VERSION
NAME = "numba"


def probe() -> Availability:
    """Available when Numba can be imported (checked without importing it)."""
    if importlib.util.find_spec("numba") is None:
        return Availability(False, "Numba is not installed: pip install numba")
    return Availability(True)


def info() -> dict[str, Any]:
    """Details for ``pt.get_runtime_info()`` and ``pypto info``."""
    value = os.environ.get("PYPTO_NUM_THREADS") or os.environ.get("NUMBA_NUM_THREADS") or ""
    threads = int(value) if value.isdigit() else os.cpu_count()
    import importlib.metadata  # imported here: it costs tens of milliseconds at plugin load

    try:
        compiler = f"numba {importlib.metadata.version('numba')}, llvmlite {importlib.metadata.version('llvmlite')}"
    except importlib.metadata.PackageNotFoundError:
        compiler = "numba (not installed)"
    return {"device": "cpu (Numba threads)", "threads": threads, "compiler": compiler}


SPEC = BackendSpec(
    name=NAME,
    version=__version__,
    plugin_api=PLUGIN_API_VERSION,
    priority=10,  # above the NumPy reference, below the C backends: "auto" prefers OpenMP
    # not the 16-bit floats, nor uint64 (Numba computes uint64 with int64 in float64); complex: pairs of floats
    capabilities=Capabilities(
        dtypes=BASE_DTYPES | COMPLEX_DTYPES | {"int8", "int16", "uint8", "uint16", "uint32"},
        notes="loop IR rendered as Python; prange loops on Numba's thread pool",
    ),
    probe=probe,
    info=info,
    description="Python source compiled by Numba (example third-party backend)",
    package="pypto-backend-numba",
    cacheable=False,  # the artifact is source text; Numba compiles it in each process
    # No target: the backend renders the core's loop IR and decides itself when a parallel loop
    # starts threads (pypto_numba.launcher.PARALLEL_MIN_WORK), from each loop's ``work`` estimate.
    target=None,
)


class NumbaBackend(Backend):
    """Loop IR -> Python source (:mod:`pypto_numba.renderer`) -> ``numba.njit`` when loaded."""

    @property
    def spec(self) -> BackendSpec:
        return SPEC

    def render(self, program: Program) -> Source:
        from .renderer import render_numba

        return Source(render_numba(program.loops))

    def build(self, program: Program, source: Source) -> Artifact:
        # Numba compiles when the launcher first runs each variant; the artifact is the source.
        from .renderer import function_name

        return Artifact(NAME, source.text.encode(), ".py", {"function": function_name(program.loops)})

    def load(self, program: Program, artifact: Artifact) -> Launcher:
        from pypto.ir.loops import Loop, walk

        from .launcher import NumbaLauncher  # imports numba
        from .renderer import is_prange

        parallel = any(isinstance(s, Loop) and is_prange(s) for s in walk(program.loops.body))
        return NumbaLauncher(
            artifact.metadata["function"],
            artifact.data.decode(),
            parallel=parallel,
            fastmath=program.options.fastmath,
        )


BACKEND = NumbaBackend()


@hookimpl
def pypto_backends() -> list[Backend]:
    return [BACKEND]
