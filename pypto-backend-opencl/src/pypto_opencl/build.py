"""Building OpenCL C source into a program binary for the device, with readable failures."""

from __future__ import annotations

import re

from pypto.errors import CompileError
from pypto.targets.simt.render import excerpt

from .device import Device

BUILD_OPTIONS = ("-cl-std=CL1.2", "-w")  # the generated code is parenthesised as C reads it
FASTMATH_OPTIONS = ("-cl-fast-relaxed-math",)


def build_options(fastmath: bool) -> list[str]:
    """Options for ``clBuildProgram`` (every one of them is part of the cache key)."""
    return [*BUILD_OPTIONS, *(FASTMATH_OPTIONS if fastmath else ())]


def build_binary(dev: Device, source: str, name: str, options: list[str]) -> bytes:
    """Compile ``source`` for ``dev``; the program binary (raises CompileError with the build log)."""
    import pyopencl as cl

    from pypto.cache import cache_dir

    prg = cl.Program(dev.context, source)
    try:  # pyopencl's own source cache (used for drivers without one) stays under pypto's cache directory
        prg.build(options=options, devices=[dev.device], cache_dir=str(cache_dir() / "pyopencl"))
    except cl.Error as e:
        try:
            log = prg.get_build_info(dev.device, cl.program_build_info.LOG)
        except cl.Error:
            log = ""
        raise CompileError(build_report(name, dev, options, log or str(e), source)) from None
    (binary,) = prg.get_info(cl.program_info.BINARIES)
    return bytes(binary)


def load_program(dev: Device, binary: bytes, options: list[str]):
    """The built program from a binary made by :func:`build_binary` (for this device)."""
    import pyopencl as cl

    return cl.Program(dev.context, [dev.device], [binary]).build(options=options)


def build_report(name: str, dev: Device, options: list[str], log: str, source: str) -> str:
    """The build log with the generated source around the first error."""
    text = f"building OpenCL kernel '{name}' for {dev.name} ({dev.platform}) failed\n"
    text += f"options: {' '.join(options)}\n"
    text += "build log:\n" + "\n".join("  " + ln for ln in log.strip().splitlines()[:40])
    # clang prints "file:line:col: error: ..."; PoCL's log puts the severity first
    m = re.search(r":(\d+):\d+: (?:fatal )?error", log) or re.search(r"error: \S*:(\d+):\d+:", log)
    if m:
        text += "\ngenerated source around the error:\n" + excerpt(source, int(m.group(1)))
    text += "\nThis is a bug in pypto or in the backend: please report it with this message."
    return text
