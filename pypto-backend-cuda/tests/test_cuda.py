"""The CUDA backend: generated code, nvcc compilation of every conformance kernel, the launch path.

Without a GPU (CI) the code generation, the compilation for sm_90 and sm_80 and the launcher's
bookkeeping (sizes, arguments, copies, buffer reuse, streams) are tested, against a stand-in for the
driver object and against a stand-in driver library in C (``tests/standin``) loaded through the same
cffi declarations; tests that launch on a GPU are skipped with the reason (``benchmarks/gpu/run.sh``
runs them on a GPU machine).
"""

from __future__ import annotations

import json
import os
import warnings
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
    matmul,
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


def test_a_contraction_runs_in_blocks_over_register_tiles():
    code = dense_relu.get_code(backend="cuda")
    # 128 x 128 outputs per block of 16 x 16 threads, 8 x 8 per thread in registers, 16 k per step in shared memory
    assert "__shared__ float pt_ta[2112];" in code and "__shared__ float pt_tb[2112];" in code
    assert "float pt_acc[64];" in code and "__launch_bounds__(256, 2) dense_relu_k0(" in code
    assert code.count("__syncthreads();") == 2
    assert "pt_acc[pt_m * 8 + pt_n] += pt_fa[pt_m] * pt_fb[pt_n];" in code
    # x[i, k] and w[j, k] are both contiguous along k: both are staged along k
    assert code.count("const long long pt_s = pt_e % 16, pt_o = pt_e / 16;") == 2
    (launch,) = rendered(dense_relu).extras["plan"].kernels
    assert launch.kind == "tiles" and launch.group == (16, 16) and launch.extents[0].endswith(" + 7), 8)")
    # the register_tiles pass of the simt-cuda target recorded it: the grid covers the outputs in steps of 8
    assert "8 x 8 outputs per thread" in dense_relu.ir("register_tiles", backend="cuda")
    assert "outputs per thread" not in dense_relu.ir("place_barriers", backend="cuda")
    # b[k, j] is contiguous along j: staged along j
    assert "const long long pt_o = pt_e % 128, pt_s = pt_e / 128;" in matmul.get_code(backend="cuda")


M, K, N = pt.dims("M K N")


def test_integer_contractions_keep_one_output_per_thread():
    @pt.kernel
    def imm(a: pt.Tensor[pt.int32, (M, K)], b: pt.Tensor[pt.int32, (K, N)], c: pt.Tensor[pt.int32, (M, N)]):
        i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
        c[i, j] = pt.reduce_sum(a[i, k] * b[k, j], axis=k)

    code = imm.get_code(backend="cuda")
    assert "__shared__ int pt_ta[272];" in code and "pt_acc" not in code
    (launch,) = rendered(imm).extras["plan"].kernels
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


R, C = pt.dims("R C")


@pt.kernel
def running_rows(x: pt.Tensor[pt.float32, (R, C)], s: pt.Tensor[pt.float32, (R, C)], hi: pt.Tensor[pt.int16, (R, C)],
                 down: pt.Tensor[pt.float64, (R, C)]):  # fmt: skip
    r, c = pt.axis(0), pt.axis(1)
    s[r, c] = pt.cumsum(x[r, c], axis=c)
    hi[r, c] = pt.cummax(pt.cast(x[r, c] * 100.0, pt.int16), axis=c, reverse=True)
    down[r, c] = pt.cumprod(1.0 + 0.01 * pt.cast(x[r, c], pt.float64), axis=r)


def test_scans_along_rows_are_block_prefixes_and_down_columns_a_thread_per_column():
    code = running_rows.get_code(backend="cuda")
    assert "pt_groupscan_sum_f32(float v, float *total)" in code and "__shfl_up_sync" in code
    assert "(short)__shfl_up_sync(0xffffffffu, (int)v, o)" in code  # 16-bit values move as 32-bit words
    kinds = [(k.kind, k.prefix) for k in rendered(running_rows).extras["plan"].kernels]
    assert kinds.count(("groups", True)) == 2 and ("map", False) in kinds  # (the cumprod runs down columns)


