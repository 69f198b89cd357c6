"""The compiled kernel of every front end: the object users call, inspect (``get_code``, ``ir``) and benchmark.

``@pt.kernel`` (:mod:`pypto.lang.kernel`) makes one from a Python body; ``pt.jit`` signatures and dask layers
make one from IR (:meth:`Kernel.from_ir`). A kernel runs the core's stages and its backend's target passes
(:mod:`pypto.passes`) and compiles through the driver (:mod:`pypto.driver`), keeping one compilation per
target and one launcher per backend, and binds every call's arguments.
"""

from __future__ import annotations

import functools
import numbers
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from pypto import _env, driver, plugins
from pypto.backend_api import KernelOptions, Program
from pypto.compiler import progress, render
from pypto.errors import ArgumentError, PyptoError
from pypto.ir.contract import CallContract
from pypto.ir.kernel import KernelIR
from pypto.ir.schedule import Schedule
from pypto.lang.tracer import trace
from pypto.passes import STAGES, Compilation, stages
from pypto.plugins import BackendEntry
from pypto.runtime.binding import Binder, BoundCall
from pypto.targets import Target

_kernels: weakref.WeakSet[Kernel] = weakref.WeakSet()
_env_executor = _env.executor_raw


_observed = False  # plugins.launch_observed, kept here by on_observe: tested first by every call


@plugins.on_observe
def _observe(observed: bool) -> None:
    global _observed
    _observed = observed


@plugins.on_reload
def invalidate_compiled() -> None:
    """Drop every kernel's compiled launchers (after plugins were reloaded)."""
    for k in list(_kernels):
        k._launchers.clear()
        k._fast = None


