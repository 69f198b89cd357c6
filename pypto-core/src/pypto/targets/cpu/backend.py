"""What the native CPU backends (OpenMP, TBB) share: probing, source assembly, compile, load.

A backend plugin creates one :class:`NativeBackend` with its language, flags and renderer and
returns it from its ``pypto_backends`` hook. Everything else — the toolchain probe, the cache key,
the C fast-call entry point, the cffi launcher — is the same code for every such backend.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from importlib.machinery import EXTENSION_SUFFIXES
from typing import TYPE_CHECKING, Any

from pypto._hashing import source_digest
from pypto.backend_api import (
    Artifact,
    Availability,
    Backend,
    BackendSpec,
    Capabilities,
    Program,
    Source,
)
from pypto.errors import CompileError
from pypto.targets.cpu.toolchain import (
    Toolchain,
    ToolchainError,
    build_shared,
    discard_python_header,
    probe,
    python_header,
)
from pypto.targets.machine import num_threads, threads_chosen

if TYPE_CHECKING:  # imported where used: a warm process never renders code
    from pypto.targets.cpu.loader import NativeLauncher, SharedObject
    from pypto.targets.cstyle import CRenderer


OPTIONAL_FLAGS = (
    "-march=native",  # the host's vector instructions (AVX2, AVX-512 ...): kernels run where they are built
    "-mprefer-vector-width=512",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fno-semantic-interposition",
)
"""The flags every C-family CPU backend asks for when its compiler accepts them (probed one by one)."""


class NativeBackend(Backend):
    """A backend that renders C/C++, builds a shared object and loads it with cffi."""

    def __init__(
        self,
        name: str,
        version: str,
        *,
        language: str,
        base_flags: Sequence[str],
        probe_source: str,
        make_renderer: Callable[[Toolchain, Program], CRenderer],
        priority: int,
        package: str,
        description: str,
        capabilities: Capabilities | None = None,
        link_flags: Sequence[str] = (),
        extra_flags: Callable[[], Sequence[str]] | None = None,
        extra_link: Callable[[], Sequence[str]] | None = None,
        fastmath_flags: Sequence[str] = ("-ffast-math",),
        codegen_modules: Sequence[str] = (),
        optional_flags: Sequence[str] = OPTIONAL_FLAGS,
    ):
        self._name = name
        self.version = version
        self.language = language
        self.base_flags = tuple(base_flags)
        self.optional_flags = tuple(optional_flags)
        self.probe_source = probe_source
        self.make_renderer = make_renderer
        self.priority = priority
        self.package = package
        self.description = description
        self.capabilities = capabilities or Capabilities()
        self.link_flags = tuple(link_flags)
        self.extra_flags = extra_flags or (lambda: ())
        self.extra_link = extra_link or (lambda: ())
        self.fastmath_flags = tuple(fastmath_flags)
        self.codegen_modules = tuple(codegen_modules)
        self._toolchain: Toolchain | None = None
        self._lock = threading.Lock()

    # -- probing ------------------------------------------------------------------------------------
    def toolchain(self) -> Toolchain:
        if self._toolchain is None:
            with self._lock:
                if self._toolchain is None:
                    self._toolchain = probe(
                        self.language,
                        [*self.base_flags, *self.extra_flags()],
                        self.optional_flags,
                        self.probe_source,
                        [*self.link_flags, *self.extra_link()],
                    )
        return self._toolchain

    def availability(self) -> Availability:
        try:
            self.toolchain()
        except ToolchainError as e:
            return Availability(False, str(e))
        except Exception as e:  # an unexpected probe failure must not break other backends
            return Availability(False, f"{type(e).__name__}: {e}")
        return Availability(True)

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {"device": "cpu", "threads": num_threads()}
        try:
            tc = self.toolchain()
        except Exception as e:
            out["compiler"] = f"unavailable: {e}"
            return out
        out.update({
            "compiler": f"{tc.compiler} ({tc.version})" + (" [not found: cached kernels only]" if tc.prebuilt else ""),
            "flags": " ".join(tc.flags),
            "vector_math": list(tc.vector_math),
            "fast_dispatch": tc.python_include is not None,
        })  # fmt: skip
        return out

    @property
    def name(self) -> str:
        return self._name

    @functools.cached_property
    def spec(self) -> BackendSpec:
        return BackendSpec.of(self, self.capabilities, "cpu-simd")

    # -- the backend's steps -----------------------------------------------------------------------
    def render(self, program: Program) -> Source:
        from pypto.targets.cpu.pyentry import render_entry

        tc = self.toolchain_or_default()
        renderer = self.make_renderer(tc, program)
        source = renderer.render(program.loops)
        entry = ""
        complex_scalar = any(p.dtype.is_complex for p in program.contract.scalar_params)  # the checked path splits it
        checked = program.contract.index_check is not None  # gathered indices: the binder checks them (NumPy)
        if program.noalias and tc.python_include and not complex_scalar and not checked:
            entry = "\n/* fast-call entry point for Python */\n" + render_entry(
                program.contract, program.loops.name, renderer.types, tuple(a.name for a in program.loops.args)
            )
        parts = compile_jobs(source.count("\n") + entry.count("\n"))
        if parts > 1:
            units = renderer.units(program.loops, parts, entry.count("\n") + ENTRY_COST_LINES if entry else 0)
            if len(units) > 1:  # the first holds the kernel function, and the entry point that calls it
                return Source(source + entry, {"units": (units[0] + entry, *units[1:])})
        return Source(source + entry)

    def toolchain_or_default(self) -> Toolchain:
        """The probed toolchain, or a stand-in so code can be generated without a compiler."""
        try:
            return self.toolchain()
        except ToolchainError:
            return Toolchain(self.language, "none", "none", ())

    def compile_key(self, program: Program) -> str:
        tc = self.toolchain()
        abi = f"{sys.implementation.cache_tag} {EXTENSION_SUFFIXES[0]}"
        return f"{tc.identity()} fastmath={program.options.fastmath} py={abi} codegen={self.codegen_digest()}"

    def codegen_digest(self) -> str:
        """A digest of the code generators' sources: a changed renderer never reuses stale binaries."""
        return source_digest(
            "pypto.targets.cstyle",
            "pypto.targets.cpu.render",
            "pypto.targets.cpu.pyentry",
            "pypto.targets.cpu.captures",
            "pypto.targets.cpu.vmath",
            *self.codegen_modules,
        )

    def build(self, program: Program, source: Source) -> Artifact:
        tc = self.toolchain()
        if tc.prebuilt:  # no compiler here: only kernels already in the cache can run
            raise ToolchainError(
                f"{tc.prebuilt}\n  kernel '{program.name}' is not in pypto's cache, and building it needs a "
                "compiler (cached kernels built by the same compiler still run)"
            )
        fast: list[str] = list(self.fastmath_flags) if program.options.fastmath else []
        flags: list[str] = []
        if tc.python_include and program.noalias:
            flags.append(f"-I{tc.python_include}")
        from pypto.targets.cpu.pyentry import ENTRY_SYMBOL

        entry = ENTRY_SYMBOL if f" *{ENTRY_SYMBOL}(" in source.text else None
        header = python_header(tc, [*tc.flags, *flags, *fast]) if entry else None
        units = source.extras.get("units", ())
        try:
            data = build_shared(tc, source.text, name=program.name, extra_flags=flags, compile_flags=fast,
                                units=units, first_flags=("-include", header) if header else ())  # fmt: skip
        except CompileError as e:
            if header is None or "PCH" not in str(e):
                raise
            discard_python_header(header)  # a damaged precompiled header fails every build: without it
            data = build_shared(tc, source.text, name=program.name, extra_flags=flags, compile_flags=fast, units=units)
        return Artifact(self.name, data, ".so", {"kernel": program.name, "entry": entry})

    def load(self, program: Program, artifact: Artifact) -> NativeLauncher:
        from pypto.targets.cpu.loader import NativeLauncher

        return NativeLauncher(program.loops, artifact, entry=artifact.metadata.get("entry"), on_load=self.on_load)

    def on_load(self, library: SharedObject) -> None:
        """Prepare a kernel's freshly loaded object before its first call: its thread count (0: the default),
        which ``pt.set_num_threads`` changes later (:func:`apply_threads`)."""
        library.call("pt_set_num_threads", num_threads() if threads_chosen() else 0)
        _threaded.add(library)


