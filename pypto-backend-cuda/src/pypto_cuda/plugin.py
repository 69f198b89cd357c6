"""The ``cuda`` backend (entry point ``pypto: cuda``): :data:`BACKEND`.

Kept light: the driver is opened and nvcc run only when a hook needs them. Code
generation and compilation work without a GPU (``kernel.get_code(backend="cuda")``, the tests that
compile every kernel); launching needs the driver (``libcuda.so.1``) and a device.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pypto.backend_api import (
    BASE_DTYPES,
    COMPLEX_DTYPES,
    HALF_DTYPES,
    PLUGIN_API_VERSION,
    SMALL_INT_DTYPES,
    Artifact,
    Availability,
    Backend,
    Capabilities,
    Program,
)
from pypto.hookspecs import hookimpl
from pypto.targets.simt.backend import DeviceUnavailable, SimtBackend

from . import __version__

if TYPE_CHECKING:
    from pypto.targets.simt.plan import LaunchPlan

PYPTO_PLUGIN_API = PLUGIN_API_VERSION


class CudaBackend(SimtBackend):
    """CUDA C compiled with nvcc to a cubin for the device's architecture, launched through the driver API."""

    name = "cuda"
    version = __version__
    priority = 200  # the GPU wins "auto" whenever it can run
    package = "pypto-backend-cuda"
    description = "CUDA C compiled with nvcc, launched through the CUDA driver API"
    renderer_module = "pypto_cuda.renderer"
    suffix = ".cubin"
    target = "simt-cuda"  # the simt passes, then register_tiles (pypto_cuda.target)

    def open_device(self) -> Any:
        from .device import open_device

        return open_device()

    def capabilities(self) -> Capabilities:
        return Capabilities(dtypes=BASE_DTYPES | HALF_DTYPES | SMALL_INT_DTYPES | COMPLEX_DTYPES, max_threads=1024,
                            atomics=True, notes="CUDA C through nvcc; blocks share rows, warp shuffles")  # fmt: skip

    def availability(self) -> Availability:
        """A driver and a GPU, then nvcc."""
        av = super().availability()
        if not av.available:
            return av
        from .nvcc import NvccNotFound, probe_nvcc

        try:
            probe_nvcc()
        except NvccNotFound as e:
            return Availability(False, str(e))
        return av

    def info(self) -> dict[str, Any]:
        from .device import device_info

        return device_info(self)

    def target_arch(self) -> str:
        """The architecture kernels are compiled for: ``$PYPTO_CUDA_ARCH``, else the device's, else a default."""
        from .nvcc import DEFAULT_ARCH, parse_arch

        if os.environ.get("PYPTO_CUDA_ARCH"):
            return parse_arch(os.environ["PYPTO_CUDA_ARCH"])
        try:
            return self.device().arch
        except DeviceUnavailable:
            return DEFAULT_ARCH

    def renderer(self, program: Program):
        from .renderer import CudaRenderer

        return CudaRenderer()

    def toolchain(self, program: Program) -> str:
        from .nvcc import flags, probe_nvcc

        # nvcc's version, not its path: the same compiler installed elsewhere builds the same cubins
        return f"nvcc {probe_nvcc().version} arch={self.target_arch()} flags={flags(program.options.fastmath)}"

    def build_device_code(self, program: Program, code: str, plan: LaunchPlan) -> tuple[bytes, dict[str, Any]]:
        from .nvcc import compile_cuda

        arch = self.target_arch()
        data, fmt = compile_cuda(code, program.name, arch, fastmath=program.options.fastmath)
        return data, {"arch": arch, "format": fmt, "suffix": f".{fmt}"}

    def load(self, program: Program, artifact: Artifact) -> Any:
        from .launcher import CudaLauncher

        return CudaLauncher(program, artifact, self.device())

    def timer(self, args: Any) -> Any:
        """A CUDA-event timer for ``pt.benchmark`` when ``args`` hold arrays in GPU memory (else None)."""
        from .arrays import on_device

        flat = [a for a in args if on_device(a)]
        if not flat:
            return None
        try:
            dev = self.device()
        except DeviceUnavailable:
            return None
        from .launcher import EventTimer, resolve_stream

        return EventTimer(dev, resolve_stream(flat, dev.ordinal))


BACKEND = CudaBackend()


@hookimpl
def pypto_backends() -> list[Backend]:
    return [BACKEND]


@hookimpl
def pypto_targets() -> list[Any]:
    from .target import simt_cuda

    return [simt_cuda()]
