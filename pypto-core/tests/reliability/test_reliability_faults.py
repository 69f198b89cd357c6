"""Faults of the disk cache and of the build: damaged entries, unwritable directories, many processes at
once, a compiler killed mid-build. Each runs kernels in fresh processes (``CUBE_SCRIPT`` checks its result
against NumPy and prints ``ok``), on the OpenMP backend, which builds through the system compiler."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

import pypto as pt
from pypto.testing import CUBE_SCRIPT, counting_compiler, run_python

pytestmark = pytest.mark.skipif("openmp" not in pt.list_backends(), reason="needs the openmp backend")


def _run(env: dict[str, str], backend: str = "openmp") -> subprocess.CompletedProcess[str]:
    return run_python(CUBE_SCRIPT, {"PYPTO_EXECUTOR": backend, **env}, timeout=300)


@pytest.mark.parametrize("damage", ["truncated", "zero_bytes", "garbled", "garbled_json", "missing_data"])
def test_damaged_cache_entries_are_rebuilt(tmp_path, damage):
    cc = counting_compiler(tmp_path, "c")
    env = {"CC": cc.path, "PYPTO_CACHE_DIR": str(tmp_path / "cache")}
    assert _run(env).stdout.strip() == "ok"
    (meta,) = list((tmp_path / "cache").glob("openmp/*/*.json"))
    (so,) = list((tmp_path / "cache").glob("openmp/*/*.so"))
    if damage == "truncated":
        so.write_bytes(so.read_bytes()[: so.stat().st_size // 2])
    elif damage == "zero_bytes":
        so.write_bytes(b"")
    elif damage == "garbled":
        data = bytearray(so.read_bytes())
        data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
        so.write_bytes(bytes(data))
    elif damage == "garbled_json":
        meta.write_text(meta.read_text()[:20])
    else:
        so.unlink()
    r = _run(env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    assert cc.count("cube.c") == 2  # detected and rebuilt
    assert json.loads(meta.read_text())["suffix"] == ".so"  # and the entry is whole again
    assert _run(env).stdout.strip() == "ok" and cc.count("cube.c") == 2


def test_a_read_only_cache_directory_warns_once_and_still_runs(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories: run as a normal user to test this")
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        r = _run({"PYPTO_CACHE_DIR": str(cache)})
    finally:
        cache.chmod(stat.S_IRWXU)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    assert r.stderr.count("CacheWarning") == 1 and "cannot be written" in r.stderr


def test_a_cache_path_that_is_a_file_warns_once_and_still_runs(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    r = _run({"PYPTO_CACHE_DIR": str(blocker / "cache")})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    assert r.stderr.count("CacheWarning") == 1 and "cannot be written" in r.stderr


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB filesystem filled to the last byte (a tmpfs: mounting one needs root)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {r.stderr.strip()}")
    try:
        (mnt / "cache").mkdir()
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 512)
        except OSError as e:
            assert e.errno == 28  # ENOSPC: the disk is full
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_cache_on_a_full_disk_warns_once_and_still_runs(full_disk):
    r = _run({"PYPTO_CACHE_DIR": str(full_disk / "cache")})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    assert r.stderr.count("CacheWarning") == 1 and "cannot be written" in r.stderr
    leftovers = [p for p in (full_disk / "cache").rglob("*") if p.is_file()]
    assert all(p.stat().st_size > 0 and not p.name.startswith(".tmp") for p in leftovers), leftovers


def test_eight_processes_compile_the_same_new_kernel(tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "PYPTO_CACHE_DIR": str(cache), "PYPTO_EXECUTOR": "openmp"}
    procs = [subprocess.Popen([sys.executable, "-c", CUBE_SCRIPT], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]  # fmt: skip
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and out.strip() == "ok", err[-2000:]
    entries = list(cache.glob("openmp/*/*.json"))
    assert len(entries) == 1 and not list(cache.rglob(".tmp-*"))  # one entry, whole, no torn files
    assert _run({"PYPTO_CACHE_DIR": str(cache)}).stdout.strip() == "ok"


def test_a_compiler_killed_mid_build_is_a_compile_error(tmp_path):
    from pypto.targets.cpu.toolchain import find_compiler

    real = find_compiler("c").split()[0]
    killer = tmp_path / "cc"  # compiles the availability probe, is killed on the kernel's source
    killer.write_text(f'#!/bin/sh\ncase "$*" in *cube.c*) kill -9 $$ ;; esac\nexec {real} "$@"\n')
    killer.chmod(killer.stat().st_mode | stat.S_IEXEC)
    code = CUBE_SCRIPT.replace(
        "cube(x, y)",
        "try:\n    cube(x, y)\nexcept pt.CompileError as e:\n    print('CompileError')\n    raise SystemExit(0)",
    )
    r = run_python(code, {"PYPTO_EXECUTOR": "openmp", "CC": str(killer), "PYPTO_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "CompileError" in r.stdout
    assert not list((tmp_path / "c").rglob("*.so"))  # nothing half-built was kept


@pytest.mark.parametrize("backend, variable", [("openmp", "CC"), ("tbb", "CXX")])
def test_a_warm_cache_runs_without_a_compiler(tmp_path, backend, variable):
    """A cache built where there was a compiler serves its kernels where there is none (TBB kernels with the
    runtime library cached beside them); a new kernel then fails with a typed error saying why."""
    if backend not in pt.list_backends():
        pytest.skip(f"needs the {backend} backend")
    env = {"PYPTO_CACHE_DIR": str(tmp_path / "cache")}
    assert _run(env, backend).stdout.strip() == "ok"  # built and cached, with the compiler
    no_compiler = {**env, "PATH": "", variable: ""}
    r = _run(no_compiler, backend)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    new_kernel = CUBE_SCRIPT.replace("+ 1.0", "+ 2.0").replace("x ** 3 + 1", "x ** 3 + 2").replace(
        "cube(x, y)", "try:\n    cube(x, y)\nexcept pt.CompileError as e:\n    print(type(e).__name__, e)\n    raise SystemExit(0)")  # fmt: skip
    r = run_python(new_kernel, {"PYPTO_EXECUTOR": backend, **no_compiler}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ToolchainError" in r.stdout and "is not in pypto's cache" in r.stdout and f"set {variable}" in r.stdout


INTERRUPTED = """
import sys, time, numpy as np, pypto as pt
N = pt.dim("N")

