"""The hooks of a pypto plugin. Read this first when writing a backend, a target or a tool.

A plugin is a module registered under the entry-point group ``pypto``::

    # pyproject.toml of your package
    [project.entry-points.pypto]
    mybackend = "pypto_mybackend.plugin"

The module sets ``PYPTO_PLUGIN_API = "2.0"`` (:data:`pypto.backend_api.PLUGIN_API_VERSION`) and
implements some of the hooks below with ``@pypto.hookimpl``. Keep its top level light: import
compilers, drivers and other heavy dependencies inside the backend's methods, so ``import pypto``
and plugin loading stay fast with every backend installed.

What a plugin can add:

- **backends** (``pypto_backends``): each a :class:`~pypto.backend_api.Backend` whose three steps
  are *codegen*, *compile* and *launch* (its methods ``render``, ``build`` and ``load``; see
  :mod:`pypto.backend_api`);
- **targets** (``pypto_targets``): a kind of machine and the passes it appends to the core
  pipeline (:class:`pypto.targets.Target`); a backend names its target in its spec;
- **wrappers** around every compilation (``pypto_compile``) and every kernel call
  (``pypto_launch``): ``@pypto.hookimpl(wrapper=True)`` generators that see the arguments, run the
  step with ``result = yield``, and return the result (or another launcher wrapping it). The core
  implements both hooks itself; ``pt.profile()`` is such a wrapper on ``pypto_launch``.

The core's compilation of one kernel variant for backend ``B`` (the implementation of
``pypto_compile``, :func:`pypto.compiler.compile_program`)::

    key      = sha256(loop IR, B's name and version, B.compile_key(program), core version)
    artifact = disk cache [key]  or  B.build(program, B.render(program))  (then stored)
    launcher = B.load(program, artifact)                 # once per artifact per process
    launcher(*args)                                      # every call, nothing in between
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

from pypto.backend_api import Backend, Launcher, Program

if TYPE_CHECKING:
    from pypto.targets import Target

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
def pypto_targets() -> Sequence[Target]:
    """The targets this plugin provides, as :class:`pypto.targets.Target` objects.

    A target is a kind of machine: a name, the loop-IR passes it appends to the core pipeline (each
    a function ``LoopKernel -> LoopKernel``, verified after it runs, shown by ``kernel.ir(name)``
    and listed by ``pypto passes --target``) and optionally the machine model the schedule pass
    plans for. The core's ``cpu-simd`` and ``simt`` are declared through this hook too. Called once
    per process with the backends; a name already taken is skipped with a warning.
    ``Target.extend`` builds a target from an existing one plus passes of its own.
    """


@hookspec(firstresult=True)
def pypto_compile(backend: Backend, program: Program) -> Launcher:
    """Compile ``program`` for ``backend`` and return the launcher its calls will use.

    The core implements it (codegen, the disk cache, compile, load; see the module doc) and calls
    it once per kernel variant, backend and process. Plugins do not replace it: they wrap it with
    ``@pypto.hookimpl(wrapper=True)`` to log or time compilations, or to return a launcher that
    wraps the one the core made (``launcher = yield; return wrapped(launcher)``). An exception
    raised by the compilation (:class:`pypto.CompileError`) reaches the wrapper at its ``yield``.
    """


@hookspec(firstresult=True)
def pypto_launch(kernel: Any, args: tuple, kwargs: dict, call: Callable[[], Any]) -> Any:
    """Run one call of ``kernel`` (a ``pt.kernel``, or the kernel of a ``pt.jit`` program) on the
    caller's ``args`` and ``kwargs``, and return what the call returns.

    The core implements it by calling ``call()`` (bind and check the arguments, compile on first
    use, launch). It is consulted only while some plugin wraps it, so calls cost nothing extra
    otherwise: a wrapper (``@pypto.hookimpl(wrapper=True)``) sees ``kernel.name`` and the
    arguments, runs the call with ``result = yield`` and returns ``result``. ``pt.profile()``
    registers one for the length of its ``with`` block.
    """
