"""A small built-in benchmark set for ``pypto bench``: each case on every available backend and NumPy.

The full comparison against Numba, torch and hand-written C lives in the repository's
``benchmarks/`` folder; this set needs nothing but pypto and NumPy, so any installation can run it.
Timings are interleaved (one call of every implementation per round, in a new order each round) and reported as medians.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pypto.lang.functions import axis, dims, exp, reduce_max, reduce_mean, reduce_sum, rsqrt, tanh
from pypto.lang.tensor import Tensor
from pypto.runtime.kernel import Kernel
from pypto.runtime.memory import empty

_M, _N = dims("M N")


def _vector_add(a: Tensor[float, (_N,)], b: Tensor[float, (_N,)], c: Tensor[float, (_N,)]):
    i = axis(0)
    c[i] = a[i] + b[i]


def _softmax(x: Tensor[float, (_M, _N)], y: Tensor[float, (_M, _N)]):
    row, col = axis(0), axis(1)
    e = exp(x[row, col] - reduce_max(x[row, col], axis=col))
    y[row, col] = e / reduce_sum(e, axis=col)


def _sum_exp(x: Tensor[float, (_N,)], out: Tensor[float, (1,)]):
    i = axis(0)
    out[0] = reduce_sum(exp(x[i]), axis=i)


def _layernorm(x: Tensor[float, (_M, _N)], y: Tensor[float, (_M, _N)]):
    r, c = axis(0), axis(1)
    mean = reduce_mean(x[r, c], axis=c)
    var = reduce_mean((x[r, c] - mean) ** 2, axis=c)
    y[r, c] = (x[r, c] - mean) * rsqrt(var + 1e-5)


def _gelu(x: Tensor[float, (_N,)], y: Tensor[float, (_N,)]):
    i = axis(0)
    v = x[i]
    y[i] = 0.5 * v * (1.0 + tanh(0.7978845608 * (v + 0.044715 * v * v * v)))


def gelu_numpy(x: np.ndarray, out: np.ndarray, tmp: np.ndarray) -> None:
    """GELU (tanh form) of float32 ``x`` into ``out`` the fastest plain NumPy way: in place, one temporary
    (the NumPy side of the gelu benchmarks, here and in the repository's ``benchmarks/``)."""
    np.multiply(x, x, out=tmp)
    np.multiply(tmp, x, out=tmp)
    np.multiply(tmp, np.float32(0.044715), out=tmp)
    np.add(tmp, x, out=tmp)
    np.multiply(tmp, np.float32(0.7978845608), out=tmp)
    np.tanh(tmp, out=tmp)
    np.add(tmp, np.float32(1), out=tmp)
    np.multiply(tmp, x, out=out)
    np.multiply(out, np.float32(0.5), out=out)


@dataclass
class BenchCase:
    """A kernel, its inputs and outputs, and the NumPy way to compute the same thing."""

    name: str
    kernel: Callable
    args: tuple
    numpy: Callable[[], object]
    bytes_moved: int


@dataclass
class CaseResult:
    name: str
    medians: dict[str, float] = field(default_factory=dict)  # implementation -> seconds
    bytes_moved: int = 0
    errors: dict[str, str] = field(default_factory=dict)


def cases(size: str = "medium") -> list[BenchCase]:
    """The built-in cases; ``size`` is "small" (quick), "medium" or "large"."""
    scale = {"small": 1 << 16, "medium": 1 << 20, "large": 1 << 24}[size]
    side = int(scale**0.5)
    rng = np.random.default_rng(0)
    v1, v2 = rng.random(scale, dtype=np.float32), rng.random(scale, dtype=np.float32)
    out1 = empty(scale)
    m = rng.standard_normal((side, side)).astype(np.float32)
    out2 = empty((side, side))
    tmp = np.empty_like(m)
    row = np.empty((side, 1), np.float32)
    s = np.zeros(1, np.float32)
    t1 = np.empty_like(v1)

    def np_softmax():
        np.max(m, axis=1, keepdims=True, out=row)
        np.subtract(m, row, out=tmp)
        np.exp(tmp, out=tmp)
        np.sum(tmp, axis=1, keepdims=True, out=row)
        np.divide(tmp, row, out=out2)

    def np_layernorm():
        np.mean(m, axis=1, keepdims=True, out=row)
        np.subtract(m, row, out=tmp)
        np.square(tmp, out=out2)
        var = out2.mean(axis=1, keepdims=True)
        np.multiply(tmp, 1 / np.sqrt(var + np.float32(1e-5)), out=out2)

    def np_gelu():
        gelu_numpy(v1, out1, t1)

    return [
        BenchCase("vector_add", _vector_add, (v1, v2, out1), lambda: np.add(v1, v2, out=out1), 12 * scale),
        BenchCase("softmax", _softmax, (m, out2), np_softmax, 8 * side * side),
        BenchCase("sum_exp", _sum_exp, (v1, s), lambda: np.exp(v1, out=t1).sum(), 4 * scale),
        BenchCase("layernorm", _layernorm, (m, out2), np_layernorm, 8 * side * side),
        BenchCase("gelu", _gelu, (v1, out1), np_gelu, 8 * scale),
    ]


def run(
    backends: list[str],
    names: list[str] | None = None,
    *,
    size: str = "medium",
    repeat: int = 20,
    progress: Callable[[int, int], None] | None = None,
) -> list[CaseResult]:
    """Time every case on NumPy and on each backend; ``progress(done, total)`` after each round."""
    selected = [c for c in cases(size) if names is None or c.name in names]
    unknown = set(names or ()) - {c.name for c in cases("small")}
    if unknown:
        raise ValueError(f"unknown benchmark case(s): {', '.join(sorted(unknown))}")
    total = len(selected) * repeat
    done = 0
    results = []
    for case in selected:
        res = CaseResult(case.name, bytes_moved=case.bytes_moved)
        impls: dict[str, Callable[[], object]] = {"numpy": case.numpy}
        for b in backends:
            k = Kernel(case.kernel, executor=b)
            try:
                k(*case.args)
            except Exception as e:  # report the backend's failure, keep benchmarking the others
                res.errors[b] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                continue
            impls[b] = lambda k=k, a=case.args: k(*a)
        times: dict[str, list[float]] = {k: [] for k in impls}
        for fn in impls.values():
            fn()
        rng = random.Random(0)  # a new order every round: no implementation always follows the same one
        for _ in range(repeat):
            for name in rng.sample(list(impls), len(impls)):
                fn = impls[name]
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
            done += 1
            if progress:
                progress(done, total)
        res.medians = {k: statistics.median(v) for k, v in times.items()}
        results.append(res)
    return results
