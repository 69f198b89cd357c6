"""The types a backend plugin exchanges with the core (see :mod:`pypto.hookspecs`).

A backend is one :class:`Backend` object: its :class:`BackendSpec` (what it is), and the steps the
core's one compile function (:func:`pypto.compiler.compile_program`) calls in order. The
contract's three steps are **codegen, compile and launch**; their methods are::

    step      method                                  returns
    --------  --------------------------------------  -------------------------------------------
    (key)     backend.compile_key(program)            toolchain identity, part of the cache key
    codegen   backend.render(program)                 Source (kernel.get_code shows its text)
    compile   backend.build(program, source)          Artifact (cached on disk by the core)
    launch    backend.load(program, artifact)         Launcher, called for every kernel call

(``render``/``build``/``load`` say what each method does to its input; this table is the one place
that maps them to the steps' names used in the documentation and the hooks.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pypto.ir.contract import CallContract
from pypto.ir.kernel import KernelIR
from pypto.ir.loops import LoopKernel

PLUGIN_API_VERSION = "2.0"
"""The plugin API this core implements; a plugin declaring another *major* version is skipped. 2.0: backends
as :class:`Backend` objects, targets from plugins, wrappable ``pypto_compile``/``pypto_launch`` hooks."""


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here; when it cannot, ``reason`` says why and how to fix it."""

    available: bool
    reason: str = ""


BASE_DTYPES = frozenset({"bool", "int32", "int64", "float32", "float64"})
"""The dtypes a backend has unless it declares others (:attr:`Capabilities.dtypes`)."""
HALF_DTYPES = frozenset({"float16", "bfloat16"})
"""The 16-bit floats (stored in 16 bits, computed in float32: the ``half_compute`` pass)."""
SMALL_INT_DTYPES = frozenset({"int8", "int16", "uint8", "uint16", "uint32", "uint64"})
"""The integer types beside int32 and int64 (arithmetic wraps around in each)."""
COMPLEX_DTYPES = frozenset({"complex64", "complex128"})
"""The complex types: the core writes them as pairs of floats (the ``complex_pairs`` pass), so a backend that
computes float32 and float64 declares them and has nothing else to do."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports; the conformance suite skips (with the reason) what is not claimed.

    ``tolerances`` maps a dtype name to ``(rtol, atol)`` for results of that type when they are
    looser than the suite's defaults (e.g. a fast approximate ``exp``).
    """

    dtypes: frozenset[str] = frozenset({"bool", "int32", "int64", "float32", "float64"})  # BASE_DTYPES
    fp64: bool = True
    atomics: bool = False
    max_threads: int | None = None
    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    notes: str = ""
    options: frozenset[str] = frozenset()  # keyword options of @pt.kernel / @pt.jit it reads (KernelOptions.get)


@dataclass(frozen=True)
class BackendSpec:
    """What a backend is: its name, version, priority, target, capabilities and availability probe
    (:attr:`Backend.spec`).

    ``probe`` is called (once, lazily) to learn whether the backend can run on this machine;
    ``info`` (optional) returns details for :func:`pypto.get_runtime_info` such as the device,
    the thread count and the compiler. Higher ``priority`` wins when the executor is "auto".
    ``target`` names the :mod:`pypto.targets` target whose passes shape the loop IR the backend
    receives (``"cpu-simd"``, ``"simt"``, or one a plugin declares through ``pypto_targets``);
    ``None`` gives the core's loop IR unchanged. ``stage`` names the stage whose IR the backend
    renders when that is not the loop IR after its target's passes (the NumPy reference renders the
    tensor IR after ``"simplify"``, :attr:`Program.reference_ir`): ``kernel.ir()`` shows that stage.
    """

    name: str
    version: str
    plugin_api: str
    priority: int
    capabilities: Capabilities = field(default_factory=Capabilities)
    probe: Callable[[], Availability] = field(default=lambda: Availability(True))
    info: Callable[[], Mapping[str, Any]] | None = None
    description: str = ""
    package: str = ""
    cacheable: bool = True
    target: str | None = None
    stage: str | None = None

    @staticmethod
    def of(backend: Any, capabilities: Capabilities, target: str | None) -> BackendSpec:
        """The spec of a backend object that declares ``name``, ``version``, ``priority``, ``description`` and
        ``package`` and has ``availability()`` and ``info()`` methods (the core's C and SIMT backends)."""
        return BackendSpec(
            name=backend.name,
            version=backend.version,
            plugin_api=PLUGIN_API_VERSION,
            priority=backend.priority,
            capabilities=capabilities,
            probe=backend.availability,
            info=backend.info,
            description=backend.description,
            package=backend.package,
            target=target,
        )


