"""The integer types beside int32 and int64: promotion (against NumPy 2), wrap-around arithmetic, reductions,
saturating conversions from floats, and the errors."""

import numpy as np
import pytest

import pypto as pt
from pypto import dtypes

N = pt.dim("N")

INTEGERS = [pt.int8, pt.int16, pt.int32, pt.int64, pt.uint8, pt.uint16, pt.uint32, pt.uint64]
SMALL = [pt.int8, pt.int16, pt.uint8, pt.uint16, pt.uint32, pt.uint64]


@pytest.mark.parametrize("a", INTEGERS + [pt.bool_], ids=str)
@pytest.mark.parametrize("b", INTEGERS + [pt.bool_], ids=str)
def test_integer_promotion_is_numpys(a, b):
    assert dtypes.promote(a, b).numpy == np.result_type(a.numpy, b.numpy)


@pytest.mark.parametrize("a", INTEGERS, ids=str)
def test_an_integer_with_a_float_gives_the_float(a):
    for f in (pt.float16, pt.bfloat16, pt.float32, pt.float64):
        assert dtypes.promote(a, f) is f and dtypes.promote(f, a) is f


def test_the_types_and_numpy():
    for dt in INTEGERS:
        assert dtypes.as_dtype(dt.numpy) is dt and dtypes.as_dtype(dt.name) is dt and dt.is_int
        assert dt.bounds == (np.iinfo(dt.numpy).min, np.iinfo(dt.numpy).max)
    assert pt.uint8.is_unsigned and not pt.int8.is_unsigned and pt.uint16.is_narrow_int and not pt.uint32.is_narrow_int
    # stores follow NumPy's same-kind rule: unsigned into signed, not signed into unsigned
    assert dtypes.can_store(pt.uint8, pt.int8) and not dtypes.can_store(pt.int8, pt.uint64)


