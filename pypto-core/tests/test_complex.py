"""complex64 and complex128: promotion (against NumPy), kernels and jit programs against NumPy, the pass that
writes them as pairs of floats, the call paths (fast entry, strided arrays, scalars) and the errors."""

import numpy as np
import pytest

import pypto as pt
from pypto import dtypes

N, M, K = pt.dims("N M K")
REALS = [pt.bool_, pt.int8, pt.uint8, pt.int32, pt.uint64, pt.int64, pt.float16, pt.float32, pt.float64]


def cplx(rng, *shape, dt=np.complex64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)


@pytest.mark.parametrize("c", [pt.complex64, pt.complex128], ids=str)
@pytest.mark.parametrize("r", REALS + [pt.complex64, pt.complex128], ids=str)
def test_promotion(c, r):
    got = dtypes.promote(c, r)
    assert got is dtypes.promote(r, c)
    if r.is_int and r.bits >= 32 or r.is_bool:  # pypto never invents a 64-bit float: int32 + complex64 is complex64
        assert got is c
    else:
        assert got.numpy == np.result_type(c.numpy, r.numpy)


def test_weak_complex_scalars():
    assert dtypes.promote_weak(pt.float32, 1j) is pt.complex64
    assert dtypes.promote_weak(pt.float64, 1j) is pt.complex128
    assert dtypes.promote_weak(pt.int64, 2j) is pt.complex64
    assert dtypes.promote_weak(pt.complex128, 1.5) is pt.complex128
    assert dtypes.can_store(pt.float64, pt.complex64) and not dtypes.can_store(pt.complex64, pt.float64)
    assert pt.complex64.part is pt.float32 and pt.complex128.part is pt.float64 and pt.complex64.itemsize == 8


