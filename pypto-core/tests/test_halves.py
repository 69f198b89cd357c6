"""float16 and bfloat16: types, promotion, the half_compute pass, and results against NumPy / ml_dtypes."""

import math

import ml_dtypes
import numpy as np
import pytest

import pypto as pt
from pypto import dtypes

N = pt.dim("N")

HALVES = [pt.float16, pt.bfloat16]
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}


def rounded(x32: np.ndarray, dt) -> np.ndarray:
    """The float32 result rounded once to ``dt`` (what a half kernel stores)."""
    return np.asarray(x32, np.float32).astype(dt.numpy)


def ulps(got: np.ndarray, want: np.ndarray, dt) -> float:
    """Largest distance in units of the type's epsilon, relative to |want| (at least 1)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    return float(np.max(np.abs(g - w) / np.maximum(np.abs(w), 1.0)) / EPS[dt.name]) if g.size else 0.0


def test_the_types_and_numpy():
    assert pt.float16.numpy == np.float16 and pt.bfloat16.numpy == np.dtype(ml_dtypes.bfloat16)
    assert dtypes.as_dtype(np.float16) is pt.float16 and dtypes.as_dtype("bfloat16") is pt.bfloat16
    assert dtypes.from_numpy(np.dtype(ml_dtypes.bfloat16)) is pt.bfloat16
    assert pt.float16.itemsize == pt.bfloat16.itemsize == 2 and pt.float16.compute is pt.float32


@pytest.mark.parametrize(
    "a, b, want",
    [
        (pt.float16, pt.bfloat16, pt.float32),  # neither holds the other
        (pt.float16, pt.float32, pt.float32),
        (pt.bfloat16, pt.float64, pt.float64),
        (pt.int32, pt.float16, pt.float16),
        (pt.bfloat16, pt.bool_, pt.bfloat16),
    ],
)
def test_promotion(a, b, want):
    assert dtypes.promote(a, b) is want and dtypes.promote(b, a) is want


@pytest.mark.parametrize("dt", HALVES, ids=str)
def test_python_scalars_keep_the_half_type(dt):
    f = pt.jit(lambda x: x * 2.5 + 1)
    assert f(np.ones(4, dt.numpy)).dtype == dt.numpy


@pytest.mark.parametrize("dt", HALVES, ids=str)
def test_kernel_computes_in_float32_and_rounds_once(pypto_executor, dt, rng):
    @pt.kernel(executor=pypto_executor)
    def k(x: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (N,)], out: pt.Tensor[dt, (N,)], total: pt.Tensor[pt.float32, 1]):
        i = pt.axis(0)
        out[i] = x[i] * y[i] + x[i] / 3.0
        total[0] = pt.reduce_sum(x[i] * y[i], axis=i)

    x = rng.standard_normal(4099).astype(dt.numpy)
    y = rng.standard_normal(4099).astype(dt.numpy)
    out, total = np.empty(4099, dt.numpy), np.empty(1, np.float32)
    k(x, y, out, total)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    np.testing.assert_array_equal(out, rounded(x32 * y32 + x32 / np.float32(3.0), dt))  # each op exact in f32 here
    np.testing.assert_allclose(total[0], (x32.astype(np.float64) * y32).sum(), rtol=1e-5, atol=1e-3)


def test_the_pass_widens_loads_and_rounds_at_the_store():
    @pt.kernel
    def k(x: pt.Tensor[pt.bfloat16, (N,)], out: pt.Tensor[pt.bfloat16, (N,)]):
        i = pt.axis(0)
        out[i] = pt.exp(x[i]) + pt.cast(x[i] * 3.0, pt.float16)

    text = k.ir("half_compute")
    assert text.count("= load x[i] : bfloat16") == 2
    assert "exp(%1) : float32" in text  # computed in float32
    lines = text.splitlines()
    rounding = [n for n, line in enumerate(lines) if ": float16" in line]
    assert len(rounding) == 1 and "cast(%6, float16)" in lines[rounding[0]]  # the explicit cast still rounds
    assert lines[rounding[0] + 1].strip().startswith("%8 = cast(%7, float32)")  # ... then widens
    (store,) = k.compilation("reference").stages["half_compute"].stores
    assert store.value.dtype is pt.bfloat16 and store.value.x.dtype is pt.float32  # rounded once, on store
    assert text.count(", bfloat16) : bfloat16") == 1  # the one rounding, at the store


@pytest.mark.parametrize("dt", HALVES, ids=str)
def test_jit_programs_match_float32_rounded_once(pypto_executor, dt, rng):
    x = rng.standard_normal((24, 64)).astype(dt.numpy)
    w1 = (rng.standard_normal((64, 48)) / 8).astype(dt.numpy)
    w2 = (rng.standard_normal((48, 16)) / 7).astype(dt.numpy)
    f = pt.jit(lambda x, w1, w2: pt.softmax(pt.gelu(x @ w1) @ w2, dim=-1), executor=pypto_executor)
    got = f(x, w1, w2)
    assert got.dtype == dt.numpy
    h = x.astype(np.float64) @ w1.astype(np.float64)
    h = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))  # the hidden layer stays float32 (a temporary)
    s = h @ w2.astype(np.float64)
    e = np.exp(s - s.max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)).astype(dt.numpy)
    assert ulps(got, want, dt) <= 1.0


@pytest.mark.parametrize("dt", HALVES, ids=str)
def test_scalar_parameters_of_half_type(pypto_executor, dt):
    @pt.kernel(executor=pypto_executor)
    def scale(x: pt.Tensor[dt, (N,)], s: dt, out: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        out[i] = x[i] * s

    x = np.arange(8).astype(dt.numpy)
    out = np.empty(8, dt.numpy)
    scale(x, 1.1, out)  # 1.1 is rounded to the type first, as NumPy would
    np.testing.assert_array_equal(out, rounded(x.astype(np.float32) * np.float32(dt.numpy.type(1.1)), dt))
    scale(x, dt.numpy.type(0.5), out)
    np.testing.assert_array_equal(out, rounded(x.astype(np.float32) * 0.5, dt))


def test_backends_without_half_types_refuse_them_with_a_typed_error():
    @pt.kernel(executor="numba")
    def k(x: pt.Tensor[pt.float16, (N,)], out: pt.Tensor[pt.float16, (N,)]):
        i = pt.axis(0)
        out[i] = x[i] + 1

    if "numba" not in pt.list_backends():
        pytest.skip("the numba example backend is not installed")
    with pytest.raises(pt.DTypeError, match="the numba backend has no float16") as e:
        k(np.ones(3, np.float16), np.empty(3, np.float16))
    assert "float32" in e.value.expected


@pytest.mark.parametrize("dt", HALVES, ids=str)
def test_gradients_of_half_programs(dt, rng):
    x = rng.standard_normal((8, 16)).astype(dt.numpy)
    g = pt.grad(lambda x: (pt.tanh(x) * x).sum())(x)
    assert g.dtype == dt.numpy
    x64 = x.astype(np.float64)
    want = (np.tanh(x64) + x64 * (1 - np.tanh(x64) ** 2)).astype(dt.numpy)
    assert ulps(g, want, dt) <= 2.0