@needs_gpu
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (64, 1031), (2, 150_000)])
def test_scans_on_the_gpu(shape):
    x = np.random.default_rng(shape[1]).standard_normal(shape).astype(np.float32)
    k = pt.kernel(executor="cuda")(running_rows.fn)
    s, hi, down = np.empty(shape, np.float32), np.empty(shape, np.int16), np.empty(shape)
    k(x, s, hi, down)
    # float32 running sums in another order of additions: rounding grows like sqrt(length)
    np.testing.assert_allclose(s, np.cumsum(x.astype(np.float64), 1), rtol=0, atol=2e-6 * np.sqrt(shape[1]) * 4)
    want = np.flip(np.maximum.accumulate(np.flip((x * np.float32(100)).astype(np.int16), 1), 1), 1)
    np.testing.assert_array_equal(hi, want)
    np.testing.assert_allclose(down, np.cumprod(1 + 0.01 * x.astype(np.float64), 0), rtol=1e-12)
    s2 = np.empty_like(s)
    k(x, s2, hi, down)
    assert s2.tobytes() == s.tobytes()  # deterministic: the same tree of additions every call


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
    from pypto.compiler import compile_program

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

    kernels = [(f"{c.name}[{dt}]", pt.kernel(c.build(dt), **c.options)) for c in all_cases() for dt in c.dtypes]
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
    aliased: set[str] = set()
    for name, k in _catalogue():
        # the variant for aliased calls on one architecture, for the first dtype of each case (the aliasing
        # changes the pointers' qualifiers, not the arithmetic); the kernels of the 16-bit floats and the other
        # integer types (the same helpers and conversions on every architecture) once
        once = any(f"[{t}" in name for t in ("float16", "bfloat16", "int8", "int16", "uint", "complex"))
        base = name.split("[")[0]
        both = arch == "sm_90" and not once and base not in aliased
        aliased.add(base)
        for noalias in (True, False) if both else (True,):
            if once and arch != "sm_90":
                continue
            jobs.append((f"{name} noalias={noalias}", rendered(k, noalias).text, k.program(noalias).name))

    def build(job):
        label, code, name = job
        try:
            data, fmt = compile_cuda(code, name, arch)
        except pt.CompileError as e:
            return f"{label}: {e}"
        return None if fmt == "cubin" and data else f"{label}: no cubin"

    def build_batch(batch):  # one nvcc run for many kernels; each alone again when the batch fails
        try:
            data, fmt = compile_cuda(_one_unit([code for _, code, _ in batch]), "batch", arch)
        except pt.CompileError:
            return [f for f in map(build, batch) if f]
        return [] if fmt == "cubin" and data else [f"{batch[0][0]} ...: no cubin"]

    batches = [jobs[k : k + BATCH] for k in range(0, len(jobs), BATCH)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        failures = [f for fs in pool.map(build_batch, batches) for f in fs]
    assert not failures, f"{len(failures)} of {len(jobs)} kernels failed:\n" + "\n".join(failures[:5])


BATCH = 24  # kernels per nvcc run in the catalogue test (nvcc's start, not the kernels, took most of its time)


def _one_unit(sources: list[str]) -> str:
    """Several generated kernels as one translation unit: their includes first, each kernel's code in a
    namespace of its own (its helpers and kernels keep their names: C++ linkage instead of C's)."""
    includes: dict[str, None] = {}
    parts = []
    for k, code in enumerate(sources):
        body = []
        for line in code.splitlines():
            if line.startswith("#include"):
                includes[line] = None
            else:
                body.append(line.replace('extern "C" __global__', "__global__"))
        parts.append(f"namespace pt_unit{k} {{\n" + "\n".join(body) + f"\n}}  // namespace pt_unit{k}")
    return "\n".join([*includes, *parts]) + "\n"


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
    """Records what the launcher asks of the driver (:class:`pypto_cuda.driver.Driver`'s methods);
    device memory is host bytes keyed by address."""

    def __init__(self):
        from cffi import FFI

        self.ffi = FFI()
        self.memory: dict[int, bytearray] = {}
        self.next = 1 << 20
        self.launches: list[tuple] = []
        self.copies: list[str] = []
        self.freed: list[int] = []

    def stream(self, handle):
        return handle

    def current_context(self):
        return "ctx"

    def load_module(self, data):
        return "module"

    def unload_module(self, module):
        pass

    def function(self, module, name):
        return name

    def function_attribute(self, fn, attr):
        from pypto_cuda import driver

        return 1024 if attr == driver.FUNC_MAX_THREADS_PER_BLOCK else 0

    def set_function_attribute(self, fn, attr, value):
        self.launches.append(("opt-in", fn, value))

    def alloc(self, n):
        addr, self.next = self.next, self.next + n + 256
        self.memory[addr] = bytearray(n)
        return addr

    def free(self, ptr):
        self.freed.append(ptr)

    def htod(self, dst, host, nbytes, stream):
        self.copies.append("htod")
        self.memory[dst][:nbytes] = self.ffi.buffer(self.ffi.cast("char *", host), nbytes)[:]

    def dtoh(self, host, src, nbytes, stream):
        self.copies.append("dtoh")
        self.ffi.memmove(self.ffi.cast("char *", host), bytes(self.memory[src][:nbytes]), nbytes)

    def stream_synchronize(self, stream):
        self.copies.append(f"sync {stream}")

    def pointer_device(self, ptr):
        return 0

    def launch(self, fn, grid, block, shared, stream, params, slots):
        self.launches.append((fn, grid, block, tuple(s[0] for s in slots), shared, stream))


def fake_launcher(kernel):
    from pypto.backend_api import Artifact
    from pypto_cuda.device import CudaDevice
    from pypto_cuda.launcher import CudaLauncher

    driver = FakeDriver()
    dev = CudaDevice(driver, 0, "ctx", "fake", (9, 0), 132, 1024, 48 * 1024, 227 * 1024, 1 << 30)
    program = kernel.program()
    plan = rendered(kernel).extras["plan"]
    art = Artifact("cuda", b"cubin", ".cubin", {"plan": json.loads(plan.to_json())})
    return CudaLauncher(program, art, dev), driver


def test_launch_sizes_arguments_and_copies():
    launcher, driver = fake_launcher(sum_exp)
    x = np.ones(100_000, np.float32)
    out = np.zeros(1, np.float32)
    with pytest.warns(pt.PerformanceWarning, match="copied to the device and back"):
        launcher(x, out, 100_000)
    (k0, g0, b0, a0, s0, st0), (k1, g1, b1, a1, s1, st1) = driver.launches
    assert (k0, g0, b0) == ("sum_exp_k0", (7, 1, 1), (1024, 1, 1))  # 7 blocks of 16384, 4 per thread at most
    assert (k1, g1, b1) == ("sum_exp_k1", (1, 1, 1), (32, 1, 1))  # 7 partials: one warp combines them
    assert a0[1] == a1[1] and a0[2] == 100_000  # the partials buffer is shared by both stages
    assert a0[0] == launcher.copies[0][0] and st0 == st1 == 0  # the copy of x, on the default stream
    assert driver.copies == ["htod", "htod", "dtoh", "sync 0"]
    first = dict(launcher.copies)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning per kernel, not per call
        launcher(x, out, 100_000)
    assert launcher.copies == first  # device buffers are reused for arguments of the same size


def test_rows_that_fit_use_shared_memory():
    launcher, driver = fake_launcher(softmax)
    x = np.ones((64, 4096), np.float32)
    launcher(x, np.empty_like(x), 64, 4096)
    (name, grid, block, args, shared, stream) = driver.launches[-1]
    assert name == "softmax_k1_rows" and grid == (64, 1, 1) and block == (1024, 1, 1)  # 4 points per thread
    assert shared == 2 * 4096 * 4
    wide = np.ones((2, 20000), np.float32)
    launcher(wide, np.empty_like(wide), 2, 20000)
    assert driver.launches[-2][:2] == ("opt-in", "softmax_k1_rows")  # 160 KB: past the 48 KB default
    assert driver.launches[-1][0] == "softmax_k1_rows" and driver.launches[-1][4] == 2 * 20000 * 4


def test_map_kernels_get_a_grid_that_fills_the_gpu():
    launcher, driver = fake_launcher(vector_add)
    n = 1 << 20
    a = np.ones(n, np.float32)
    launcher(a, a, np.empty_like(a), n)
    (name, grid, block, *_rest) = driver.launches[-1]
    assert block == (256, 1, 1) and grid == (132 * 8, 1, 1)  # enough to fill the GPU, then each thread strides


def test_a_dropped_launcher_frees_its_device_memory():
    import gc
    import weakref

    launcher, driver = fake_launcher(softmax)
    x = np.ones((8, 300), np.float32)
    with pytest.warns(pt.PerformanceWarning):
        launcher(x, np.empty_like(x), 8, 300)
    kept = {ptr for ptr, _ in launcher.copies.values()} | {ptr for ptr, _ in launcher.runner.temps.values()}
    assert len(kept) >= 2 and not driver.freed
    ref = weakref.ref(launcher)
    del launcher
    gc.collect()
    assert ref() is None  # nothing the finalizer holds keeps the launcher alive
    assert kept <= set(driver.freed)


class FakeCudaArray:
    """An object exposing ``__cuda_array_interface__`` (what CuPy or Numba hand over)."""

    def __init__(self, shape, dtype, ptr, strides=None, stream=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": np.dtype(dtype).str, "data": (ptr, False),
                                         "strides": strides, "version": 3, "stream": stream}  # fmt: skip


def test_device_arrays_are_used_in_place():
    launcher, driver = fake_launcher(vector_add)
    a, b, c = (FakeCudaArray((1000,), np.float32, p) for p in (4096, 8192, 16384))
    assert launcher.fast_entry(a, b, c) is c
    (name, grid, block, args, shared, stream) = driver.launches[-1]
    assert args == (4096, 8192, 16384, 1000)
    assert driver.copies == [] and launcher.copies == {}  # no copies, and no wait for the GPU
    assert launcher.fast_entry(np.ones(3), np.ones(3), np.ones(3)) is NotImplemented
    with pytest.raises(pt.ShapeError):
        launcher.fast_entry(a, FakeCudaArray((999,), np.float32, 8192), c)
    with pytest.raises(pt.DTypeError):
        launcher.fast_entry(a, FakeCudaArray((1000,), np.float64, 8192), c)
    with pytest.raises(pt.AliasingError):
        launcher.fast_entry(a, b, FakeCudaArray((1000,), np.float32, 4096 + 400))
    with pytest.raises(pt.ArgumentError, match="not C-contiguous"):
        launcher.fast_entry(a, FakeCudaArray((1000,), np.float32, 8192, strides=(8,)), c)
    # extents of one may carry any stride: still contiguous
    col = FakeCudaArray((1000,), np.float32, 8192, strides=(4,))
    assert launcher.fast_entry(a, col, c) is c


def test_launches_go_to_the_callers_stream():
    launcher, driver = fake_launcher(vector_add)
    a, b, c = (FakeCudaArray((10,), np.float32, p) for p in (4096, 8192, 16384))
    with pt.stream(77):
        launcher.fast_entry(a, b, c)
    assert driver.launches[-1][-1] == 77

    class TorchLikeStream:
        cuda_stream = 91

    with pt.stream(TorchLikeStream()):
        launcher.fast_entry(a, b, c)
    assert driver.launches[-1][-1] == 91
    with pytest.raises(pt.ArgumentError, match="cannot read a CUDA stream"):
        with pt.stream("fast"):
            launcher.fast_entry(a, b, c)


def test_a_producer_stream_named_by_the_interface_is_waited_for():
    launcher, driver = fake_launcher(vector_add)
    events = []
    driver.new_event = lambda timing=True: "event"
    driver.record = lambda e, s: events.append(("record", s))
    driver.wait = lambda s, e: events.append(("wait", s))
    a = FakeCudaArray((10,), np.float32, 4096, stream=55)
    b, c = (FakeCudaArray((10,), np.float32, p) for p in (8192, 16384))
    with pt.stream(77):
        launcher.fast_entry(a, b, c)
    assert events == [("record", 55), ("wait", 77)]


def test_host_arrays_among_device_arrays_are_copied_and_waited_for():
    launcher, driver = fake_launcher(vector_add)
    a = FakeCudaArray((1000,), np.float32, 4096)
    b = np.arange(1000, dtype=np.float32)
    c = np.zeros(1000, np.float32)
    with pytest.warns(pt.PerformanceWarning):
        assert launcher.fast_entry(a, b, c) is c
    assert driver.copies == ["htod", "htod", "dtoh", "sync 0"]
    args = driver.launches[-1][3]
    assert args[0] == 4096 and args[1] == launcher.copies[1][0] and args[2] == launcher.copies[2][0]


def test_dlpack_capsules_are_read_in_place():
    from pypto_cuda.arrays import KDL_CPU, dlpack_view, host_view

    x = np.arange(12, dtype=np.float32).reshape(3, 4)

    class OnGpu:  # NumPy's capsule, presented as if it were on GPU 0
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None):
            return x.__dlpack__()

    v = dlpack_view(OnGpu(), 0)
    assert (v.handle, v.dtype, v.shape, v.contiguous, v.nbytes) == (x.ctypes.data, x.dtype, (3, 4), True, 48)
    assert x.__dlpack_device__()[0] == KDL_CPU and dlpack_view(x, 0) is None
    assert host_view(x, 0).handle is None
    with pytest.raises(pt.ArgumentError, match="lives on cuda:0"):
        dlpack_view(OnGpu(), 1)