class Kernel:
    """A traced, compiled-on-demand kernel. Call it with arrays (outputs are passed in too).

    Tracing happens on first use (a call, ``get_code`` or ``ir``); compilation happens once per
    backend and is cached on disk. Calling returns the output array (or a tuple of them).
    """

    def __init__(
        self,
        fn: Callable,
        *,
        executor: str | None = None,
        fastmath: bool = False,
        schedule: Schedule | dict | None = None,
        boundscheck: bool = True,
        deterministic: bool = True,
        **options: Any,
    ):
        if executor is not None and not isinstance(executor, str):
            raise ArgumentError(
                f"pt.kernel: executor must be a backend name or 'auto', got {executor!r}",
                param="executor",
                expected="str",
                got=executor,
            )
        for flag, value in (("fastmath", fastmath), ("boundscheck", boundscheck), ("deterministic", deterministic)):
            if not isinstance(value, bool):
                raise ArgumentError(
                    f"pt.kernel: {flag} must be True or False, got {value!r}", param=flag, expected="bool", got=value
                )
        hints = getattr(fn, "__pypto_schedule__", None) or Schedule()
        if schedule is not None:
            hints = hints.merged(Schedule.of(schedule))
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.executor = executor
        self.schedule = hints
        """The schedule hints (``@pt.tile``, ``schedule=``) this kernel is compiled with."""
        self.options = KernelOptions(fastmath=fastmath, extra=tuple(sorted(options.items())), boundscheck=boundscheck,
                                     deterministic=deterministic)  # fmt: skip
        self._lock = threading.RLock()
        self._compilations: dict[tuple[bool, str | None], Compilation] = {}
        self._binder: Binder | None = None
        self._contract: CallContract | None = None
        self._launchers: dict[tuple[str, bool], Callable[..., None]] = {}
        self._traced = None
        self._fast: tuple[object, Callable[..., Any], tuple[int, ...]] | None = None
        _kernels.add(self)

    # -- compilation stages ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._trace().name

    @classmethod
    def from_ir(
        cls,
        ir: KernelIR,
        *,
        fn: Callable | None = None,
        executor: str | None = None,
        fastmath: bool = False,
        schedule: Schedule | dict | None = None,
        **options: Any,
    ) -> Kernel:
        """A kernel whose program is ``ir`` (a traced :class:`~pypto.ir.kernel.KernelIR` made by another
        front end: a ``pt.jit`` signature, a dask layer, a gradient) rather than traced from a body.

        ``fn``, when given, is the Python function it stands for (its name and docstring are the
        kernel's); the IR is used as given and goes through the same stages as a traced body.
        """
        if not isinstance(ir, KernelIR):
            raise ArgumentError(
                f"Kernel.from_ir takes a KernelIR, got {type(ir).__name__}", param="ir", expected="KernelIR", got=ir
            )
        if fn is None:

            def fn() -> None:  # stands for the program; never called: the IR is given
                raise AssertionError("a kernel made from IR has no body to trace")

            fn.__name__ = fn.__qualname__ = ir.name
        k = cls(fn, executor=executor, fastmath=fastmath, schedule=schedule, **options)
        k._traced = ir
        return k

    @property
    def traced(self) -> KernelIR:
        """The program as traced (or as given to :meth:`from_ir`): the first stage, ``ir("traced")``."""
        return self._trace()

    def compilation(
        self, backend: str | None = None, *, target: str | None = None, noalias: bool = True
    ) -> Compilation:
        """Every stage of this kernel's compilation (:class:`pypto.passes.Compilation`, IR records by
        stage name) for ``backend``'s target; default: the kernel's backend, or no target where none
        can be resolved here. ``target`` names a target instead of a backend (``"simt"`` without a GPU
        backend installed). ``noalias=False`` is the variant for calls whose outputs overlap inputs."""
        if target is not None:
            chosen = plugins.get_target(target)
        else:
            chosen = self._target(backend) if backend is not None else self._default_target()
        return self._compilation(noalias, chosen)

    def bind(self, *args: Any, **kwargs: Any) -> BoundCall:
        """Check ``args`` as a call would (dtypes, shapes, dims, bounds, aliasing) and bind them to the
        parameters, without running anything; raises the error the call would raise."""
        return self._get_binder().bind(args, kwargs)

    def _trace(self):
        if self._traced is None:
            with self._lock:
                if self._traced is None:
                    self._traced = trace(self.fn)
        return self._traced

    def _compilation(self, noalias: bool = True, target: Target | None = None) -> Compilation:
        """Every stage for ``target`` (the schedule depends on the target's machine)."""
        key = (noalias, target.name if target is not None else None)
        c = self._compilations.get(key)
        if c is None:
            with self._lock:
                c = self._compilations.get(key)
                if c is None:
                    c = driver.stages(self._trace(), target, noalias=noalias, hints=self.schedule,
                                      deterministic=self.options.deterministic)  # fmt: skip
                    self._compilations[key] = c
        return c

    def _default_target(self) -> Target | None:
        """The target of the kernel's backend, or None when no backend can be resolved here."""
        try:
            return self._target(None)
        except PyptoError:
            return None

    def shared_buffers(self) -> dict[str, str]:
        """The scratch outputs this kernel's backend reads and writes through another's memory (the
        ``plan_memory`` pass): each such parameter -> the one whose array the caller passes for it. Empty
        for a backend that renders an earlier stage (the NumPy reference) or when nothing is shared."""
        try:
            stage = self._backend(None, need_available=False).spec.stage
        except PyptoError:
            return {}
        if stage is not None and stage in STAGES and STAGES.index(stage) < STAGES.index("plan_memory"):
            return {}
        return dict(self._compilation(True, self._default_target()).final.shares)

    def contract(self) -> CallContract:
        """The rules every call of this kernel satisfies (derived once; see :mod:`pypto.ir.contract`)."""
        if self._contract is None:
            self._contract = driver.contract(
                self._compilation(True, self._default_target()), boundscheck=self.options.boundscheck
            )
        return self._contract

    def _get_binder(self) -> Binder:
        if self._binder is None:
            self._binder = Binder(self.contract())
        return self._binder

    def program(self, noalias: bool = True, backend: str | None = None) -> Program:
        """What ``backend`` (default: the kernel's) receives for this kernel: the loop IR after the
        passes of the backend's target (see :class:`pypto.backend_api.Program`)."""
        target = self._target(backend)
        return driver.program(self._compilation(noalias, target), target, self.options, noalias=noalias,
                              rules=self.contract())  # fmt: skip

    def _target(self, backend: str | None) -> Target | None:
        return plugins.get_target(self._backend(backend, need_available=False).spec.target)

    # -- backends ------------------------------------------------------------------------------------
    def _backend(self, backend: str | None, *, need_available: bool) -> BackendEntry:
        """The registry entry for ``backend`` (default: the kernel's executor, then $PYPTO_EXECUTOR).

        Code generation does not need the backend to be runnable here (no GPU, no driver), so
        ``need_available=False`` accepts an installed but unavailable backend named explicitly.
        """
        reg = plugins.get_registry()
        name = backend if backend is not None else self.executor
        if name is None:
            name = _env.executor()
        if need_available or name == "auto":
            return reg.resolve(name)
        entry = reg.backends.get(name)
        return entry if entry is not None else reg.resolve(name)  # resolve raises BackendNotFound

    def _launcher(self, backend: str, noalias: bool) -> Callable[..., None]:
        key = (backend, noalias)
        launcher = self._launchers.get(key)
        if launcher is not None:
            return launcher
        with self._lock:
            launcher = self._launchers.get(key)
            if launcher is None:
                with progress(f"compiling kernel '{self.name}' for {backend}"):
                    driver.check_dtypes(self._trace(), backend)
                    launcher = driver.launcher(self.program(noalias, backend), backend)
                self._launchers[key] = launcher
        return launcher

    # -- public API --------------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if (
            "stream" in kwargs
            and "stream" not in self._get_binder().dims
            and "stream" not in self._get_binder().param_names
        ):
            from pypto.runtime.stream import stream

            with stream(kwargs.pop("stream")):
                return self(*args, **kwargs)
        if _observed:  # a plugin wraps pypto_launch (pt.profile, a tracer): the hook runs the call
            return plugins.get_registry().launch(self, args, kwargs, functools.partial(self._call, args, kwargs))
        fast = self._fast
        if fast is not None:
            if kwargs:  # arguments by name: in parameter order, they take the same fast entry
                flat = self._positional(args, kwargs)
                if flat is None:
                    return self._call(args, kwargs)
                args, kwargs = flat, {}
            key = self.executor if self.executor is not None else _env_executor()
            if key == fast[0]:
                try:
                    result = fast[1](*args)
                except MemoryError:
                    _poison([args[i] for i in fast[2]])
                    raise
                if result is not NotImplemented:
                    return result
        return self._call(args, kwargs)

    def _positional(self, args: tuple, kwargs: dict) -> tuple | None:
        """``args`` and ``kwargs`` as one tuple in parameter order when the names are exactly the parameters
        not given positionally; None otherwise (dims by name, a misspelt name: the binder says what is wrong)."""
        names = self._get_binder().param_names
        n = len(args)
        if n + len(kwargs) != len(names):
            return None
        try:
            return args + tuple(kwargs[name] for name in names[n:])
        except KeyError:
            return None

    def _call(self, args: tuple, kwargs: dict) -> Any:
        """The full path: resolve the backend, bind and check every argument, launch."""
        key = self.executor if self.executor is not None else _env_executor()
        entry = self._backend(None, need_available=True)
        try:
            bound = self._get_binder().bind(args, kwargs)
        except ArgumentError:
            result = self._device_call(entry.spec.name, key, args, kwargs)
            if result is NotImplemented:
                raise
            return result
        launcher = self._launcher(entry.spec.name, bound.noalias)
        fast = getattr(launcher, "fast_entry", None) if bound.noalias else None
        if fast is None or not _launch_fast(fast, bound):
            _launch(launcher, bound)
        if fast is not None:
            outputs = tuple(i for i, p in enumerate(self._get_binder().params) if getattr(p, "role", "in") != "in")
            self._fast = (key, fast, outputs)
        return bound.finish()

    def _device_call(self, backend: str, key: object, args: tuple, kwargs: dict) -> Any:
        """Arguments the host binder cannot read (arrays in GPU memory) offered to the backend's
        fast entry, which checks and runs them itself; ``NotImplemented`` if it declines."""
        if kwargs or len(args) != len(self._get_binder().params) or not any(map(_foreign_array, args)):
            return NotImplemented
        fast = getattr(self._launcher(backend, True), "fast_entry", None)
        if fast is None:
            return NotImplemented
        result = fast(*args)
        if result is not NotImplemented:
            outputs = tuple(i for i, p in enumerate(self._get_binder().params) if getattr(p, "role", "in") != "in")
            self._fast = (key, fast, outputs)
        return result

    def compile(self, backend: str | None = None) -> Kernel:
        """Trace and compile now for ``backend`` (default: the kernel's executor); returns the kernel."""
        entry = self._backend(backend, need_available=True)
        self._launcher(entry.spec.name, True)
        return self

    def get_code(self, backend: str | None = None) -> str:
        """The source the backend generates for this kernel (works without its device or driver)."""
        entry = self._backend(backend, need_available=False)
        assert entry.backend is not None
        return render(self.program(backend=entry.spec.name), entry.backend).display

    def ir(self, stage: str | None = None, backend: str | None = None) -> str:
        """The IR after ``stage`` for ``backend`` (default: the kernel's). The default stage is the one
        the backend renders: the last (its target's last pass), or the one its spec names (the NumPy
        reference evaluates the tensor IR after ``simplify``).

        The stages are the core pipeline's (:data:`pypto.passes.STAGES`) followed by the passes of
        the backend's target; :attr:`stages` lists them in order.
        """
        if stage is None:
            try:
                stage = self._backend(backend, need_available=False).spec.stage
            except PyptoError:
                if backend is not None:
                    raise
        if stage is None or stage not in STAGES:
            target = self._target(backend)
            names = stages(target)
            stage = stage or names[-1]
            if stage not in names:
                raise ArgumentError(
                    f"unknown IR stage {stage!r}",
                    param="stage",
                    expected=", ".join(names),
                    got=stage,
                    fix=f"use one of: {', '.join(names)}",
                )
        else:  # a core stage: shown for the backend's target where one can be resolved
            try:
                target = self._target(backend)
            except PyptoError:
                if backend is not None:
                    raise
                target = None
        if stage == "traced":
            from pypto.ir.printer import format_kernel

            return format_kernel(self._trace())
        return self._compilation(True, target).text(stage, target)

    @property
    def stages(self) -> tuple[str, ...]:
        """The names accepted by :meth:`ir`, in pipeline order: the core's, then the target's."""
        try:
            return stages(self._target(None))
        except PyptoError:  # no usable backend: the core's stages still exist
            return STAGES

    def __repr__(self) -> str:
        opts = [f"executor={self.executor!r}"] if self.executor else []
        if self.options.fastmath:
            opts.append("fastmath=True")
        return f"<pypto kernel {getattr(self.fn, '__qualname__', self.fn)}{' ' + ', '.join(opts) if opts else ''}>"


