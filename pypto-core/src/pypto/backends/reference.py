"""The NumPy reference backend (``executor="reference"``), registered through the plugin hooks.

It renders the typed, simplified tensor IR, before any scheduling, as a NumPy function that
computes whole axes at a time, so it states what a kernel means rather than how a backend
schedules it. It is always available (lowest priority), serves as the fallback when no compiled
backend is installed, and ``kernel.get_code(backend="reference")`` shows readable NumPy.
"""

from __future__ import annotations

from .._version import __version__
from ..backend_api import PLUGIN_API_VERSION, Artifact, BackendSpec, Capabilities, Program
from ..hookspecs import hookimpl

PYPTO_PLUGIN_API = PLUGIN_API_VERSION
NAME = "reference"


@hookimpl
def pypto_declare_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name=NAME,
            version=__version__,
            plugin_api=PLUGIN_API_VERSION,
            priority=0,
            capabilities=Capabilities(notes="NumPy, whole arrays at a time; single-threaded"),
            info=lambda: {"device": "cpu (NumPy)", "threads": 1},
            description="NumPy reference implementation (always available)",
            package="pypto-core",
            cacheable=False,
        )
    ]


@hookimpl
def pypto_codegen(backend: str, program: Program) -> str | None:
    if backend != NAME:
        return None
    from ..codegen.numpy_source import render_numpy

    return render_numpy(program.reference_ir)


@hookimpl
def pypto_compile(backend: str, program: Program, source: str) -> Artifact | None:
    if backend != NAME:
        return None
    return Artifact(NAME, source.encode(), ".py", {"name": program.name})


@hookimpl
def pypto_launch(backend: str, program: Program, artifact: Artifact):
    if backend != NAME:
        return None
    from ..codegen.numpy_support import NAMESPACE

    namespace = dict(NAMESPACE)
    code = compile(artifact.data.decode(), f"<pypto reference: {program.name}>", "exec")
    exec(code, namespace)
    return namespace[program.reference_ir.name]