@dataclass(frozen=True)
class KernelOptions:
    """Options given to ``@pt.kernel(...)`` that backends honour."""

    fastmath: bool = False
    extra: tuple[tuple[str, Any], ...] = ()
    boundscheck: bool = True  # check gathered indices before each call (pypto.ir.contract)
    deterministic: bool = True  # False: scatters may use atomic updates (results vary in rounding from run to run)

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.extra).get(key, default)


@dataclass(frozen=True)
class Program:
    """Everything a backend needs to generate code for one kernel variant.

    ``loops`` is the loop IR to render; ``tensor_ir`` the scheduled tensor-level IR it came from;
    ``reference_ir`` the typed, simplified program before any scheduling. ``noalias`` is true when
    no output overlaps another argument in the calls this variant serves. ``target`` names the
    target whose passes ran on ``loops``. ``contract`` holds the rules every call satisfies (dtypes,
    dims, size and bounds checks, allowed aliasing): a backend that checks calls itself (a C fast
    entry, device arrays) checks these. ``verify`` checks the IR's invariants (an ``IRVerificationError``
    otherwise); the compiler calls it before building, not when the kernel comes from the disk cache.
    """

    name: str
    loops: LoopKernel
    tensor_ir: KernelIR
    reference_ir: KernelIR
    options: KernelOptions
    noalias: bool
    ir_text: str  # canonical text of the loop IR: part of every cache key
    target: str | None = None
    contract: CallContract | None = None
    verify: Callable[[], None] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Source:
    """What :meth:`Backend.render` returns: the code to build and anything else the build needs.

    ``text`` is the generated code; ``extras`` carries data made with it (a device backend's launch
    plan); ``shown`` is what ``kernel.get_code`` displays when it should say more than ``text``.
    """

    text: str
    extras: Mapping[str, Any] = field(default_factory=dict)
    shown: str | None = None

    @property
    def display(self) -> str:
        return self.text if self.shown is None else self.shown


@dataclass
class Artifact:
    """The result of :meth:`Backend.build`: bytes a launcher can load (a shared object, a cubin, source).

    The core's disk cache stores ``data`` and ``metadata``; when an artifact comes from (or has
    been written to) the cache, ``path`` names the file holding ``data``.
    """

    backend: str
    data: bytes
    suffix: str = ".bin"
    metadata: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    from_cache: bool = False


class Launcher(Protocol):
    """What :meth:`Backend.load` returns: runs the compiled kernel on validated arguments.

    Called with the arguments in :class:`~pypto.ir.loops.LoopKernel` order: C-contiguous NumPy
    arrays for buffers, NumPy scalars of the declared type for scalars, Python ints for dims.
    """

    def __call__(self, *args: Any) -> None: ...


class Backend:
    """A backend: subclass it, set :attr:`spec` (or override it), implement codegen (``render``),
    compile (``build``) and launch (``load``), and ``compile_key`` when a toolchain is involved.

    A plugin returns its backends from the ``pypto_backends`` hook. The core resolves names,
    caches artifacts on disk and checks arguments; a backend only renders, builds and loads.
    ``render`` must work without the backend's device or driver (``get_code`` on any machine);
    ``build`` must be a pure function of its inputs (its result is cached and shared by processes).
    """

    @property
    def spec(self) -> BackendSpec:
        """Name, version, priority, target, capabilities and the availability probe."""
        raise NotImplementedError

    @property
    def name(self) -> str:
        return self.spec.name

    def compile_key(self, program: Program) -> str:
        """The toolchain identity and every flag that affects the artifact (part of the cache key)."""
        return ""

    def render(self, program: Program) -> Source:
        """Generate the code for ``program`` (the loop IR after the target's passes)."""
        raise NotImplementedError

    def build(self, program: Program, source: Source) -> Artifact:
        """Build ``source``; raise :class:`pypto.CompileError` with the compiler's output on failure."""
        raise NotImplementedError

    def load(self, program: Program, artifact: Artifact) -> Launcher:
        """A launcher for a built (or cached) artifact: called with validated arguments."""
        raise NotImplementedError
