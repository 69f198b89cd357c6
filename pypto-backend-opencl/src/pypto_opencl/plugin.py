"""The ``opencl`` backend (entry point ``pypto: opencl``): :data:`BACKEND`.

Kept light: pyopencl is imported, and the device opened, only when a hook needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pypto.backend_api import PLUGIN_API_VERSION, Artifact, Backend, Program
from pypto.hookspecs import hookimpl
from pypto.targets.simt.backend import SimtBackend

from . import __version__

if TYPE_CHECKING:
    from pypto.targets.simt.plan import LaunchPlan

PYPTO_PLUGIN_API = PLUGIN_API_VERSION


class OpenCLBackend(SimtBackend):
    """OpenCL C 1.2 built and launched with pyopencl, on the device :mod:`pypto_opencl.device` picks."""

    name = "opencl"
    version = __version__
    priority = 50  # below the CPU backends: chosen automatically only when nothing else is installed
    package = "pypto-backend-opencl"
    description = "OpenCL C 1.2 through pyopencl (GPUs, or PoCL's CPU device)"
    renderer_module = "pypto_opencl.renderer"
    suffix = ".clbin"
    target = "simt-opencl"  # the simt passes, then vector_lanes (pypto_opencl.target)

    def open_device(self) -> Any:
        from .device import open_device

        return open_device()

    def capabilities(self) -> Any:
        from .device import DeviceCapabilities

        return DeviceCapabilities(self)  # read from the device when first used

    def info(self) -> dict[str, Any]:
        from .device import device_info

        return device_info(self)

    def renderer(self, program: Program):
        """OpenCL C; the vector width for CPU devices comes with the program (the ``vector_lanes`` pass)."""
        from .renderer import OpenCLRenderer

        return OpenCLRenderer()

    def toolchain(self, program: Program) -> str:
        from .build import build_options

        return f"{self.device().identity()} options={build_options(program.options.fastmath)}"

    def build_device_code(self, program: Program, code: str, plan: LaunchPlan) -> tuple[bytes, dict[str, Any]]:
        from .build import build_binary, build_options

        return build_binary(self.device(), code, program.name, build_options(program.options.fastmath)), {}

    def load(self, program: Program, artifact: Artifact) -> Any:
        from .build import build_options
        from .launcher import OpenCLLauncher

        return OpenCLLauncher(program, artifact, self.device(), build_options(program.options.fastmath))


BACKEND = OpenCLBackend()


@hookimpl
def pypto_backends() -> list[Backend]:
    return [BACKEND]


@hookimpl
def pypto_targets() -> list[Any]:
    from .target import simt_opencl

    return [simt_opencl()]
