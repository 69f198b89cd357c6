"""Finding nvcc and compiling CUDA C to a cubin for one GPU architecture (PTX when nvcc is too old).

nvcc is looked up as ``$PYPTO_NVCC``, ``$CUDA_HOME/bin/nvcc``, ``nvcc`` on ``PATH``, then
``/usr/local/cuda/bin/nvcc``. The architecture is ``$PYPTO_CUDA_ARCH`` (``sm_90``, ``90`` or
``9.0``) when set, else the current device's compute capability, else :data:`DEFAULT_ARCH` (so
kernels can be compiled on machines without a GPU).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pypto.errors import CompileError
from pypto.targets.simt.render import excerpt

DEFAULT_ARCH = "sm_80"
BASE_FLAGS = ("-O3", "-std=c++17")
FASTMATH_FLAGS = ("--use_fast_math",)


class NvccNotFound(CompileError):
    """No nvcc: the message says where it was looked for and how to point at one."""


@dataclass(frozen=True)
class Nvcc:
    """A usable nvcc: its path, version and the real architectures it can compile for."""

    path: str
    version: str
    archs: tuple[int, ...]

    def identity(self) -> str:
        return f"{self.path} ({self.version})"


def find_nvcc() -> str:
    """The nvcc executable (raises :class:`NvccNotFound` naming what was tried)."""
    tried = []
    candidates = [os.environ.get("PYPTO_NVCC", "")]
    if os.environ.get("CUDA_HOME"):
        candidates.append(str(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"))
    candidates += [shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"]
    for c in candidates:
        if not c:
            continue
        tried.append(c)
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise NvccNotFound(
        "nvcc (the CUDA compiler) was not found"
        + (f" (tried {', '.join(tried)})" if tried else "")
        + "; install the CUDA toolkit, or set PYPTO_NVCC or CUDA_HOME"
    )


@functools.lru_cache(maxsize=4)
def probe_nvcc(path: str | None = None) -> Nvcc:
    """nvcc's version and the ``sm_XX`` architectures it supports."""
    path = path or find_nvcc()
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
        listed = subprocess.run([path, "--list-gpu-code"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise NvccNotFound(f"cannot run {path}: {e}") from None
    m = re.search(r"release ([\d.]+), (V[\d.]+)", out)
    version = m.group(2) if m else out.strip().splitlines()[-1] if out.strip() else "unknown"
    archs = tuple(sorted({int(a) for a in re.findall(r"\bsm_(\d+)\b", listed)}))
    return Nvcc(path, version, archs)


def parse_arch(text: str) -> str:
    """``sm_90``, ``90``, ``9.0`` or ``compute_90`` → ``sm_90``."""
    t = text.strip().lower().removeprefix("sm_").removeprefix("compute_").replace(".", "")
    if not t.isdigit():
        raise ValueError(f"not a CUDA architecture: {text!r} (expected e.g. sm_90, 90 or 9.0)")
    return f"sm_{int(t)}"


def flags(fastmath: bool) -> list[str]:
    """nvcc flags besides the architecture (every one of them is part of the cache key)."""
    return [*BASE_FLAGS, *(FASTMATH_FLAGS if fastmath else ())]


def compile_cuda(
    source: str, name: str, arch: str, *, fastmath: bool = False, nvcc: Nvcc | None = None
) -> tuple[bytes, str]:
    """Compile ``source`` for ``arch``: (cubin bytes, "cubin"), or (PTX, "ptx") for an architecture
    newer than this nvcc knows (the driver compiles the PTX when it loads it)."""
    tc = nvcc or probe_nvcc()
    target = parse_arch(arch)
    number = int(target[3:])
    if tc.archs and number not in tc.archs and number > max(tc.archs):
        fmt, cmd_arch = "ptx", f"-arch=compute_{max(tc.archs)}"
    else:
        fmt, cmd_arch = "cubin", f"-arch={target}"
    with tempfile.TemporaryDirectory(prefix="pypto-cuda-") as d:
        src, out = Path(d) / f"{name}.cu", Path(d) / f"{name}.{fmt}"
        src.write_text(source)
        cmd = [tc.path, f"-{fmt}", cmd_arch, *flags(fastmath), "-o", str(out), str(src)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise CompileError(f"compiling kernel '{name}' with nvcc timed out after 600 s") from None
        if r.returncode != 0:
            raise CompileError(report(name, tc, cmd, r.stderr + r.stdout, source))
        return out.read_bytes(), fmt


def report(name: str, tc: Nvcc, cmd: list[str], output: str, source: str) -> str:
    """nvcc's messages with the generated source around the first error."""
    text = f"compiling CUDA kernel '{name}' failed ({tc.identity()})\ncommand: {' '.join(cmd)}\n"
    text += "nvcc output:\n" + "\n".join("  " + ln for ln in output.strip().splitlines()[:40])
    m = re.search(r"\((\d+)\): (?:catastrophic )?error", output)
    if m:
        text += "\ngenerated source around the error:\n" + excerpt(source, int(m.group(1)))
    text += "\nThis is a bug in pypto or in the backend: please report it with this message."
    return text
