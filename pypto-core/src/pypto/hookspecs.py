"""The hooks a pypto backend plugin implements. Read this first when writing a backend.

A plugin is a module (or object) registered under the entry-point group ``pypto``::

    # pyproject.toml of your package
    [project.entry-points.pypto]
    mybackend = "pypto_mybackend.plugin"

The module sets ``PYPTO_PLUGIN_API = "1.0"`` and implements some of the hooks below with
``@pypto.hookimpl``. Keep its top level light: import compilers, drivers and other heavy
dependencies inside the hook functions, so ``import pypto`` stays fast with every backend
installed.

Compiling a kernel for backend ``B`` calls, in order::

    source   = pypto_codegen(backend=B, program)
    artifact = pypto_compile(backend=B, program, source)      # the core caches this on disk
    launcher = pypto_launch(backend=B, program, artifact)     # once per artifact
    launcher(*args)                                           # every call, no hook in between

``codegen``, ``compile``, ``compile_key`` and ``launch`` are *firstresult* hooks: every plugin sees
every call, and must return ``None`` unless ``backend`` is one of its own. The core's disk cache
and any profiling are implemented as wrappers on these same hooks.
"""

from __future__ import annotations

from collections.abc import Sequence

import pluggy

from .backend_api import Artifact, BackendSpec, Launcher, Program

PROJECT = "pypto"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def pypto_declare_backends() -> Sequence[BackendSpec]:
    """Declare the backends this plugin provides.

    Called once per process, when pypto first needs its backends. Return a sequence of
    :class:`~pypto.backend_api.BackendSpec` (name, version, ``plugin_api``, priority,
    capabilities, availability probe). Must not import heavy dependencies: availability is
    checked later, lazily, through ``BackendSpec.probe``. A spec whose ``plugin_api`` has another
    major version than :data:`pypto.backend_api.PLUGIN_API_VERSION` is skipped with a warning.
    """


@hookspec(firstresult=True)
def pypto_codegen(backend: str, program: Program) -> str | None:
    """Generate source code for ``program`` when ``backend`` is yours; else return ``None``.

    ``program.loops`` is the loop IR (:mod:`pypto.ir.loops`) to render; most C-like backends
    subclass :class:`pypto.codegen.cstyle.CRenderer`. The text returned is what
    ``kernel.get_code(backend=...)`` shows and what ``pypto_compile`` receives.
    """


@hookspec(firstresult=True)
def pypto_compile_key(backend: str, program: Program) -> str | None:
    """Describe the toolchain that ``pypto_compile`` would use, for the disk-cache key.

    Return a string naming the compiler identity (path and version) and every flag that affects
    the binary, when ``backend`` is yours; else ``None``. Artifacts are cached under
    sha256(loop IR + source + backend name and version + this string + core version).
    """


@hookspec(firstresult=True)
def pypto_compile(backend: str, program: Program, source: str) -> Artifact | None:
    """Build ``source`` into an :class:`~pypto.backend_api.Artifact` when ``backend`` is yours.

    Must be a pure function of its inputs (the result is cached on disk and reused by other
    processes). Raise :class:`pypto.CompileError` with the compiler's output and a source
    excerpt when the build fails.
    """


@hookspec(firstresult=True)
def pypto_launch(backend: str, program: Program, artifact: Artifact) -> Launcher | None:
    """Load ``artifact`` and return a launcher for it when ``backend`` is yours.

    Called once per artifact per process. The launcher is then called directly for every kernel
    call with the validated arguments in the loop IR's argument order (arrays, then scalars,
    then dims); the core has already checked dtypes, shapes, bounds and aliasing. A wrapper on
    this hook may wrap the returned launcher (to time it, for example).
    """
