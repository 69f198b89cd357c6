"""The CUDA backend: generated code, nvcc compilation of every conformance kernel, the launch path.

Without a GPU (CI) the code generation, the compilation for sm_90 and sm_80 and the launcher's
bookkeeping (sizes, arguments, copies, buffer reuse) are tested, the last against a stand-in
for pycuda's driver module; tests that launch on a GPU are skipped with the reason.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import pypto as pt
from pypto.plugins import get_registry
from pypto.testing import (
    assert_column_reductions_match_numpy,
    assert_contractions_match_numpy,
    assert_softmax_matches_numpy,
    column_stats,
    dense_relu,
    np_sum_exp,
    softmax,
    sum_exp,
    vector_add,
)

ENTRY = get_registry().backends.get("cuda")


def rendered(kernel, noalias=True):
    """What the cuda backend renders for ``kernel``: device code and its launch plan (no GPU needed)."""
    return ENTRY.backend.render(kernel.program(noalias, backend="cuda"))


GPU = ENTRY is not None and ENTRY.availability.available
needs_gpu = pytest.mark.skipif(
    not GPU, reason=f"no GPU to launch on: {ENTRY.availability.reason if ENTRY else 'not installed'}"
)


def _nvcc_problem() -> str | None:
    from pypto_cuda.nvcc import NvccNotFound, probe_nvcc

    try:
        probe_nvcc()
    except NvccNotFound as e:
        return str(e)
    return None


needs_nvcc = pytest.mark.skipif(_nvcc_problem() is not None, reason=f"{_nvcc_problem()}")


# -- availability and generated code (no GPU needed) ----------------------------------------------------


def test_listed_with_the_reason_when_it_cannot_run():
    info = pt.get_runtime_info()["backends"]["cuda"]
    assert info["priority"] == 200
    if not GPU:
        assert not info["available"] and info["reason"]
        from pypto_cuda.device import driver_problem

        if driver_problem():
            assert info["reason"].startswith("no CUDA driver: libcuda.so.1 not found")


def test_code_is_generated_without_a_gpu():
    code = softmax.get_code(backend="cuda")
    assert 'extern "C" __global__ void softmax_k1(const float *__restrict__ x, float *__restrict__ y' in code
    assert "__shfl_down_sync(0xffffffffu, v, o)" in code and "expf(" in code
    assert "extern __shared__ __align__(16) unsigned char pt_dyn[];" in code  # the row kept in shared memory
    rows = code.split("void softmax_k1_rows(")[1].split("\n}\n")[0]
    assert rows.count("x[row * N + col]") == 1  # each row read from global memory once
    add = vector_add.get_code(backend="cuda")
    assert "for (long long pt_g0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x); pt_g0 < N - 0;" in add


def test_a_contraction_runs_in_blocks_over_tiles_in_shared_memory():
    code = dense_relu.get_code(backend="cuda")
    assert "__shared__ float pt_ta[272];" in code and "__shared__ float pt_tb[272];" in code
    assert code.count("__syncthreads();") == 2
    assert "const long long i = 0 + (long long)blockIdx.y * 16 + pt_ty;" in code
    assert "const long long pt_tx = (long long)threadIdx.x;" in code
    (launch,) = rendered(dense_relu).extras["plan"].kernels
    assert launch.kind == "tiles" and launch.group == (16, 16)


def test_a_column_reduction_runs_in_blocks_of_columns_splitting_the_rows():
    code = column_stats.get_code(backend="cuda")
    assert "__shared__ float pt_part_sum_1[256];" in code and code.count("__syncthreads();") == 1
    assert "for (long long i = 0 + pt_ty; i < M; i += 8) {" in code
    (launch,) = rendered(column_stats).extras["plan"].kernels
    assert launch.kind == "columns" and launch.group == (32, 8)


def test_full_reduction_is_two_stages_in_the_plan():
    plan = rendered(sum_exp).extras["plan"]
    assert [k.kind for k in plan.kernels] == ["groups", "single"]
    assert all(not b.per_thread for k in plan.kernels for b in k.local)  # warp shuffles: no scratch argument


# -- nvcc ------------------------------------------------------------------------------------------------------


def test_arch_spellings():
    from pypto_cuda.nvcc import parse_arch

    assert parse_arch("sm_90") == parse_arch("90") == parse_arch("9.0") == parse_arch("compute_90") == "sm_90"
    with pytest.raises(ValueError):
        parse_arch("hopper")


@needs_nvcc
def test_compile_key_names_nvcc_arch_and_flags(monkeypatch):
    monkeypatch.setenv("PYPTO_CUDA_ARCH", "8.0")
    key = ENTRY.backend.compile_key(softmax.program(backend="cuda"))
    assert "nvcc" in key and "arch=sm_80" in key and "-O3" in key and "codegen=" in key


@needs_nvcc
def test_compiled_cubins_go_through_the_disk_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PYPTO_CUDA_ARCH", "sm_90")
    from pypto.runtime.compile import compile_program

    program = softmax.program(backend="cuda")
    backend = ENTRY.backend
    monkeypatch.setattr(type(backend), "load", lambda self, program, artifact: artifact)  # no GPU to load on
    art = compile_program(program, backend)
    assert art.data[:4] == b"\x7fELF" and art.metadata["arch"] == "sm_90" and art.metadata["format"] == "cubin"
    assert json.dumps(art.metadata) and not art.from_cache  # the plan travels as JSON
    again = compile_program(program, backend)
    assert again.from_cache and again.data == art.data


@needs_nvcc
def test_ptx_for_an_architecture_newer_than_nvcc():
    from pypto_cuda.nvcc import compile_cuda, probe_nvcc

    newest = max(probe_nvcc().archs)
    data, fmt = compile_cuda('extern "C" __global__ void k(float *x) { x[0] = 1.0f; }', "k", f"sm_{newest + 1000}")
    assert fmt == "ptx" and b".entry k" in data


@needs_nvcc
def test_compile_errors_show_nvcc_output_and_the_source():
    from pypto_cuda.nvcc import compile_cuda

    source = 'extern "C" __global__ void k(float *x) {\n    x[0] = 1.0f;\n    x[1] = undefined_name;\n}\n'
    with pytest.raises(pt.CompileError) as ei:
        compile_cuda(source, "broken", "sm_90")
    msg = str(ei.value)
    assert "compiling CUDA kernel 'broken' failed" in msg and "undefined_name" in msg
    assert ">>     3 |     x[1] = undefined_name;" in msg


def _catalogue() -> list[tuple[str, object]]:
    """Every conformance kernel for each of its dtypes, and the kernels of the array-API programs (a kernel of
    its own when the suite is missing)."""
    try:
        from pypto_conformance.cases import all_cases
    except ImportError:
        return [("softmax", softmax), ("sum_exp", sum_exp), ("vector_add", vector_add)]
    from pypto_conformance.cases.arrays import all_array_cases
    from pypto_conformance.runner import array_inputs

    kernels = [(f"{c.name}[{dt}]", pt.kernel(c.build(dt))) for c in all_cases() for dt in c.dtypes]
    for c in all_array_cases():  # the array-API programs, at each of their sizes
        for dt in c.dtypes:
            fn = pt.jit(c.fn, dims=c.dims)
            kernels += [(f"{c.name}[{dt}, size {k}]", fn.kernel(*array_inputs(c, dt, k))) for k in range(len(c.shapes))]
    return kernels


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_every_conformance_kernel_compiles(arch):
    from pypto_cuda.nvcc import compile_cuda

    jobs = []
    for name, k in _catalogue():
        for noalias in (True, False) if arch == "sm_90" else (True,):  # the variant for aliased calls once
            jobs.append((f"{name} noalias={noalias}", rendered(k, noalias).text, k.program(noalias).name))

    def build(job):
        label, code, name = job
        try:
            data, fmt = compile_cuda(code, name, arch)
        except pt.CompileError as e:
            return f"{label}: {e}"
        return None if fmt == "cubin" and data else f"{label}: no cubin"

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        failures = [f for f in pool.map(build, jobs) if f]
    assert not failures, f"{len(failures)} of {len(jobs)} kernels failed:\n" + "\n".join(failures[:5])


@needs_nvcc
def test_random_kernels_compile():
    """Kernels from the conformance fuzzer (the shapes the catalogue does not list) compile too."""
    hypothesis = pytest.importorskip("hypothesis")
    try:
        from pypto_conformance.fuzz import FAMILIES, programs
        from pypto_conformance.fuzz.check import build_kernel
    except ImportError:
        pytest.skip("pypto-conformance is not installed")
    from pypto_cuda.nvcc import compile_cuda

    sources = []

    @hypothesis.settings(max_examples=25, derandomize=True, database=None, deadline=None,
                         suppress_health_check=list(hypothesis.HealthCheck))  # fmt: skip
    @hypothesis.given(hypothesis.strategies.data())
    def collect(data):
        family = data.draw(hypothesis.strategies.sampled_from(FAMILIES))
        k = pt.kernel(build_kernel(data.draw(programs(family))))
        sources.append((k.program().name, rendered(k).text))

    collect()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(lambda s: compile_cuda(s[1], s[0], "sm_90"), sources))


# -- the launcher against a stand-in driver ----------------------------------------------------------------------


class FakeDriver:
    """Records what the launcher asks of pycuda.driver; memory is host bytes keyed by address."""

    class Error(Exception):
        pass

    class function_attribute:  # noqa: N801 - pycuda's spelling
        MAX_THREADS_PER_BLOCK, SHARED_SIZE_BYTES, MAX_DYNAMIC_SHARED_SIZE_BYTES = range(3)

    def __init__(self):
        self.memory: dict[int, bytearray] = {}
        self.next = 1 << 20
        self.launches: list[tuple] = []
        self.copies: list[str] = []
        driver = self

        class Context:
            @staticmethod
            def synchronize():
                driver.copies.append("sync")

            @staticmethod
            def pop():
                pass

        self.Context = Context

    def mem_alloc(self, n):
        addr, self.next = self.next, self.next + n + 256
        self.memory[addr] = bytearray(n)
        return addr

    def memcpy_htod(self, dst, arr):
        self.copies.append("htod")
        self.memory[dst][: arr.nbytes] = arr.tobytes()

    def memcpy_dtoh(self, arr, src):
        self.copies.append("dtoh")
        arr.view(np.uint8).reshape(-1)[:] = np.frombuffer(bytes(self.memory[src][: arr.nbytes]), np.uint8)

    def module_from_buffer(self, data):
        driver = self

        class Function:
            def __init__(self, name):
                self.name = name

            def prepare(self, fmt):
                self.fmt = fmt

            def get_attribute(self, a):
                return 1024 if a == driver.function_attribute.MAX_THREADS_PER_BLOCK else 0

            def set_attribute(self, a, v):
                driver.launches.append(("opt-in", self.name, v))

            def prepared_call(self, grid, block, *args, shared_size=0):
                driver.launches.append((self.name, grid, block, self.fmt, args, shared_size))

        class Module:
            def get_function(self, name):
                return Function(name)

        return Module()


def fake_launcher(kernel, monkeypatch):
    from contextlib import nullcontext

    from pypto.backend_api import Artifact
    from pypto_cuda.device import CudaDevice
    from pypto_cuda.launcher import CudaLauncher

    driver = FakeDriver()
    dev = CudaDevice(driver, None, None, "fake", (9, 0), 132, 1024, 48 * 1024, 227 * 1024, 1 << 30)
    monkeypatch.setattr(CudaDevice, "active", lambda self: nullcontext())
    program = kernel.program()
    plan = rendered(kernel).extras["plan"]
    art = Artifact("cuda", b"cubin", ".cubin", {"plan": json.loads(plan.to_json())})
    return CudaLauncher(program, art, dev), driver


def test_launch_sizes_arguments_and_copies(monkeypatch):
    launcher, driver = fake_launcher(sum_exp, monkeypatch)
    x = np.ones(100_000, np.float32)
    out = np.zeros(1, np.float32)
    launcher(x, out, 100_000)
    (k0, g0, b0, f0, a0, s0), (k1, g1, b1, f1, a1, s1) = driver.launches
    assert (k0, g0, b0, f0) == ("sum_exp_k0", (7, 1, 1), (256, 1, 1), "PPq")  # 7 blocks of 16384, 256 threads
    assert (k1, g1, b1) == ("sum_exp_k1", (1, 1, 1), (32, 1, 1))  # 7 partials: one warp combines them
    assert a0[1] == a1[1] and a0[2] == 100_000  # the partials buffer is shared by both stages
    assert driver.copies == ["htod", "htod", "dtoh", "sync"]
    first = dict(launcher.copies)
    launcher(x, out, 100_000)
    assert launcher.copies == first  # device buffers are reused for arguments of the same size


def test_rows_that_fit_use_shared_memory(monkeypatch):
    launcher, driver = fake_launcher(softmax, monkeypatch)
    x = np.ones((64, 4096), np.float32)
    launcher(x, np.empty_like(x), 64, 4096)
    (name, grid, block, fmt, args, shared) = driver.launches[-1]
    assert name == "softmax_k1_rows" and grid == (64, 1, 1) and block == (256, 1, 1)
    assert shared == 2 * 4096 * 4
    wide = np.ones((2, 20000), np.float32)
    launcher(wide, np.empty_like(wide), 2, 20000)
    assert driver.launches[-2][:2] == ("opt-in", "softmax_k1_rows")  # 160 KB: past the 48 KB default
    assert driver.launches[-1][0] == "softmax_k1_rows" and driver.launches[-1][-1] == 2 * 20000 * 4


def test_map_kernels_get_a_capped_grid(monkeypatch):
    launcher, driver = fake_launcher(vector_add, monkeypatch)
    n = 1 << 20
    a = np.ones(n, np.float32)
    launcher(a, a, np.empty_like(a), n)
    (name, grid, block, *_rest) = driver.launches[-1]
    assert block == (256, 1, 1) and grid == (n // 256, 1, 1)


class FakeCudaArray:
    """An object exposing ``__cuda_array_interface__`` (what CuPy or torch hand over)."""

    def __init__(self, shape, dtype, ptr, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": np.dtype(dtype).str, "data": (ptr, False),
                                         "strides": strides, "version": 3}  # fmt: skip


def test_device_arrays_are_used_in_place(monkeypatch):
    launcher, driver = fake_launcher(vector_add, monkeypatch)
    a, b, c = (FakeCudaArray((1000,), np.float32, p) for p in (4096, 8192, 16384))
    assert launcher.fast_entry(a, b, c) is c
    (name, grid, block, fmt, args, shared) = driver.launches[-1]
    assert args[:3] == (4096, 8192, 16384) and args[3] == 1000
    assert "htod" not in driver.copies and launcher.copies == {}
    assert launcher.fast_entry(np.ones(3), np.ones(3), np.ones(3)) is NotImplemented
    with pytest.raises(pt.ShapeError):
        launcher.fast_entry(a, FakeCudaArray((999,), np.float32, 8192), c)
    with pytest.raises(pt.DTypeError):
        launcher.fast_entry(a, FakeCudaArray((1000,), np.float64, 8192), c)
    with pytest.raises(pt.AliasingError):
        launcher.fast_entry(a, b, FakeCudaArray((1000,), np.float32, 4096 + 400))
    with pytest.raises(pt.ArgumentError, match="not C-contiguous"):
        launcher.fast_entry(a, FakeCudaArray((1000,), np.float32, 8192, strides=(8,)), c)


# -- on a GPU -------------------------------------------------------------------------------------------------------


@needs_gpu
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (64, 1031), (300, 130), (2, 40000), (2, 150_000)])
def test_softmax_on_the_gpu(shape):
    assert_softmax_matches_numpy(shape, rtol=1e-5, atol=1e-7, kernel=pt.kernel(executor="cuda")(softmax.fn))


@needs_gpu
@pytest.mark.parametrize("mkn", [(1, 1, 1), (9, 3, 33), (130, 64, 257), (512, 512, 512)])
def test_contractions_on_the_gpu(mkn):
    assert_contractions_match_numpy(*mkn, rtol=1e-5, atol=1e-5, executor="cuda")


@needs_gpu
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (64, 1031), (1031, 65), (4096, 4096)])
def test_column_reductions_on_the_gpu(shape):
    assert_column_reductions_match_numpy(shape, rtol=2e-5, atol=1e-5, executor="cuda")


@needs_gpu
@pytest.mark.parametrize("n", [0, 1, 17, 16385, 3_000_001])
def test_full_reduction_on_the_gpu_is_deterministic(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    k = pt.kernel(executor="cuda")(sum_exp.fn)
    bits = set()
    for _ in range(3):
        out = np.zeros(1, np.float32)
        k(x, out)
        bits.add(out.view(np.uint32)[0])
    assert len(bits) == 1
    np.testing.assert_allclose(out[0], np_sum_exp(x), rtol=2e-5)


@needs_gpu
def test_cupy_arrays_in_place():
    cp = pytest.importorskip("cupy")
    a = cp.arange(1000, dtype=cp.float32)
    c = cp.empty_like(a)
    assert pt.kernel(executor="cuda")(vector_add.fn)(a, a, c) is c
    np.testing.assert_array_equal(cp.asnumpy(c), 2 * np.arange(1000, dtype=np.float32))
