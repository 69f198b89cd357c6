"""Finding and probing a host C/C++ compiler, and building shared objects with it.

Used by the CPU backends (OpenMP, TBB). Probing a compiler (which flags it accepts, whether it
can build OpenMP code, which vector-math functions glibc's libmvec offers) takes a few compiler
runs; the result is cached on disk next to the compile cache, keyed by the compiler's identity.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from pypto._hashing import sha256
from pypto.errors import CompileError
from pypto.ir.ops import FUNCTIONS

# C functions of the op table whose vector variants libmvec may have: float with 8 lanes (AVX2), double with 4
_VECTOR_MATH = tuple(f.c_name for f in FUNCTIONS if f.c_name and f.vector_math)


class ToolchainError(CompileError):
    """No usable compiler: the message says what was tried and how to install or select one."""


@dataclass(frozen=True)
class Toolchain:
    """A probed compiler: what it is, which flags it takes, what the machine's libraries offer."""

    language: str  # "c" or "c++"
    compiler: str
    version: str
    flags: tuple[str, ...]
    link_flags: tuple[str, ...] = ()
    python_include: str | None = None
    vector_math: tuple[str, ...] = ()
    cpu: str = ""
    extra: dict = field(default_factory=dict)
    # set when no compiler was found and this is the toolchain recorded by the last probe on this machine:
    # kernels that toolchain built can still be loaded from the cache; new ones cannot be built (the reason)
    prebuilt: str = ""

    def identity(self) -> str:
        """Everything that changes the binary: part of every cache key."""
        return json.dumps(
            {"compiler": self.compiler, "version": self.version, "flags": self.flags, "link": self.link_flags,
             "py": self.python_include, "vm": self.vector_math, "cpu": self.cpu, "extra": self.extra},
            sort_keys=True,
        )  # fmt: skip


def cpu_identity() -> str:
    """The CPU model and feature flags (``-march=native`` binaries are only valid on such CPUs)."""
    model, flags = platform.machine(), ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and ":" in line and model == platform.machine():
                    model += " " + line.split(":", 1)[1].strip()
                elif line.startswith("flags") and ":" in line:
                    flags = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return model + " " + sha256(flags.encode()).hexdigest()[:16]


def find_compiler(language: str) -> str:
    """The compiler for ``language``: ``$CC`` / ``$CXX`` if set, else the first of the usual names."""
    env = "CXX" if language == "c++" else "CC"
    candidates = [os.environ[env]] if os.environ.get(env) else (
        ["g++", "c++", "clang++"] if language == "c++" else ["gcc", "cc", "clang"]
    )  # fmt: skip
    for c in candidates:
        parts = c.split()
        path = shutil.which(parts[0]) if parts else None
        if path:
            return " ".join([path, *parts[1:]])
    pkg = "g++" if language == "c++" else "gcc"
    raise ToolchainError(
        f"no {language.upper()} compiler found (tried {', '.join(candidates)})\n"
        f"  fix: install one (e.g. 'apt install {pkg}' or 'dnf install {'gcc-c++' if pkg == 'g++' else 'gcc'}') "
        f"or set {env} to the compiler to use"
    )