def _foreign_array(v: Any) -> bool:
    """An argument that may be an array the host binder cannot read (one in GPU memory)."""
    if isinstance(v, (np.ndarray, np.generic, numbers.Number, list, tuple, str, bytes)):
        return False
    return not (hasattr(v, "__array_interface__") or hasattr(v, "__array_struct__"))


def _poison(outputs: list[Any]) -> bool:
    """Fill floating-point outputs with NaN so a failed launch cannot be mistaken for a result."""
    poisoned = False
    for out in outputs:
        try:
            if out.dtype.kind in "fc":
                out[...] = float("nan")
                poisoned = True
        except Exception:
            pass
    return poisoned


def _launch_fast(entry: Callable[..., Any], bound: BoundCall) -> bool:
    """Run validated arguments through a backend's fast entry; False if it declined them."""
    try:
        result = entry(*bound.in_param_order)
    except BaseException as e:
        if _poison(bound.outputs):
            e.add_note("pypto: floating-point outputs were filled with NaN because the launch failed")
        raise
    return result is not NotImplemented


def _launch(launcher: Callable[..., None], bound: BoundCall) -> None:
    try:
        launcher(*bound.args())
    except BaseException as e:
        if _poison(bound.outputs):
            e.add_note("pypto: floating-point outputs were filled with NaN because the launch failed")
        raise