@pt.kernel(executor=sys.argv[1])
def slow(x: pt.Tensor[pt.float64, (N,)], y: pt.Tensor[pt.float64, (N,)]):
    i, j = pt.axis(0), pt.axis(1)
    y[i] = pt.reduce_sum(pt.sin(x[i] * x[j]), axis=j)

x = np.linspace(0, 1, 40000)
y = np.full_like(x, 7.0)
slow(x[:10], y[:10])  # compiled before the clock starts
print("start", flush=True)
try:
    slow(x, y)
    print("finished")
except KeyboardInterrupt:
    state = "nan" if np.isnan(y).all() else "partial" if (y == 7.0).any() else "complete"
    print("interrupted", state)
print("alive")
"""


@pytest.mark.parametrize("backend", ["openmp", "opencl"])
def test_ctrl_c_during_a_long_kernel_call(tmp_path, backend):
    """The interpreter survives, and the output is either the whole result (the kernel finished before
    Python saw the signal) or NaN: never partly written as if it were a result."""
    import signal

    if backend not in pt.list_backends() or not pt.get_runtime_info()["backends"][backend].get("available"):
        pytest.skip(f"backend '{backend}' is not available here")
    script = tmp_path / "slow.py"
    script.write_text(INTERRUPTED)
    p = subprocess.Popen([sys.executable, str(script), backend], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)  # fmt: skip
    assert p.stdout is not None and p.stdout.readline().strip() == "start"
    import time

    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-2000:]
    assert "alive" in out and "partial" not in out
    assert "interrupted complete" in out or "interrupted nan" in out or "finished" in out
