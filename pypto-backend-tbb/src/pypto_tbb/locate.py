"""Finding oneTBB in the installed wheels: headers from ``tbb-devel``, ``libtbb.so.12`` from ``tbb``.

The wheels install their files under the environment's prefix (``<prefix>/include``,
``<prefix>/lib``), wherever that is: the paths are read from the distributions' file lists, never
assumed. Nothing here runs a compiler; the result is computed once per process.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pypto.targets.cpu.toolchain import ToolchainError

if TYPE_CHECKING:
    from importlib import metadata

DEVEL_DIST = "tbb-devel"
RUNTIME_DIST = "tbb"
_HEADER = "oneapi/tbb/parallel_for.h"  # oneTBB (2021 and later) layout
_LIBRARY = re.compile(r"^libtbb\.so\.\d+$")  # the name the linker records (SONAME), e.g. libtbb.so.12


class TBBNotFound(ToolchainError):
    """oneTBB's headers or runtime library are missing: the message says which and how to install them."""


@dataclass(frozen=True)
class TBBInstall:
    """Where the oneTBB headers and runtime library are, and which version they are."""

    version: str
    include_dir: str
    lib_dir: str
    library: str  # full path of libtbb.so.<major>

    def compile_flags(self) -> tuple[str, ...]:
        """Compiler flags that make ``#include <oneapi/tbb/...>`` find the wheel's headers."""
        return (f"-I{self.include_dir}",)

    def link_flags(self) -> tuple[str, ...]:
        """Linker flags: libtbb, found at run time through an rpath (no LD_LIBRARY_PATH needed)."""
        rpath = f"-Wl,-rpath,{self.lib_dir}"
        if (Path(self.lib_dir) / "libtbb.so").exists():
            return (f"-L{self.lib_dir}", "-ltbb", rpath)
        return (self.library, rpath)  # only the versioned file: link it by path


def _files(dist: metadata.Distribution) -> list[Path]:
    """The distribution's installed files as absolute paths (empty when it has no file list)."""
    # normpath, not resolve: a symlink libtbb.so.12 -> libtbb.so.12.x must keep its own name
    return [Path(os.path.normpath(str(dist.locate_file(f)))) for f in dist.files or ()]


def _find_headers() -> tuple[str, Path]:
    from importlib import metadata  # here, not at import: it costs tens of milliseconds when plugins load

    try:
        dist = metadata.distribution(DEVEL_DIST)
    except metadata.PackageNotFoundError:
        raise TBBNotFound(
            f"oneTBB headers not found: the '{DEVEL_DIST}' distribution is not installed in this environment\n"
            f"  fix: pip install {DEVEL_DIST}"
        ) from None
    for path in _files(dist):
        if path.as_posix().endswith("/include/" + _HEADER) and path.is_file():
            return dist.version, path.parents[2]
    raise TBBNotFound(
        f"oneTBB headers not found: '{DEVEL_DIST}' {dist.version} is installed but provides no include/{_HEADER}\n"
        f"  fix: pip install --force-reinstall '{DEVEL_DIST}>=2021.1'"
    )


def _find_library(include_dir: Path) -> Path:
    from importlib import metadata

    candidates: list[Path] = []
    try:
        candidates += _files(metadata.distribution(RUNTIME_DIST))
    except metadata.PackageNotFoundError:
        pass
    lib_dir = include_dir.parent / "lib"  # where the wheels put it when the file list is unavailable
    if lib_dir.is_dir():
        candidates += sorted(lib_dir.iterdir())
    for path in candidates:
        if _LIBRARY.match(path.name) and path.is_file():
            return path
    raise TBBNotFound(
        f"the oneTBB runtime library (libtbb.so.12) was not found: the '{RUNTIME_DIST}' distribution is missing or "
        f"incomplete\n  fix: pip install --force-reinstall {DEVEL_DIST} {RUNTIME_DIST}"
    )


@functools.lru_cache(maxsize=1)
def locate_tbb() -> TBBInstall:
    """The oneTBB installation of this environment; raises :class:`TBBNotFound` with the fix."""
    version, include_dir = _find_headers()
    library = _find_library(include_dir)
    return TBBInstall(version, str(include_dir), str(library.parent), str(library))
