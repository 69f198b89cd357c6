"""The benchmark cases and every competitor's implementation of them.

Each case builds its inputs once (float32, fixed seed), preallocates every output (destination
passing: timing page faults of fresh outputs would measure the allocator, not the kernel), states
the bytes a kernel must move at least, and offers one zero-argument callable per implementation.
Every implementation is checked against NumPy before it is timed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import pypto as pt
from pypto.benchsuite import gelu_numpy
from pypto.testing import layernorm, matmul, softmax, sum_exp, vector_add

HERE = Path(__file__).resolve().parent
M_, N_ = pt.dims("M N")


# -- the kernels, written once in pypto ------------------------------------------------------------
# vector_add, softmax, sum_exp and layernorm are the standard test kernels (pypto/testing/kernels.py)


@pt.kernel
def gelu(x: pt.Tensor[float, (N_,)], y: pt.Tensor[float, (N_,)]):
    i = pt.axis(0)
    v = x[i]
    y[i] = 0.5 * v * (1.0 + pt.tanh(0.7978845608 * (v + 0.044715 * v * v * v)))


@pt.kernel
def column_sum(x: pt.Tensor[float, (M_, N_)], y: pt.Tensor[float, (N_,)]):
    i, j = pt.axis(0), pt.axis(1)
    y[j] = pt.reduce_sum(x[i, j], axis=i)


@pt.kernel
def transpose(x: pt.Tensor[float, (M_, N_)], y: pt.Tensor[float, (N_, M_)]):
    i, j = pt.axis(0), pt.axis(1)
    y[j, i] = x[i, j]


PYPTO_KERNELS = {
    "vector_add": vector_add,
    "softmax": softmax,
    "sum_exp": sum_exp,
    "layernorm": layernorm,
    "gelu": gelu,
    "column_sum": column_sum,
    "matmul": matmul,
    "transpose": transpose,
}


# -- hand-written C ---------------------------------------------------------------------------------

_C_DECLS = """
void vector_add(const float*, const float*, float*, int64_t);
void vector_add_nt(const float*, const float*, float*, int64_t);
void softmax(const float*, float*, int64_t, int64_t);
float sum_exp(const float*, int64_t);
void layernorm(const float*, const float*, const float*, float*, int64_t, int64_t, float);
void gelu(const float*, float*, int64_t);
void stream_triad(const float*, const float*, float*, float, int64_t);
float stream_read(const float*, int64_t);
double fma_peak(int64_t);
"""


def load_handwritten(build_dir: Path):
    """Compile benchmarks/handwritten/kernels.c with the OpenMP backend's compiler and flags."""
    import cffi

    from pypto.targets.cpu.toolchain import find_compiler

    try:
        from pypto_openmp.plugin import BACKEND

        tc = BACKEND.toolchain()
        cmd_cc, flags, link = tc.compiler.split(), list(tc.flags), list(tc.link_flags)
    except Exception:  # the OpenMP backend is not installed: same flags by hand
        cmd_cc = find_compiler("c").split()
        flags = ["-O3", "-fopenmp", "-march=native", "-fno-math-errno", "-mprefer-vector-width=512"]
        link = ["-lmvec", "-lm"]
    build_dir.mkdir(parents=True, exist_ok=True)
    so = build_dir / "handwritten.so"
    src = HERE / "handwritten" / "kernels.c"
    subprocess.run([*cmd_cc, *flags, "-shared", "-fPIC", str(src), "-o", str(so), *link], check=True)
    ffi = cffi.FFI()
    ffi.cdef(_C_DECLS)
    lib = ffi.dlopen(str(so))
    return ffi, lib, " ".join([*cmd_cc, *flags])


# -- competitors ---------------------------------------------------------------------------------------


class Competitors:
    """Lazily imported libraries; a missing one is reported, not fatal."""

    def __init__(self, threads: int, build_dir: Path):
        self.threads = threads
        self.missing: dict[str, str] = {}
        self.ne = self._try("numexpr", lambda: __import__("numexpr"))
        if self.ne:
            self.ne.set_num_threads(threads)
        self.numba = self._try("numba", lambda: __import__("numba"))
        if self.numba:
            self.numba.set_num_threads(threads)
        self.torch = self._try("torch", lambda: __import__("torch"))
        if self.torch:
            self.torch.set_num_threads(threads)
        c = self._try("c", lambda: load_handwritten(build_dir))
        self.ffi, self.c, self.c_flags = c if c else (None, None, "")
        self.pypto_backends = [b for b in ("openmp", "tbb", "opencl") if b in pt.list_backends()]

    def _try(self, name: str, fn: Callable):
        try:
            return fn()
        except Exception as e:  # report and carry on without that competitor
            self.missing[name] = f"{type(e).__name__}: {e}"
            return None

    def ptr(self, a: np.ndarray):
        return self.ffi.from_buffer("float[]", a)

    def compiled(self, fn: Callable) -> Callable | None:
        """torch.compile(fn) (inductor, CPU), or None."""
        if not self.torch:
            return None
        return self.torch.compile(fn, dynamic=False)


