"""Loading a compiled kernel, and unloading it once nothing can call it any more.

A kernel's shared object is opened with ``dlopen`` (:class:`SharedObject`) and closed when the last
Python object that can reach its code is collected: the launcher, and the fast entry, a function
object that holds the library (see :mod:`pypto.targets.cpu.pyentry`). A call in progress holds the
function it calls, so the code it runs stays mapped; a program that makes kernels without end (one
per shape, per constant, per request) keeps only the ones it still refers to. An object found in a
reference cycle is unloaded when the garbage collection is over, not while the collector still holds
the cycle's entries (whose method table lives in the library).

The runtime libraries kernels link (libgomp, libtbb, libstdc++) are pinned the first time they are
seen (``RTLD_NODELETE``): their worker threads outlive any one kernel, and unloading them while the
process runs, or at exit, crashes it. A kernel may export ``void pt_release(void)`` to free what it
allocated for itself (a TBB task arena) just before it is unloaded; it is never called at
interpreter exit, where nothing is unloaded.
"""

from __future__ import annotations

import _ctypes
import ctypes
import gc
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pypto.backend_api import Artifact
from pypto.ir.loops import LoopKernel

_CFFI_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t", "bool": "_Bool",
               "float16": "uint16_t", "bfloat16": "uint16_t", "int8": "int8_t", "int16": "int16_t",
               "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t"}  # fmt: skip
"""cffi's spelling of each dtype (16-bit float buffers by their bits: cffi knows no half types)."""

# shared libraries that kernels link and that must never be unloaded while the process runs
RUNTIME_LIBRARIES = (
    "libgomp.so.1",
    "libtbb.so.12",
    "libtbbmalloc.so.2",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "libmvec.so.1",
)
_pinned: dict[str, int] = {}
_pending: list[SharedObject] = []  # found in cyclic garbage: unloaded when the collection is over
_lock = threading.RLock()  # reentrant: a collection inside the lock may unload another object
_loaded = 0  # shared objects loaded now (kernels alive), for tests and diagnostics


def loaded_count() -> int:
    """How many kernel shared objects are loaded in this process now."""
    return _loaded


def _pin_runtime_libraries() -> None:
    """Make the runtime libraries loaded so far permanent (``RTLD_NOLOAD | RTLD_NODELETE``)."""
    for name in RUNTIME_LIBRARIES:
        if name not in _pinned:
            try:
                _pinned[name] = _ctypes.dlopen(name, os.RTLD_NOW | os.RTLD_NOLOAD | os.RTLD_NODELETE)
            except OSError:
                pass  # not loaded (yet): no kernel uses it


def _symbol(handle: int, name: str) -> int | None:
    try:
        return _ctypes.dlsym(handle, name)
    except OSError:
        return None


class SharedObject:
    """A kernel's shared object, loaded with ``RTLD_LOCAL`` and closed when this object is collected."""

    def __init__(self, path: str, *, temporary: bool = False):
        global _loaded
        self.path = path
        with _lock:
            self._handle = _ctypes.dlopen(path, os.RTLD_NOW | os.RTLD_LOCAL)
            _pin_runtime_libraries()
            _loaded += 1
        if temporary:  # a private copy: the mapping stays valid after the file is gone
            try:
                os.unlink(path)
            except OSError:
                pass

    def symbol(self, name: str) -> int | None:
        """The address of an exported symbol, or None."""
        return _symbol(self._handle, name)

    def call(self, name: str, *args: int | ctypes.c_void_p) -> None:
        """Call the exported C function ``void name(...)`` with the GIL held; an ``int`` is passed as a
        C ``int``, a :class:`ctypes.c_void_p` as a pointer."""
        address = self.symbol(name)
        if address is None:
            raise AttributeError(f"{self.path} exports no function '{name}'")
        types = [ctypes.c_void_p if isinstance(a, ctypes.c_void_p) else ctypes.c_int for a in args]
        ctypes.PYFUNCTYPE(None, *types)(address)(*args)

    def entry(self, name: str) -> Callable[..., Any]:
        """The fast entry made by the exported ``PyObject *name(PyObject *owner)``; it keeps ``self`` loaded."""
        address = self.symbol(name)
        if address is None:
            raise AttributeError(f"{self.path} exports no function '{name}'")
        return ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(address)(self)

    def close(self) -> None:
        """Unload now: ``pt_release`` (when exported), then ``dlclose``. Only when nothing can call it."""
        global _loaded
        handle = self.__dict__.pop("_handle", None)
        if handle is None:
            return
        release = _symbol(handle, "pt_release")
        if release is not None:
            ctypes.PYFUNCTYPE(None)(release)()
        with _lock:
            _ctypes.dlclose(handle)
            _loaded -= 1

    # The module's globals may be gone when an object is collected at interpreter exit: what is used is bound.
    def __del__(self, _finalizing=sys.is_finalizing, _pending=_pending) -> None:
        if "_handle" not in self.__dict__ or _finalizing():
            return  # at exit nothing is unloaded: libraries' own shutdown must not race ours
        if _collecting:
            # Collected as part of a reference cycle: the fast entries of the cycle, which hold this object
            # and whose method table is in the library, are still alive until the collector clears them.
            # Kept (so resurrected) and unloaded when the collection is over, if nothing holds it by then.
            _pending.append(self)
            return
        self.close()  # freed by reference counting: no entry refers to it any more


