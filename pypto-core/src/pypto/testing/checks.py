"""Checks of the standard kernels against NumPy that every backend's tests run with their own shapes and tolerances."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import pypto as pt
from pypto.testing.kernels import (
    N,
    batched_matmul,
    column_softmax,
    column_stats,
    dense_relu,
    matmul,
    np_column_stats,
    np_softmax,
    softmax,
    transpose_add,
)


def assert_softmax_matches_numpy(
    shape: tuple[int, int],
    *,
    rtol: float,
    atol: float,
    seed: int = 0,
    kernel: Callable = softmax,
    reference_dtype: type | None = None,
) -> None:
    """Run a softmax ``kernel`` on standard-normal float32 input of ``shape`` (``default_rng(seed)``) and
    compare with :func:`np_softmax` (computed in float32, or in ``reference_dtype``) with the tolerances given."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    y = pt.empty_like(x)
    kernel(x, y)
    want = np_softmax(x if reference_dtype is None else x.astype(reference_dtype))
    np.testing.assert_allclose(y, want, rtol=rtol, atol=atol)


def assert_nan_poisons_only_its_row(kernel: Callable = softmax, seed: int = 1) -> None:
    """A NaN in one row of a softmax input (4 x 100, ``default_rng(seed)``) must make that whole row NaN (the row
    maximum propagates it, vectorised or not) and leave the other rows free of NaN."""
    x = np.random.default_rng(seed).standard_normal((4, 100)).astype(np.float32)
    x[2, 57] = np.nan
    y = np.empty_like(x)
    kernel(x, y)
    if not np.isnan(y[2]).all() or np.isnan(y[[0, 1, 3]]).any():
        raise AssertionError(f"a NaN at x[2, 57] must give exactly row 2 NaN; NaN per row: {np.isnan(y).sum(1)}")


def assert_column_reductions_match_numpy(
    shape: tuple[int, int], *, rtol: float, atol: float, seed: int = 0, executor: str | None = None
) -> None:
    """Reductions down the columns of a float32 ``shape`` input (``default_rng(seed)``; one NaN when the
    input has at least 3 x 5 elements) against NumPy in float64: :data:`column_stats` (sum, max, root mean
    square) and :data:`column_softmax` (compared with the softmax of the transpose), run by ``executor``
    (default: the kernels' own)."""
    stats, colsoft = (pt.kernel(executor=executor)(f.fn) if executor else f for f in (column_stats, column_softmax))
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if shape[0] >= 3 and shape[1] >= 5:
        x[2, 4] = np.nan
    outs = [np.zeros(shape[1], np.float32) for _ in range(3)]
    stats(x, *outs)
    for name, got, want in zip(("total", "top", "rms"), outs, np_column_stats(x.astype(np.float64))):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"column_stats: {name}")
    y = np.empty_like(x)
    colsoft(x, y)
    if shape[0] and shape[1]:
        np.testing.assert_allclose(y, np_softmax(x.astype(np.float64).T).T, rtol=rtol, atol=atol,
                                   err_msg="column_softmax")  # fmt: skip