def test_driver_declarations_match_cuda_h():
    """The cffi declarations name functions of the toolkit's cuda.h with as many parameters, and the
    enumeration values used are cuda.h's."""
    import re

    from pypto_cuda import driver

    header = None
    for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "include", "cuda.h")):
            header = open(os.path.join(root, "include", "cuda.h")).read()
            break
    if header is None:
        pytest.skip("cuda.h not found (set CUDA_HOME)")
    for m in re.finditer(r"CUresult (\w+)\(([^)]*)\);", driver.CDEF):
        name, params = m.group(1), m.group(2)
        base = re.sub(r"_v\d+$", "", name)
        if base != name:  # cuda.h declares the plain name and maps it to this entry point
            assert re.search(rf"#define {base}\s+(__CUDA_API_PTSZ\()?{name}\b", header), f"cuda.h maps {base} elsewhere"
        found = re.search(rf"CUresult CUDAAPI {base}\(([^)]*)\);", header)
        assert found, f"{name} is not declared in cuda.h"
        count = lambda p: 0 if p.strip() in ("", "void") else p.count(",") + 1  # noqa: E731
        assert count(found.group(1)) == count(params), name
    for const, enum in [("ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
                        ("ATTR_COMPUTE_CAPABILITY_MAJOR", "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                        ("ATTR_MULTIPROCESSOR_COUNT", "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
                        ("ATTR_L2_CACHE_SIZE", "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
                        ("FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES", "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"),
                        ("FUNC_NUM_REGS", "CU_FUNC_ATTRIBUTE_NUM_REGS"),
                        ("POINTER_DEVICE_ORDINAL", "CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL")]:  # fmt: skip
        value = re.search(rf"\b{enum}\s*=\s*(\w+)", header)
        assert value and int(value.group(1), 0) == getattr(driver, const), const


def test_benchmark_uses_the_backends_device_timer(monkeypatch):
    class Timer:
        def __init__(self):
            self.starts = 0

        def start(self):
            self.starts += 1

        def stop(self):
            return 0.25

    timer = Timer()
    monkeypatch.setattr(type(ENTRY.backend), "timer", lambda self, args: timer if args and args[0] == "dev" else None)
    r = pt.benchmark(lambda x: None, ("dev",), warmup=1, repeat=4, number=2)
    assert r.clock == "device events" and r.times == (0.125,) * 4 and timer.starts == 4
    assert pt.benchmark(lambda x: None, ("host",), warmup=0, repeat=2).clock == "host"


# -- on a GPU -------------------------------------------------------------------------------------------------------


@needs_gpu
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (64, 1031), (300, 130), (2, 40000), (2, 150_000)])
def test_softmax_on_the_gpu(shape):
    assert_softmax_matches_numpy(shape, rtol=1e-5, atol=1e-7, kernel=pt.kernel(executor="cuda")(softmax.fn))


@needs_gpu
@pytest.mark.parametrize("mkn", [(1, 1, 1), (9, 3, 33), (130, 64, 257), (512, 512, 512)])
def test_contractions_on_the_gpu(mkn):
    # float32 sums of k products: rounding grows like sqrt(k) (seen on an H200: 1.3e-5 at k = 512)
    assert_contractions_match_numpy(*mkn, rtol=1e-5, atol=1e-5 * max(1.0, (mkn[1] / 16) ** 0.5), executor="cuda")


@needs_gpu
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (64, 1031), (1031, 65), (4096, 4096)])
def test_column_reductions_on_the_gpu(shape):
    # float32 sums of a column's rows: rounding grows like sqrt(rows) (seen on an H200: 9.2e-5 over 4096 rows)
    assert_column_reductions_match_numpy(
        shape, rtol=2e-5, atol=1e-5 * max(1.0, (shape[0] / 16) ** 0.5), executor="cuda"
    )


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


