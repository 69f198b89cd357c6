"""The NumPy reference backend (``executor="reference"``), registered through the plugin hooks.

It renders the typed, simplified tensor IR, before any scheduling, as a NumPy function that
computes whole axes at a time, so it states what a kernel means rather than how a backend
schedules it. It is always available (lowest priority), serves as the fallback when no compiled
backend is installed, and ``kernel.get_code(backend="reference")`` shows readable NumPy.
"""

from __future__ import annotations

from typing import Any

from pypto._version import __version__
from pypto.backend_api import (
    BASE_DTYPES,
    COMPLEX_DTYPES,
    HALF_DTYPES,
    PLUGIN_API_VERSION,
    SMALL_INT_DTYPES,
    Artifact,
    Backend,
    BackendSpec,
    Capabilities,
    Program,
    Source,
)
from pypto.hookspecs import hookimpl

PYPTO_PLUGIN_API = PLUGIN_API_VERSION
NAME = "reference"


class ReferenceBackend(Backend):
    """NumPy source from the reference IR, executed with ``exec`` (nothing to build or cache)."""

    spec = BackendSpec(  # type: ignore[assignment]
        name=NAME,
        version=__version__,
        plugin_api=PLUGIN_API_VERSION,
        priority=0,
        capabilities=Capabilities(
            dtypes=BASE_DTYPES | HALF_DTYPES | SMALL_INT_DTYPES | COMPLEX_DTYPES,
            notes="NumPy, whole arrays at a time; single-threaded",
        ),
        info=lambda: {"device": "cpu (NumPy)", "threads": 1},
        description="NumPy reference implementation (always available)",
        package="pypto-core",
        cacheable=False,
        stage="simplify",  # it renders Program.reference_ir (pypto.passes.REFERENCE_STAGE)
    )

    def render(self, program: Program) -> Source:
        from pypto.backends.numpy_source import render_numpy

        return Source(render_numpy(program.reference_ir))

    def build(self, program: Program, source: Source) -> Artifact:
        return Artifact(NAME, source.text.encode(), ".py", {"name": program.name})

    def load(self, program: Program, artifact: Artifact) -> Any:
        from pypto.backends.numpy_support import namespace

        source = artifact.data.decode()
        names = namespace(source)
        exec(compile(source, f"<pypto reference: {program.name}>", "exec"), names)
        return names[program.reference_ir.name]


BACKEND = ReferenceBackend()


@hookimpl
def pypto_backends() -> list[Backend]:
    return [BACKEND]
