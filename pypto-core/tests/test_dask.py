"""pypto kernels and jit functions on dask arrays (``pypto.dask``), on dask's synchronous scheduler.

Every result is compared with NumPy on the same inputs; the chunkings cut reduced axes so that the
partial / combine / online paths run. The two-worker cluster tests are in pypto-conformance
(``test_dask_cluster.py``), where the whole catalogue runs under several chunkings.
"""

import warnings

import numpy as np
import pytest

import pypto as pt
from pypto.testing.kernels import softmax, sum_exp
from pypto.testing.kernels import vector_add as vadd

dask = pytest.importorskip("dask", reason="pypto.dask needs the extra: pip install 'pypto-core[dask]'")
da = pytest.importorskip("dask.array")

M, N = pt.dims("M N")


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


@pt.kernel
def shifted(x: pt.Tensor[float, (N + 1,)], y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = x[i + 1] - x[i]


@pt.kernel
def scaled_mean(x: pt.Tensor[pt.float64, (M, N)], s: pt.float64, y: pt.Tensor[pt.float64, (M,)]):
    r, c = pt.axis(0), pt.axis(1)
    y[r] = s * pt.reduce_mean(x[r, c], axis=c) + pt.reduce_max(x[r, c], axis=c) * pt.reduce_min(x[r, c], axis=c)


def _softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_elementwise_is_blockwise_over_unaligned_chunks(rng):
    a = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    c = vadd(da.from_array(a, chunks=300), da.from_array(b, chunks=250))
    assert isinstance(c, da.Array) and c.shape == (1000,) and c.dtype == np.float32
    np.testing.assert_array_equal(c.compute(), a + b)  # elementwise: exact


@pytest.mark.parametrize("chunks", [(20, 95), (7, 10), (5, 1), (3, 33)])
def test_softmax_rows_longer_than_a_chunk(rng, chunks):
    x = (rng.standard_normal((20, 95)) * 4).astype(np.float32)
    y = softmax(da.from_array(x, chunks=chunks))
    np.testing.assert_allclose(y.compute(), _softmax(x), rtol=2e-6, atol=1e-7)


def test_softmax_plan_uses_online_pairs(rng):
    x = da.from_array(rng.standard_normal((8, 40)).astype(np.float32), chunks=(4, 10))
    plan = pt.dask.explain(softmax, x)
    assert "online (max, sum) rescaling" in plan
    assert plan.count("of each chunk") == 1  # one pass over x for max and sum together


def test_softmax_rows_of_minus_infinity_in_some_chunks(rng):
    x = rng.standard_normal((4, 12)).astype(np.float32)
    x[1, :6] = -np.inf  # whole chunks of -inf: their partial sums are NaN and must not count
    y = softmax(da.from_array(x, chunks=(2, 3))).compute()
    np.testing.assert_allclose(y, _softmax(x), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("chunk", [1, 97, 1000, 4096])
def test_full_reduction_is_a_tree_of_partials(rng, chunk):
    x = rng.standard_normal(4096).astype(np.float32)
    s = sum_exp(da.from_array(x, chunks=chunk))
    assert s.shape == (1,)
    np.testing.assert_allclose(s.compute(), [np.exp(x.astype(np.float64)).sum()], rtol=1e-5)


def test_mean_counts_the_whole_axis_and_scalars_pass_through(rng):
    x = rng.standard_normal((9, 31))
    y = scaled_mean(da.from_array(x, chunks=(4, 7)), 2.5).compute()
    np.testing.assert_allclose(y, 2.5 * x.mean(1) + x.max(1) * x.min(1), rtol=1e-12)


def test_shifted_reads_rechunk_with_one_warning(rng):
    x = rng.standard_normal(101).astype(np.float32)
    with pytest.warns(pt.RechunkWarning, match=r"x is indexed by i \+ 1"):
        y = shifted(da.from_array(x, chunks=30))
    np.testing.assert_array_equal(y.compute(), x[1:] - x[:-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", pt.RechunkWarning)
        shifted(da.from_array(x, chunks=30))  # once per kernel and reason


def test_numpy_output_is_computed_into(rng):
    a = rng.standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.float32)
    got = vadd(da.from_array(a, chunks=16), a, out)
    assert got is out
    np.testing.assert_array_equal(out, a + a)


def test_bad_arguments_are_typed_errors(rng):
    a = da.from_array(rng.standard_normal(10).astype(np.float32), chunks=5)
    with pytest.raises(pt.DTypeError, match="b has dtype float64"):
        vadd(a, da.zeros(10, chunks=5, dtype=np.float64))
    with pytest.raises(pt.ShapeError, match="b.shape"):
        vadd(a, da.zeros(11, chunks=5, dtype=np.float32))
    with pytest.raises(pt.ArgumentError, match="unknown argument"):
        vadd(a, a, bogus=1)


def test_jit_matmul_softmax_with_contracted_chunks(rng):
    @pt.jit
    def f(a, b):
        return pt.softmax(a @ b).mean(axis=0)

    a = rng.standard_normal((37, 50)).astype(np.float32)
    b = rng.standard_normal((50, 23)).astype(np.float32)
    ad, bd = da.from_array(a, chunks=(10, 17)), da.from_array(b, chunks=(17, 6))
    plan = pt.dask.explain(f, ad, bd)
    assert "sum of each chunk" in plan and "online" in plan
    got = f(ad, bd)
    assert isinstance(got, da.Array) and got.shape == (23,)
    want = _softmax(a.astype(np.float64) @ b).mean(axis=0)
    np.testing.assert_allclose(got.compute(), want, rtol=1e-5, atol=1e-6)


def test_jit_arrays_captured_from_outside_are_read_with_dask_inputs(rng):
    """Weights in a closure (and constants a NumPy function makes inside the trace, as np.repeat's positions) are
    inputs of the program after the call's own: on dask arrays too."""
    w = rng.standard_normal((50, 7))
    f = pt.jit(lambda x: np.repeat(x @ w, [2, 0, 1, 1, 3, 0, 1], axis=1) + 1)
    x = rng.standard_normal((37, 50))
    got = f(da.from_array(x, chunks=(10, 50)))
    assert isinstance(got, da.Array)
    np.testing.assert_allclose(got.compute(), np.repeat(x @ w, [2, 0, 1, 1, 3, 0, 1], axis=1) + 1, rtol=1e-12)


def test_jit_nested_reductions_and_several_results(rng):
    @pt.jit
    def stats(x):
        m = x.mean(axis=1, keepdims=True)
        return ((x - m) ** 2).mean(axis=1), x.sum()

    x = rng.standard_normal((40, 30)).astype(np.float32)
    var, total = stats(da.from_array(x, chunks=(7, 11)))
    np.testing.assert_allclose(var.compute(), x.astype(np.float64).var(axis=1), rtol=1e-5)
    assert total.shape == ()
    np.testing.assert_allclose(total.compute(), x.astype(np.float64).sum(), rtol=1e-5, atol=1e-4)


def test_dask_call_after_numpy_calls_and_scalar_checks(rng):
    a = rng.standard_normal(50).astype(np.float32)
    c = np.empty_like(a)
    vadd(a, a, c)  # a NumPy call first: the kernel's fast path is set up
    got = vadd(da.from_array(a, chunks=20), a)
    assert isinstance(got, da.Array)
    np.testing.assert_array_equal(got.compute(), a + a)
    with pytest.raises(pt.ArgumentError, match="s must be a number"):
        scaled_mean(da.zeros((2, 3), chunks=1, dtype=np.float64), "2.5")


@pytest.mark.parametrize("dt", [pt.bfloat16, pt.float16, pt.int8, pt.uint16], ids=str)
def test_the_small_types_chunked_as_in_one_kernel(rng, dt):
    """16-bit float partials stay float32 between chunks (rounded once, at the end, as in one kernel); narrow
    integers sum in int32/uint32 (the array API rule) and wrap around the same way."""
    x = (rng.standard_normal((64, 48)) * 50).astype(dt.numpy)
    f = pt.jit(lambda x: (x * 2 + 1).sum(axis=1))
    whole = f(x)
    chunked = np.asarray(f(da.from_array(x, chunks=(16, 24))).compute())
    assert chunked.dtype == whole.dtype
    if dt.is_int:
        np.testing.assert_array_equal(chunked, whole)
    else:  # float32 sums rounded once: within half a unit of the 16-bit type (plus float32's error) of the exact sum
        half_unit = 2.0**-11 if dt == pt.float16 else 2.0**-8
        wide = x.astype(np.float64) * 2 + 1
        exact, scale = wide.sum(axis=1), np.abs(wide).sum(axis=1)
        for got in (whole, chunked):
            assert np.all(np.abs(got.astype(np.float64) - exact) <= half_unit * np.abs(exact) + 48 * 2.0**-24 * scale)
    g = pt.jit(lambda x: x - x.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(np.asarray(g(da.from_array(x, chunks=(16, 24))).compute()), g(x))


@pt.kernel
def running(x: pt.Tensor[pt.float64, (M, N)], s: pt.Tensor[pt.float64, (M, N)], back: pt.Tensor[pt.float64, (M, N)],
            hi: pt.Tensor[pt.float64, (M, N)], down: pt.Tensor[pt.float64, (M, N)],
            k: pt.Tensor[pt.int32, (M, N)]):  # fmt: skip
    r, c = pt.axis(0), pt.axis(1)
    s[r, c] = pt.cumsum(x[r, c], axis=c)
    back[r, c] = pt.cumprod(1.0 + 0.01 * x[r, c], axis=c, reverse=True)
    hi[r, c] = pt.cummax(x[r, c], axis=c)
    down[r, c] = pt.cumsum(x[r, c] * 2.0, axis=r)
    k[r, c] = pt.cumsum(pt.cast(x[r, c] > 0, pt.int32), axis=c)


@pytest.mark.parametrize("chunks", [(7, 50), (3, 11), (2, 7), (7, 1)])
def test_scans_keep_their_chunks_each_started_from_the_chunks_before(rng, chunks):
    x = rng.standard_normal((7, 50))
    x[2, 20] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", pt.RechunkWarning)  # (no axis is rechunked whole)
        s, back, hi, down, k = (a.compute() for a in running(da.from_array(x, chunks=chunks)))
    np.testing.assert_allclose(s, np.cumsum(x, 1), rtol=1e-12, atol=1e-12)  # (NaN from its position on)
    np.testing.assert_allclose(back, np.flip(np.cumprod(np.flip(1 + 0.01 * x, 1), 1), 1), rtol=1e-12)
    np.testing.assert_array_equal(hi, np.maximum.accumulate(x, 1))
    np.testing.assert_allclose(down, np.cumsum(2 * x, 0), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(k, np.cumsum(x > 0, 1))
    plan = pt.dask.explain(running, da.from_array(x, chunks=chunks))
    assert ("part0_carry: the totals of the chunks before each one, combined (sum) in order" in plan) == (
        chunks[1] < 50
    )


def test_jit_scans_of_scans_and_narrow_types_on_chunks(rng):
    x = rng.standard_normal((6, 40))
    X = da.from_array(x, chunks=(4, 9))
    f = pt.jit(lambda a: np.cumsum(np.cumsum(a, axis=1), axis=0) - a.cumsum(axis=1).sum(axis=1, keepdims=True))
    want = np.cumsum(np.cumsum(x, 1), 0) - np.cumsum(x, 1).sum(1, keepdims=True)
    np.testing.assert_allclose(f(X).compute(), want, rtol=1e-10, atol=1e-10)
    i8 = rng.integers(-100, 100, (5, 30)).astype(np.int8)
    got = pt.jit(lambda a: np.maximum.accumulate(a, axis=1) + np.cumsum(a, axis=1))(da.from_array(i8, chunks=(5, 7)))
    np.testing.assert_array_equal(got.compute(), np.maximum.accumulate(i8, 1) + np.cumsum(i8, 1).astype(np.int32))
    v = rng.standard_normal(1000).astype(np.float32)  # flattened, float32: block totals in another order
    np.testing.assert_allclose(pt.jit(np.cumsum)(da.from_array(v, chunks=77)).compute(),
                               np.cumsum(v.astype(np.float64)), rtol=0, atol=2e-4)  # fmt: skip
    lse = pt.jit(lambda a: pt.associative_scan(lambda p, q: pt.maximum(p, q) + pt.log1p(pt.exp(-pt.abs(p - q))), a, 1))
    with pytest.warns(pt.RechunkWarning, match="runs along axis"):  # the user's function: in order, one chunk
        got = lse(X)
    np.testing.assert_allclose(got.compute(), np.logaddexp.accumulate(x, 1), rtol=1e-12)
