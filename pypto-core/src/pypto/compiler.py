"""The one compile function: program + backend -> launcher, through the disk cache.

    key      = cache key of (loop IR, backend name and version, backend.compile_key, core version)
    artifact = cache.get(key)  or  backend.build(program, backend.render(program))  -> cache.put
    launcher = backend.load(program, artifact)

The key is computed once; a warm cache needs no code generation at all. This module is also the
core's plugin implementing the ``pypto_compile`` and ``pypto_launch`` hooks (:mod:`pypto.hookspecs`),
which other plugins wrap (:meth:`pypto.plugins.Registry.compile` calls it).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pypto import _env
from pypto.backend_api import Artifact, Backend, Launcher, Program, Source
from pypto.cache import DiskCache, cache_enabled, cache_key
from pypto.errors import CompileError
from pypto.hookspecs import hookimpl


def render(program: Program, backend: Backend) -> Source:
    """The backend's code for ``program`` (what ``kernel.get_code`` shows), its IR verified first."""
    if program.verify is not None:
        program.verify()
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


PROGRESS_AFTER = 1.0  # seconds a compilation runs before a progress line appears
_progress = threading.local()


@contextmanager
def progress(what: str) -> Iterator[None]:
    """A line on stderr for work that takes longer than :data:`PROGRESS_AFTER` (``what``…, then its time), shown
    when stderr is a terminal or ``PYPTO_PROGRESS=1``; never with ``PYPTO_PROGRESS=0``. Work inside other
    such work (a jit program's kernel compiled while the program is) shows only the outer line."""
    wanted = _env.progress()
    if wanted is None:
        wanted = sys.stderr is not None and sys.stderr.isatty()
    if not wanted or getattr(_progress, "active", False):
        yield
        return
    _progress.active = True
    try:
        with _progress_line(what):
            yield
    finally:
        _progress.active = False


@contextmanager
def _progress_line(what: str) -> Iterator[None]:
    shown = threading.Event()
    lock = threading.Lock()
    start = time.perf_counter()

    def show() -> None:
        with lock:
            if not done:
                print(f"pypto: {what} ...", file=sys.stderr, flush=True)
                shown.set()

    done = False
    timer = threading.Timer(PROGRESS_AFTER, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            done = True
        timer.cancel()
        if shown.is_set():
            print(f"pypto: {what}: done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


@hookimpl(trylast=True)
def pypto_compile(backend: Backend, program: Program) -> Launcher:
    return compile_program(program, backend)


@hookimpl(trylast=True)
def pypto_launch(kernel: Any, args: tuple, kwargs: dict, call: Callable[[], Any]) -> Any:
    return call()
