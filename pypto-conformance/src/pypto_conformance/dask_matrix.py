"""The catalogue on dask arrays: every kernel and array case under several chunkings, against NumPy.

Each case runs at one of its sizes (the largest with at most :data:`MAX_ELEMENTS` elements per input)
with its inputs cut three ways: ``one`` (a single chunk), ``uneven`` (about three chunks per axis, the last
one shorter) and ``ones`` (chunks of one element along the last axis, which most reductions reduce, and
uneven elsewhere, at a size with at most :data:`ONES_LAST` elements along it). The results are computed on whatever dask scheduler is active (a
``dask.distributed`` client when one exists) and compared with the case's NumPy reference at the suite's
tolerances. ``python -m pypto_conformance.dask_matrix`` runs it on a two-worker ``LocalCluster``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

import pypto as pt

from .cases import all_cases
from .cases.arrays import all_array_cases
from .compare import compare_arrays
from .runner import array_inputs, array_reference, case_data, describe_exception, expected_as
from .tolerances import default_table

CHUNKINGS = ("one", "uneven", "ones")
MAX_ELEMENTS = 1024
ONES_LAST = 64


@dataclass(frozen=True)
class MatrixResult:
    case: str
    chunking: str
    ok: bool
    message: str = ""


def chunks_for(shape: tuple[int, ...], how: str) -> tuple[int, ...]:
    """The chunk size per axis of an input of ``shape`` for chunking ``how``."""
    if how == "one":
        return tuple(max(1, n) for n in shape)
    out = tuple(max(1, math.ceil(n / 3) + (1 if n > 4 else 0)) for n in shape)
    if how == "ones" and shape:
        out = (*out[:-1], 1)
    return out


def _size_index(sizes: Any, shapes_of: Any, how: str) -> int | None:
    """The largest size with at most MAX_ELEMENTS per input (and, for ``ones``, at most ONES_LAST elements
    along each input's last axis, so that one chunk per element stays a small graph)."""
    best, best_n = None, -1
    for k, s in enumerate(sizes):
        shapes = shapes_of(k, s)
        if any(0 in sh for sh in shapes):
            continue
        if how == "ones" and any(sh and sh[-1] > ONES_LAST for sh in shapes):
            continue
        n = max((math.prod(sh) for sh in shapes), default=0)
        if best_n < n <= MAX_ELEMENTS:
            best, best_n = k, n
    return best


def _dtype_of(dtypes: tuple[str, ...]) -> str:
    for d in ("float32", "int32", "float64", "int64"):
        if d in dtypes:
            return d
    return dtypes[0]


def _compare(name: str, got: Any, want: np.ndarray, dtype: str, functions: Any, case: str) -> str | None:
    tol = default_table().resolve(dtype, case=case, functions=functions)
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"{name} has shape {got.shape}, the reference {want.shape}"
    cmp = compare_arrays(name, got, want, tol)
    return None if cmp.ok else cmp.problem


def _compute(call: Any) -> tuple[Any, str | None]:
    """Build the graph with ``call()`` (rechunk warnings expected) and compute it: (results, None) or
    (None, what was raised)."""
    import dask

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pt.RechunkWarning)
            result = call()
        return dask.compute(*(result if isinstance(result, tuple) else (result,))), None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        return None, "raised " + describe_exception(e)


def run_kernel_case(case: Any, how: str, executor: str | None = None) -> MatrixResult | None:
    import dask.array as da

    dtype = _dtype_of(case.dtypes)
    if dtype not in ("float32", "float64", "int32", "int64", "mixed"):
        return None

    def shapes_of(k: int, _: Any) -> list[tuple[int, ...]]:
        inputs, _exp = case_data(case, dtype, k)
        return [v.shape for v in inputs.values() if isinstance(v, np.ndarray)]

    index = _size_index(case.sizes, shapes_of, how)
    if index is None:
        return None
    inputs, expected = case_data(case, dtype, index)
    kernel = pt.kernel(executor=executor, **case.options)(case.build(dtype))
    args = {
        k: da.from_array(v.copy(), chunks=chunks_for(v.shape, how)) if isinstance(v, np.ndarray) and v.ndim else v
        for k, v in inputs.items()
    }
    # a dim only outputs have (pt.topk's k) is passed by name, as a caller of a dask kernel does
    sized = {d for k, v in inputs.items() if isinstance(v, np.ndarray) for p in kernel.traced.tensor_params
             if p.name == k for e in p.shape for d in e.dim_set()}  # fmt: skip
    args.update({d: n for d, n in case.sizes[index].items() if d in kernel.traced.dims and d not in sized})
    got, raised = _compute(lambda: kernel(**args))
    if raised:
        return MatrixResult(case.name, how, False, raised)
    outs = [p.name for p in kernel.traced.outputs]
    problems = []
    for name, g in zip(outs, got):
        if name in expected:
            p = _compare(name, g, expected[name], expected[name].dtype.name, case.functions, case.name)
            if p:
                problems.append(p)
    return MatrixResult(case.name, how, not problems, "; ".join(problems))


def run_array_case(case: Any, how: str, executor: str | None = None) -> MatrixResult | None:
    import dask.array as da

    dtype = "float32" if "float32" in getattr(case, "dtypes", ("float32",)) else case.dtypes[0]
    index = _size_index(case.shapes, lambda k, s: list(s.values()), how)
    if index is None:
        return None
    inputs = array_inputs(case, dtype, index)
    want = array_reference(case, inputs)
    fn = pt.jit(case.fn, executor=executor)
    got, raised = _compute(
        lambda: fn(*(da.from_array(x, chunks=chunks_for(x.shape, how)) if x.ndim else x for x in inputs))
    )
    if raised:
        return MatrixResult(case.name, how, False, raised)
    problems = []
    for k, (g, w) in enumerate(zip(got, want)):
        p = _compare(f"result {k}", g, expected_as(w, dtype), dtype, case.functions, case.name)
        if p:
            problems.append(p)
    return MatrixResult(case.name, how, not problems, "; ".join(problems))


def run_matrix(executor: str | None = None, pattern: str = "*") -> Iterator[MatrixResult]:
    """Every case (matching ``pattern``) under every chunking; cases without a usable size are left out."""
    import fnmatch

    for how in CHUNKINGS:
        for case in all_cases():
            if fnmatch.fnmatchcase(case.name, pattern) and not case.slow:
                r = run_kernel_case(case, how, executor)
                if r is not None:
                    yield r
        for acase in all_array_cases():
            if fnmatch.fnmatchcase(acase.name, pattern):
                r = run_array_case(acase, how, executor)
                if r is not None:
                    yield r


def main() -> int:  # pragma: no cover - a command-line entry
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, Client(cluster):
        results = list(run_matrix())
    bad = [r for r in results if not r.ok]
    for r in bad:
        print(f"FAIL {r.case} [{r.chunking}]: {r.message}")
    print(f"{len(results) - len(bad)} of {len(results)} case x chunking runs agree with NumPy")
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