_collecting = False


def _on_collection(phase: str, info: dict) -> None:
    """``gc.callbacks``: unload the shared objects found in cyclic garbage once the collection is over."""
    global _collecting
    if phase == "start":
        _collecting = True
        return
    _collecting = False
    survivors = []
    while _pending:
        library = _pending.pop()
        # two references: this variable and getrefcount's argument; a third is an entry still alive
        # (resurrected by some finalizer): keep it loaded, and look again after the next collection
        if sys.getrefcount(library) > 2:
            survivors.append(library)
        else:
            library.close()
    _pending.extend(survivors)


gc.callbacks.append(_on_collection)


def c_declaration(k: LoopKernel, name: str | None = None) -> str:
    """The C prototype of the kernel function (a cffi ``cdef`` line)."""
    params = []
    for a in k.args:
        if a.kind != "buffer" and a.dtype.is_half:
            params.append("float")  # a 16-bit float scalar is passed as a float32 (cstyle.CRenderer.param)
            continue
        t = _CFFI_TYPES[a.dtype.name]
        if a.kind == "buffer":
            params.append(f"{'const ' if a.role == 'in' else ''}{t} *")
        else:
            params.append(t)
    return f"int {name or k.name}({', '.join(params)});"


def artifact_path(artifact: Artifact) -> tuple[str, bool]:
    """A file holding the artifact's shared object: the cache's, or a private temporary copy (True)."""
    if artifact.path and os.path.exists(artifact.path):
        return artifact.path, False
    fd, path = tempfile.mkstemp(prefix=f"pypto-{artifact.backend}-", suffix=artifact.suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(artifact.data)
    return path, True


class NativeLauncher:
    """Runs a kernel from a shared object; ``fast_entry`` is the C entry point when one was built.

    Calling the launcher takes validated arguments (arrays, scalars, dims in loop-IR order) and goes
    through cffi; ``fast_entry(*raw_args)`` takes the kernel's own arguments and returns the outputs,
    or ``NotImplemented`` when the full Python binder must handle the call. Both keep the shared
    object loaded for as long as they exist.
    """

    def __init__(self, k: LoopKernel, artifact: Artifact, *, function: str | None = None,
                 entry: str | None = None, on_load: Callable[[SharedObject], None] | None = None):  # fmt: skip
        self.kernel = k
        path, temporary = artifact_path(artifact)
        self.library = SharedObject(path, temporary=temporary)
        self.path = path
        self.function = function or k.name
        self._fn: Any = None
        # the entry point is all a warm process needs: cffi (and its parser) load only on demand
        self.fast_entry = self.library.entry(entry) if entry else None
        if on_load is not None:
            on_load(self.library)

    def _load_cffi(self) -> None:
        import cffi

        k = self.kernel
        address = self.library.symbol(self.function)
        if address is None:
            raise AttributeError(f"{self.path} exports no function '{self.function}'")
        self.ffi = cffi.FFI()
        self.casts = [f"{_CFFI_TYPES[a.dtype.name]}[]" if a.kind == "buffer" else None for a in k.args]
        # 16-bit float arrays are passed by their bits (a bfloat16 array exports no buffer of its own)
        self.bits = [a.kind == "buffer" and a.dtype.is_half for a in k.args]
        pointer = c_declaration(k, "(*)").replace("int (*)(", "int(*)(", 1).rstrip(";")
        self._fn = self.ffi.cast(pointer, address)

    def __call__(self, *args: Any) -> None:
        if self._fn is None:
            self._load_cffi()
        fb = self.ffi.from_buffer
        conv = [
            (fb(c, a.view(np.uint16)) if bits else fb(c, a)) if c is not None else a
            for c, bits, a in zip(self.casts, self.bits, args)
        ]
        status = self._fn(*conv)
        if status != 0:
            raise MemoryError(f"kernel {self.kernel.name}: out of memory for temporary buffers")
