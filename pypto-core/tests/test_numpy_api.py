"""NumPy's functions and methods on traced arrays inside ``@pt.jit`` (ufuncs from the op table, the functions of
``pypto.array.numpy_api``), and the rounding and inverse trigonometric functions, compared with NumPy on the same
inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto as pt


@pytest.fixture
def x(rng):
    return rng.standard_normal((5, 7)).astype(np.float32)


UFUNCS = [
    ("exp", lambda a: np.exp(a)),
    ("log1p of abs", lambda a: np.log1p(np.absolute(a))),
    ("maximum", lambda a: np.maximum(a, 0.25)),
    ("add, multiply", lambda a: np.add(np.multiply(a, 2.0), 1.0)),
    ("power, square", lambda a: np.power(a, 2) + np.square(a)),
    ("negative, arctan2", lambda a: np.arctan2(np.negative(a), 1.5)),
    ("rint, floor, ceil, trunc", lambda a: np.rint(a * 3) + np.floor(a) * 10 + np.ceil(a) * 100 + np.trunc(a) * 1e3),
    ("arcsin, arccos, exp2", lambda a: np.arcsin(a / 4) + np.arccos(a / 4) + np.exp2(a)),
    ("sign", lambda a: np.sign(a)),
    ("arcsinh, arccosh, arctanh", lambda a: np.arcsinh(a * 3) + np.arccosh(2 + a * a) + np.arctanh(a / 4)),
    ("copysign, signbit, logaddexp", lambda a: np.copysign(a, a - 0.5) + np.signbit(a * 2 - 1) + np.logaddexp(a, -a)),
    ("tanh of matmul", lambda a: np.tanh(np.matmul(a, a.T))),
    ("comparisons", lambda a: np.less(a, 0.0) | np.greater_equal(a, 1.0)),
]


@pytest.mark.parametrize("name,fn", UFUNCS, ids=[u[0] for u in UFUNCS])
def test_ufuncs_on_traced_arrays_match_numpy(pypto_executor, x, name, fn):
    x = x.copy()
    x[0, 0], x[1, 1], x[2, 2] = 0.5, -2.5, 1.5  # halves (rint rounds them to even)
    got = pt.jit(fn, executor=pypto_executor)(x)
    np.testing.assert_allclose(got, fn(x), rtol=2e-6, atol=2e-6)


FUNCTIONS = [
    ("sum axis keepdims", lambda a: np.sum(a, axis=1, keepdims=True)),
    ("mean, max, min, prod", lambda a: np.mean(a) + np.max(a, 0) + np.min(a, axis=0) + np.prod(a[:2], axis=0)),
    ("var and std, ddof", lambda a: np.var(a, axis=1) + np.std(a, axis=0, ddof=1).sum()),
    ("methods var std", lambda a: a.var() + a.std(axis=1, keepdims=True)),
    ("any, all", lambda a: np.any(a > 1.0, axis=1) ^ np.all(a > -3.0, axis=1) ^ (a > 0).any()),
    ("all of an empty axis", lambda a: np.all(a[:, :0] > 0, axis=1)),
    ("clip, both and one bound", lambda a: np.clip(a, -0.5, 0.5) + np.clip(a, None, 0.0) + a.clip(min=0.1)),
    ("round decimals", lambda a: np.round(a, 2) + np.around(a) + a.round(1)),
    ("where", lambda a: np.where(a > 0, a, -a)),
    ("squeeze, ravel, flatten", lambda a: np.squeeze(a[:1]) + np.ravel(a[1:2]) + a[2:3].flatten()),
    ("cumsum, argmax, sort", lambda a: np.cumsum(a, axis=1) + np.argmax(a, axis=1)[:, None] + np.sort(a, axis=0)),
    ("concatenate, stack", lambda a: np.concatenate([a, a * 2], axis=0).sum(0) + np.stack([a, a], axis=1).sum((0, 1))),
    ("repeat, tile", lambda a: np.repeat(a, 2, axis=1)[:, ::2] + np.tile(a, (1, 2))[:, 3:10] + a.repeat(3)[:35].reshape(5, 7)
     + np.repeat(a, [0, 2, 1, 1, 1], axis=0)),
    ("searchsorted", lambda a: np.searchsorted(np.sort(a[0]), a) + np.sort(a[1]).searchsorted(a, side="right")),
    ("dot, einsum, transpose, reshape", lambda a: np.dot(a, np.transpose(a)) + np.einsum("ij,kj->ik", a, a)
     + np.reshape(a, (7, 5)).T @ np.reshape(a, (7, 5))[:, :5]),
]  # fmt: skip


@pytest.mark.parametrize("name,fn", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_numpy_functions_and_methods_on_traced_arrays_match_numpy(pypto_executor, x, name, fn):
    x = x.copy()
    x[0, :3] = [0.125, -1.375, 2.5]  # exactly halfway at 2 decimals: halves to even
    x[1, 0] = np.nan
    got = pt.jit(fn, executor=pypto_executor)(x)
    want = fn(x)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    assert np.asarray(got).shape == np.shape(want)


def test_builtin_round_and_softmax_spelled_with_axis(x):
    np.testing.assert_array_equal(pt.jit(lambda a: round(a * 4))(x), np.round(x * 4))
    np.testing.assert_allclose(pt.jit(lambda a: pt.softmax(a, axis=0))(x), pt.jit(lambda a: pt.softmax(a, 0))(x))
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(pt.jit(lambda a: pt.log_softmax(a, axis=-1))(x), np.log(e / e.sum(-1, keepdims=True)),
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    with pytest.raises(pt.TracingError, match="give the axis once"):
        pt.jit(lambda a: pt.softmax(a, 0, axis=1))(x)


def test_ufunc_reduce_and_accumulate_methods(pypto_executor, x):
    """``np.maximum.accumulate(x, axis)`` (a running maximum), ``np.add.reduce(x)`` (axis 0 by default) ..."""
    x = x.astype(np.float64)
    x[1, 3] = np.nan
    cases = [
        lambda a: np.maximum.accumulate(a, axis=1), lambda a: np.minimum.accumulate(a),
        lambda a: np.add.accumulate(a, 1), lambda a: np.multiply.accumulate(a * 0.5, axis=0),
        lambda a: np.add.reduce(a), lambda a: np.maximum.reduce(a, axis=1, keepdims=True),
        lambda a: np.minimum.reduce(a, axis=None), lambda a: np.multiply.reduce(a, 1),
    ]  # fmt: skip
    for fn in cases:
        np.testing.assert_allclose(pt.jit(fn, executor=pypto_executor)(x), fn(x), rtol=1e-12, equal_nan=True)


def test_what_numpy_cannot_do_on_traced_arrays_is_a_typed_error(x):
    with pytest.raises(pt.TracingError, match="numpy.where with one argument"):
        pt.jit(lambda a: np.where(a > 0))(x)
    with pytest.raises(pt.TracingError, match="numpy.sum: the argument out= is not supported"):
        pt.jit(lambda a: np.sum(a, out=a))(x)
    with pytest.raises(pt.TracingError, match="numpy.add.reduceat is not supported on a traced array"):
        pt.jit(lambda a: np.add.reduceat(a, [0, 2]))(x)
    with pytest.raises(pt.TracingError, match="numpy.maximum.accumulate: the argument dtype= is not supported"):
        pt.jit(lambda a: np.maximum.accumulate(a, dtype=np.float64))(x)
    with pytest.raises(pt.TracingError, match="numpy.fft.fft is not supported on a traced array"):
        pt.jit(lambda a: np.fft.fft(a))(x)
    with pytest.raises(pt.TracingError, match="numpy.linalg.qr is not supported on a traced array"):
        pt.jit(lambda a: np.linalg.qr(a[:, :5]))(x)
    with pytest.raises(pt.TracingError, match=r"squeeze\(\): axis 1 has size 7, not 1"):
        pt.jit(lambda a: np.squeeze(a, axis=1))(x)


def test_rounding_functions_have_zero_gradient_and_inverse_trig_functions_their_derivatives(rng):
    v = rng.uniform(-0.9, 0.9, 11)
    g = pt.grad(lambda a: (pt.floor(a * 3) + pt.round(a) + pt.ceil(a) + pt.trunc(a) + a).sum())(v)
    np.testing.assert_array_equal(g, np.ones_like(v))
    g = pt.grad(lambda a: (pt.arcsin(a) + 2 * pt.arccos(a) + pt.exp2(a)).sum())(v)
    np.testing.assert_allclose(g, 1 / np.sqrt(1 - v * v) - 2 / np.sqrt(1 - v * v) + np.exp2(v) * np.log(2),
                               rtol=1e-12)  # fmt: skip


def test_searchsorted_matches_numpy_on_ties_nans_sides_sorters_and_long_arrays(pypto_executor, rng):
    """The whole-row count (up to 128 elements) and the search by blocks beyond, on floats with ties, NaN and
    infinities (NumPy's order: NaN last), integers, scalars and a ``sorter``."""
    for n in (1, 5, 128, 129, 2049, 6000):
        a = np.sort(np.round(rng.standard_normal(n) * 4)).astype(np.float64)
        a[-min(2, n) :] = np.nan
        v = np.concatenate([np.round(rng.standard_normal(200) * 4), a[:: max(1, n // 50)], [np.nan, np.inf, -np.inf]])
        f = pt.jit(lambda a, v: (np.searchsorted(a, v), np.searchsorted(a, v, side="right")), executor=pypto_executor)
        left, right = f(a, v)
        np.testing.assert_array_equal(left, np.searchsorted(a, v))
        np.testing.assert_array_equal(right, np.searchsorted(a, v, side="right"))
        assert left.dtype == np.int64
    ints = np.sort(rng.integers(-50, 50, 3000))
    probe = np.arange(-52, 53)
    got = pt.jit(lambda a, v: (np.searchsorted(a, v, "right"), np.searchsorted(a, 7)), executor=pypto_executor)(
        ints, probe
    )
    np.testing.assert_array_equal(got[0], np.searchsorted(ints, probe, "right"))
    assert got[1] == np.searchsorted(ints, 7) and np.shape(got[1]) == ()
    shuffled = rng.standard_normal(40)
    order = np.argsort(shuffled)
    got = pt.jit(lambda a, s, v: np.searchsorted(a, v, sorter=s), executor=pypto_executor)(shuffled, order, probe / 20)
    np.testing.assert_array_equal(got, np.searchsorted(shuffled, probe / 20, sorter=order))


def test_repeat_tile_and_searchsorted_refuse_what_numpy_would_shape_by_the_values(x):
    with pytest.raises(pt.TracingError, match="repeats is a traced array"):
        pt.jit(lambda a, r: np.repeat(a, r, axis=0))(x, np.ones(5, np.int64))
    with pytest.raises(pt.TracingError, match="repeats must be non-negative integers"):
        pt.jit(lambda a: np.repeat(a, -1))(x)
    with pytest.raises(pt.ShapeError, match="3 repeat counts for an axis of 5 elements"):
        pt.jit(lambda a: np.repeat(a, [1, 2, 3], axis=0))(x)
    with pytest.raises(pt.ShapeError, match="must be one-dimensional"):
        pt.jit(lambda a: np.searchsorted(a, 0.0))(x)
    with pytest.raises(pt.TracingError, match="side must be 'left' or 'right'"):
        pt.jit(lambda a: np.searchsorted(a[0], 0.0, side="middle"))(x)


def test_copysign_logaddexp_and_inverse_hyperbolic_gradients_match_torch(rng):
    torch = pytest.importorskip("torch")
    a, b = rng.standard_normal(9), rng.standard_normal(9)
    b[0], a[1] = a[0], 0.0  # a tie for logaddexp (half each), a zero magnitude for copysign

    def f(xp, a, b):
        return ((xp.copysign(a, b) * 3 + xp.logaddexp(a, b)).sum() + xp.asinh(a).sum() + xp.acosh(2 + b * b).sum()
                + xp.atanh(a / 4).sum())  # fmt: skip

    ga, gb = pt.grad(lambda a, b: f(pt, a, b), argnums=(0, 1))(a, b)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    f(torch, ta, tb).backward()
    np.testing.assert_allclose(ga, ta.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gb, tb.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32])
def test_shifts_match_numpy_on_every_count_including_negative_and_too_wide(pypto_executor, rng, dt):
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, 64, dtype=dt, endpoint=True)
    a[:4] = [info.min, info.max, 0, 1]
    counts = rng.integers(-3 if info.min < 0 else 0, info.bits + 3, 64).astype(dt)
    counts[:5] = [0, 1, info.bits - 1, info.bits, info.bits - 2]
    f = pt.jit(lambda a, c: (a << c, a >> c, np.left_shift(a, 3), np.right_shift(a, info.bits - 1), 5 << c[6:9],
                             a >> (info.bits + 1)), executor=pypto_executor)  # fmt: skip
    with np.errstate(over="ignore"):
        want = (a << counts, a >> counts, a << dt(3), a >> dt(info.bits - 1), dt(5) << counts[6:9],
                a >> dt(info.bits + 1))  # fmt: skip
    for got, w in zip(f(a, counts), want):
        assert got.dtype == w.dtype
        np.testing.assert_array_equal(got, w)
    mixed = pt.jit(lambda a, c: a << c, executor=pypto_executor)(a.astype(np.int32), counts.astype(np.int64))
    np.testing.assert_array_equal(mixed, a.astype(np.int32) << counts.astype(np.int64))
    with pytest.raises(pt.TracingError, match="'<<' shifts integers, got an operand of type float32"):
        pt.jit(lambda a: a.astype(np.float32) << 1)(a)


def test_round_and_rounding_functions_in_kernels(pypto_executor):
    N = pt.dim("N")

    @pt.kernel(executor=pypto_executor)
    def rounding(x: pt.Tensor[pt.float64, (N,)], y: pt.Tensor[pt.float64, (5, N)]):
        i = pt.axis(0)
        y[0, i] = round(x[i])
        y[1, i] = round(x[i], 1)
        y[2, i] = np.floor(x[i])
        y[3, i] = pt.ceil(x[i]) + np.trunc(x[i])
        y[4, i] = np.arcsin(x[i] / 8) + pt.arccos(x[i] / 8)

    x = np.array([-2.5, -1.55, -0.5, -0.0, 0.5, 1.5, 2.25, 7.75, np.nan, np.inf])
    y = np.zeros((5, len(x)))
    rounding(x, y)
    with np.errstate(invalid="ignore"):  # (arcsin of inf: NaN)
        want = [np.round(x), np.round(x, 1), np.floor(x), np.ceil(x) + np.trunc(x), np.arcsin(x / 8) + np.arccos(x / 8)]
    np.testing.assert_allclose(y, want, rtol=1e-15, atol=0)
    assert np.signbit(y[0, 3]) and np.signbit(y[2, 3])  # -0.0 stays -0.0


SPECIALS = np.array([[1.5, np.nan, np.inf, -np.inf], [-2.0, 0.0, -0.0, 3.0]], np.float32)


def test_nan_and_infinity_predicates_and_sign_in_both_front_ends(pypto_executor):
    f = pt.jit(lambda a: (pt.isnan(a), np.isinf(a), pt.isfinite(a), np.sign(a) + pt.sign(a)), executor=pypto_executor)
    got = [np.asarray(v) for v in f(SPECIALS)]
    want = [np.isnan(SPECIALS), np.isinf(SPECIALS), np.isfinite(SPECIALS), 2 * np.sign(SPECIALS)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype
    ints = np.array([-3, 0, 5], np.int32)
    g = pt.jit(lambda a: (np.sign(a), pt.isnan(a), pt.isfinite(a)), executor=pypto_executor)(ints)
    np.testing.assert_array_equal(g[0], np.sign(ints))
    assert np.asarray(g[0]).dtype == np.int32 and not np.asarray(g[1]).any() and np.asarray(g[2]).all()
    M, N = pt.dims("M N")

    @pt.kernel(executor=pypto_executor)
    def classify(x: pt.Tensor[pt.float32, (M, N)], c: pt.Tensor[pt.int32, (M, N)]):
        i, j = pt.axis(0), pt.axis(1)
        c[i, j] = pt.where(np.isnan(x[i, j]), 1, 0) + pt.where(pt.isinf(x[i, j]), 2, 0) + \
            pt.where(pt.isfinite(x[i, j]), 4, 0) + pt.cast(pt.sign(x[i, j]), pt.int32) * 8  # fmt: skip

    c = np.zeros(SPECIALS.shape, np.int32)
    classify(SPECIALS, c)
    with np.errstate(invalid="ignore"):
        want = np.isnan(SPECIALS) * 1 + np.isinf(SPECIALS) * 2 + np.isfinite(SPECIALS) * 4 + \
            np.where(np.isnan(SPECIALS), 0, np.sign(SPECIALS)).astype(np.int32) * 8  # fmt: skip
    np.testing.assert_array_equal(c, want)


def test_arrays_made_from_positions(pypto_executor, rng):
    m = rng.standard_normal((2, 4, 5))
    f = pt.jit(lambda a: (pt.tril(a, -1) + np.triu(a, 2) * 10, a[0] @ pt.eye(5, 3, k=1, dtype=pt.float64),
                          a[0, 0] * pt.arange(5) + pt.arange(1.0, 2.0, 0.25)[:, None] * 0), executor=pypto_executor)  # fmt: skip
    tri, eye, ar = f(m)
    np.testing.assert_array_equal(tri, np.tril(m, -1) + np.triu(m, 2) * 10)
    np.testing.assert_array_equal(eye, m[0] @ np.eye(5, 3, k=1))
    np.testing.assert_allclose(ar, np.broadcast_to(m[0, 0] * np.arange(5), (4, 5)))
    # outside a traced function they are NumPy's own
    np.testing.assert_array_equal(pt.arange(2, 11, 3), np.arange(2, 11, 3))
    np.testing.assert_array_equal(pt.eye(3, dtype=pt.int32), np.eye(3, dtype=np.int32))
    np.testing.assert_array_equal(pt.tril(np.ones((3, 3))), np.tril(np.ones((3, 3))))
    with pytest.raises(pt.ShapeError, match="step must not be 0"):
        pt.arange(0, 4, 0)


@pytest.mark.parametrize("args", [(0, 1, 5), (-3, 7.5, 11), (2, 2, 1), (0, 1, 0), (1, 0, 7, False), (5, -5, 50)])
def test_linspace_as_numpy(args, pypto_executor):
    n = args[2]
    f = pt.jit(lambda x: x + pt.linspace(*args, dtype=pt.float64), executor=pypto_executor)
    got, want = f(np.zeros(n)), np.linspace(*args)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=4 * np.finfo(np.float64).eps * max(map(abs, args[:2])))
    if n > 1 and (len(args) < 4 or args[3]):
        assert got[-1] == want[-1] == args[1]  # the end point exactly
    assert pt.jit(lambda x: x * pt.linspace(0, 1, 4))(np.ones(4, np.float32)).dtype == np.float32
    np.testing.assert_array_equal(pt.linspace(*args), np.linspace(*args, dtype=np.float32))  # outside: NumPy's
    with pytest.raises(pt.ShapeError, match="start must be a Python number"):
        pt.jit(lambda x: pt.linspace(x, 1, 3))(np.zeros(3))


def _logsumexp(x, axis=None, keepdims=False):
    """NumPy reference (as scipy.special.logsumexp): the maximum taken out in float64; a row of -inf gives -inf,
    one holding +inf gives +inf."""
    m = np.max(x, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - shift), axis=axis, keepdims=True)) + shift
    return out if keepdims else np.squeeze(out, axis=axis)


def test_logsumexp_matches_numpy_and_its_gradient_is_the_softmax(pypto_executor, rng):
    logsumexp = _logsumexp

    def softmax(v, axis):
        e = np.exp(v - v.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    x = rng.standard_normal((4, 6)) * 30
    x[1] = -np.inf
    x[2, 3] = np.inf
    got = pt.jit(lambda a: pt.logsumexp(a, axis=1), executor=pypto_executor)(x)
    np.testing.assert_allclose(got, logsumexp(x, axis=1), rtol=1e-12)
    np.testing.assert_allclose(pt.jit(lambda a: pt.logsumexp(a, keepdims=True))(x[[0, 3]]),
                               logsumexp(x[[0, 3]], keepdims=True), rtol=1e-12)  # fmt: skip
    finite = x[[0, 3]]
    g = pt.grad(lambda a: pt.logsumexp(a, axis=1).sum())(finite)
    np.testing.assert_allclose(g, softmax(finite, axis=1), rtol=1e-10, atol=1e-15)


PORTING = [
    ("flip", lambda a: np.flip(a, 1) + np.fliplr(a) + np.flipud(a) + np.flip(a)),
    (
        "roll",
        lambda a: np.roll(a, 2, axis=1) + np.roll(a, -1, axis=0) + np.roll(a, 3) + np.roll(a, (1, 2), axis=(0, 1)),
    ),
    ("diff", lambda a: np.diff(a).sum() + np.diff(a, 2, axis=0).sum()),
    (
        "pad",
        lambda a: (
            np.pad(a, 1).sum(0)
            + np.pad(a, ((1, 2), (0, 3)), constant_values=2.5).sum(0)[:9]
            + np.pad(a, 1, mode="edge").sum(0)
        ),
    ),
    ("outer, inner", lambda a: np.outer(a[0], a[1]) + np.inner(a, a)[0, :1]),
    ("tensordot", lambda a: np.tensordot(a, a, axes=([1], [1])) + np.tensordot(a, a.T, axes=1)),
    ("cov", lambda a: np.cov(a) + np.cov(a.T, rowvar=False, bias=True)),
    ("corrcoef", lambda a: np.corrcoef(a)),
    ("trace", lambda a: np.trace(a[:, :5]) + np.trace(a)),
    ("zeros_like, ones_like, full_like", lambda a: np.zeros_like(a) + np.ones_like(a) * 2 + np.full_like(a, 3.0)),
    ("linalg.norm", lambda a: np.linalg.norm(a) + np.linalg.norm(a, axis=1).sum()),
    (
        "swapaxes, expand_dims, broadcast_to",
        lambda a: (
            np.swapaxes(a, 0, 1).sum(1) + np.expand_dims(a, 0).sum((0, 2)).sum() + np.broadcast_to(a[0], (3, 7)).sum(0)
        ),
    ),
]


@pytest.mark.parametrize("name,fn", PORTING, ids=[u[0] for u in PORTING])
def test_more_numpy_functions_match_numpy(pypto_executor, rng, name, fn):
    a = rng.standard_normal((5, 7))
    np.testing.assert_allclose(pt.jit(fn, executor=pypto_executor)(a), fn(a), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (5, 5), (4, 8, 8), (2, 3, 4, 4)])
def test_small_linear_algebra_matches_numpy(pypto_executor, rng, shape):
    a = rng.standard_normal(shape)
    spd = a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])
    bm = rng.standard_normal((*shape[:-1], 3))

    def f(a, s, bm):
        return np.linalg.cholesky(s), np.linalg.solve(a, bm), np.linalg.inv(a), np.linalg.det(a)

    got = pt.jit(f, executor=pypto_executor)(a, spd, bm)
    for g, w in zip(got, f(a, spd, bm)):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("n", [1, 3, 8])
