"""The rest of NumPy inside ``@pt.jit`` (``pypto.array.numpy_library`` and the ufuncs made of the op table's
operations): NaN-skipping statistics, quantiles, interpolation, convolution, polynomials, stacking and splitting,
each compared with NumPy on the same inputs (NaN, infinities and ties among them)."""

import warnings

import numpy as np
import pytest

import pypto as pt


@pytest.fixture
def x(rng):
    v = rng.standard_normal((5, 8))
    v[0, 1], v[2, 2], v[3] = np.nan, np.inf, np.nan  # a NaN, an infinity, a row of NaN only
    v[4, :4] = np.round(v[4, :4])  # ties
    return v


K = np.array([0.25, 0.5, 0.25, -1.0])

CASES = [
    ("nansum nanprod", lambda a: (np.nansum(a, axis=1), np.nanprod(a[:, :3], axis=0), np.nansum(a))),
    ("nanmax nanmin", lambda a: (np.nanmax(a, axis=1), np.nanmin(a, axis=0), np.nanmax(a[:3]))),
    ("nanmean nanvar nanstd", lambda a: (np.nanmean(a, axis=1), np.nanvar(a[:3], axis=1), np.nanstd(a[4], ddof=1))),
    ("nan_to_num", lambda a: (np.nan_to_num(a), np.nan_to_num(a, nan=-1.0, posinf=9.0, neginf=-9.0))),
    ("isclose allclose", lambda a: (np.isclose(a, np.round(a, 1), atol=0.05), np.isclose(a, a, equal_nan=True),
                                    np.allclose(a[4], a[4] + 1e-9), np.allclose(a[4], a[4] + 1))),
    ("isposinf isneginf", lambda a: (np.isposinf(a), np.isneginf(-a))),
    ("count_nonzero ptp", lambda a: (np.count_nonzero(a > 0, axis=1), np.count_nonzero(a[4]), np.ptp(a[4:], axis=1))),
    ("average", lambda a: (np.average(a[4]), np.average(a[1:3], axis=1, weights=np.arange(1.0, 9.0)),
                           *np.average(a[4], weights=np.abs(a[4]) + 1, returned=True))),
    ("median", lambda a: (np.median(a, axis=1), np.median(a[4]), np.median(a[1:3, :5], axis=0, keepdims=True))),
    ("quantile percentile", lambda a: (np.quantile(a, 0.3, axis=1), np.quantile(a[4], [0, 0.25, 0.5, 1.0]),
                                       np.percentile(a[1:3], 90, axis=0), np.percentile(a[4], [10, 70]))),
    ("interp", lambda a: (np.interp(a[4], [-1.0, 0.0, 0.5, 2.0], [3.0, 1.0, -1.0, 5.0]),
                          np.interp(a[1], np.sort(a[4]) + np.arange(8) * 1e-3, a[2], left=-7.0, right=7.0))),
    ("trapezoid", lambda a: (np.trapezoid(a[1:3], axis=1), np.trapezoid(a[4], x=np.cumsum(np.abs(a[1])) + 1))),
    ("polyval", lambda a: (np.polyval([2.0, -1.0, 0.5], a), np.polyval(a[4, :3], a[1]))),
    ("convolve", lambda a: (np.convolve(a[4], K), np.convolve(a[1], K, "same"), np.convolve(K, a[4], "valid"),
                            np.convolve(a[4, :2], K, "same"))),
    ("correlate", lambda a: (np.correlate(a[4], K), np.correlate(a[1], K, "full"), np.correlate(K[:2], a[4, :3], "full"))),
    ("sinc", lambda a: np.sinc(a[4] * np.array([0.0, 1.0, -2.0, 1.0, 1.0, 1.0, 1.0, 0.5]))),
    ("stacks", lambda a: (np.vstack([a[1], a[2]]), np.hstack([a[1:3], a[3:5]]), np.hstack([a[1], a[2]]),
                          np.dstack([a[1:3], a[2:4]]), np.column_stack([a[1], a[2:4].T]), np.atleast_2d(a[1]),
                          np.atleast_3d(a[1:3]))),
    ("split", lambda a: (*np.split(a, 2, axis=1), *np.array_split(a, 3), *np.split(a[4], [2, 5]))),
    ("diagonal diag kron", lambda a: (np.diagonal(a), np.diagonal(a, 2), np.diag(a[4]), np.diag(a[4, :3], -1),
                                      np.diag(a[4, :3], 2), np.diag(a, -1), np.kron(a[4:, :2], a[1:3, :3]))),
    ("cross vdot moveaxis", lambda a: (np.cross(a[1:3, :3], a[3:5, 3:6]), np.vdot(a[4], a[1]),
                                       np.moveaxis(a.reshape(5, 2, 4), 0, -1))),
    ("meshgrid", lambda a: (*np.meshgrid(a[4, :3], a[1, :2]), *np.meshgrid(a[4, :3], a[1, :2], indexing="ij"),
                            *np.meshgrid(a[4, :2], a[1, :3], a[2, :4]))),
    ("select ediff1d", lambda a: (np.select([a > 1, a < -1], [a, -a], 0.5), np.ediff1d(a[4]))),
    ("ufuncs", lambda a: (np.fmax(a, 0.5), np.fmin(a, a[::-1]), np.heaviside(a, 0.5), np.deg2rad(a), np.rad2deg(a),
                          np.reciprocal(a), np.fabs(a), np.float_power(a, 3), np.logaddexp2(a, 1.0), np.fmod(a, 0.7),
                          np.logical_and(a > 0, a < 1), np.logical_xor(a > 0, a < 1), np.logical_not(a > 0),
                          *np.divmod(a, 0.5), np.cbrt(a))),
    ("reductions with where, initial, dtype", lambda a: (np.sum(a, where=a > 0), np.max(a, axis=1, where=a < 1, initial=-5.0),
                                                        np.mean(a[4], where=a[4] > 0), np.sum(a[4], initial=10.0),
                                                        np.mean(a[4].astype(np.float32), dtype=np.float64))),
]  # fmt: skip


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_numpy_functions_match_numpy(pypto_executor, x, name, fn):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # (NumPy warns about all-NaN slices)
        want = fn(x)
        got = pt.jit(fn, executor=pypto_executor)(x)
    want, got = (want if isinstance(want, tuple) else (want,)), (got if isinstance(got, tuple) else (got,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype.kind == w.dtype.kind, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_integer_fmod_and_long_filters(pypto_executor, rng):
    a = rng.integers(-50, 50, 40)
    b = np.where(a % 3 == 0, 0, rng.integers(-7, 7, 40))  # zero divisors give 0, as NumPy's
    got = pt.jit(lambda a, b: np.fmod(a, b), executor=pypto_executor)(a, b)
    with np.errstate(all="ignore"):
        want = np.fmod(a, b)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype
    signal, taps = rng.standard_normal(300), rng.standard_normal(45)  # longer than 32 taps: one contraction
    got = pt.jit(lambda s, t: (np.convolve(s, t), np.correlate(s, t, "same")), executor=pypto_executor)(signal, taps)
    np.testing.assert_allclose(got[0], np.convolve(signal, taps), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got[1], np.correlate(signal, taps, "same"), rtol=1e-10, atol=1e-10)


def test_gradients_through_statistics_and_convolution_match_torch(rng):
    torch = pytest.importorskip("torch")
    a, k = rng.standard_normal(12), rng.standard_normal(4)

    def ours(a, k):
        conv = np.convolve(a, k)
        return (conv * conv).sum() + np.nanmean(a * a) + np.quantile(a, 0.3) + np.logaddexp2(a, k.sum()).sum()

    def theirs(a, k):
        conv = torch.nn.functional.conv1d(a.reshape(1, 1, -1), k.flip(0).reshape(1, 1, -1), padding=3).reshape(-1)
        lse2 = torch.logaddexp2(a, k.sum())
        return (conv * conv).sum() + torch.nanmean(a * a) + torch.quantile(a, 0.3) + lse2.sum()

    ga, gk = pt.grad(ours, argnums=(0, 1))(a, k)
    ta, tk = torch.tensor(a, requires_grad=True), torch.tensor(k, requires_grad=True)
    theirs(ta, tk).backward()
    np.testing.assert_allclose(ga, ta.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gk, tk.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_what_cannot_be_traced_says_why(x):
    with pytest.raises(pt.TracingError, match="q is a traced array"):
        pt.jit(lambda a, q: np.quantile(a, q))(x, np.float64(0.5) * np.ones(1))
    with pytest.raises(pt.TracingError, match="method='nearest' is not supported"):
        pt.jit(lambda a: np.quantile(a, 0.5, method="nearest"))(x)
    with pytest.raises(pt.ShapeError, match="do not split into 3 equal sections"):
        pt.jit(lambda a: np.split(a, 3, axis=1))(x)
    with pytest.raises(pt.TracingError, match="where= needs initial="):
        pt.jit(lambda a: np.max(a, where=a > 0))(x)
    with pytest.raises(pt.TracingError, match="numpy.reciprocal of int64 values"):
        pt.jit(lambda a: np.reciprocal(a))(np.arange(3))
    with pytest.raises(pt.TracingError, match="mode must be 'full', 'same' or 'valid'"):
        pt.jit(lambda a: np.convolve(a[0], a[1], "middle"))(x)
