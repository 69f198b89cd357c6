"""Loading a compiled kernel: cffi for the validated-arguments launcher, the CPython entry for fast calls."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import tempfile
from collections.abc import Callable
from typing import Any

from pypto.backend_api import Artifact
from pypto.ir.loops import LoopKernel

_CFFI_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t", "bool": "_Bool"}
_keep: list[Any] = []  # loaded libraries stay referenced for the life of the process


def c_declaration(k: LoopKernel, name: str | None = None) -> str:
    """The cffi ``cdef`` line for the kernel function."""
    params = []
    for a in k.args:
        t = _CFFI_TYPES[a.dtype.name]
        if a.kind == "buffer":
            params.append(f"{'const ' if a.role == 'in' else ''}{t} *")
        else:
            params.append(t)
    return f"int {name or k.name}({', '.join(params)});"


def artifact_path(artifact: Artifact) -> str:
    """A file holding the artifact's shared object (the cache's, or a private temporary copy)."""
    if artifact.path and os.path.exists(artifact.path):
        return artifact.path
    fd, path = tempfile.mkstemp(prefix=f"pypto-{artifact.backend}-", suffix=artifact.suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(artifact.data)
    artifact.path = path
    return path


class NativeLauncher:
    """Runs a kernel from a shared object; ``fast_entry`` is the C entry point when one was built.

    Calling the launcher takes validated arguments (arrays, scalars, dims in loop-IR order) and goes
    through cffi; ``fast_entry(*raw_args)`` takes the kernel's own arguments and returns the outputs,
    or ``NotImplemented`` when the full Python binder must handle the call.
    """

    def __init__(self, k: LoopKernel, artifact: Artifact, *, function: str | None = None,
                 entry_module: str | None = None, on_load: Callable[[Any], None] | None = None):  # fmt: skip
        self.kernel = k
        self.path = artifact_path(artifact)
        self.function = function or k.name
        self.on_load = on_load
        self._fn: Any = None
        self.fast_entry = None
        if entry_module:
            # the entry point is all a warm process needs: cffi (and its parser) load only on demand
            loader = importlib.machinery.ExtensionFileLoader(entry_module, self.path)
            spec = importlib.util.spec_from_file_location(entry_module, self.path, loader=loader)
            assert spec is not None
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
            _keep.append(mod)
            self.fast_entry = mod.entry
            if on_load is not None:
                on_load(mod)
        else:
            self._load_cffi()

    def _load_cffi(self) -> None:
        import cffi

        k = self.kernel
        self.ffi = cffi.FFI()
        self.ffi.cdef(c_declaration(k, self.function))
        self.ffi.cdef("void pt_set_num_threads(int);")
        # RTLD_NODELETE: runtime libraries (libgomp, libtbb) must stay mapped until the process exits
        flags = self.ffi.RTLD_NOW | getattr(self.ffi, "RTLD_NODELETE", 0x1000)
        self.lib = self.ffi.dlopen(self.path, flags)
        _keep.append((self.ffi, self.lib))
        if self.on_load is not None and self.fast_entry is None:
            self.on_load(self.lib)
        self.casts = [f"{_CFFI_TYPES[a.dtype.name]}[]" if a.kind == "buffer" else None for a in k.args]
        self._fn = getattr(self.lib, self.function)

    def __call__(self, *args: Any) -> None:
        if self._fn is None:
            self._load_cffi()
        fb = self.ffi.from_buffer
        conv = [fb(c, a) if c is not None else a for c, a in zip(self.casts, args)]
        status = self._fn(*conv)
        if status != 0:
            raise MemoryError(f"kernel {self.kernel.name}: out of memory for temporary buffers")
