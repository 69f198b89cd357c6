"""The CUDA device: whether there is a driver and a GPU, and the context kernels run in.

The driver library is looked for first, so a machine without one gets a plain reason ("no CUDA
driver: libcuda.so.1 not found") instead of an error from deeper down. The device is
``$PYPTO_CUDA_DEVICE`` (default 0) among those the driver shows (``CUDA_VISIBLE_DEVICES`` applies);
kernels run in its primary context, the one the CUDA runtime (and so CuPy and torch) uses too, so
their arrays and streams are ours to use.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from pypto.targets.simt.backend import DeviceUnavailable

from . import driver as drv
from .driver import CudaError, Driver, driver_problem

__all__ = ["CudaDevice", "open_device", "device_info", "driver_problem"]


@dataclass(frozen=True)
class CudaDevice:
    """The device and its primary context, with the limits launches need."""

    driver: Any  # a :class:`~pypto_cuda.driver.Driver` (a stand-in in tests)
    ordinal: int
    context: Any
    name: str
    capability: tuple[int, int]
    multiprocessors: int
    max_threads: int
    shared_per_block: int
    shared_optin: int
    memory: int
    l2_bytes: int = 0
    threads_per_multiprocessor: int = 2048
    driver_version: int = 0
    _local: threading.local = field(default_factory=threading.local, repr=False, compare=False)

    @property
    def arch(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"

    def enter(self) -> bool:
        """Make the device's context current on this thread; True when it had to be pushed
        (then :meth:`leave` pops it). One driver call when it already is current."""
        d = self.driver
        if d.current_context() == self.context:
            return False
        d.push(self.context)
        return True

    def leave(self, pushed: bool) -> None:
        if pushed:
            self.driver.pop()

    def info(self) -> dict[str, Any]:
        return {
            "device": self.name,
            "compute_capability": f"{self.capability[0]}.{self.capability[1]}",
            "arch": self.arch,
            "multiprocessors": self.multiprocessors,
            "max_threads_per_block": self.max_threads,
            "shared_bytes_per_block": self.shared_per_block,
            "shared_bytes_optin": self.shared_optin,
            "l2_bytes": self.l2_bytes,
            "memory_bytes": self.memory,
            "driver_version": f"{self.driver_version // 1000}.{self.driver_version % 1000 // 10}",
        }


def open_device(path: str = drv.DRIVER_LIBRARY) -> CudaDevice:
    """Open the GPU (the backend calls this once): load the driver, initialise it, retain the context."""
    problem = driver_problem(path)
    if problem:
        raise DeviceUnavailable(problem)
    try:
        d = Driver(path)
    except (ImportError, OSError, AttributeError) as e:
        raise DeviceUnavailable(f"the CUDA driver {path} cannot be loaded with cffi ({e})") from None
    try:
        d.init()
        count = d.device_count()
    except CudaError as e:
        raise DeviceUnavailable(f"the CUDA driver cannot be initialised ({e})") from None
    if count == 0:
        raise DeviceUnavailable("the CUDA driver reports no GPU")
    raw = os.environ.get("PYPTO_CUDA_DEVICE", "0") or "0"
    index = int(raw) if raw.strip().isdigit() else -1
    if not 0 <= index < count:
        raise DeviceUnavailable(f"PYPTO_CUDA_DEVICE={raw!r}, but the driver shows {count} GPU(s) (0 to {count - 1})")
    try:
        dev = d.device(index)
        per_block = d.attribute(dev, drv.ATTR_MAX_SHARED_MEMORY_PER_BLOCK)
        return CudaDevice(
            driver=d,
            ordinal=index,
            context=d.primary_context(dev),
            name=d.device_name(dev),
            capability=(
                d.attribute(dev, drv.ATTR_COMPUTE_CAPABILITY_MAJOR),
                d.attribute(dev, drv.ATTR_COMPUTE_CAPABILITY_MINOR),
            ),  # fmt: skip
            multiprocessors=d.attribute(dev, drv.ATTR_MULTIPROCESSOR_COUNT),
            max_threads=d.attribute(dev, drv.ATTR_MAX_THREADS_PER_BLOCK),
            shared_per_block=per_block,
            shared_optin=max(per_block, d.attribute(dev, drv.ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)),
            memory=d.total_memory(dev),
            l2_bytes=d.attribute(dev, drv.ATTR_L2_CACHE_SIZE),
            threads_per_multiprocessor=d.attribute(dev, drv.ATTR_MAX_THREADS_PER_MULTIPROCESSOR),
            driver_version=d.version(),
        )
    except CudaError as e:
        raise DeviceUnavailable(f"GPU {index} cannot be opened ({e})") from None


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