def _run(cmd: Sequence[str], cwd: str | None = None, timeout: float = 120):
    import subprocess

    return subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _version(compiler: str) -> str:
    import subprocess

    try:
        out = _run([*compiler.split(), "--version"], timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolchainError(f"cannot run the compiler '{compiler}': {e}") from None
    return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else "unknown"


def _accepts(compiler: str, language: str, flags: Sequence[str], source: str, link: Sequence[str] = ()) -> bool:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pypto-probe-") as d:
        src = Path(d) / ("probe.cpp" if language == "c++" else "probe.c")
        src.write_text(source)
        try:
            r = _run(
                [*compiler.split(), *flags, "-shared", "-fPIC", str(src), "-o", str(Path(d) / "probe.so"), *link],
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return r.returncode == 0 and not re.search(r"unrecognized|unknown argument|ignoring", r.stderr, re.I)


def _libmvec() -> tuple[str, ...]:
    """C math functions whose AVX2 vector variants glibc's libmvec provides on this machine."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("mvec")
    if not name or platform.machine() not in ("x86_64", "AMD64"):
        return ()
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return ()
    out = []
    for fn in _VECTOR_MATH:
        if hasattr(lib, f"_ZGVdN8v_{fn}f"):
            out.append(fn + "f")
        if hasattr(lib, f"_ZGVdN4v_{fn}"):
            out.append(fn)
    return tuple(out)


def _python_include() -> str | None:
    import sysconfig

    inc = sysconfig.get_path("include")
    return inc if inc and (Path(inc) / "Python.h").exists() else None


def _python_identity() -> list[object]:
    """What decides :func:`_python_include`, without importing sysconfig (1 ms) on the warm path."""
    import sys

    guess = Path(sys.base_prefix, "include", f"python{sys.version_info[0]}.{sys.version_info[1]}{sys.abiflags}")
    return [sys.base_prefix, sys.version, (guess / "Python.h").exists()]


_FLAG_SOURCE = "int pt_probe_flag(int x) { return x + 1; }\n"


def probe(language: str, base_flags: Sequence[str], optional_flags: Sequence[str], test_source: str,
          link_flags: Sequence[str] = ()) -> Toolchain:  # fmt: skip
    """Probe the compiler for ``language``: required ``base_flags`` must work, ``optional_flags`` are
    kept when accepted. The result is cached on disk per compiler identity."""
    import tempfile

    from pypto.cache import cache_dir

    cpu = cpu_identity()
    last = cache_dir() / "toolchains" / f"last-{language}-{sha256(cpu.encode()).hexdigest()[:16]}.json"
    try:
        compiler = find_compiler(language)
    except ToolchainError as missing:
        recorded = _load_toolchain(last)
        if recorded is None:
            raise
        # a cache built elsewhere (or before the compiler went away): its kernels still load
        return replace(recorded, prebuilt=str(missing))
    # keyed by the compiler file's identity, so a warm start runs no compiler at all
    key_src = json.dumps([language, compiler, list(base_flags), list(optional_flags), test_source,
                          list(link_flags), cpu, _stat(compiler), _python_identity(), 5])  # fmt: skip
    key = sha256(key_src.encode()).hexdigest()[:32]
    cache_file = cache_dir() / "toolchains" / f"{key}.json"
    hit = _load_toolchain(cache_file)
    if hit is not None:
        return hit
    version = _version(compiler)
    if not _accepts(compiler, language, base_flags, test_source, link_flags):
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / ("t.cpp" if language == "c++" else "t.c")
            src.write_text(test_source)
            r = _run([*compiler.split(), *base_flags, "-shared", "-fPIC", str(src), "-o", str(Path(d) / "t.so"),
                      *link_flags])  # fmt: skip
        raise ToolchainError(
            f"the compiler {compiler} ({version}) cannot build with {' '.join(base_flags)}:\n{r.stderr.strip()[-2000:]}"
        )
    # Flags are tried on a one-line source (the test source may include headers that take a second to
    # parse, like oneTBB's), then the test source is built once with everything chosen; should that
    # combination fail, every flag is tried again on the test source itself.
    for source in (_FLAG_SOURCE, test_source):
        flags = list(base_flags)
        for f in optional_flags:
            if _accepts(compiler, language, [*flags, f], source, link_flags):
                flags.append(f)
        link = list(link_flags)
        vm = _libmvec()
        if vm and _accepts(compiler, language, flags, source, [*link, "-lmvec", "-lm"]):
            link += ["-lmvec", "-lm"]
        else:
            vm = ()
        if source is test_source or _accepts(compiler, language, flags, test_source, link):
            break
    tc = Toolchain(language, compiler, version, tuple(flags), tuple(link), _python_include(), vm, cpu)
    from pypto.cache import _atomic_write

    for path in (cache_file, last):  # ``last``: what a machine without a compiler uses to find cached kernels
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(path, json.dumps(asdict(tc)).encode())  # whole or absent, even on a full disk
        except OSError:
            pass
    return tc


def _load_toolchain(path: Path) -> Toolchain | None:
    try:
        data = json.loads(path.read_text())
        data["flags"] = tuple(data["flags"])
        data["link_flags"] = tuple(data["link_flags"])
        data["vector_math"] = tuple(data["vector_math"])
        data.pop("prebuilt", None)
        return Toolchain(**data)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _stat(path: str) -> list:
    try:
        real = os.path.realpath(path.split()[0])
        st = os.stat(real)
        return [real, st.st_mtime_ns, st.st_size]
    except OSError:
        return []


PYTHON_HEADER = "pypto_python.h"
"""The header every kernel's fast-call entry point needs (``Python.h``), precompiled once per toolchain and
flags into the cache directory (``pch/``): parsing ``Python.h`` and the ~100 headers it includes took 0.04 s
of the 0.25 s gcc spent on a fused softmax (265 lines), every cold compilation."""
_pch_failed: set[str] = set()


def python_header(tc: Toolchain, flags: Sequence[str]) -> str | None:
    """The path of :data:`PYTHON_HEADER` beside its precompiled form for exactly ``flags`` (building it the
    first time, ~0.2 s), to compile a unit with ``-include <path>``; None without a cache directory, with a
    compiler other than gcc (clang reads precompiled headers differently), or when building it failed. gcc
    checks that a precompiled header matches the compilation and reads the header itself otherwise."""
    import subprocess
    import tempfile

    from pypto.cache import cache_dir, cache_enabled

    if not tc.python_include or tc.prebuilt or not cache_enabled() or "clang" in f"{tc.compiler} {tc.version}".lower():
        return None
    h = sha256()
    h.update(json.dumps([tc.identity(), tc.language, list(flags)]).encode())
    key = h.hexdigest()[:24]
    if key in _pch_failed:
        return None
    d = os.path.join(cache_dir(), "pch", key)
    header = os.path.join(d, PYTHON_HEADER)
    if os.path.exists(header + ".gch"):
        return header
    kind = "c++-header" if tc.language == "c++" else "c-header"
    text = "/* pypto: the fast-call entry points' Python.h, precompiled beside */\n#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n"
    made: list[str] = []  # temporary files, removed whatever happens (a full disk leaves none behind)
    try:
        os.makedirs(d, exist_ok=True)
        for suffix in (".h", ".gch"):
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=suffix)
            os.close(fd)
            made.append(tmp)
        with open(made[0], "w") as f:
            f.write(text)
        os.replace(made[0], header)  # the same text whoever writes it
        r = _run([*tc.compiler.split(), *flags, "-fPIC", "-x", kind, header, "-o", made[1]], timeout=120)
        if r.returncode != 0 or os.path.getsize(made[1]) == 0:
            raise OSError(r.stderr[-500:])
        os.chmod(made[1], 0o644)
        os.replace(made[1], header + ".gch")
    except (OSError, subprocess.TimeoutExpired):
        _pch_failed.add(key)
        return None
    finally:
        for tmp in made:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return header


def discard_python_header(header: str) -> None:
    """Remove a precompiled header a build failed with (damaged on disk): the next build makes it again."""
    try:
        os.unlink(header + ".gch")
    except OSError:
        pass


def build_shared(tc: Toolchain, source: str, *, name: str, extra_flags: Sequence[str] = (),
                 extra_link: Sequence[str] = (), units: Sequence[str] = (),
                 compile_flags: Sequence[str] = (), first_flags: Sequence[str] = ()) -> bytes:  # fmt: skip
    """Compile ``source`` into a shared object and return its bytes; a failure raises
    :class:`~pypto.errors.CompileError` with the compiler's messages and the source around them.

    With ``units`` (the same program as several translation units), each unit is compiled by a compiler
    process of its own, all at once, and the objects are linked: the wall time of the largest unit
    instead of the sum. ``compile_flags`` are given to the compiling steps only, never to the link: with
    ``-ffast-math`` at link time gcc adds a constructor that sets flush-to-zero for the whole process
    (NumPy's subnormals included) as soon as the object is loaded. ``first_flags`` go to the first unit's
    compilation alone (``-include`` of :func:`python_header` for the unit with the entry point).
    """
    import tempfile

    suffix = ".cpp" if tc.language == "c++" else ".c"
    with tempfile.TemporaryDirectory(prefix="pypto-build-") as d:  # strings, not Paths: see pypto.cache._root
        out = os.path.join(d, f"{name}.so")
        texts = list(units) if len(units) > 1 else [source]
        srcs = [os.path.join(d, f"{name}{'' if n == 0 else f'_part{n + 1}'}{suffix}") for n in range(len(texts))]
        for path, text in zip(srcs, texts):
            with open(path, "w") as f:
                f.write(text)
        base = [*tc.compiler.split(), *tc.flags, *extra_flags]
        if len(texts) == 1 and not compile_flags:
            steps = [[*base, "-fPIC", *first_flags, "-shared", srcs[0], "-o", out, *tc.link_flags, *extra_link]]
        else:
            steps = [[*base, *compile_flags, "-fPIC", *(first_flags if n == 0 else ()), "-c", src, "-o",
                      src[: -len(suffix)] + ".o"] for n, src in enumerate(srcs)]  # fmt: skip
        results = _run_all(steps, d, name, tc)
        for cmd, text, r in zip(steps, texts, results):
            if r.returncode != 0:
                raise CompileError(_compile_report(name, tc, cmd, r.stderr, text))
        if len(steps) > 1 or compile_flags:
            cmd = [*base, "-shared", "-fPIC", *(s[: -len(suffix)] + ".o" for s in srcs), "-o", out,
                   *tc.link_flags, *extra_link]  # fmt: skip
            (r,) = _run_all([cmd], d, name, tc)
            if r.returncode != 0:
                raise CompileError(_compile_report(name, tc, cmd, r.stderr, ""))
        with open(out, "rb") as f:
            return f.read()


def _run_all(cmds: Sequence[Sequence[str]], cwd: str, name: str, tc: Toolchain, timeout: float = 600) -> list:
    """Run the compiler commands ``cmds`` at once; their completed processes, in order."""
    import subprocess

    procs: list[subprocess.Popen] = []
    try:
        for cmd in cmds:
            procs.append(subprocess.Popen(list(cmd), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))  # fmt: skip
        done = []
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
        return done
    except subprocess.TimeoutExpired:
        raise CompileError(f"compiling kernel '{name}' with {tc.compiler} timed out after {timeout:.0f} s") from None
    except OSError as e:
        raise ToolchainError(f"cannot run the compiler {tc.compiler}: {e}") from None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _compile_report(name: str, tc: Toolchain, cmd: Sequence[str], stderr: str, source: str) -> str:
    lines = source.splitlines()
    excerpt = ""
    m = re.search(r":(\d+):(?:\d+:)? (?:fatal )?error", stderr)
    if m:
        n = int(m.group(1))
        lo, hi = max(1, n - 4), min(len(lines), n + 3)
        excerpt = "\n".join(f"{'>>' if i == n else '  '} {i:5d} | {lines[i - 1]}" for i in range(lo, hi + 1))
    text = f"compiling kernel '{name}' failed ({tc.compiler}, {tc.version})\n"
    text += f"command: {' '.join(cmd)}\n"
    text += "compiler output:\n" + "\n".join("  " + ln for ln in stderr.strip().splitlines()[:40])
    if excerpt:
        text += "\ngenerated source around the error:\n" + excerpt
    text += "\nThis is a bug in pypto or in the backend: please report it with this message."
    return text