@pytest.mark.parametrize("dt", SMALL, ids=str)
def test_arithmetic_wraps_around_like_numpy(pypto_executor, dt, rng):
    @pt.kernel(executor=pypto_executor)
    def k(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], out: pt.Tensor[dt, (6, N)]):
        i = pt.axis(0)
        out[0, i] = a[i] * b[i] + a[i] - b[i]
        out[1, i] = -a[i]
        out[2, i] = ~a[i] * 3
        out[3, i] = (a[i] + b[i]) // 3
        out[4, i] = (a[i] * b[i]) % 7
        out[5, i] = pt.maximum(a[i] + b[i], a[i] - b[i])

    lo, hi = dt.bounds
    a = rng.integers(lo, hi, 200, endpoint=True, dtype=dt.numpy)
    b = rng.integers(lo, hi, 200, endpoint=True, dtype=dt.numpy)
    a[:4] = [lo, hi, lo, 0]
    b[:4] = [hi, hi, lo, lo]
    out = np.zeros((6, 200), dt.numpy)
    k(a, b, out)
    t = dt.numpy.type
    with np.errstate(all="ignore"):
        want = [a * b + a - b, -a, ~a * t(3), (a + b) // t(3), (a * b) % t(7), np.maximum(a + b, a - b)]
    for row, w in enumerate(want):
        np.testing.assert_array_equal(out[row], w, err_msg=f"row {row}")


def test_mixed_signedness_in_a_jit_program(rng):
    s8 = rng.integers(-128, 127, 50, dtype=np.int8)
    u8 = rng.integers(0, 255, 50, dtype=np.uint8)
    u64 = rng.integers(0, 2**40, 50, dtype=np.uint64)
    s64 = rng.integers(-(2**40), 2**40, 50, dtype=np.int64)
    f = pt.jit(lambda a, b, c, d: (a + b, a < b, c + d))
    r, lt, x = f(s8, u8, u64, s64)
    assert r.dtype == np.int16 and x.dtype == np.float64
    np.testing.assert_array_equal(r, s8 + u8)
    np.testing.assert_array_equal(lt, s8 < u8)
    np.testing.assert_array_equal(x, u64 + s64)


@pytest.mark.parametrize("dt", [pt.int8, pt.uint8, pt.int16], ids=str)
def test_jit_sums_follow_the_array_api(dt, rng):
    lo, hi = dt.bounds
    x = rng.integers(lo, hi, (30, 400), endpoint=True, dtype=dt.numpy)
    wide = np.uint32 if dt.is_unsigned else np.int32
    s = pt.jit(lambda x: x.sum(axis=1))(x)
    assert s.dtype == wide  # the default integer's width (NumPy's np.sum gives 64 bits)
    np.testing.assert_array_equal(s, x.astype(np.int64).sum(axis=1).astype(wide))
    m = pt.jit(lambda x: x.mean(axis=1))(x)
    np.testing.assert_allclose(m, x.astype(np.float64).mean(axis=1), rtol=1e-6)


def test_kernel_mean_of_integers_sums_exactly(pypto_executor):
    @pt.kernel(executor=pypto_executor)
    def mean(x: pt.Tensor[pt.int8, (N,)], out: pt.Tensor[float, 1]):
        i = pt.axis(0)
        out[0] = pt.reduce_mean(x[i], axis=i)

    x = np.full(1000, 100, np.int8)  # a sum in int8 would wrap around at the second element
    out = np.zeros(1, np.float32)
    mean(x, out)
    assert out[0] == 100.0


def test_contractions_of_bytes_wrap_like_numpy_and_widen_when_cast(rng):
    a = rng.integers(-128, 127, (40, 64), dtype=np.int8)
    b = rng.integers(-128, 127, (64, 24), dtype=np.int8)
    np.testing.assert_array_equal(pt.jit(lambda a, b: a @ b)(a, b), a @ b)
    wide = pt.jit(lambda a, b: a.astype(pt.int32) @ b.astype(pt.int32))(a, b)
    np.testing.assert_array_equal(wide, a.astype(np.int32) @ b.astype(np.int32))


def _saturated(x: np.ndarray, dt) -> np.ndarray:
    lo, hi = dt.bounds
    out = [0 if v != v else lo if v <= lo else hi if v >= hi else int(v) for v in x.tolist()]
    return np.array(out, dtype=object).astype(dt.numpy)


@pytest.mark.parametrize("dt", INTEGERS, ids=str)
def test_casts_from_floats_saturate_and_nan_gives_zero(pypto_executor, dt):
    @pt.kernel(executor=pypto_executor)
    def cast(x: pt.Tensor[pt.float64, (N,)], f: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[dt, (N,)],
             z: pt.Tensor[dt, (N,)]):  # fmt: skip
        i = pt.axis(0)
        y[i] = pt.cast(x[i], dt)
        z[i] = pt.cast(f[i], dt)

    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.9, -0.9, 127.5, -128.5, 255.9, 256.0, 65535.5, -32769.0,
                  2.0**31 - 0.5, 2.0**31, -(2.0**31) - 1, 2.0**32, 2.0**63 - 1024, 2.0**63, -(2.0**63) - 2048,
                  2.0**64, 1e300, -1e300])  # fmt: skip
    with np.errstate(over="ignore"):
        f = x.astype(np.float32)  # the largest values become infinities
    y, z = np.zeros(len(x), dt.numpy), np.zeros(len(x), dt.numpy)
    cast(x, f, y, z)
    np.testing.assert_array_equal(y, _saturated(x, dt))
    np.testing.assert_array_equal(z, _saturated(f, dt))


def test_python_integers_out_of_range_are_refused():
    with pytest.raises(pt.DTypeError, match="out of bounds for uint8"):
        pt.jit(lambda x: x + 300)(np.zeros(3, np.uint8))
    with pytest.raises(pt.DTypeError, match="out of bounds for int8"):
        pt.jit(lambda x: x * -129)(np.zeros(3, np.int8))
    np.testing.assert_array_equal(pt.jit(lambda x: x + 255)(np.ones(3, np.uint8)), np.zeros(3, np.uint8))


def test_a_backend_without_the_type_is_a_typed_error():
    pytest.importorskip("pypto_numba")
    if "numba" not in pt.list_backends():
        pytest.skip("the Numba example backend is not available")

    @pt.kernel(executor="numba")
    def copy(x: pt.Tensor[pt.uint64, (N,)], y: pt.Tensor[pt.uint64, (N,)]):
        i = pt.axis(0)
        y[i] = x[i]

    with pytest.raises(pt.DTypeError, match="numba backend has no uint64"):
        copy(np.zeros(3, np.uint64), np.zeros(3, np.uint64))
