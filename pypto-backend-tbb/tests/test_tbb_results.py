"""Results of TBB-compiled kernels against NumPy, determinism across thread counts, NaN propagation.

float32 results are compared with a float64 NumPy reference (rtol 2e-6 for elementwise work,
looser for long sums, whose rounding depends on the summation order).
"""

from __future__ import annotations

import numpy as np
import pytest

import pypto as pt
from pypto.testing import (
    THREADED_SUM_SCRIPT,
    M,
    N,
    assert_column_reductions_match_numpy,
    assert_contractions_match_numpy,
    assert_nan_poisons_only_its_row,
    assert_softmax_matches_numpy,
    assert_transposes_match_numpy,
    np_sum_exp,
    vector_add,
)

D0, D1, D2 = pt.dims("D0 D1 D2")


@pt.kernel
def row_stats(x: pt.Tensor[float, (M, N)], total: pt.Tensor[float, (1,)], rmax: pt.Tensor[float, (M,)]):
    r, c = pt.axis(0), pt.axis(1)
    total[0] = pt.reduce_sum(x[r, c] * x[r, c], axis=(r, c))
    rmax[r] = pt.reduce_max(x[r, c], axis=c)


@pt.kernel
def cube_reductions(
    x: pt.Tensor[float, (D0, D1, D2)], mid_min: pt.Tensor[float, (D0, D2)], total: pt.Tensor[float, (1,)]
):
    i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
    mid_min[i, k] = pt.reduce_min(x[i, j, k], axis=j)
    total[0] = pt.reduce_max(x[i, j, k], axis=(i, j, k))


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (64, 1031), (300, 130), (1000, 600), (3, 140_001)])
def test_softmax_matches_numpy(shape):
    assert_softmax_matches_numpy(shape, rtol=2e-6, atol=1e-7, reference_dtype=np.float64)


@pytest.mark.parametrize("shape", [(0, 5), (1, 1), (7, 3), (300, 1031), (4100, 70), (3, 20_000)])
def test_column_reductions_match_numpy(shape):
    assert_column_reductions_match_numpy(shape, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("mkn", [(1, 1, 1), (9, 3, 33), (130, 64, 257)])
def test_contractions_match_numpy(mkn):
    assert_contractions_match_numpy(*mkn, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (31, 33), (1031, 129), (256, 384)])
def test_transposes_match_numpy(shape):
    assert_transposes_match_numpy(shape)


@pytest.mark.parametrize("n", [0, 1, 255, 100_003, 5_000_001])
def test_vector_add_matches_numpy_streamed_or_not(n):
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = pt.empty(n, np.float32)  # 64-byte aligned: large ones take the streaming-store path
    vector_add(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    if n > 1:  # a misaligned output takes the plain path
        raw = pt.empty(n + 1, np.float32)
        vector_add(a[1:], b[1:], raw[1:n])
        np.testing.assert_array_equal(raw[1:n], a[1:] + b[1:])


def test_2d_reductions_full_and_per_row():
    x = np.random.default_rng(2).standard_normal((700, 300)).astype(np.float32)
    total, rmax = np.zeros(1, np.float32), np.zeros(700, np.float32)
    row_stats(x, total, rmax)
    np.testing.assert_allclose(total[0], (x.astype(np.float64) ** 2).sum(), rtol=1e-5)
    np.testing.assert_array_equal(rmax, x.max(1))


def test_3d_reductions_middle_axis_and_full():
    x = np.random.default_rng(3).standard_normal((40, 50, 60)).astype(np.float32)
    mid, total = np.zeros((40, 60), np.float32), np.zeros(1, np.float32)
    cube_reductions(x, mid, total)
    np.testing.assert_array_equal(mid, x.min(1))
    assert total[0] == x.max()


def test_nan_propagates_through_vectorised_max_and_min():
    assert_nan_poisons_only_its_row()
    c = np.random.default_rng(4).standard_normal((30, 40, 50)).astype(np.float32)
    c[7, 11, 13] = np.nan
    mid, total = np.zeros((30, 50), np.float32), np.zeros(1, np.float32)
    cube_reductions(c, mid, total)
    assert np.isnan(mid[7, 13]) and np.isnan(mid).sum() == 1


def test_nan_propagates_through_max_over_several_axes():
    # the NaN is seen in an early run of the vector loop and must survive the later ones
    c = np.random.default_rng(4).standard_normal((30, 40, 50)).astype(np.float32)
    c[7, 11, 13] = np.nan
    mid, total = np.zeros((30, 50), np.float32), np.zeros(1, np.float32)
    cube_reductions(c, mid, total)
    assert np.isnan(total[0])


def test_full_reduction_same_bits_for_1_and_2_threads(run_py):
    runs = {}
    for threads in ("1", "2"):
        r = run_py(THREADED_SUM_SCRIPT, {"PYPTO_NUM_THREADS": threads})
        assert r.returncode == 0, r.stderr
        runs[threads] = r.stdout.split()
    assert runs["1"][1] == "1" and runs["2"][1] == "2"
    assert runs["1"][0] == runs["2"][0]  # identical bits: fixed blocks, ordered combine
    x = np.random.default_rng(7).standard_normal(3_000_001).astype(np.float32)
    got = np.array([int(runs["1"][0])], np.uint32).view(np.float32)[0]
    np.testing.assert_allclose(got, 0.5 * np_sum_exp(x), rtol=1e-5)


def test_same_bits_as_the_openmp_backend_where_it_is_installed():
    if "openmp" not in pt.list_backends():
        pytest.skip("the OpenMP backend is not installed")
    x = np.random.default_rng(8).standard_normal(1_000_003).astype(np.float32)
    outs = []
    for executor in ("tbb", "openmp"):

        @pt.kernel(executor=executor)
        def total(x: pt.Tensor[float, (N,)], out: pt.Tensor[float, (1,)]):
            i = pt.axis(0)
            out[0] = pt.reduce_sum(x[i] * x[i], axis=i)

        out = np.zeros(1, np.float32)
        total(x, out)
        outs.append(out.view(np.uint32)[0])
    assert outs[0] == outs[1]


def test_float32_exp_tanh_erf_are_within_their_documented_ulp():
    from pypto.testing import float32_math_errors

    # the same sweep as the OpenMP backend's test: pypto's own exp and erf, in C++, and glibc's tanh
    errors = float32_math_errors("tbb", 4099)
    bounds = {"exp": 1.05, "erf": 0.6, "tanh": 2.0}
    assert {name: e[0] <= bounds[name] for name, e in errors.items()} == dict.fromkeys(bounds, True), errors
