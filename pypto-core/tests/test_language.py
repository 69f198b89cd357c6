"""Every feature of the kernel language, checked against NumPy on the same inputs.

Tolerances: float32 rtol=2e-6 / atol=1e-6, float64 rtol=1e-12; integers and booleans exact.
"""

import math

import numpy as np
import pytest

import pypto as pt
from pypto.testing import K, M, N, layernorm, np_layernorm, np_softmax, np_sum_exp, softmax, sum_exp, vector_add

F32 = dict(rtol=2e-6, atol=1e-6)
F64 = dict(rtol=1e-12, atol=1e-12)


def close(got, want, **tol):
    assert got.dtype == np.asarray(want).dtype or tol.get("check_dtype") is False, (got.dtype, np.asarray(want).dtype)
    tol.pop("check_dtype", None)
    np.testing.assert_allclose(got, want, **(tol or F32))


def test_vector_add(rng):
    a, b = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    c = np.empty_like(a)
    out = vector_add(a, b, c)
    assert out is c
    close(c, a + b)


def test_vector_add_explicit_dim(rng):
    a = rng.random(7, dtype=np.float32)
    c = np.empty_like(a)
    vector_add(a, a, c, N=7)
    close(c, 2 * a)


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (17, 1031)])
def test_fused_softmax(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    y = np.empty_like(x)
    softmax(x, y)  # the fused softmax: one loop nest
    close(y, np_softmax(x))


def test_static_shapes(rng):
    @pt.kernel
    def scale4(x: pt.Tensor[float, (4, N)], y: pt.Tensor[float, (4, N)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = x[r, c] * 3.0

    x = rng.random((4, 5), dtype=np.float32)
    y = np.empty_like(x)
    scale4(x, y)
    close(y, x * np.float32(3))
    assert "4" in scale4.ir("infer_shapes")


def test_affine_and_reversed_indices(rng):
    @pt.kernel
    def diff_rev(x: pt.Tensor[float, (N + 1,)], d: pt.Tensor[float, (N,)], r: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        d[i] = x[i + 1] - x[i]
        r[i] = x[N - 1 - i]

    x = rng.random(9, dtype=np.float32)
    d, r = np.empty(8, np.float32), np.empty(8, np.float32)
    diff_rev(x, d, r)
    close(d, np.diff(x))
    close(r, x[:8][::-1])


def test_strided_affine_index(rng):
    @pt.kernel
    def evens(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (M,)]):
        i = pt.axis(0)
        y[i] = x[2 * i] + x[2 * i + 1]

    x = rng.random(10, dtype=np.float32)
    y = np.empty(5, np.float32)
    evens(x, y)
    close(y, x[0::2] + x[1::2])


def test_transpose_and_broadcast_by_omission(rng):
    @pt.kernel
    def tb(
        x: pt.Tensor[float, (M, N)], rb: pt.Tensor[float, (N,)], cb: pt.Tensor[float, (M,)], y: pt.Tensor[float, (N, M)]
    ):
        r, c = pt.axis(0), pt.axis(1)
        y[c, r] = x[r, c] + rb[c] - cb[r]

    x = rng.random((3, 5), dtype=np.float32)
    rb, cb = rng.random(5, dtype=np.float32), rng.random(3, dtype=np.float32)
    y = np.empty((5, 3), np.float32)
    tb(x, rb, cb, y)
    close(y, (x + rb - cb[:, None]).T)


UNARY = [
    ("exp", pt.exp, np.exp, lambda r: r.standard_normal(64)),
    ("log", pt.log, np.log, lambda r: r.random(64) + 0.1),
    ("sqrt", pt.sqrt, np.sqrt, lambda r: r.random(64)),
    ("rsqrt", pt.rsqrt, lambda v: 1 / np.sqrt(v), lambda r: r.random(64) + 0.1),
    ("tanh", pt.tanh, np.tanh, lambda r: r.standard_normal(64) * 3),
    ("sin", pt.sin, np.sin, lambda r: r.standard_normal(64) * 3),
    ("cos", pt.cos, np.cos, lambda r: r.standard_normal(64) * 3),
    ("erf", pt.erf, np.vectorize(math.erf), lambda r: r.standard_normal(64) * 2),
    ("sigmoid", pt.sigmoid, lambda v: 1 / (1 + np.exp(-v)), lambda r: r.standard_normal(64) * 4),
    ("abs", pt.abs, np.abs, lambda r: r.standard_normal(64)),
    ("builtin abs", abs, np.abs, lambda r: r.standard_normal(64)),
    ("neg", lambda v: -v, np.negative, lambda r: r.standard_normal(64)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,fn,ref,gen", UNARY, ids=[u[0] for u in UNARY])
def test_unary_functions(rng, name, fn, ref, gen, dtype):
    dt = pt.float32 if dtype == np.float32 else pt.float64

    @pt.kernel
    def k(x: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        y[i] = fn(x[i])

    x = gen(rng).astype(dtype)
    y = np.empty_like(x)
    k(x, y)
    want = ref(x.astype(np.float64)).astype(dtype)
    close(y, want, **(F32 if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)))


def test_erf_reference_accuracy():
    from pypto.backends.numpy_support import erf

    x = np.linspace(-7, 7, 2001)
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(erf(x), want, rtol=1e-14, atol=1e-16)
    assert np.isnan(erf(np.array([np.nan])))[0]


BINARY = [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b),
    ("maximum", lambda a, b: np.maximum(a, b)),
    ("minimum", lambda a, b: np.minimum(a, b)),
]


@pytest.mark.parametrize("name,op", BINARY, ids=[b[0] for b in BINARY])
def test_binary_float(rng, name, op):
    fn = {"maximum": pt.maximum, "minimum": pt.minimum}.get(name, op)

    @pt.kernel
    def k(a: pt.Tensor[float, (N,)], b: pt.Tensor[float, (N,)], c: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        c[i] = fn(a[i], b[i])

    a, b = rng.standard_normal(50).astype(np.float32), rng.standard_normal(50).astype(np.float32) + 3
    c = np.empty_like(a)
    k(a, b, c)
    close(c, op(a, b))


def test_integer_powers(rng):
    @pt.kernel
    def powers(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (5, N)]):
        i = pt.axis(0)
        y[0, i] = x[i] ** 2
        y[1, i] = x[i] ** 3
        y[2, i] = x[i] ** 0
        y[3, i] = x[i] ** -2
        y[4, i] = x[i] ** 7

    x = (rng.random(20) + 0.5).astype(np.float32)
    x[0] = np.nan
    y = np.empty((5, 20), np.float32)
    powers(x, y)
    for row, p in enumerate([2, 3, 0, -2, 7]):
        np.testing.assert_allclose(y[row], x.astype(np.float64) ** p, rtol=1e-5)
    assert y[2, 0] == 1.0  # x ** 0 is 1 even for NaN, like NumPy


def test_integer_ops_match_numpy(rng):
    @pt.kernel
    def iops(a: pt.Tensor[int, (N,)], b: pt.Tensor[int, (N,)], o: pt.Tensor[int, (6, N)]):
        i = pt.axis(0)
        o[0, i] = a[i] // b[i]
        o[1, i] = a[i] % b[i]
        o[2, i] = a[i] & b[i]
        o[3, i] = a[i] | b[i]
        o[4, i] = a[i] ^ b[i]
        o[5, i] = ~a[i]

    a = rng.integers(-50, 50, 40).astype(np.int32)
    b = rng.integers(-7, 8, 40).astype(np.int32)
    b[b == 0] = 3
    o = np.empty((6, 40), np.int32)
    iops(a, b, o)
    for row, want in enumerate([a // b, a % b, a & b, a | b, a ^ b, ~a]):
        np.testing.assert_array_equal(o[row], want)


def test_integer_true_division_is_float32(rng):
    @pt.kernel
    def idiv(a: pt.Tensor[int, (N,)], b: pt.Tensor[int, (N,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = a[i] / b[i]

    a, b = np.arange(1, 9, dtype=np.int32), np.full(8, 3, np.int32)
    y = np.empty(8, np.float32)
    idiv(a, b, y)
    close(y, (a / b).astype(np.float32))
    assert "float32" in idiv.ir("infer_types")


def test_comparisons_and_where(rng):
    @pt.kernel
    def cmp(
        a: pt.Tensor[float, (N,)], b: pt.Tensor[float, (N,)], o: pt.Tensor[pt.bool_, (6, N)], w: pt.Tensor[float, (N,)]
    ):
        i = pt.axis(0)
        o[0, i] = a[i] < b[i]
        o[1, i] = a[i] <= b[i]
        o[2, i] = a[i] > b[i]
        o[3, i] = a[i] >= b[i]
        o[4, i] = a[i] == b[i]
        o[5, i] = a[i] != b[i]
        w[i] = pt.where((a[i] > 0) & ~(b[i] > 0.5) | (a[i] < -1), a[i], b[i] * 2)

    a = rng.standard_normal(30).astype(np.float32)
    b = a.copy()
    b[::2] = rng.standard_normal(15).astype(np.float32)
    o = np.empty((6, 30), np.bool_)
    w = np.empty(30, np.float32)
    cmp(a, b, o, w)
    for row, want in enumerate([a < b, a <= b, a > b, a >= b, a == b, a != b]):
        np.testing.assert_array_equal(o[row], want)
    close(w, np.where((a > 0) & ~(b > 0.5) | (a < -1), a, b * 2))


def test_cast_and_weak_scalars(rng):
    @pt.kernel
    def mixed(
        x: pt.Tensor[float, (N,)],
        n: pt.Tensor[int, (N,)],
        y: pt.Tensor[float, (N,)],
        z: pt.Tensor[int, (N,)],
        d: pt.Tensor[pt.float64, (N,)],
    ):
        i = pt.axis(0)
        y[i] = x[i] * 2.5 + n[i] * 0.5 + 1
        z[i] = pt.cast(x[i] * 10.0, pt.int32) + n[i] * 2
        d[i] = pt.cast(x[i], pt.float64) * 0.1

    x = rng.standard_normal(16).astype(np.float32)
    n = rng.integers(-5, 5, 16).astype(np.int32)
    y, z, d = np.empty(16, np.float32), np.empty(16, np.int32), np.empty(16, np.float64)
    mixed(x, n, y, z, d)
    # weak scalars: float32 arithmetic throughout, never float64
    close(y, x * np.float32(2.5) + n.astype(np.float32) * np.float32(0.5) + np.float32(1))
    np.testing.assert_array_equal(z, (x * np.float32(10)).astype(np.int32) + n * 2)
    close(d, x.astype(np.float64) * 0.1, **F64)


def test_no_silent_float64_with_python_floats():
    @pt.kernel
    def k(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = pt.exp(x[i] * 0.1) + 3.14159

    text = k.ir("infer_types")
    assert "float64" not in text


@pytest.mark.parametrize(
    "red,np_red",
    [
        (pt.reduce_sum, np.sum),
        (pt.reduce_prod, np.prod),
        (pt.reduce_max, np.max),
        (pt.reduce_min, np.min),
        (pt.reduce_mean, np.mean),
    ],
)
def test_reductions_each_axis_3d(rng, red, np_red):
    @pt.kernel
    def r3(
        x: pt.Tensor[float, (M, N, K)],
        a0: pt.Tensor[float, (N, K)],
        a1: pt.Tensor[float, (M, K)],
        a2: pt.Tensor[float, (M, N)],
        a12: pt.Tensor[float, (M,)],
        full: pt.Tensor[float, (1,)],
    ):
        i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
        a0[j, k] = red(x[i, j, k], axis=i)
        a1[i, k] = red(x[i, j, k], axis=j)
        a2[i, j] = red(x[i, j, k], axis=k)
        a12[i] = red(x[i, j, k], axis=(j, k))
        full[0] = red(x[i, j, k], axis=(i, j, k))

    x = (rng.random((3, 4, 5)) + 0.5).astype(np.float32)
    outs = [np.empty(s, np.float32) for s in [(4, 5), (3, 5), (3, 4), (3,), (1,)]]
    r3(x, *outs)
    for o, ax in zip(outs, [0, 1, 2, (1, 2), None]):
        want = np_red(x, axis=ax)
        close(o, np.asarray(want, dtype=np.float32).reshape(o.shape), rtol=1e-5, atol=1e-6)


def test_full_reduction_sum_exp(rng):
    x = rng.standard_normal(100_003).astype(np.float32)
    out = np.zeros(1, np.float32)
    sum_exp(x, out)
    np.testing.assert_allclose(out[0], np_sum_exp(x), rtol=1e-5)
    assert "_partial" in sum_exp.ir("optimize_loops")  # split into blocks with an ordered combine


def test_reduction_result_broadcasts_and_empty_reductions():
    @pt.kernel
    def center(
        x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (M, N)], mx: pt.Tensor[float, (M,)], s: pt.Tensor[float, (M,)]
    ):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = x[r, c] - pt.reduce_mean(x[r, c], axis=c)
        mx[r] = pt.reduce_max(x[r, c], axis=c)
        s[r] = pt.reduce_sum(x[r, c], axis=c)

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y, mx, s = np.empty_like(x), np.empty(3, np.float32), np.empty(3, np.float32)
    center(x, y, mx, s)
    close(y, x - x.mean(1, keepdims=True))
    x0 = np.empty((2, 0), np.float32)
    y0, mx0, s0 = np.empty_like(x0), np.empty(2, np.float32), np.empty(2, np.float32)
    center(x0, y0, mx0, s0)
    assert np.all(mx0 == -np.inf) and np.all(s0 == 0)  # documented identities of empty reductions


def test_nan_and_inf_propagation():
    @pt.kernel
    def stats(
        x: pt.Tensor[float, (M, N)], mx: pt.Tensor[float, (M,)], mn: pt.Tensor[float, (M,)], s: pt.Tensor[float, (M,)]
    ):
        r, c = pt.axis(0), pt.axis(1)
        mx[r] = pt.reduce_max(x[r, c], axis=c)
        mn[r] = pt.reduce_min(x[r, c], axis=c)
        s[r] = pt.reduce_sum(x[r, c], axis=c)

    x = np.array([[1, np.nan, 3], [1, np.inf, -np.inf], [-np.inf, -np.inf, 2]], np.float32)
    mx, mn, s = (np.empty(3, np.float32) for _ in range(3))
    stats(x, mx, mn, s)
    with np.errstate(invalid="ignore"):  # inf + -inf in the reference sum
        np.testing.assert_array_equal(mx, np.max(x, axis=1))
        np.testing.assert_array_equal(mn, np.min(x, axis=1))
        np.testing.assert_array_equal(s, np.sum(x, axis=1))


def test_several_stores_and_reading_earlier_outputs(rng):
    @pt.kernel
    def two(
        x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)], z: pt.Tensor[float, (N,)], total: pt.Tensor[float, (1,)]
    ):
        i = pt.axis(0)
        y[i] = x[i] * 2.0
        z[i] = y[i] + 1.0
        total[0] = pt.reduce_sum(z[i], axis=i)

    x = rng.random(100, dtype=np.float32)
    y, z, t = np.empty_like(x), np.empty_like(x), np.zeros(1, np.float32)
    result = two(x, y, z, t)
    assert isinstance(result, tuple) and result[0] is y and result[2] is t
    close(y, 2 * x)
    close(z, 2 * x + 1)
    np.testing.assert_allclose(t[0], (2 * x.astype(np.float64) + 1).sum(), rtol=1e-5)


def test_range_unrolling_and_python_helpers(rng):
    def poly(v, coeffs):
        acc = coeffs[0]
        for c in coeffs[1:]:
            acc = acc * v + c
        return acc

    @pt.kernel
    def horner(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)], taps: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = poly(x[i], [1.0, -2.0, 3.0, 0.5])
        s = 0.0
        for k in range(3):
            s = s + x[i] * (k + 1)
        taps[i] = s

    x = rng.standard_normal(10).astype(np.float32)
    y, taps = np.empty_like(x), np.empty_like(x)
    horner(x, y, taps)
    close(y, ((np.float32(1) * x - 2) * x + 3) * x + np.float32(0.5), rtol=1e-5)
    close(taps, x * 6, rtol=1e-6)


def test_scalar_parameters(rng):
    @pt.kernel
    def axpy(alpha: float, x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)], n: int, flag: bool):
        i = pt.axis(0)
        y[i] = pt.where(flag, alpha * x[i] + n, x[i])

    x = rng.random(12, dtype=np.float32)
    y = np.empty_like(x)
    axpy(0.5, x, y, 3, True)
    close(y, np.float32(0.5) * x + 3)
    axpy(0.5, x, y, 3, flag=False)
    close(y, x)


def test_axes_and_dims_as_values():
    @pt.kernel
    def iota(y: pt.Tensor[float, (M, N)], eye: pt.Tensor[float, (N, N)]):
        r, c = pt.axis(0), pt.axis(1)
        p, q = pt.axis(2), pt.axis(3)  # eye has other sizes: other axes
        y[r, c] = pt.cast(r * N + c, float) / N
        eye[p, q] = pt.where(p == q, 1.0, 0.0)

    y, eye = np.empty((3, 4), np.float32), np.empty((4, 4), np.float32)
    iota(y, eye)
    close(y, (np.arange(12).reshape(3, 4) / 4).astype(np.float32))
    np.testing.assert_array_equal(eye, np.eye(4, dtype=np.float32))


def test_matmul_and_batched_matmul(rng):
    B = pt.dim("B")

    @pt.kernel
    def bmm(a: pt.Tensor[float, (B, M, K)], b: pt.Tensor[float, (B, K, N)], c: pt.Tensor[float, (B, M, N)]):
        n, i, j, k = pt.axis(0), pt.axis(1), pt.axis(2), pt.axis(3)
        c[n, i, j] = pt.reduce_sum(a[n, i, k] * b[n, k, j], axis=k)

    a = rng.random((2, 3, 5), dtype=np.float32)
    b = rng.random((2, 5, 4), dtype=np.float32)
    c = np.empty((2, 3, 4), np.float32)
    bmm(a, b, c)
    close(c, a @ b, rtol=1e-5)


def test_in_place_update_and_self_reads(rng):
    @pt.kernel
    def scale_inplace(x: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        x[i] = x[i] * 2.0

    @pt.kernel
    def reverse_inplace(x: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        x[i] = x[N - 1 - i]

    @pt.kernel
    def normalize_inplace(x: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        x[i] = x[i] / pt.reduce_sum(x[i], axis=i)

    x = rng.random(9, dtype=np.float32)
    x0 = x.copy()
    scale_inplace(x)
    close(x, 2 * x0)
    reverse_inplace(x)
    close(x, 2 * x0[::-1])  # right-hand side evaluated completely first, as in NumPy
    normalize_inplace(x)
    close(x, x0[::-1] / x0.sum(), rtol=1e-5)


def test_layernorm_and_gelu(rng):
    @pt.kernel
    def gelu(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        v = x[i]
        y[i] = 0.5 * v * (1.0 + pt.tanh(0.7978845608 * (v + 0.044715 * v**3)))

    x = rng.standard_normal((4, 33)).astype(np.float32)
    g, b = rng.random(33, dtype=np.float32), rng.random(33, dtype=np.float32)
    y = np.empty_like(x)
    layernorm(x, g, b, y)
    close(y, np_layernorm(x, g, b), rtol=1e-5, atol=1e-5)
    v = rng.standard_normal(100).astype(np.float32)
    w = np.empty_like(v)
    gelu(v, w)
    close(w, 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v**3))), rtol=1e-5, atol=1e-6)


def test_numpy_ufuncs_map_to_kernel_functions(rng):
    @pt.kernel
    def k(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = np.exp(x[i]) + np.maximum(x[i], 0.0)

    x = rng.standard_normal(8).astype(np.float32)
    y = np.empty_like(x)
    k(x, y)
    close(y, np.exp(x) + np.maximum(x, 0))


def test_tensor_shape_attribute_in_expressions(rng):
    @pt.kernel
    def mean_by_shape(x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (M,)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r] = pt.reduce_sum(x[r, c], axis=c) / x.shape[1]

    x = rng.random((3, 6), dtype=np.float32)
    y = np.empty(3, np.float32)
    mean_by_shape(x, y)
    close(y, x.mean(1), rtol=1e-6)


def test_kernels_named_like_c_library_functions():
    @pt.kernel
    def remainder(a: pt.Tensor[float, (N,)], b: pt.Tensor[float, (N,)], c: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] % b[i]

    a, b = np.array([5, -5, 7.5], np.float32), np.array([3, 3, -2], np.float32)
    c = np.empty_like(a)
    remainder(a, b, c)
    close(c, np.remainder(a, b))
    assert remainder.name == "remainder_kernel"


def test_a_store_sees_earlier_stores_through_computed_values(pypto_executor):
    """The same expression of an output after a store to it is a new value (every backend, the NumPy reference
    included: it once reused ``y[i] * 2`` computed for the first store, and a float16 load converted once)."""

    @pt.kernel(executor=pypto_executor)
    def twice(y: pt.Tensor[pt.float32, (N,)], z: pt.Tensor[pt.float16, (N,)]):
        i = pt.axis(0)
        y[i] = y[i] * 2.0
        y[i] = y[i] * 2.0
        z[i] = pt.where(z[i] > 0, z[i] + 1.0, z[i])
        z[i] = pt.where(z[i] > 2, z[i] * 3.0, z[i])

    y, z = np.array([1.0, -2.0, 3.0], np.float32), np.array([1.5, -1.0, 0.5], np.float16)
    twice(y, z)
    np.testing.assert_array_equal(y, [4.0, -8.0, 12.0])
    np.testing.assert_array_equal(z, np.array([7.5, -1.0, 1.5], np.float16))
