"""The ``numba`` backend's hook implementations (entry point ``pypto: numba``).

Every hook answers only for its own backend name and returns ``None`` otherwise. The module stays
light: the renderer needs only pypto, and Numba itself is imported when a kernel is launched.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from typing import Any

from pypto.backend_api import PLUGIN_API_VERSION, Artifact, Availability, BackendSpec, Capabilities, Program
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
    try:
        compiler = f"numba {importlib.metadata.version('numba')}, llvmlite {importlib.metadata.version('llvmlite')}"
    except importlib.metadata.PackageNotFoundError:
        compiler = "numba (not installed)"
    return {"device": "cpu (Numba threads)", "threads": threads, "compiler": compiler}


@hookimpl
def pypto_declare_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name=NAME,
            version=__version__,
            plugin_api=PLUGIN_API_VERSION,
            priority=10,  # above the NumPy reference, below the C backends: "auto" prefers OpenMP
            capabilities=Capabilities(notes="loop IR rendered as Python; prange loops on Numba's thread pool"),
            probe=probe,
            info=info,
            description="Python source compiled by Numba (example third-party backend)",
            package="pypto-backend-numba",
            cacheable=False,  # the artifact is source text; Numba compiles it in each process
        )
    ]


@hookimpl
def pypto_codegen(backend: str, program: Program) -> str | None:
    if backend != NAME:
        return None
    from .renderer import render_numba

    return render_numba(program.loops)


@hookimpl
def pypto_compile(backend: str, program: Program, source: str) -> Artifact | None:
    if backend != NAME:
        return None
    # Numba compiles when the launcher first runs each variant; the artifact is the source.
    from .renderer import function_name

    return Artifact(NAME, source.encode(), ".py", {"function": function_name(program.loops)})


@hookimpl
def pypto_launch(backend: str, program: Program, artifact: Artifact):
    if backend != NAME:
        return None
    from pypto.ir.loops import Loop, walk

    from .launcher import NumbaLauncher
    from .renderer import is_prange

    parallel = any(isinstance(s, Loop) and is_prange(s) for s in walk(program.loops.body))
    source = artifact.data.decode()
    return NumbaLauncher(artifact.metadata["function"], source, parallel=parallel, fastmath=program.options.fastmath)
