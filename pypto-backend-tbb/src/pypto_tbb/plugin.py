"""The ``tbb`` backend's plugin module (entry point ``tbb = "pypto_tbb.plugin"``): :data:`BACKEND`.

Kept light: nothing here imports cffi, looks for TBB or runs a compiler until a hook needs it.
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

from . import __version__
from .backend import TBBBackend, compile_flags, link_flags

PYPTO_PLUGIN_API = PLUGIN_API_VERSION
NAME = "tbb"

# compiled and linked against the located headers and libtbb: proves both are usable
_PROBE = """
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
extern "C" int pt_probe(int *out, int n) {
    tbb::task_arena arena(2);
    arena.execute([&] {
        tbb::parallel_for(tbb::blocked_range<int>(0, n), [&](const tbb::blocked_range<int> &r) {
            for (int i = r.begin(); i < r.end(); i++) out[i] = i;
        }, tbb::simple_partitioner());
    });
    return arena.max_concurrency();
}
"""


def _renderer(toolchain, program):
    from .renderer import TBBRenderer

    return TBBRenderer(vector_math=toolchain.vector_math, own_math=not program.options.fastmath)


BACKEND = TBBBackend(
    NAME,
    __version__,
    language="c++",
    base_flags=("-O3", "-std=gnu++17", "-fopenmp-simd", "-fwrapv"),
    probe_source=_PROBE,
    make_renderer=_renderer,
    priority=90,  # below OpenMP: "auto" keeps choosing OpenMP when both are installed
    package="pypto-backend-tbb",
    description="C++17 + oneTBB (tbb-devel wheel), compiled with $CXX (g++ or clang++)",
    capabilities=Capabilities(
        dtypes=BASE_DTYPES | HALF_DTYPES | SMALL_INT_DTYPES | COMPLEX_DTYPES,
        atomics=True,  # __atomic builtins for deterministic=False scatters
        notes="tbb::parallel_for over outer loops (a few chunks per thread), SIMD inner loops",
    ),
    # libtbb stays mapped until the process exits: the core's loader pins it (RTLD_NODELETE) once loaded
    extra_flags=compile_flags,
    extra_link=link_flags,
    codegen_modules=("pypto_tbb.renderer", "pypto_tbb.runtime"),
)


@hookimpl
def pypto_backends() -> list[Backend]:
    return [BACKEND]