SPLIT_MIN_LINES = 100
"""Kernels of at least this many lines of C are built as several translation units, one compiler process each
(see :func:`compile_jobs`). Measured on the benchmark machine (2 CPUs, gcc 12, cold compilations): a
two-layer MLP gradient (2,000 lines) 2.6 -> 1.7 s, the attention example 1.85 -> 1.33 s, a 373-line matmul
0.35 -> 0.28 s, the 190-line fused softmax 0.35 -> 0.28 s (its entry point's unit, which parses
``Python.h``, takes as long as its two loop nests). A kernel without outlined nests stays one unit."""
ENTRY_COST_LINES = 100
"""What parsing ``Python.h`` costs the unit with the fast-call entry point, in lines of generated C."""
MAX_COMPILE_JOBS = 8


def compile_jobs(lines: int) -> int:
    """How many translation units to build a kernel of ``lines`` lines of C as: one per CPU this process may
    use (``PYPTO_COMPILE_JOBS`` overrides), at most :data:`MAX_COMPILE_JOBS`, one below :data:`SPLIT_MIN_LINES`."""
    from pypto import _env

    if lines < SPLIT_MIN_LINES:
        return 1
    jobs = _env.compile_jobs()
    if jobs is None:
        try:
            jobs = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            jobs = os.cpu_count() or 1
    return max(1, min(jobs, MAX_COMPILE_JOBS))


_threaded: weakref.WeakSet[SharedObject] = weakref.WeakSet()  # loaded kernels that take a thread count


def apply_threads(n: int) -> None:
    """Give every loaded kernel of the C backends ``n`` threads for its next calls."""
    for library in list(_threaded):
        library.call("pt_set_num_threads", n)
