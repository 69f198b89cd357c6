"""The ``cuda`` backend's hook implementations (entry point ``pypto: cuda``).

Kept light: pycuda is imported, the driver opened and nvcc run only when a hook needs them. Code
generation and compilation work without a GPU (``kernel.get_code(backend="cuda")``, the tests that
compile every kernel); launching needs the driver, pycuda and a device.
"""

from __future__ import annotations

import json
import os

from pypto.backend_api import PLUGIN_API_VERSION, Artifact, BackendSpec, Capabilities, Program
from pypto.hookspecs import hookimpl

from . import __version__

PYPTO_PLUGIN_API = PLUGIN_API_VERSION
NAME = "cuda"
RENDERER = "pypto_cuda.renderer"  # its source is part of the cache key
PRIORITY = 200  # the GPU wins "auto" whenever it can run


def target_arch() -> str:
    """The architecture kernels are compiled for: ``$PYPTO_CUDA_ARCH``, else the device's, else a default."""
    from .device import DeviceUnavailable, get_device
    from .nvcc import DEFAULT_ARCH, parse_arch

    if os.environ.get("PYPTO_CUDA_ARCH"):
        return parse_arch(os.environ["PYPTO_CUDA_ARCH"])
    try:
        return get_device().arch
    except DeviceUnavailable:
        return DEFAULT_ARCH


def _spec() -> BackendSpec:
    from .device import availability, device_info

    return BackendSpec(
        name=NAME,
        version=__version__,
        plugin_api=PLUGIN_API_VERSION,
        priority=PRIORITY,
        capabilities=Capabilities(max_threads=1024, notes="CUDA C through nvcc; blocks share rows, warp shuffles"),
        probe=availability,
        info=device_info,
        description="CUDA C compiled with nvcc, launched with pycuda",
        package="pypto-backend-cuda",
    )


@hookimpl
def pypto_declare_backends():
    return [_spec()]


@hookimpl
def pypto_codegen(backend: str, program: Program) -> str | None:
    if backend != NAME:
        return None
    from .renderer import CudaRenderer

    return CudaRenderer().render(program.loops)


@hookimpl
def pypto_compile_key(backend: str, program: Program) -> str | None:
    if backend != NAME:
        return None
    from pypto.codegen.simt import codegen_digest

    from .nvcc import flags, probe_nvcc

    tc = probe_nvcc()
    return f"{tc.identity()} arch={target_arch()} flags={flags(program.options.fastmath)} codegen={codegen_digest(RENDERER)}"


@hookimpl
def pypto_compile(backend: str, program: Program, source: str) -> Artifact | None:
    if backend != NAME:
        return None
    from pypto.codegen.simt import split_plan

    from .nvcc import compile_cuda

    code, plan = split_plan(source)
    arch = target_arch()
    data, fmt = compile_cuda(code, program.name, arch, fastmath=program.options.fastmath)
    meta = {"kernel": program.name, "plan": json.loads(plan.to_json()), "arch": arch, "format": fmt}
    return Artifact(NAME, data, f".{fmt}", meta)


@hookimpl
def pypto_launch(backend: str, program: Program, artifact: Artifact):
    if backend != NAME:
        return None
    from .device import get_device
    from .launcher import CudaLauncher

    return CudaLauncher(program, artifact, get_device())
