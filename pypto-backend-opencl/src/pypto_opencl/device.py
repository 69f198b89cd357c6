"""The OpenCL device pypto runs on: choosing it, what it can do, and why it may be missing.

The device is chosen once per process: ``$PYOPENCL_CTX`` when set (pyopencl's own convention,
e.g. ``0`` or ``0:1``), else the first GPU, else the first device of any kind (PoCL's CPU device
with the ``[pocl]`` extra, or the distribution's PoCL), among the devices whose compiler builds a
trivial kernel. pyopencl is imported here, lazily, on first use.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

from pypto.backend_api import HALF_DTYPES, SMALL_INT_DTYPES
from pypto.targets.simt.backend import DeviceUnavailable

POCL_HINT = "pip install pypto-backend-opencl[pocl]"


@dataclass(frozen=True)
class Device:
    """The chosen device with its context and queue, and the limits code generation and launches use."""

    context: Any
    queue: Any
    device: Any
    platform: str
    name: str
    version: str
    driver: str
    is_cpu: bool
    unified_memory: bool
    fp64: bool
    max_work_group_size: int
    local_mem_size: int
    compute_units: int
    max_alloc: int

    def identity(self) -> str:
        """What makes a program binary specific to this device (part of the cache key)."""
        return f"{self.platform} | {self.name} | {self.version} | driver {self.driver}"

    def info(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "device": self.name,
            "device_type": "cpu" if self.is_cpu else "gpu/accelerator",
            "opencl": self.version,
            "driver": self.driver,
            "compute_units": self.compute_units,
            "max_work_group_size": self.max_work_group_size,
            "local_mem_bytes": self.local_mem_size,
            "max_alloc_bytes": self.max_alloc,
            "fp64": self.fp64,
            "unified_memory": self.unified_memory,
        }


def set_pocl_cache() -> None:
    """Keep PoCL's kernel cache next to pypto's (PoCL reads the variable when it starts)."""
    if "POCL_CACHE_DIR" not in os.environ:
        from pypto.cache import cache_dir

        os.environ["POCL_CACHE_DIR"] = str(cache_dir() / "pocl")


def open_device() -> Device:
    """Choose and open the device (the backend calls this once)."""
    set_pocl_cache()
    try:
        import pyopencl as cl
    except ImportError as e:
        raise DeviceUnavailable(f"pyopencl cannot be imported ({e}); {POCL_HINT}") from None
    if os.environ.get("PYOPENCL_CTX"):
        try:
            ctx = cl.create_some_context(interactive=False)
        except Exception as e:
            raise DeviceUnavailable(
                f"PYOPENCL_CTX={os.environ['PYOPENCL_CTX']!r} names no usable device ({e})"
            ) from None
        dev = ctx.devices[0]
    else:
        dev = _choose(cl)
        ctx = cl.Context([dev])
    _check_linker(cl, dev)
    queue = cl.CommandQueue(ctx, dev)
    exts = dev.extensions.split()
    return Device(
        context=ctx,
        queue=queue,
        device=dev,
        platform=dev.platform.name.strip(),
        name=dev.name.strip(),
        version=dev.version.strip(),
        driver=dev.driver_version.strip(),
        is_cpu=bool(dev.type & cl.device_type.CPU),
        unified_memory=bool(dev.host_unified_memory),
        fp64="cl_khr_fp64" in exts or bool(getattr(dev, "double_fp_config", 0)),
        max_work_group_size=int(dev.max_work_group_size),
        local_mem_size=int(dev.local_mem_size),
        compute_units=int(dev.max_compute_units),
        max_alloc=int(dev.max_mem_alloc_size),
    )


def _check_linker(cl: Any, dev: Any) -> None:
    """PoCL's CPU device links every kernel it builds with the system linker ``ld``; without one a build
    aborts the process, so the device is unavailable instead (with the reason)."""
    try:
        pocl = "portable computing language" in dev.platform.name.lower() or "pocl" in dev.platform.name.lower()
        cpu = bool(dev.type & cl.device_type.CPU)
    except Exception:  # a driver that cannot say: nothing to check
        return
    if pocl and cpu and shutil.which("ld") is None:
        raise DeviceUnavailable(
            "PoCL's CPU device links kernels with the system linker 'ld', which is not on PATH "
            f"(PATH={os.environ.get('PATH', '')!r}); install binutils (Debian: apt install binutils) or put it on PATH"
        )


PROBE = "__kernel void pypto_probe(__global int *a) { a[get_global_id(0)] = 1; }"
SYSTEM_POCL_HINT = (
    "Install your distribution's PoCL, whose kernel libraries are chosen by CPU features rather than by CPU "
    "model (Debian/Ubuntu: apt install pocl-opencl-icd), or set PYOPENCL_CTX to a device that works"
)


def _choose(cl: Any) -> Any:
    """The first GPU of any platform, else the first device at all, among those whose compiler builds a
    trivial kernel: a driver that cannot build for this machine (PoCL 3.0's LLVM 14 on a CPU it does not
    know: "unknown target CPU 'generic'") is passed over, and named if no device is left."""
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # pyopencl raises when the ICD loader finds no platform at all
        raise DeviceUnavailable(
            f"no OpenCL platform found ({e}); install your GPU's OpenCL driver, or PoCL's CPU device: {POCL_HINT}"
        ) from None
    devices = []
    for p in platforms:
        try:
            devices += p.get_devices()
        except Exception:  # a platform without devices
            continue
    if not devices:
        names = ", ".join(p.name for p in platforms) or "none"
        raise DeviceUnavailable(f"the OpenCL platforms ({names}) have no devices; {POCL_HINT}")
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    failed = []
    for dev in gpus + [d for d in devices if not d.type & cl.device_type.GPU]:
        why = _cannot_build(cl, dev)
        if why is None:
            return dev
        failed.append(f"{dev.name.strip()} ({dev.platform.version.strip()}): {why}")
    raise DeviceUnavailable("no OpenCL device here builds a kernel: " + "; ".join(failed) + f". {SYSTEM_POCL_HINT}")


def _cannot_build(cl: Any, dev: Any) -> str | None:
    """Why ``dev``'s compiler cannot build a trivial kernel (None when it can)."""
    try:
        _check_linker(cl, dev)
        cl.Program(cl.Context([dev]), PROBE).build()
    except DeviceUnavailable as e:
        return str(e)
    except Exception as e:  # a build failure: the first lines of the build log say why
        text = " ".join(line.strip() for line in str(e).splitlines() if "error" in line.lower())
        return (text or str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)[:300]
    return None


