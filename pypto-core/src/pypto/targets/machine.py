"""What a target knows about the machine it generates code for: vector width, caches, threads.

The scheduling pass (:mod:`pypto.passes.schedule`) derives tile sizes and register tiles from a
:class:`Machine`. A CPU target describes the host, probed once per process (:func:`host_cpu`): the
generated code is compiled with ``-march=native``, so it runs where it is built. A SIMT target
describes the device class it renders for (:data:`SIMT_DEVICE`).
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass


@dataclass(frozen=True)
class Machine:
    """The facts a schedule depends on."""

    name: str  # e.g. "x86_64 avx512"
    vector_bytes: int  # bytes of one SIMD register (SIMT: what a warp of 32 lanes loads per float32 access)
    vector_registers: int  # SIMD registers a micro-kernel may keep values in
    l1: int  # bytes of level-1 data cache (SIMT: shared/local memory per work-group)
    l2: int  # bytes of level-2 cache
    threads: int  # hardware threads the kernels may use
    kind: str = "cpu"  # "cpu" (threads over SIMD lanes) or "simt" (work-groups of threads)

    def lanes(self, itemsize: int) -> int:
        """Elements of ``itemsize`` bytes in one vector register."""
        return max(1, self.vector_bytes // itemsize)

    def describe(self) -> str:
        return (
            f"{self.name}: {self.vector_bytes}-byte vectors x {self.vector_registers} registers, "
            f"L1 {_kib(self.l1)}, L2 {_kib(self.l2)}, {self.threads} threads"
        )


def _kib(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB"


def _size(text: str) -> int:
    """Bytes of a sysfs cache size such as ``32K`` or ``1024K``."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def _caches() -> dict[int, int]:
    """Data/unified cache sizes by level, from sysfs (Linux)."""
    out: dict[int, int] = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return out
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(f"{base}/{entry}/level") as f:
                level = int(f.read())
            with open(f"{base}/{entry}/type") as f:
                kind = f.read().strip()
            with open(f"{base}/{entry}/size") as f:
                size = _size(f.read())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and level not in out:
            out[level] = size
    return out


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")) and ":" in line:
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


_threads_set: int | None = None  # pt.set_num_threads


def threads_chosen() -> bool:
    """Whether the thread count was chosen (``pt.set_num_threads`` or ``PYPTO_NUM_THREADS``), not left to the
    threading runtime's default."""
    return _threads_set is not None or bool(os.environ.get("PYPTO_NUM_THREADS"))


def set_threads(n: int | None) -> None:
    """Record the thread count ``pt.set_num_threads`` chose (the CPU backends apply it to loaded kernels)."""
    global _threads_set
    _threads_set = n


def num_threads() -> int:
    """Threads for parallel loops: ``pt.set_num_threads``, else PYPTO_NUM_THREADS, else OMP_NUM_THREADS, else
    every core."""
    if _threads_set is not None:
        return _threads_set
    for var in ("PYPTO_NUM_THREADS", "OMP_NUM_THREADS"):
        v = os.environ.get(var, "").split(",")[0].strip()
        if v.isdigit() and int(v) > 0:
            return int(v)
    return os.cpu_count() or 1


@functools.lru_cache(maxsize=1)
def host_cpu() -> Machine:
    """The machine this process runs on, probed once: SIMD width from the CPU flags, cache sizes from
    sysfs (32 KiB / 1 MiB where they cannot be read), threads from :func:`num_threads`."""
    arch = platform.machine().lower()
    flags = _cpu_flags()
    if "avx512f" in flags:
        isa, width, regs = "avx512", 64, 32
    elif "avx2" in flags or "avx" in flags:
        isa, width, regs = "avx2", 32, 16
    elif arch in ("aarch64", "arm64"):
        isa, width, regs = "neon", 16, 32
    else:
        isa, width, regs = "sse", 16, 16
    caches = _caches()
    return Machine(
        name=f"{arch} {isa}",
        vector_bytes=width,
        vector_registers=regs,
        l1=caches.get(1, 32 << 10),
        l2=caches.get(2, 1 << 20),
        threads=num_threads(),
    )


# The device class SIMT backends render for: a warp of 32 lanes reads 128 bytes of float32 at once,
# 48 KiB of shared/local memory per work-group (the portable CUDA limit; OpenCL devices report at
# least 32 KiB), 255 registers per lane.
SIMT_DEVICE = Machine(
    name="simt", vector_bytes=128, vector_registers=255, l1=48 << 10, l2=4 << 20, threads=32, kind="simt"
)

__all__ = ["Machine", "host_cpu", "num_threads", "set_threads", "threads_chosen", "SIMT_DEVICE"]
