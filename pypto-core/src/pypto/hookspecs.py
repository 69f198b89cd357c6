"""The hooks a pypto backend plugin implements. Read this first when writing a backend.

A plugin is a module registered under the entry-point group ``pypto``::

    # pyproject.toml of your package
    [project.entry-points.pypto]
    mybackend = "pypto_mybackend.plugin"

The module sets ``PYPTO_PLUGIN_API = "1.1"`` and implements ``pypto_backends`` with
``@pypto.hookimpl``, returning :class:`~pypto.backend_api.Backend` objects. Keep its top level
light: import compilers, drivers and other heavy dependencies inside the backend's methods, so
``import pypto`` and plugin loading stay fast with every backend installed.

Compiling a kernel for backend ``B`` is one function of the core
(:func:`pypto.runtime.compile.compile_program`)::

    key      = sha256(loop IR, B's name and version, B.compile_key(program), core version)
    artifact = disk cache [key]  or  B.build(program, B.render(program))  (then stored)
    launcher = B.load(program, artifact)                 # once per artifact per process
    launcher(*args)                                      # every call, nothing in between

Plugin API 1.0 style (still supported, deprecated): ``pypto_declare_backends`` returning
:class:`~pypto.backend_api.BackendSpec` objects plus the *firstresult* hooks ``pypto_codegen``,
``pypto_compile_key``, ``pypto_compile`` and ``pypto_launch``, each answering only for its own
backend names. The core wraps such a plugin's backends in one :class:`~pypto.backend_api.Backend`
each, so they are cached and dispatched exactly like the new style.
"""

from __future__ import annotations

from collections.abc import Sequence

import pluggy

from pypto.backend_api import Artifact, Backend, BackendSpec, Launcher, Program

PROJECT = "pypto"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def pypto_backends() -> Sequence[Backend]:
    """The backends this plugin provides, as :class:`~pypto.backend_api.Backend` objects.

    Called once per process, when pypto first needs its backends. Each backend's ``spec`` names it
    and declares its ``plugin_api``, priority, target, capabilities and availability probe. Must
    not import heavy dependencies: availability is checked later, lazily, through
    ``BackendSpec.probe``. A backend whose ``plugin_api`` has another major version than
    :data:`pypto.backend_api.PLUGIN_API_VERSION` is skipped with a warning.
    """


@hookspec
def pypto_declare_backends() -> Sequence[BackendSpec]:
    """Plugin API 1.0: declare backends whose steps are the hooks below (use ``pypto_backends``).

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
    subclass :class:`pypto.targets.cstyle.CRenderer`. The text returned is what
    ``kernel.get_code(backend=...)`` shows and what ``pypto_compile`` receives.
    """


@hookspec(firstresult=True)
def pypto_compile_key(backend: str, program: Program) -> str | None:
    """Describe the toolchain that ``pypto_compile`` would use, for the disk-cache key.

    Return a string naming the compiler identity (path and version) and every flag that affects
    the binary, when ``backend`` is yours; else ``None``. Artifacts are cached under
    sha256(loop IR + backend name and version + this string + core version).
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