def get_device() -> Device:
    """The device the ``opencl`` backend runs on (raises DeviceUnavailable with the reason)."""
    from .plugin import BACKEND

    return BACKEND.device()


def context() -> Any:
    """The OpenCL context pypto's kernels run in (make ``pyopencl.array`` arguments in it)."""
    return get_device().context


def queue() -> Any:
    """The command queue pypto's kernels are launched on."""
    return get_device().queue


def device_info(backend: Any) -> dict[str, Any]:
    """``pt.get_runtime_info()`` details: platform, device and its limits."""
    try:
        dev = backend.device()
    except DeviceUnavailable as e:
        return {"device": f"unavailable: {e}"}
    import pyopencl as cl

    return {**dev.info(), "pyopencl": cl.VERSION_TEXT, "pocl_cache": os.environ.get("POCL_CACHE_DIR")}


class DeviceCapabilities:
    """The backend's :class:`~pypto.backend_api.Capabilities`, read from the device on first use.

    Declaring backends must not touch drivers, so the values are looked up only when someone
    (the conformance suite, ``pt.get_runtime_info()``) reads them.
    """

    atomics = True  # atomic_add / atomic_cmpxchg (OpenCL 1.1); 64-bit ones through cl_khr_int64_base_atomics

    def __init__(self, backend: Any):
        self.backend = backend

    @property
    def _dev(self) -> Device | None:
        try:
            return self.backend.device()
        except DeviceUnavailable:
            return None

    @property
    def fp64(self) -> bool:
        dev = self._dev
        return bool(dev and dev.fp64)

    @property
    def dtypes(self) -> frozenset[str]:
        base = {"bool", "int32", "int64", "float32", "complex64"} | HALF_DTYPES | SMALL_INT_DTYPES
        return frozenset(base | ({"float64", "complex128"} if self.fp64 else set()))  # complex: pairs of floats

    @property
    def max_threads(self) -> int | None:
        dev = self._dev
        return dev.max_work_group_size if dev else None

    @property
    def tolerances(self) -> dict[str, tuple[float, float]]:
        return {}

    @property
    def notes(self) -> str:
        dev = self._dev
        if dev is None:
            return "no OpenCL device"
        return (f"{dev.name}: work-groups of up to {dev.max_work_group_size} work-items, "
                f"{dev.local_mem_size} bytes of local memory, fp64 {'yes' if dev.fp64 else 'no'}")  # fmt: skip

    def __repr__(self) -> str:
        return f"DeviceCapabilities(dtypes={sorted(self.dtypes)}, fp64={self.fp64})"
