"""The one compile function: program + backend -> launcher, through the disk cache.

    key      = cache key of (loop IR, backend name and version, backend.compile_key, core version)
    artifact = cache.get(key)  or  backend.build(program, backend.render(program))  -> cache.put
    launcher = backend.load(program, artifact)

The key is computed once; a warm cache needs no code generation at all. This module is also the
core's plugin implementing the ``pypto_compile`` and ``pypto_launch`` hooks (:mod:`pypto.hookspecs`),
which other plugins wrap (:meth:`pypto.plugins.Registry.compile` calls it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pypto.backend_api import Artifact, Backend, Launcher, Program, Source
from pypto.cache import DiskCache, cache_enabled, cache_key
from pypto.errors import CompileError
from pypto.hookspecs import hookimpl


def render(program: Program, backend: Backend) -> Source:
    """The backend's code for ``program`` (what ``kernel.get_code`` shows)."""
    source = backend.render(program)
    if isinstance(source, str):  # tolerated from third-party backends: plain text
        source = Source(source)
    if not isinstance(source, Source):
        raise CompileError(f"backend '{backend.name}' rendered {type(source).__name__}, not a pypto Source")
    return source


def compile_program(program: Program, backend: Backend) -> Launcher:
    """Build (or find in the disk cache) ``program`` for ``backend`` and load it."""
    spec = backend.spec
    key = None
    if spec.cacheable and cache_enabled():
        key = cache_key(spec.name, spec.version, program, backend.compile_key(program) or "")
    cache = DiskCache()
    artifact = cache.get(spec.name, key) if key else None
    if artifact is None:
        artifact = backend.build(program, render(program, backend))
        if not isinstance(artifact, Artifact):
            raise CompileError(f"backend '{spec.name}' returned no artifact for kernel '{program.name}'")
        if key:
            artifact = cache.put(spec.name, key, artifact)
    launcher = backend.load(program, artifact)
    if launcher is None:
        raise CompileError(f"backend '{spec.name}' could not load the compiled kernel '{program.name}'")
    return launcher


@hookimpl(trylast=True)
def pypto_compile(backend: Backend, program: Program) -> Launcher:
    return compile_program(program, backend)


@hookimpl(trylast=True)
def pypto_launch(kernel: Any, args: tuple, kwargs: dict, call: Callable[[], Any]) -> Any:
    return call()
