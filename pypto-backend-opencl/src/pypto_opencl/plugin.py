"""The ``opencl`` backend's hook implementations (entry point ``pypto: opencl``).

Kept light: pyopencl is imported, and the device opened, only when a hook needs them.
"""

from __future__ import annotations

import json

from pypto.backend_api import PLUGIN_API_VERSION, Artifact, BackendSpec, Program
from pypto.hookspecs import hookimpl

from . import __version__

PYPTO_PLUGIN_API = PLUGIN_API_VERSION
NAME = "opencl"
RENDERER = "pypto_opencl.renderer"  # its source is part of the cache key
PRIORITY = 50  # below the CPU backends: chosen automatically only when nothing else is installed


def _spec() -> BackendSpec:
    from .device import DeviceCapabilities, availability, device_info

    return BackendSpec(
        name=NAME,
        version=__version__,
        plugin_api=PLUGIN_API_VERSION,
        priority=PRIORITY,
        capabilities=DeviceCapabilities(),  # type: ignore[arg-type]  # read from the device when first used
        probe=availability,
        info=device_info,
        description="OpenCL C 1.2 through pyopencl (GPUs, or PoCL's CPU device)",
        package="pypto-backend-opencl",
    )


def _renderer():
    """The renderer for the process's device (GPU-style code when there is no device to ask)."""
    from .device import DeviceUnavailable, get_device
    from .renderer import OpenCLRenderer

    try:
        cpu = get_device().is_cpu
    except DeviceUnavailable:
        cpu = False
    return OpenCLRenderer(cpu=cpu)


@hookimpl
def pypto_declare_backends():
    return [_spec()]


@hookimpl
def pypto_codegen(backend: str, program: Program) -> str | None:
    if backend != NAME:
        return None
    return _renderer().render(program.loops)


@hookimpl
def pypto_compile_key(backend: str, program: Program) -> str | None:
    if backend != NAME:
        return None
    from pypto.codegen.simt import codegen_digest

    from .build import build_options
    from .device import get_device

    dev = get_device()
    return f"{dev.identity()} options={build_options(program.options.fastmath)} codegen={codegen_digest(RENDERER)}"


@hookimpl
def pypto_compile(backend: str, program: Program, source: str) -> Artifact | None:
    if backend != NAME:
        return None
    from pypto.codegen.simt import split_plan

    from .build import build_binary, build_options
    from .device import get_device

    code, plan = split_plan(source)
    binary = build_binary(get_device(), code, program.name, build_options(program.options.fastmath))
    return Artifact(NAME, binary, ".clbin", {"kernel": program.name, "plan": json.loads(plan.to_json())})


@hookimpl
def pypto_launch(backend: str, program: Program, artifact: Artifact):
    if backend != NAME:
        return None
    from .build import build_options
    from .device import get_device
    from .launcher import OpenCLLauncher

    return OpenCLLauncher(program, artifact, get_device(), build_options(program.options.fastmath))
