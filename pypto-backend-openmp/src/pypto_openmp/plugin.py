"""The ``openmp`` backend's plugin module (entry point ``openmp = "pypto_openmp.plugin"``): :data:`BACKEND`.

Kept light: nothing here imports cffi or runs a compiler until a hook needs it.
"""

from __future__ import annotations

from pypto.backend_api import (
    BASE_DTYPES,
    COMPLEX_DTYPES,
    HALF_DTYPES,
    PLUGIN_API_VERSION,
    SMALL_INT_DTYPES,
    Backend,
    Capabilities,
)
from pypto.hookspecs import hookimpl
from pypto.targets.cpu.backend import NativeBackend

from . import __version__

PYPTO_PLUGIN_API = PLUGIN_API_VERSION
NAME = "openmp"

_PROBE = """
#include <omp.h>
int pt_probe(void) {
    int n = 0;
    #pragma omp parallel reduction(+:n)
    n += 1;
    return n;
}
"""


def _renderer(toolchain, program):
    from .renderer import OpenMPRenderer

    return OpenMPRenderer(vector_math=toolchain.vector_math, own_math=not program.options.fastmath)


class OpenMPBackend(NativeBackend):
    """The C backend with OpenMP threads whose teams shrink while other processes hold the cores
    (:mod:`pypto_openmp.load`)."""

    def on_load(self, library) -> None:
        from .load import bind

        super().on_load(library)
        bind(library)

    def info(self) -> dict:
        from .load import report

        return {**super().info(), "load": report()}


BACKEND = OpenMPBackend(
    NAME,
    __version__,
    language="c",
    base_flags=("-O3", "-std=gnu11", "-fopenmp", "-fwrapv"),
    probe_source=_PROBE,
    make_renderer=_renderer,
    priority=100,
    package="pypto-backend-openmp",
    description="C99 + OpenMP, compiled with $CC (gcc or clang)",
    capabilities=Capabilities(
        dtypes=BASE_DTYPES | HALF_DTYPES | SMALL_INT_DTYPES | COMPLEX_DTYPES,
        atomics=True,  # __atomic builtins for deterministic=False scatters
        notes="OpenMP threads over outer loops, SIMD inner loops",
    ),
    codegen_modules=("pypto_openmp.renderer", "pypto_openmp.load"),
)


@hookimpl
def pypto_backends() -> list[Backend]:
    return [BACKEND]