def assert_transposes_match_numpy(shape: tuple[int, int], seed: int = 0) -> None:
    """:data:`transpose_add` on float32 inputs of ``shape`` (``x``) and its transpose's shape (``w``) gives
    exactly ``x.T + w`` (one addition per element: no rounding to differ)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(shape[::-1]).astype(np.float32)
    y = np.empty_like(w)
    transpose_add(x, w, y)
    np.testing.assert_array_equal(y, x.T + w)


def assert_contractions_match_numpy(
    m: int, k: int, n: int, *, rtol: float, atol: float, seed: int = 0, executor: str | None = None
) -> None:
    """:data:`matmul`, :data:`dense_relu` and :data:`batched_matmul` (3 batches) on float32 inputs of sizes
    ``m x k`` times ``k x n`` (``default_rng(seed)``, values in [-1, 1)) against NumPy in float64, run by
    ``executor`` (default: the kernels' own)."""
    rng = np.random.default_rng(seed)
    mm, dense, bmm = (
        pt.kernel(executor=executor)(f.fn) if executor else f for f in (matmul, dense_relu, batched_matmul)
    )

    def rand(*shape: int) -> np.ndarray:
        return (rng.random(shape) * 2 - 1).astype(np.float32)

    a, b, w, bias = rand(m, k), rand(k, n), rand(n, k), rand(n)
    c = np.empty((m, n), np.float32)
    mm(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=rtol, atol=atol, err_msg="matmul")
    dense(a, w, bias, c)
    want = np.maximum(a.astype(np.float64) @ w.T + bias, 0.0)
    np.testing.assert_allclose(c, want, rtol=rtol, atol=atol, err_msg="dense_relu")
    ab, bb = rand(3, m, k), rand(3, k, n)
    cb = np.empty((3, m, n), np.float32)
    bmm(ab, bb, cb)
    np.testing.assert_allclose(cb, ab.astype(np.float64) @ bb, rtol=rtol, atol=atol, err_msg="batched_matmul")


# -- accuracy of float32 math functions, in ulp -----------------------------------------------------------
FLOAT32_EDGES = (0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.72284, -87.33654, -87.33655, -103.27893,
                 -103.97207, -103.97208, 1e-30, -1e-30, 1.4e-45, 3.9, 3.92, 9.0, 10.0)  # fmt: skip
"""Inputs every sweep adds: signed zeros, infinities, NaN, where exp overflows, turns subnormal and
underflows, where erf and tanh reach 1 in float32, the smallest subnormal."""


def float32_sweep(stride: int) -> np.ndarray:
    """Every ``stride``-th finite float32 bit pattern, of both signs, and :data:`FLOAT32_EDGES`."""
    x = np.arange(0, 0x7F800000, stride, dtype=np.uint32).view(np.float32)
    return np.concatenate([x, -x, np.array(FLOAT32_EDGES, np.float32)])


def ulp_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """How far float32 results ``got`` are from the exact values ``want`` (float64), in units of the last
    place of the float32 nearest ``want``: 0.5 is a correctly rounded result. Infinities that are the
    correctly rounded result and NaN where ``want`` is NaN count 0; anything else non-finite counts inf."""
    with np.errstate(all="ignore"):
        nearest = want.astype(np.float32)
        err = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(nearest)).astype(np.float64)
    exact = (np.isinf(got) & (got == nearest)) | (np.isnan(got) & np.isnan(want))
    return np.where(exact, 0.0, np.where(np.isnan(err), np.inf, err))


def _map_kernel(fn: Callable, name: str) -> Callable:
    def body(a: pt.Tensor[pt.float32, (N,)], b: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        b[i] = fn(a[i])

    body.__name__ = body.__qualname__ = name
    return body


def float32_math_errors(executor: str, stride: int) -> dict[str, tuple[float, float, float]]:
    """``exp``, ``tanh`` and ``erf`` on ``executor`` over :func:`float32_sweep` ``(stride)`` against float64
    references (NumPy; ``math.erf`` for erf): per function, the largest error in ulp, the input where it
    occurs, and the fraction of inputs more than 1 ulp off."""
    import math

    x = float32_sweep(stride)
    erf64 = np.frompyfunc(math.erf, 1, 1)
    out = {}
    for name, fn, ref in (("exp", pt.exp, np.exp), ("tanh", pt.tanh, np.tanh),
                          ("erf", pt.erf, lambda v: erf64(v).astype(np.float64))):  # fmt: skip
        body = _map_kernel(fn, f"sweep_{name}")
        got = np.empty_like(x)
        pt.kernel(executor=executor)(body)(x, got)
        with np.errstate(all="ignore"):
            err = ulp_error(got, ref(x.astype(np.float64)))
        worst = int(np.argmax(err))
        out[name] = (float(err[worst]), float(x[worst]), float(np.mean(err > 1)))
    return out
