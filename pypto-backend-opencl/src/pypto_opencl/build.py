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


SOURCE_ARTIFACT = b"pypto-opencl-source\0"
"""What starts the artifact of a CPU device's program: its source, not a binary (see :func:`build_binary`)."""


def build_binary(dev: Device, source: str, name: str, options: list[str]) -> bytes:
    """Compile ``source`` for ``dev``; the program binary (raises CompileError with the build log).

    On CPU devices the artifact is the checked source: asking PoCL for a program's binary compiles every kernel
    for any group size, and a kernel with several group reductions (each a barrier behind the one-work-item
    test) took minutes there (a 3 x 3 determinant's last kernel did not finish in 5 minutes), where compiling
    it for the group size it is launched with (the driver does, when it runs it, and keeps it in its own cache)
    takes a second or two."""
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
    if dev.is_cpu:
        return SOURCE_ARTIFACT + source.encode()
    (binary,) = prg.get_info(cl.program_info.BINARIES)
    return bytes(binary)


def load_program(dev: Device, binary: bytes, options: list[str]):
    """The built program from a binary made by :func:`build_binary` (for this device)."""
    import pyopencl as cl

    if binary.startswith(SOURCE_ARTIFACT):
        return cl.Program(dev.context, binary[len(SOURCE_ARTIFACT) :].decode()).build(options=options)
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