@dataclass
class Case:
    """One benchmark: inputs, the NumPy answer, the minimum bytes moved, the implementations."""

    name: str
    title: str
    bytes_moved: int
    reference: Callable[[], np.ndarray]
    result: Callable[[], np.ndarray]  # reads the output the implementations write
    impls: dict[str, Callable[[], object]] = field(default_factory=dict)
    tolerance: dict = field(default_factory=lambda: {"rtol": 2e-5, "atol": 1e-6})
    skipped: dict[str, str] = field(default_factory=dict)
    flops: int = 0  # floating-point operations, for compute-bound cases (reported as GFLOP/s)


def _numba_kernels(nb):
    from numba import njit, prange

    @njit(parallel=True, fastmath=True, cache=False)
    def vadd(a, b, c):
        for i in prange(a.shape[0]):
            c[i] = a[i] + b[i]

    @njit(parallel=True, fastmath=True)
    def softmax_nb(x, y):
        for r in prange(x.shape[0]):
            m = -np.inf
            for j in range(x.shape[1]):
                m = max(m, x[r, j])
            s = np.float32(0.0)
            for j in range(x.shape[1]):
                e = np.exp(x[r, j] - m)
                y[r, j] = e
                s += e
            inv = np.float32(1.0) / s
            for j in range(x.shape[1]):
                y[r, j] *= inv

    @njit(parallel=True, fastmath=True)
    def sum_exp_nb(x):
        s = np.float32(0.0)
        for i in prange(x.shape[0]):
            s += np.exp(x[i])
        return s

    @njit(parallel=True, fastmath=True)
    def layernorm_nb(x, g, b, y):
        n = x.shape[1]
        for r in prange(x.shape[0]):
            s = np.float32(0.0)
            for j in range(n):
                s += x[r, j]
            mean = s / n
            v = np.float32(0.0)
            for j in range(n):
                d = x[r, j] - mean
                v += d * d
            rstd = np.float32(1.0) / np.sqrt(v / n + np.float32(1e-5))
            for j in range(n):
                y[r, j] = (x[r, j] - mean) * rstd * g[j] + b[j]

    @njit(parallel=True, fastmath=True)
    def gelu_nb(x, y):
        for i in prange(x.shape[0]):
            v = x[i]
            y[i] = (
                np.float32(0.5)
                * v
                * (np.float32(1.0) + np.tanh(np.float32(0.7978845608) * (v + np.float32(0.044715) * v * v * v)))
            )

    @njit(parallel=True, fastmath=True)
    def column_sum_nb(x, y):  # as a Numba user writes it: a thread per column, summing down it
        for j in prange(x.shape[1]):
            s = np.float32(0.0)
            for i in range(x.shape[0]):
                s += x[i, j]
            y[j] = s

    @njit(parallel=True, fastmath=True)
    def matmul_nb(a, b, c):  # as a Numba user writes it, in the cache-friendly i-k-j order
        for i in prange(a.shape[0]):
            for j in range(b.shape[1]):
                c[i, j] = 0.0
            for k in range(a.shape[1]):
                aik = a[i, k]
                for j in range(b.shape[1]):
                    c[i, j] += aik * b[k, j]

    return vadd, softmax_nb, sum_exp_nb, layernorm_nb, gelu_nb, column_sum_nb, matmul_nb


