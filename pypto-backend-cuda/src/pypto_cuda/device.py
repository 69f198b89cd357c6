"""The CUDA device: whether there is a driver, pycuda and a GPU, and the context kernels run in.

Nothing here imports pycuda until a device is needed; the driver library is looked for first, so a
machine without one gets a plain reason ("no CUDA driver: libcuda.so.1 not found") instead of an
import error. The device is ``$PYPTO_CUDA_DEVICE`` (default 0) among those the driver shows
(``CUDA_VISIBLE_DEVICES`` applies); kernels run in its primary context, shared with CuPy and torch.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pypto.targets.simt.backend import DeviceUnavailable

DRIVER_LIBRARY = "libcuda.so.1"
PYCUDA_HINT = "install pycuda (pip install pycuda; building it needs the CUDA toolkit and driver)"


@dataclass(frozen=True)
class CudaDevice:
    """The device and its primary context, with the limits launches need."""

    cuda: Any  # the pycuda.driver module
    device: Any
    context: Any
    name: str
    capability: tuple[int, int]
    multiprocessors: int
    max_threads: int
    shared_per_block: int
    shared_optin: int
    memory: int

    @property
    def arch(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The device's context made current for this thread while the block runs."""
        self.context.push()
        try:
            yield
        finally:
            self.cuda.Context.pop()

    def info(self) -> dict[str, Any]:
        return {
            "device": self.name,
            "compute_capability": f"{self.capability[0]}.{self.capability[1]}",
            "arch": self.arch,
            "multiprocessors": self.multiprocessors,
            "max_threads_per_block": self.max_threads,
            "shared_bytes_per_block": self.shared_per_block,
            "shared_bytes_optin": self.shared_optin,
            "memory_bytes": self.memory,
        }


def driver_problem() -> str | None:
    """Why the CUDA driver library cannot be loaded, or None when it can."""
    try:
        ctypes.CDLL(DRIVER_LIBRARY)
    except OSError as e:
        return f"no CUDA driver: {DRIVER_LIBRARY} not found ({e})"
    return None


def open_device() -> CudaDevice:
    """Open the GPU (the backend calls this once): the driver first, then pycuda."""
    problem = driver_problem()
    if problem:
        raise DeviceUnavailable(problem)
    try:
        import pycuda.driver as cuda
    except ImportError as e:
        raise DeviceUnavailable(f"pycuda cannot be imported ({e}); {PYCUDA_HINT}") from None
    try:
        cuda.init()
        count = cuda.Device.count()
    except cuda.Error as e:
        raise DeviceUnavailable(f"the CUDA driver cannot be initialised ({e})") from None
    if count == 0:
        raise DeviceUnavailable("the CUDA driver reports no GPU")
    index = int(os.environ.get("PYPTO_CUDA_DEVICE", "0") or 0)
    if not 0 <= index < count:
        raise DeviceUnavailable(f"PYPTO_CUDA_DEVICE={index}, but the driver shows {count} GPU(s)")
    dev = cuda.Device(index)
    attr = cuda.device_attribute
    optin = getattr(attr, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", None)
    per_block = dev.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK)
    return CudaDevice(
        cuda=cuda,
        device=dev,
        context=dev.retain_primary_context(),
        name=dev.name(),
        capability=tuple(dev.compute_capability()),  # type: ignore[arg-type]
        multiprocessors=dev.get_attribute(attr.MULTIPROCESSOR_COUNT),
        max_threads=dev.get_attribute(attr.MAX_THREADS_PER_BLOCK),
        shared_per_block=per_block,
        shared_optin=dev.get_attribute(optin) if optin is not None else per_block,
        memory=dev.total_memory(),
    )


def device_info(backend: Any) -> dict[str, Any]:
    """``pt.get_runtime_info()`` details: the GPU and the compiler."""
    from .nvcc import NvccNotFound, probe_nvcc

    out: dict[str, Any] = {}
    try:
        out.update(backend.device().info())
    except DeviceUnavailable as e:
        out["device"] = f"unavailable: {e}"
    try:
        tc = probe_nvcc()
        out["compiler"] = tc.identity()
    except NvccNotFound as e:
        out["compiler"] = f"unavailable: {e}"
    return out
