"""The TBB flavour of the core's :class:`~pypto.targets.cpu.backend.NativeBackend`.

Compiling, caching, the fast-call entry point and loading are the core's; this adds what differs
for C++ and oneTBB: flags computed from the located wheels, the TBB version in the cache key, the
runtime library every loaded kernel is bound to, and a thread count reported as TBB sees it
(``OMP_NUM_THREADS`` means nothing to TBB).
"""

from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING, Any

from pypto.backend_api import Program
from pypto.targets.cpu.backend import NativeBackend, num_threads
from pypto.targets.machine import threads_chosen

from .locate import locate_tbb

if TYPE_CHECKING:
    from pypto.targets.cpu.loader import SharedObject


def default_concurrency() -> int:
    """The threads TBB uses by default: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity API on this platform
        return os.cpu_count() or 1


def thread_count() -> int:
    """The concurrency of a kernel's task arena once loaded: ``pt.set_num_threads`` or ``PYPTO_NUM_THREADS``,
    else TBB's default.

    Mirrors what :meth:`NativeBackend.launch` passes to ``pt_set_num_threads`` (0 = TBB's default).
    """
    return num_threads() if threads_chosen() else default_concurrency()


def compile_flags() -> tuple[str, ...]:
    """Compiler flags for the TBB headers (raises with the fix when tbb-devel is missing)."""
    return locate_tbb().compile_flags()


def link_flags() -> tuple[str, ...]:
    """Linker flags for libtbb, with an rpath to the wheel's library directory."""
    return locate_tbb().link_flags()


class TBBBackend(NativeBackend):
    """A :class:`NativeBackend` that builds C++ against the oneTBB of the installed wheels; kernels reach
    oneTBB through one runtime library (:mod:`pypto_tbb.runtime`), so they compile without its headers."""

    def info(self) -> dict[str, Any]:
        out = super().info()
        out["threads"] = thread_count()
        try:
            tbb = locate_tbb()
        except Exception as e:  # info is best-effort; availability carries the reason
            out["tbb"] = f"unavailable: {e}"
        else:
            out.update({"tbb": tbb.version, "tbb_include": tbb.include_dir, "tbb_library": tbb.library})
        return out

    def compile_key(self, program: Program) -> str:
        # the headers' version changes the binary even when their path does not
        return f"{super().compile_key(program)} tbb={locate_tbb().version}"

    def on_load(self, library: SharedObject) -> None:
        from .runtime import runtime_api

        library.call("pt_bind_runtime", ctypes.c_void_p(runtime_api(self, locate_tbb().version)))
        super().on_load(library)