def test_small_linear_algebra_gradients_match_torch(rng, n):
    """Gradients through the unrolled factorisations (pivot choices are piecewise constant) against torch's
    analytic ones; cholesky of a symmetric matrix made from x (torch symmetrises its gradient, the unrolled
    algorithm reads the lower triangle: a loss of x compares the two)."""
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((2, n, n)) + n * np.eye(n)
    x = rng.standard_normal((2, n, n))
    b = rng.standard_normal((2, n, 2))
    w = rng.standard_normal((2, n, n))

    def loss(a, x, b, lib):
        spd = x @ lib.swapaxes(x, -1, -2) + n * lib.eye(n)
        terms = (lib.linalg.solve(a, b) ** 2).sum() + (lib.linalg.inv(a) * w).sum()
        terms = terms + (lib.linalg.det(a) ** 2).sum() + (lib.linalg.cholesky(spd) * w).sum()
        return terms

    got = pt.grad(lambda a, x, b: loss(a, x, b, np), argnums=(0, 1, 2))(a, x, b)
    ts = [torch.tensor(v, requires_grad=True) for v in (a, x, b)]
    w = torch.tensor(w)
    loss(*ts, torch).backward()
    for g, t in zip(got, ts):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_small_linear_algebra_vectors_integers_and_errors(rng):
    a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    b = rng.standard_normal(4)
    np.testing.assert_allclose(pt.jit(lambda a, b: np.linalg.solve(a, b))(a, b), np.linalg.solve(a, b), rtol=1e-12)
    k = np.array([[2, 1], [1, 3]])
    got = pt.jit(lambda k: np.linalg.inv(k))(k)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.linalg.inv(k), rtol=1e-12)
    with pytest.raises(pt.TracingError, match=r"n <= 16.*\n.*\n.*call np.linalg.inv outside the jit function"):
        pt.jit(lambda m: np.linalg.inv(m))(np.eye(17))
    with pytest.raises(pt.ShapeError, match="square matrices"):
        pt.jit(lambda m: np.linalg.det(m))(np.ones((3, 4)))
    with pytest.raises(pt.TracingError, match="numpy.linalg.eig is not supported"):
        pt.jit(lambda m: np.linalg.eig(m))(np.eye(3))