def test_kernel_against_numpy(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def k(a: pt.Tensor[pt.complex64, (N,)], b: pt.Tensor[pt.complex64, (N,)], x: pt.Tensor[float, (N,)],
          w: pt.complex64, y: pt.Tensor[pt.complex64, (N,)], m: pt.Tensor[float, (2, N)]):  # fmt: skip
        i = pt.axis(0)
        y[i] = (a[i] * b[i] - x[i]) / (b[i] + 2j) * w + pt.sqrt(a[i]) * pt.exp(b[i].conj())
        m[0, i] = pt.abs(a[i] - pt.log(b[i]))
        m[1, i] = pt.angle(a[i]) + a[i].imag

    a, b, x = cplx(rng, 257), cplx(rng, 257), rng.standard_normal(257).astype(np.float32)
    y, m = pt.empty(257, pt.complex64), pt.empty((2, 257))
    k(a, b, x, 0.5 - 2j, y, m)
    A, B, X = a.astype(np.complex128), b.astype(np.complex128), x.astype(np.float64)
    want = (A * B - X) / (B + 2j) * (0.5 - 2j) + np.sqrt(A) * np.exp(np.conj(B))
    np.testing.assert_allclose(y, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(m, [np.abs(A - np.log(B)), np.angle(A) + A.imag], rtol=2e-5, atol=2e-5)


def test_matrix_product_is_four_real_ones(rng):
    @pt.kernel
    def mm(a: pt.Tensor[pt.complex128, (M, K)], b: pt.Tensor[pt.complex128, (K, N)],
           c: pt.Tensor[pt.complex128, (M, N)]):  # fmt: skip
        i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
        c[i, j] = pt.reduce_sum(a[i, k] * b[k, j], axis=k)

    a, b = cplx(rng, 33, 65, dt=np.complex128), cplx(rng, 65, 17, dt=np.complex128)
    c = pt.empty((33, 17), pt.complex128)
    mm(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)
    text = mm.ir("complex_pairs")
    assert "a: float64[M, K, 2]" in text and text.count("reduce_sum") == 4  # one real contraction per term
    assert "complex" not in mm.ir("complex_pairs") and "complex128" in mm.ir("infer_shapes")


def test_jit_programs(pypto_executor, rng):
    f = pt.jit(lambda a, b, x: ((a * 1j + x) @ b, pt.abs(a).sum(1), a.mean(0), a.real - a.imag, pt.conj(b).sum()),
               executor=pypto_executor)  # fmt: skip
    a, b, x = cplx(rng, 9, 30), cplx(rng, 30, 5), rng.standard_normal((9, 30)).astype(np.float32)
    got = f(a, b, x)
    A, B = a.astype(np.complex128), b.astype(np.complex128)
    want = ((A * 1j + x) @ B, np.abs(A).sum(1), A.mean(0), A.real - A.imag, np.conj(B).sum())
    for g, w in zip(got, want):
        assert g.dtype == np.asarray(w).astype(np.complex64 if np.iscomplexobj(w) else np.float32).dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_strided_and_fast_calls_read_the_same_memory(rng):
    @pt.kernel(executor="openmp")
    def twice(z: pt.Tensor[pt.complex64, (N,)], y: pt.Tensor[pt.complex64, (N,)]):
        i = pt.axis(0)
        y[i] = z[i] * 2 - 1j

    z = cplx(rng, 64)
    y = pt.empty(64, pt.complex64)
    for _ in range(2):  # the second call takes the C entry point
        twice(z, y)
        np.testing.assert_array_equal(y, z * 2 - 1j)
    assert twice._fast is not None
    strided = np.empty((64, 2), np.complex64)[:, 0]
    with pytest.warns(pt.PerformanceWarning):
        twice(z[::2], strided[:32])  # both copied; the output copied back
    np.testing.assert_array_equal(strided[:32], z[::2] * 2 - 1j)


def test_real_operands_of_the_part_functions():
    @pt.kernel
    def parts(x: pt.Tensor[pt.int32, (N,)], y: pt.Tensor[float, (4, N)]):
        i = pt.axis(0)
        y[0, i] = pt.real(x[i])
        y[1, i] = pt.imag(x[i])
        y[2, i] = pt.conj(x[i])
        y[3, i] = pt.angle(x[i])

    x = np.array([-3, 0, 5], np.int32)
    y = pt.empty((4, 3))
    parts(x, y)
    np.testing.assert_allclose(y, [np.real(x), np.imag(x), np.conj(x), np.angle(x)], rtol=1e-7)


def test_errors():
    def build(body):
        @pt.kernel
        def k(z: pt.Tensor[pt.complex64, (N,)], y: pt.Tensor[pt.complex64, (N,)], r: pt.Tensor[float, (N,)]):
            body(pt.axis(0), z, y, r)

        return k

    z, y, r = np.ones(3, np.complex64), np.ones(3, np.complex64), np.ones(3, np.float32)
    cases = {
        "is not ordered": lambda i, z, y, r: y.__setitem__(i, pt.maximum(z[i], 1)),
        "not supported": lambda i, z, y, r: y.__setitem__(i, pt.sin(z[i])),
        "imaginary part": lambda i, z, y, r: r.__setitem__(i, pt.cast(z[i], float)),
        "complex numbers have no order": lambda i, z, y, r: y.__setitem__(i, pt.reduce_prod(z[i], axis=i)),
    }
    for match, body in cases.items():
        with pytest.raises(pt.TracingError, match=match):
            build(body)(z, y, r)
    with pytest.raises(pt.DTypeError, match="cannot store a complex64"):
        build(lambda i, z, y, r: r.__setitem__(i, z[i]))(z, y, r)
    with pytest.raises(pt.TracingError, match="returned complex64, not a float"):
        pt.grad(lambda x: (x * (1 + 1j)).sum())(np.ones(3, np.float32))
    with pytest.raises(pt.TracingError, match="complex"):
        pt.jit(lambda z: z.max())(y)

    @pt.kernel
    def scaled(z: pt.Tensor[pt.complex64, (N,)], w: pt.complex64, y: pt.Tensor[pt.complex64, (N,)]):
        i = pt.axis(0)
        y[i] = z[i] * w

    with pytest.raises(pt.DTypeError, match="does not fit in complex64"):
        scaled(z, 1e300 + 0j, y)
    with pytest.raises(pt.DTypeError, match="must be a complex64 value"):
        scaled(z, "1j", y)


def test_atan2_and_hypot_outside_and_inside_kernels():
    assert pt.atan2(1.0, -1.0) == np.arctan2(1.0, -1.0) and pt.hypot(3, 4) == 5.0
    assert pt.real(3 + 4j) == 3.0 and pt.abs(3 + 4j) == 5.0 and pt.exp(1j * np.pi) == np.exp(1j * np.pi)
    f = pt.grad(lambda a, b: (pt.atan2(a, b) * pt.hypot(a, b)).sum(), argnums=(0, 1))
    a, b = np.array([0.5, -2.0, 3.0]), np.array([1.5, 0.25, -4.0])
    ga, gb = f(a, b)
    t, h = np.arctan2(a, b), np.hypot(a, b)
    np.testing.assert_allclose(ga, b / h**2 * h + t * a / h, rtol=1e-12)
    np.testing.assert_allclose(gb, -a / h**2 * h + t * b / h, rtol=1e-12)


def test_gradients_follow_jaxs_convention(pypto_executor, rng):
    """dL/dx - i dL/dy for z = x + iy: the conjugate of torch's gradient, on the same program."""
    torch = pytest.importorskip("torch")

    def f(z, w, x, lib):
        conj, angle = (pt.conj, pt.angle) if lib is pt else (torch.conj, torch.angle)
        e = lib.exp(z * 0.3) / (z + 3) + lib.sqrt(z) * lib.log(z + 5j) + conj(z) * x
        return (lib.abs(e @ w) ** 2).sum() + angle(z).sum() + (e.real * e.imag).sum() + lib.abs(z * x).sum()

    z, w = cplx(rng, 6, dt=np.complex128), cplx(rng, 6, 3, dt=np.complex128)
    x = rng.standard_normal(6)
    grads = pt.grad(pt.jit(lambda z, w, x: f(z, w, x, pt), executor=pypto_executor), argnums=(0, 1, 2))(z, w, x)
    tz, tw, tx = (torch.tensor(a, requires_grad=True) for a in (z, w, x))
    f(tz, tw, tx, torch).backward()
    for ours, theirs in zip(grads, (tz.grad, tw.grad, tx.grad)):
        assert ours.dtype == theirs.numpy().dtype
        np.testing.assert_allclose(ours, np.conj(theirs.numpy()), rtol=1e-10, atol=1e-10)
    y, pull = pt.vjp(lambda z: z * z + 1j, z)  # a complex result: any complex cotangent
    np.testing.assert_allclose(pull(z.conj())[0], z.conj() * 2 * z, rtol=1e-12)


def test_in_place_updates_read_the_old_value(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def rotate_reverse(z: pt.Tensor[pt.complex64, (N,)], w: pt.Tensor[pt.complex64, (N,)]):
        i = pt.axis(0)
        z[i] = z[N - 1 - i] * w[i] + 1j  # both parts from the old z, at another point

    z, w = cplx(rng, 33), cplx(rng, 33)
    want = z[::-1] * w + 1j
    rotate_reverse(z, w)
    np.testing.assert_allclose(z, want, rtol=1e-6, atol=1e-6)
    assert "_zre" in rotate_reverse.ir("complex_pairs")  # the real part waits in a temporary

    @pt.kernel(executor=pypto_executor)
    def times_i(a: pt.Tensor[pt.complex64, (N,)], y: pt.Tensor[pt.complex64, (N,)]):
        i = pt.axis(0)
        y[i] = a[i] * 1j

    with pytest.raises(pt.AliasingError, match="'y' overlaps input 'a'"):  # its parts are written one by one
        times_i(z, z)