def build_cases(comp: Competitors, names: list[str] | None = None) -> list[Case]:
    rng = np.random.default_rng(0)
    nb = _numba_kernels(comp.numba) if comp.numba else None
    torch = comp.torch
    cases: list[Case] = []

    def want(name: str) -> bool:
        return names is None or name in names

    def pypto_impls(case: Case, kernel_name: str, args: tuple) -> None:
        for b in comp.pypto_backends:
            k = pt.kernel(executor=b)(PYPTO_KERNELS[kernel_name].fn)
            case.impls[f"pypto-{b}"] = lambda k=k: k(*args)

    for n, label in ((1 << 20, "1M"), (16 << 20, "16M")):
        name = f"vector_add_{label}"
        if not want(name):
            continue
        a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        c = pt.empty(n)
        case = Case(name, f"vector add, {label} float32", 12 * n, lambda a=a, b=b: a + b, lambda c=c: c)
        pypto_impls(case, "vector_add", (a, b, c))
        case.impls["numpy"] = lambda a=a, b=b, c=c: np.add(a, b, out=c)
        if comp.ne:
            case.impls["numexpr"] = lambda a=a, b=b, c=c: comp.ne.evaluate("a + b", local_dict={"a": a, "b": b}, out=c)
        if nb:
            case.impls["numba"] = lambda a=a, b=b, c=c: nb[0](a, b, c)
        if torch:
            ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
            case.impls["torch"] = lambda ta=ta, tb=tb, tc=tc: torch.add(ta, tb, out=tc)
            f = comp.compiled(lambda x, y: x + y)
            case.impls["torch.compile"] = lambda ta=ta, tb=tb, tc=tc, f=f: tc.copy_(f(ta, tb))
        if comp.c:
            pa, pb, pc = comp.ptr(a), comp.ptr(b), comp.ptr(c)
            # "C" is the best hand-written version for the size: streaming stores only pay off when
            # the output is far larger than the caches
            plain = lambda pa=pa, pb=pb, pc=pc, n=n: comp.c.vector_add(pa, pb, pc, n)  # noqa: E731
            stream = lambda pa=pa, pb=pb, pc=pc, n=n: comp.c.vector_add_nt(pa, pb, pc, n)  # noqa: E731
            case.impls["C"] = stream if n >= (4 << 20) else plain
            case.impls["C (streaming)" if n < (4 << 20) else "C (no streaming)"] = plain if n >= (4 << 20) else stream
        cases.append(case)

    for m in (1024, 4096):
        name = f"softmax_{m}"
        if not want(name):
            continue
        x = rng.standard_normal((m, m)).astype(np.float32)
        y = pt.empty((m, m))

        def ref(x=x):
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        case = Case(name, f"softmax over rows, {m}x{m} float32", 8 * m * m, ref, lambda y=y: y)
        pypto_impls(case, "softmax", (x, y))
        tmp = np.empty_like(x)
        rowv = np.empty((m, 1), np.float32)

        def np_softmax(x=x, y=y, tmp=tmp, rowv=rowv):
            np.max(x, axis=1, keepdims=True, out=rowv)
            np.subtract(x, rowv, out=tmp)
            np.exp(tmp, out=tmp)
            np.sum(tmp, axis=1, keepdims=True, out=rowv)
            np.divide(tmp, rowv, out=y)

        case.impls["numpy"] = np_softmax
        if comp.ne:

            def ne_softmax(x=x, y=y, tmp=tmp, rowv=rowv):
                np.max(x, axis=1, keepdims=True, out=rowv)
                comp.ne.evaluate("exp(x - r)", local_dict={"x": x, "r": rowv}, out=tmp)
                np.sum(tmp, axis=1, keepdims=True, out=rowv)
                comp.ne.evaluate("t / r", local_dict={"t": tmp, "r": rowv}, out=y)

            case.impls["numexpr"] = ne_softmax
        if nb:
            case.impls["numba"] = lambda x=x, y=y: nb[1](x, y)
        if torch:
            tx, ty = torch.from_numpy(x), torch.from_numpy(y)
            case.impls["torch"] = lambda tx=tx, ty=ty: torch.softmax(tx, dim=1, out=ty)
            f = comp.compiled(lambda t: torch.softmax(t, dim=1))
            case.impls["torch.compile"] = lambda tx=tx, ty=ty, f=f: ty.copy_(f(tx))
        if comp.c:
            px, py = comp.ptr(x), comp.ptr(y)
            case.impls["C"] = lambda px=px, py=py, m=m: comp.c.softmax(px, py, m, m)
        cases.append(case)

    def _sum_exp_case() -> None:  # a function of its own: its lambdas must not see the other cases' arrays
        n = 16 << 20
        x = (rng.standard_normal(n) * 0.5).astype(np.float32)
        out = np.zeros(1, np.float32)
        holder = np.zeros(1, np.float32)
        case = Case("sum_exp_16M", "sum(exp(x)), 16M float32", 4 * n,
                    lambda: np.array([np.exp(x.astype(np.float64)).sum()], np.float32), lambda: holder,
                    tolerance={"rtol": 2e-4, "atol": 0})  # fmt: skip

        def keep(v):
            holder[0] = v

        for b in comp.pypto_backends:
            k = pt.kernel(executor=b)(PYPTO_KERNELS["sum_exp"].fn)
            case.impls[f"pypto-{b}"] = lambda k=k: (k(x, out), keep(out[0]))
        tmp = np.empty_like(x)
        case.impls["numpy"] = lambda: keep(np.exp(x, out=tmp).sum())
        if comp.ne:
            case.impls["numexpr"] = lambda: keep(comp.ne.evaluate("sum(exp(x))", local_dict={"x": x}))
        if nb:
            case.impls["numba"] = lambda: keep(nb[2](x))
        if torch:
            tx = torch.from_numpy(x)
            case.impls["torch"] = lambda: keep(torch.exp(tx).sum().item())
            f = comp.compiled(lambda t: torch.exp(t).sum())
            case.impls["torch.compile"] = lambda: keep(f(tx).item())
        if comp.c:
            px = comp.ptr(x)
            case.impls["C"] = lambda: keep(comp.c.sum_exp(px, n))
        cases.append(case)

    if want("sum_exp_16M"):
        _sum_exp_case()

    def _layernorm_case() -> None:  # a function of its own: its lambdas must not see the other cases' arrays
        m = 4096
        x = rng.standard_normal((m, m)).astype(np.float32)
        g, bb = rng.random(m, dtype=np.float32), rng.random(m, dtype=np.float32)
        y = pt.empty((m, m))

        def ref_ln():
            mu = x.mean(1, keepdims=True)
            return (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-5) * g + bb

        case = Case("layernorm_4096", "layernorm over rows, 4096x4096 float32", 8 * m * m, ref_ln, lambda: y,
                    tolerance={"rtol": 1e-4, "atol": 1e-4})  # fmt: skip
        pypto_impls(case, "layernorm", (x, g, bb, y))
        tmp = np.empty_like(x)
        rowv = np.empty((m, 1), np.float32)

        def np_ln():
            np.mean(x, axis=1, keepdims=True, out=rowv)
            np.subtract(x, rowv, out=tmp)
            np.square(tmp, out=y)
            var = y.mean(axis=1, keepdims=True)
            np.multiply(tmp, 1.0 / np.sqrt(var + np.float32(1e-5)), out=y)
            np.multiply(y, g, out=y)
            np.add(y, bb, out=y)

        case.impls["numpy"] = np_ln
        if nb:
            case.impls["numba"] = lambda: nb[3](x, g, bb, y)
        if torch:
            tx, ty, tg, tb = (torch.from_numpy(v) for v in (x, y, g, bb))
            ln = torch.nn.functional.layer_norm
            case.impls["torch"] = lambda: ty.copy_(ln(tx, (m,), tg, tb, 1e-5))
            f = comp.compiled(lambda t: ln(t, (m,), tg, tb, 1e-5))
            case.impls["torch.compile"] = lambda: ty.copy_(f(tx))
        if comp.c:
            px, pg, pb, py = comp.ptr(x), comp.ptr(g), comp.ptr(bb), comp.ptr(y)
            case.impls["C"] = lambda: comp.c.layernorm(px, pg, pb, py, m, m, 1e-5)
        cases.append(case)

    if want("layernorm_4096"):
        _layernorm_case()

    def _gelu_case() -> None:  # a function of its own: its lambdas must not see the other cases' arrays
        n = 16 << 20
        x = rng.standard_normal(n).astype(np.float32)
        y = pt.empty(n)

        def ref_gelu():
            v = x
            return 0.5 * v * (1 + np.tanh(np.float32(0.7978845608) * (v + np.float32(0.044715) * v * v * v)))

        case = Case("gelu_16M", "gelu (tanh form), 16M float32", 8 * n, ref_gelu, lambda: y,
                    tolerance={"rtol": 1e-5, "atol": 1e-6})  # fmt: skip
        pypto_impls(case, "gelu", (x, y))
        tmp = np.empty_like(x)

        def np_gelu(x=x, y=y, tmp=tmp):
            gelu_numpy(x, y, tmp)

        case.impls["numpy"] = np_gelu
        if comp.ne:
            case.impls["numexpr"] = lambda: comp.ne.evaluate(
                "0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))", local_dict={"x": x}, out=y
            )
        if nb:
            case.impls["numba"] = lambda: nb[4](x, y)
        if torch:
            tx, ty = torch.from_numpy(x), torch.from_numpy(y)
            gl = torch.nn.functional.gelu
            case.impls["torch"] = lambda: ty.copy_(gl(tx, approximate="tanh"))
            f = comp.compiled(lambda t: gl(t, approximate="tanh"))
            case.impls["torch.compile"] = lambda: ty.copy_(f(tx))
        if comp.c:
            px, py = comp.ptr(x), comp.ptr(y)
            case.impls["C"] = lambda: comp.c.gelu(px, py, n)
        cases.append(case)

    if want("gelu_16M"):
        _gelu_case()

    def _column_sum_case() -> None:  # a function of its own: its lambdas must not see the other cases' arrays
        m = 4096
        x = rng.random((m, m), dtype=np.float32)
        y = pt.empty(m)
        case = Case("column_sum_4096", "sum down the columns, 4096x4096 float32", 4 * m * m,
                    lambda: x.astype(np.float64).sum(0), lambda: y, tolerance={"rtol": 1e-5, "atol": 0})  # fmt: skip
        pypto_impls(case, "column_sum", (x, y))
        case.impls["numpy"] = lambda: np.sum(x, axis=0, out=y)
        if nb:
            case.impls["numba"] = lambda: nb[5](x, y)
        if torch:
            tx, ty = torch.from_numpy(x), torch.from_numpy(y)
            case.impls["torch"] = lambda: torch.sum(tx, 0, out=ty)
            f = comp.compiled(lambda t: t.sum(0))
            case.impls["torch.compile"] = lambda: ty.copy_(f(tx))
        cases.append(case)

    if want("column_sum_4096"):
        _column_sum_case()

    def _matmul_case(m: int, n: int, k: int) -> None:  # a function of its own: its lambdas keep their arrays
        name = f"matmul_{m}" if m == n == k else f"matmul_{m}x{n}x{k}"
        if not want(name):
            return
        a, b = rng.random((m, k), dtype=np.float32) - 0.5, rng.random((k, n), dtype=np.float32) - 0.5
        c = pt.empty((m, n))
        case = Case(name, f"matmul c = a @ b, {m}x{k} times {k}x{n} float32", 4 * (m * k + k * n + m * n),
                    lambda: a.astype(np.float64) @ b, lambda: c, tolerance={"rtol": 1e-4, "atol": 1e-4},
                    flops=2 * m * n * k)  # fmt: skip
        pypto_impls(case, "matmul", (a, b, c))
        if k >= 1024 and "openmp" in comp.pypto_backends:  # the schedule hint blocking k (not the default)
            blocked = pt.tile(j=256, k=256)(pt.kernel(executor="openmp")(PYPTO_KERNELS["matmul"].fn))
            case.impls["pypto-openmp j=256 k=256"] = lambda: blocked(a, b, c)
        case.impls["numpy"] = lambda: np.matmul(a, b, out=c)  # OpenBLAS sgemm, 2 threads
        if nb:
            case.impls["numba"] = lambda: nb[6](a, b, c)
        if torch:
            ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
            case.impls["torch"] = lambda: torch.matmul(ta, tb, out=tc)
        cases.append(case)

    for m, n, k in ((256, 256, 256), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 64)):
        _matmul_case(m, n, k)

    def _transpose_case() -> None:  # a function of its own: its lambdas must not see the other cases' arrays
        m = 4096
        x = rng.random((m, m), dtype=np.float32)
        y = pt.empty((m, m))
        case = Case("transpose_4096", "transpose y = x.T, 4096x4096 float32", 8 * m * m, lambda: x.T, lambda: y,
                    tolerance={"rtol": 0, "atol": 0})  # fmt: skip
        pypto_impls(case, "transpose", (x, y))
        case.impls["numpy"] = lambda: np.copyto(y, x.T)
        if torch:
            tx, ty = torch.from_numpy(x), torch.from_numpy(y)
            case.impls["torch"] = lambda: ty.copy_(tx.T)
        cases.append(case)

    if want("transpose_4096"):
        _transpose_case()

    from array_cases import build_array_cases

    cases += build_array_cases(comp, want, rng, Case)

    if comp.missing:
        for c in cases:
            c.skipped.update(comp.missing)
    return cases


def environment() -> dict[str, str]:
    import platform

    info = pt.get_runtime_info()
    out = {"python": platform.python_version(), "numpy": np.__version__, "pypto": pt.__version__,
           "cpu": platform.processor() or platform.machine(), "cores": str(os.cpu_count())}  # fmt: skip
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    out["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    om = info["backends"].get("openmp", {})
    if om:
        out["compiler"] = om.get("compiler", "")
    for mod in ("numba", "numexpr", "torch"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            out[mod] = "not installed"
    return out