@pytest.mark.parametrize("executor", ["reference", "openmp"])
def test_argmax_of_an_expression_compares_one_stored_value(executor, rng):
    """argmax is a maximum and the first position holding it: of a computed expression the two must read the same
    values (recomputed, a division could become a multiplication by the reciprocal in one loop only)."""
    x, y = rng.standard_normal((3000, 7)), rng.standard_normal((3000, 7))
    s = rng.random((3000, 1)) + 0.5
    got = pt.jit(lambda x, y, s: np.argmax((x - y * 0.37) / s, axis=1), executor=executor)(x, y, s)
    np.testing.assert_array_equal(got, np.argmax((x - y * 0.37) / s, axis=1))


UNARY_EXPRS = [
    lambda a: np.exp(np.clip(a, -3, 3)),
    np.sin,
    np.tanh,
    np.abs,
    lambda a: np.sqrt(np.abs(a)),
    lambda a: np.log1p(np.abs(a)),
    np.negative,
    lambda a: a.cumsum(axis=1),
    lambda a: a.mean(axis=0, keepdims=True),
    lambda a: a.max(axis=1, keepdims=True),
    lambda a: np.sum(a, axis=1, keepdims=True),
    lambda a: a.std(axis=0, keepdims=True),
    lambda a: np.round(a, 1),
]
BINARY_EXPRS = [np.add, np.subtract, np.multiply, np.maximum, np.minimum, lambda a, b: np.where(a > b, a, b * 0.5)]