# -- device arrays, streams and the array API on a GPU (torch CUDA tensors) ---------------------------------------


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch cannot see a GPU")
    return torch


@needs_gpu
def test_torch_tensors_in_place_without_waiting():
    torch = _torch()
    k = pt.kernel(executor="cuda")(vector_add.fn)
    n = 1 << 22
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", pt.PerformanceWarning)  # device arrays: nothing is copied
        assert k(a, b, c) is c
    d = torch.empty_like(a)
    for _ in range(25):  # back to back on one stream: each launch sees the previous one's result
        k(a, c, d)
        k(a, d, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a * 51 + b, rtol=1e-4, atol=1e-4)
    with pytest.raises(pt.DTypeError):
        k(a.double(), b, c)
    with pytest.raises(pt.ShapeError):
        k(a[:-1], b, c)
    with pytest.raises(pt.AliasingError):
        k(a, b, a[0:n])


@needs_gpu
def test_launches_follow_torch_current_stream_and_pt_stream():
    torch = _torch()
    k = pt.kernel(executor="cuda")(softmax.fn)
    x = torch.randn(512, 3000, device="cuda")
    ref = torch.softmax(x.double(), -1)
    side = torch.cuda.Stream()
    y1, y2 = torch.empty_like(x), torch.empty_like(x)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        k(x, y1)  # torch's current stream is `side` here
    k(x, y2, stream=side)
    with pt.stream(side):
        k(x, y2)
    side.synchronize()
    torch.testing.assert_close(y1.double(), ref, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(y2.double(), ref, rtol=1e-5, atol=1e-7)


@needs_gpu
def test_full_reductions_on_two_streams_keep_their_partials_apart():
    torch = _torch()
    k = pt.kernel(executor="cuda")(sum_exp.fn)
    xs = [torch.randn(3_000_001, device="cuda") for _ in range(2)]
    outs = [torch.zeros(1, device="cuda") for _ in range(2)]
    streams = [torch.cuda.Stream() for _ in range(2)]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    for _ in range(20):
        for x, o, s in zip(xs, outs, streams):
            k(x, o, stream=s)
    torch.cuda.synchronize()
    for x, o in zip(xs, outs):
        np.testing.assert_allclose(o.item(), np_sum_exp(x.cpu().numpy()), rtol=2e-5)


@needs_gpu
def test_dlpack_objects_and_numpy_arrays():
    torch = _torch()
    k = pt.kernel(executor="cuda")(vector_add.fn)
    a = torch.arange(1000, dtype=torch.float32, device="cuda")

    class OnlyDLPack:  # a device array known by its DLPack capsule alone
        def __init__(self, t):
            self.t = t

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

    c = torch.empty_like(a)
    k(OnlyDLPack(a), OnlyDLPack(a), OnlyDLPack(c))
    torch.cuda.synchronize()
    torch.testing.assert_close(c, 2 * a)
    x = np.arange(1000, dtype=np.float32)
    z = np.empty_like(x)
    k2 = pt.kernel(executor="cuda")(vector_add.fn)
    with pytest.warns(pt.PerformanceWarning, match="copied to the device and back"):
        k2(x, x, z)
    np.testing.assert_array_equal(z, 2 * x)
    mixed = torch.empty_like(a)
    k(a, x, mixed)  # a host array among device ones is copied in
    torch.cuda.synchronize()
    torch.testing.assert_close(mixed, 2 * a)


@needs_gpu
def test_jit_functions_run_on_torch_tensors():
    torch = _torch()

    @pt.jit
    def mlp(x, w1, w2):
        return pt.gelu(x @ w1) @ w2

    x = torch.randn(64, 96, device="cuda")
    w1, w2 = torch.randn(96, 128, device="cuda") / 10, torch.randn(128, 32, device="cuda") / 10
    y = mlp(x, w1, w2)
    assert isinstance(y, torch.Tensor) and y.is_cuda and tuple(y.shape) == (64, 32)
    ref = mlp(x.cpu().numpy(), w1.cpu().numpy(), w2.cpu().numpy())
    np.testing.assert_allclose(y.cpu().numpy(), ref, rtol=1e-4, atol=1e-5)


@needs_gpu
def test_torch_op_on_cuda_tensors_with_gradients():
    torch = _torch()

    @pt.jit
    def scaled_softmax(x, w):
        return pt.softmax(x * w, dim=-1)

    op = pt.torch.op(scaled_softmax)
    x = torch.randn(8, 40, device="cuda", dtype=torch.float32, requires_grad=True)
    w = torch.randn(40, device="cuda", dtype=torch.float32, requires_grad=True)
    y = op(x, w)
    assert y.is_cuda
    (y * torch.arange(40.0, device="cuda")).sum().backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    (torch.softmax(x2 * w2, -1) * torch.arange(40.0, device="cuda")).sum().backward()
    torch.testing.assert_close(y, torch.softmax(x2 * w2, -1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-4, atol=1e-5)


@needs_gpu
def test_benchmark_times_device_arrays_with_events():
    torch = _torch()
    k = pt.kernel(executor="cuda")(vector_add.fn)
    a = torch.randn(1 << 24, device="cuda")
    c = torch.empty_like(a)
    r = pt.benchmark(k, (a, a, c), warmup=2, repeat=5)
    assert r.clock == "device events" and 0 < r.median < 1.0


# -- the whole launch path against a stand-in driver library (C, with the driver's signatures) ------------------


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    import shutil
    import subprocess

    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler for the stand-in driver")
    src = os.path.join(os.path.dirname(__file__), "standin", "libcuda_standin.c")
    lib = str(tmp_path_factory.mktemp("standin") / "libcuda_standin.so")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", lib, src], check=True)
    from cffi import FFI

    ffi = FFI()
    ffi.cdef("long long standin_launches(void); const char *standin_last_name(void);"
             "unsigned int standin_last_size(int); unsigned long long standin_last_arg(int);"
             "void standin_fail_next_launch(int);")  # fmt: skip
    return lib, ffi, ffi.dlopen(lib)


def test_the_driver_path_through_cffi_against_a_stand_in_library(standin):
    from pypto.backend_api import Artifact
    from pypto_cuda.device import open_device
    from pypto_cuda.launcher import CudaLauncher, EventTimer

    path, ffi, probe = standin
    dev = open_device(path)
    assert (dev.name, dev.arch, dev.multiprocessors, dev.shared_optin) == ("Stand-in GPU", "sm_90", 132, 227 * 1024)
    assert dev.info()["driver_version"] == "13.0"
    art = Artifact("cuda", b"image", ".cubin", {"plan": json.loads(rendered(softmax).extras["plan"].to_json())})
    launcher = CudaLauncher(softmax.program(), art, dev)
    x = np.random.default_rng(0).standard_normal((64, 1000)).astype(np.float32)
    y = np.full_like(x, np.nan)
    before = probe.standin_launches()
    with pytest.warns(pt.PerformanceWarning):
        launcher(x, y, 64, 1000)
    assert probe.standin_launches() == before + 1
    assert ffi.string(probe.standin_last_name()) == b"softmax_k1_rows"
    assert [probe.standin_last_size(i) for i in range(7)] == [64, 1, 1, 256, 1, 1, 2 * 1000 * 4]
    args = [probe.standin_last_arg(i) for i in range(4)]
    assert args[:2] == [launcher.copies[0][0], launcher.copies[1][0]] and args[2:] == [64, 1000]
    np.testing.assert_array_equal(y[np.isfinite(y)], x[np.isfinite(y)])  # the stand-in runs nothing: y = its copy in
    assert np.isnan(y).all()  # (the output was copied in as it was, NaN, and back)
    # device arrays by pointer: the stand-in's device memory is host memory
    out = np.empty_like(x)

    class Dev:
        def __init__(self, a):
            self.a = a
            self.__cuda_array_interface__ = {"shape": a.shape, "typestr": "<f4", "data": (a.ctypes.data, False),
                                             "version": 3, "strides": None}  # fmt: skip

    dx, dout = Dev(x), Dev(out)
    assert launcher.fast_entry(dx, dout) is dout
    assert [probe.standin_last_arg(i) for i in range(4)] == [x.ctypes.data, out.ctypes.data, 64, 1000]
    timer = EventTimer(dev, 0)
    timer.start()
    assert timer.stop() == pytest.approx(0.5e-3)


def test_a_refused_launch_is_a_launch_error_with_the_sizes(standin):
    from pypto.backend_api import Artifact
    from pypto_cuda.device import open_device
    from pypto_cuda.launcher import CudaLauncher

    path, _, probe = standin
    dev = open_device(path)
    art = Artifact("cuda", b"image", ".cubin", {"plan": json.loads(rendered(softmax).extras["plan"].to_json())})
    launcher = CudaLauncher(softmax.program(), art, dev)
    x = np.ones((2, 1000), np.float32)
    y = np.zeros_like(x)
    probe.standin_fail_next_launch(1)
    with pytest.raises(pt.LaunchError) as ei:
        launcher(x, y, 2, 1000)
    msg = str(ei.value)
    assert "launching 'softmax_k1_rows' with grid (2, 1, 1), blocks of (256, 1, 1) threads" in msg
    assert "CUDA_ERROR_INVALID_VALUE (1)" in msg and "Stand-in GPU, sm_90" in msg


@needs_nvcc
def test_kernel_calls_reach_the_stand_in_through_the_core(standin, monkeypatch, tmp_path):
    """``pt.kernel(executor="cuda")`` end to end (trace, nvcc, load, bind, launch) on the stand-in driver."""
    from pypto_cuda.device import open_device

    path, _, probe = standin
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    entry = get_registry().backends["cuda"]  # the registry of now (an earlier test may have reloaded plugins)
    monkeypatch.setattr(entry.backend, "_device", open_device(path))
    monkeypatch.setattr(entry, "_availability", type(entry.availability)(True))
    k = pt.kernel(executor="cuda")(vector_add.fn)
    a, b, c = (np.full(1000, v, np.float32) for v in (1.0, 2.0, 0.0))

    class Dev:
        def __init__(self, arr):
            self.__cuda_array_interface__ = {"shape": arr.shape, "typestr": "<f4", "data": (arr.ctypes.data, False),
                                             "version": 2}  # fmt: skip

    out = Dev(c)
    before = probe.standin_launches()
    assert k(Dev(a), Dev(b), out) is out
    assert probe.standin_launches() == before + 1
    assert [probe.standin_last_arg(i) for i in range(4)] == [a.ctypes.data, b.ctypes.data, c.ctypes.data, 1000]
    with pytest.warns(pt.PerformanceWarning):
        k(a, b, c)
    assert probe.standin_launches() == before + 2