def _expression():
    return st.recursive(
        st.just(("x",)),
        lambda inner: st.one_of(
            st.tuples(st.just("u"), st.integers(0, len(UNARY_EXPRS) - 1), inner),
            st.tuples(st.just("b"), st.integers(0, len(BINARY_EXPRS) - 1), inner, inner),
        ),
        max_leaves=6,
    )


def _evaluate(tree, x):
    if tree[0] == "x":
        return x
    if tree[0] == "u":
        return UNARY_EXPRS[tree[1]](_evaluate(tree[2], x))
    return BINARY_EXPRS[tree[1]](_evaluate(tree[2], x), _evaluate(tree[3], x))


@settings(max_examples=40, deadline=None)
@given(tree=_expression())
def test_random_numpy_expressions_match_numpy(tree):
    """Random trees of NumPy ufuncs, functions and methods (elementwise, reductions keeping their axes, scans),
    traced by @pt.jit and compared with NumPy on the same float64 input."""
    x = np.random.default_rng(7).standard_normal((4, 5))
    want = _evaluate(tree, x)
    got = pt.jit(lambda x: _evaluate(tree, x) * 1.0)(x)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_more_array_methods_as_numpy(rng):
    x = rng.standard_normal((3, 4, 5))
    f = pt.jit(lambda a: (a.mT, a.swapaxes(0, 2), a[0].dot(a[1].T), a.take(np.array([2, 0]), axis=1), a[0].trace(),
                          a[0, 0].argsort(), np.take(a, np.array([7, 1])), a * (a.nbytes + a.itemsize)))  # fmt: skip
    got = f(x)
    want = (np.swapaxes(x, -1, -2), x.swapaxes(0, 2), x[0].dot(x[1].T), x.take([2, 0], axis=1), x[0].trace(),
            x[0, 0].argsort(), np.take(x, [7, 1]), x * (x.nbytes + x.itemsize))  # fmt: skip
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    with pytest.raises(pt.TracingError, match="mode= is not supported"):
        pt.jit(lambda a: np.take(a, np.array([0]), mode="wrap"))(x)
