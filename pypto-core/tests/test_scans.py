"""Scans: ``pt.cumsum``, ``pt.cumprod``, ``pt.cummax``, ``pt.cummin`` in kernels and jit functions, compared with
NumPy's ``cumsum``/``cumprod``/``maximum.accumulate``/``minimum.accumulate`` on the same inputs, and their
gradients with torch autograd."""

import numpy as np
import pytest

import pypto as pt

N, M, K = pt.dims("N M K")

F32 = pt.Tensor[pt.float32, (N, M)]
F64 = pt.Tensor[pt.float64, (N, M)]

_NUMPY = {
    "cumsum": np.cumsum,
    "cumprod": np.cumprod,
    "cummax": lambda x, axis: np.maximum.accumulate(x, axis=axis),
    "cummin": lambda x, axis: np.minimum.accumulate(x, axis=axis),
}


def _reference(name, x, axis, reverse=False):
    if not reverse:
        return _NUMPY[name](x, axis=axis)
    flip = [slice(None)] * x.ndim
    flip[axis] = slice(None, None, -1)
    return _NUMPY[name](x[tuple(flip)], axis=axis)[tuple(flip)]


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("reverse", [False, True])
def test_kernel_scans_along_either_axis_match_numpy(pypto_executor, rng, name, reverse):
    fn = getattr(pt, name)

    @pt.kernel(executor=pypto_executor)
    def scans(x: F64, along_c: F64, along_r: F64):
        r, c = pt.axis(0), pt.axis(1)
        along_c[r, c] = fn(x[r, c], axis=c, reverse=reverse)
        along_r[r, c] = fn(x[r, c] * 0.5 + 1.0, axis=r, reverse=reverse) - 1.0

    x = rng.uniform(0.5, 1.5, (37, 23))  # products stay finite
    x[3, 5] = np.nan  # NaN spreads from its position on, as NumPy's accumulations
    a, b = np.zeros_like(x), np.zeros_like(x)
    scans(x, a, b)
    np.testing.assert_allclose(a, _reference(name, x, 1, reverse), rtol=1e-12)
    np.testing.assert_allclose(b, _reference(name, x * 0.5 + 1.0, 0, reverse) - 1.0, rtol=1e-12, atol=1e-12)
    text = scans.ir("schedule")
    assert f"{name}(" in text and "scan order=(r, c)" in text and "scan order=(c, r)" in text


def test_kernel_float32_cumsum_is_numpys_sequential_sum(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def running(x: F32, y: F32):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = pt.cumsum(x[r, c], axis=c)

    x = rng.standard_normal((16, 1000)).astype(np.float32)
    y = np.zeros_like(x)
    running(x, y)
    # the same additions in the same order: float32 partial sums equal to NumPy's within an ulp of the sum
    np.testing.assert_allclose(y, np.cumsum(x, axis=1), rtol=1e-6, atol=1e-4)


def test_kernel_scans_of_integers_booleans_and_empty_axes(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def counts(x: pt.Tensor[pt.int32, (N, M)], total: pt.Tensor[pt.int32, (N, M)],
               positives: pt.Tensor[pt.int32, (N, M)], top: pt.Tensor[pt.int32, (N, M)]):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        total[r, c] = pt.cumsum(x[r, c], axis=c)
        positives[r, c] = pt.cumsum(x[r, c] > 0, axis=c)  # booleans count
        top[r, c] = pt.cummax(x[r, c], axis=r)

    x = rng.integers(-50, 50, (9, 13)).astype(np.int32)
    outs = [np.zeros_like(x) for _ in range(3)]
    counts(x, *outs)
    np.testing.assert_array_equal(outs[0], np.cumsum(x, axis=1))
    np.testing.assert_array_equal(outs[1], np.cumsum(x > 0, axis=1))
    np.testing.assert_array_equal(outs[2], np.maximum.accumulate(x, axis=0))
    empty = [np.zeros((4, 0), np.int32) for _ in range(4)]
    counts(*empty)  # nothing to scan: nothing written, nothing fails
    assert all(e.shape == (4, 0) for e in empty)


def test_kernel_scans_nested_in_scans_and_reductions(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def nested(x: F64, a: pt.Tensor[pt.float64, (N, M, K)], twice: F64, both: F64, summed: pt.Tensor[pt.float64, (N,)],
               of_sums: F64, back: F64):  # fmt: skip
        r, c, k = pt.axis(0), pt.axis(1), pt.axis(2)
        twice[r, c] = pt.cumsum(pt.cumsum(x[r, c], axis=c) * 2.0, axis=c)  # one loop carries both
        back[r, c] = pt.cumsum(pt.cumsum(x[r, c], axis=c), axis=c, reverse=True)  # the other direction: stored first
        both[r, c] = pt.cummax(pt.cumsum(x[r, c], axis=c), axis=r)  # along another axis: a temporary first
        summed[r] = pt.reduce_sum(pt.cumsum(x[r, c], axis=c), axis=c)  # inside a reduction: a temporary first
        of_sums[r, c] = pt.cumsum(pt.reduce_sum(a[r, c, k], axis=k), axis=c)  # a reduction per step

    x = rng.standard_normal((11, 7))
    a = rng.standard_normal((11, 7, 5))
    twice, both, of_sums, back = (np.zeros_like(x) for _ in range(4))
    summed = np.zeros(11)
    nested(x, a, twice, both, summed, of_sums, back)
    cs = np.cumsum(x, axis=1)
    np.testing.assert_allclose(back, np.cumsum(cs[:, ::-1], axis=1)[:, ::-1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(twice, np.cumsum(cs * 2.0, axis=1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(both, np.maximum.accumulate(cs, axis=0), rtol=1e-12)
    np.testing.assert_allclose(summed, cs.sum(axis=1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(of_sums, np.cumsum(a.sum(axis=2), axis=1), rtol=1e-12, atol=1e-12)


def test_kernel_complex_and_half_cumsum(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def running(z: pt.Tensor[pt.complex128, (N, M)], w: pt.Tensor[pt.complex128, (N, M)]):
        r, c = pt.axis(0), pt.axis(1)
        w[r, c] = pt.cumsum(z[r, c] * 1j, axis=c)

    @pt.kernel(executor=pypto_executor)
    def halves(h: pt.Tensor[pt.float16, (N, M)], hs: pt.Tensor[pt.float16, (N, M)]):
        r, c = pt.axis(0), pt.axis(1)
        hs[r, c] = pt.cumsum(h[r, c], axis=c)  # accumulated in float32, rounded once

    z = rng.standard_normal((5, 9)) + 1j * rng.standard_normal((5, 9))
    w = np.zeros_like(z)
    running(z, w)
    np.testing.assert_allclose(w, np.cumsum(z * 1j, axis=1), rtol=1e-12)
    h = rng.uniform(-1, 1, (5, 9)).astype(np.float16)
    hs = np.zeros_like(h)
    if pypto_executor == "numba":  # (the Numba example backend has no float16: a typed error says so)
        with pytest.raises(pt.DTypeError, match="no float16"):
            halves(h, hs)
        return
    halves(h, hs)
    np.testing.assert_allclose(hs.astype(np.float64), np.cumsum(h.astype(np.float64), axis=1), rtol=2e-3, atol=2e-3)


def test_kernel_scan_errors_name_the_construct():
    with pytest.raises(pt.TracingError, match="name the axis"):

        @pt.kernel
        def no_axis(x: F32, y: F32):
            r, c = pt.axis(0), pt.axis(1)
            y[r, c] = pt.cumsum(x[r, c])

        no_axis.ir("traced")
    with pytest.raises(pt.TracingError, match="one axis at a time"):

        @pt.kernel
        def two(x: F32, y: F32):
            r, c = pt.axis(0), pt.axis(1)
            y[r, c] = pt.cumsum(x[r, c], axis=(r, c))

        two.ir("traced")

    @pt.kernel
    def of_bools(x: F32, y: pt.Tensor[pt.bool_, (N, M)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = pt.cummax(x[r, c] > 0, axis=c)

    with pytest.raises(pt.TracingError, match="cummax of a boolean"):
        of_bools.ir("infer_types")


def test_jit_scans_match_numpy(pypto_executor, rng):
    @pt.jit(executor=pypto_executor)
    def programs(x):
        return (
            pt.cumsum(x, axis=1),
            x.cumsum(0),
            x.cumprod(1),
            pt.cummax(x, -1),
            pt.cummin(x, 0, reverse=True),
            pt.cumsum(x),  # along the flattened array
            pt.exp(pt.cumsum(x, 1))[:, ::-1],  # a reversed view of a scan: stored first
            pt.cumsum(x, 1).sum(1),  # a scan inside a reduction
            pt.cumsum(pt.cumsum(x, 0), 1),
        )

    x = rng.uniform(-1, 1, (13, 17))
    got = programs(x)
    want = (
        np.cumsum(x, 1), np.cumsum(x, 0), np.cumprod(x, 1), np.maximum.accumulate(x, -1),
        _reference("cummin", x, 0, True), np.cumsum(x), np.exp(np.cumsum(x, 1))[:, ::-1], np.cumsum(x, 1).sum(1),
        np.cumsum(np.cumsum(x, 0), 1),
    )  # fmt: skip
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    i8 = rng.integers(-100, 100, (6, 40)).astype(np.int8)
    s = pt.jit(lambda a: pt.cumsum(a, 1), executor=pypto_executor)(i8)
    assert s.dtype == np.int32  # as pt.sum: narrow integers in the default integer's width
    np.testing.assert_array_equal(s, np.cumsum(i8, 1))


def test_jit_scan_gradients_match_torch(pypto_executor, rng):
    torch = pytest.importorskip("torch")

    def loss(x, w):
        return (pt.cumsum(x, 1) * w + pt.cumsum(x * x, 0, reverse=True)).sum()

    x, w = rng.standard_normal((7, 11)), rng.standard_normal((7, 11))
    gx = pt.grad(loss)(x, w)
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w)
    (torch.cumsum(xt, 1) * wt + torch.flip(torch.cumsum(torch.flip(xt * xt, [0]), 0), [0])).sum().backward()
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_gradient_of_a_part_of_a_reversed_scan(pypto_executor, rng):
    """The cumsum of a concatenation: each part's cotangent is a part of a reversed cumsum of the whole, which
    starts at the end of the whole (not of the part)."""
    torch = pytest.importorskip("torch")
    a, b, w = rng.standard_normal(3), rng.standard_normal(5), rng.standard_normal(8)
    ga, gb = pt.grad(lambda a, b, w: (pt.concat([a, b], 0).cumsum(0) * w).sum(), argnums=(0, 1))(a, b, w)
    at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    want = torch.autograd.grad((torch.cat([at, bt]).cumsum(0) * torch.tensor(w)).sum(), (at, bt))
    np.testing.assert_allclose(ga, want[0].numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gb, want[1].numpy(), rtol=1e-12, atol=1e-12)


def _sequential(fn, xs, axis, reverse):
    """``pt.associative_scan``'s definition run step by step in torch (for its autograd)."""
    torch = pytest.importorskip("torch")
    xs = [x.movedim(axis, 0) for x in xs]
    order = range(xs[0].shape[0] - 1, -1, -1) if reverse else range(xs[0].shape[0])
    state, outs = None, {}
    for t in order:
        elem = tuple(x[t] for x in xs)
        state = elem if state is None else fn(state, elem)
        outs[t] = state
    return [torch.stack([outs[t][j] for t in range(len(outs))], 0).movedim(0, axis) for j in range(len(xs))]


def test_associative_scan_gradients_match_torch(pypto_executor, rng):
    """The gradient of a user's scan (a decaying sum; a linear recurrence of (a, b) pairs; a smooth maximum, in
    both directions and along either axis) against torch's autograd of the same scan run step by step."""
    torch = pytest.importorskip("torch")
    x, a, w = rng.standard_normal((6, 9)), rng.uniform(-0.9, 0.9, (6, 9)), rng.standard_normal((6, 9))

    def pairs(p, q):
        return (p[0] * q[0], p[1] * q[0] + q[1])

    cases = [
        (lambda p, q: 0.9 * p + q, 1, False, "decay"),
        (pairs, 1, True, "pairs"),
        (pairs, 0, False, "pairs"),
        (lambda p, q: pt.log(pt.exp(p) + pt.exp(q)), 0, True, "logaddexp"),
    ]
    for fn, axis, reverse, kind in cases:

        def loss(x, a, w, fn=fn, axis=axis, reverse=reverse, kind=kind):
            if kind == "pairs":
                _, h = pt.associative_scan(fn, (a, x), axis, reverse=reverse)
            else:
                h = pt.associative_scan(fn, x, axis, reverse=reverse)
            return (pt.sin(h) * w).sum()

        gx, ga = pt.grad(pt.jit(loss, executor=pypto_executor), argnums=(0, 1))(x, a, w)
        X, A = torch.tensor(x, requires_grad=True), torch.tensor(a, requires_grad=True)
        if kind == "pairs":
            h = _sequential(lambda p, q: (p[0] * q[0], p[1] * q[0] + q[1]), [A, X], axis, reverse)[1]
        elif kind == "decay":
            h = _sequential(lambda p, q: (0.9 * p[0] + q[0],), [X], axis, reverse)[0]
        else:
            h = _sequential(lambda p, q: (torch.logaddexp(p[0], q[0]),), [X], axis, reverse)[0]
        want = torch.autograd.grad((torch.sin(h) * torch.tensor(w)).sum(), (X, A), allow_unused=True,
                                   materialize_grads=True)  # fmt: skip
        np.testing.assert_allclose(gx, want[0].numpy(), rtol=1e-10, atol=1e-12, err_msg=f"{kind} {axis} {reverse}")
        np.testing.assert_allclose(ga, want[1].numpy(), rtol=1e-10, atol=1e-12, err_msg=f"{kind} {axis} {reverse}")


def test_jit_cumprod_gradient_matches_torch_with_zeros(pypto_executor, rng):
    """No division by the elements: exact where some are zero (one zero, two zeros in a row), as torch's."""
    torch = pytest.importorskip("torch")
    x, w = rng.uniform(0.5, 1.5, (6, 9)), rng.standard_normal((6, 9))
    x[1, 3] = 0.0
    x[2, 2:4] = 0.0
    x[4, 0] = 0.0

    def loss(x, w):
        return (pt.cumprod(x, 1) * w).sum() + (pt.cumprod(x, 0, reverse=True) * w).sum()

    g = pt.grad(pt.jit(loss, executor=pypto_executor))(x, w)
    t = torch.tensor(x, requires_grad=True)
    tw = torch.from_numpy(w)
    ((torch.cumprod(t, 1) * tw).sum() + (torch.flip(torch.cumprod(torch.flip(t, [0]), 0), [0]) * tw).sum()).backward()
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_jit_cummax_cummin_gradients_match_torch(pypto_executor, rng):
    """The cotangent of a running maximum (minimum) goes to the position holding it, as torch's cummax/cummin
    send it to their indices (distinct values: the same positions)."""
    x = rng.standard_normal((5, 30))
    w = rng.standard_normal((5, 30))

    def f(x, w):
        return (pt.cummax(x, 1) * w).sum() + (pt.cummin(x, 0) ** 2).sum()

    g = pt.grad(pt.jit(f, executor=pypto_executor))(x, w)
    torch = pytest.importorskip("torch")
    t = torch.tensor(x, requires_grad=True)
    loss = (torch.cummax(t, 1).values * torch.from_numpy(w)).sum() + (torch.cummin(t, 0).values ** 2).sum()
    loss.backward()
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12, atol=1e-12)


def _logaddexp(a, b):
    m = pt.maximum(a, b)
    return m + pt.log(pt.exp(a - m) + pt.exp(b - m))


def test_associative_scan_in_kernels_and_jit_matches_numpy(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def running(x: F64, lse: F64, decayed: F64, top: pt.Tensor[pt.int32, (N, M)], k: pt.Tensor[pt.int32, (N, M)],
                rate: float):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        lse[r, c] = pt.associative_scan(_logaddexp, x[r, c], axis=c)  # a running log-sum-exp
        decayed[r, c] = pt.associative_scan(lambda a, b: a * rate + b, x[r, c] * 2.0, axis=r, reverse=True)
        top[r, c] = pt.associative_scan(lambda a, b: pt.where(b > a, b, a), k[r, c], axis=c)

    x = rng.standard_normal((9, 12))
    k = rng.integers(-1000, 1000, (9, 12)).astype(np.int32)
    lse, decayed = np.zeros_like(x), np.zeros_like(x)
    top = np.zeros_like(k)
    running(x, lse, decayed, top, k, 0.5)
    np.testing.assert_allclose(lse, np.logaddexp.accumulate(x, axis=1), rtol=1e-12)
    want = 2.0 * x.copy()
    for t in range(x.shape[0] - 2, -1, -1):  # the recurrence from the end, as written
        want[t] = want[t + 1] * 0.5 + 2.0 * x[t]
    np.testing.assert_allclose(decayed, want, rtol=1e-12)
    np.testing.assert_array_equal(top, np.maximum.accumulate(k, axis=1))
    assert "associative_scan(%" in running.ir("infer_types") and "fn(a, b) = " in running.ir("infer_types")

    jitted = pt.jit(lambda v: pt.associative_scan(_logaddexp, v, 0), executor=pypto_executor)
    np.testing.assert_allclose(jitted(x), np.logaddexp.accumulate(x, axis=0), rtol=1e-12)
    flat = pt.jit(lambda v: pt.associative_scan(lambda a, b: a + b, v), executor=pypto_executor)
    np.testing.assert_allclose(flat(x), np.cumsum(x), rtol=1e-12, atol=1e-12)


def test_associative_scan_errors():
    @pt.kernel
    def reads_a_tensor(x: F32, y: F32):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = pt.associative_scan(lambda a, b: a + b * x[r, 0], x[r, c], axis=c)

    with pytest.raises(pt.TracingError, match="may use only its arguments"):
        reads_a_tensor.ir("infer_types")

    @pt.kernel
    def changes_type(x: pt.Tensor[pt.int32, (N, M)], y: pt.Tensor[pt.int32, (N, M)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = pt.associative_scan(lambda a, b: a / b, x[r, c], axis=c)

    with pytest.raises(pt.TracingError, match="returns float32 for elements of type int32"):
        changes_type.ir("infer_types")
    with pytest.raises(pt.TracingError, match="fn returned 2 for 1 scanned value"):
        pt.jit(lambda v: pt.associative_scan(lambda a, b: (a, b), v, 0))(np.ones(3))


def test_long_scans_run_in_blocks_with_the_same_bits_on_any_thread_count(pypto_executor, rng):
    n = 3 * 65536 + 123  # several blocks of the split scan, the last one short
    V = pt.dim("V")

    @pt.kernel(executor=pypto_executor)
    def long_scans(x: pt.Tensor[pt.float64, (V,)], k: pt.Tensor[pt.int64, (V,)], s: pt.Tensor[pt.float64, (V,)],
                   ks: pt.Tensor[pt.int64, (V,)], top: pt.Tensor[pt.float64, (V,)],
                   lse: pt.Tensor[pt.float64, (V,)]):  # fmt: skip
        i = pt.axis(0)
        s[i] = pt.cumsum(x[i], axis=i)
        ks[i] = pt.cumsum(k[i], axis=i, reverse=True)
        top[i] = pt.cummax(x[i], axis=i, reverse=True)
        lse[i] = pt.associative_scan(_logaddexp, x[i], axis=i)

    x = rng.standard_normal(n)
    k = rng.integers(-(10**6), 10**6, n)
    outs = [np.zeros(n), np.zeros(n, np.int64), np.zeros(n), np.zeros(n)]
    long_scans(x, k, *outs)
    assert "split=blocks of 65536" in long_scans.ir("split_reductions")
    np.testing.assert_allclose(outs[0], np.cumsum(x), rtol=1e-9, atol=1e-9)  # blocks: the sums regrouped
    np.testing.assert_array_equal(outs[1], np.cumsum(k[::-1])[::-1])  # integers: exact
    np.testing.assert_array_equal(outs[2], np.maximum.accumulate(x[::-1])[::-1])
    np.testing.assert_allclose(outs[3], np.logaddexp.accumulate(x), rtol=1e-12)
    before = pt.get_num_threads()
    try:
        pt.set_num_threads(1)
        again = [np.zeros_like(o) for o in outs]
        long_scans(x, k, *again)
    finally:
        pt.set_num_threads(before)
    for a, b in zip(outs, again):
        assert a.tobytes() == b.tobytes()  # the blocks do not depend on the thread count


def _linear(p, q):
    """The composition of two steps ``h -> a * h + b``: the scan of (a, b) pairs is a linear recurrence."""
    return p[0] * q[0], p[1] * q[0] + q[1]


def _first_max(p, q):
    """(value, position) of the first largest value so far."""
    better = q[0] > p[0]
    return pt.where(better, q[0], p[0]), pt.where(better, q[1], p[1])


def test_associative_scan_of_tuples_linear_recurrence_and_running_argmax(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def scans2(a: F64, b: F64, x: F64, h: F64, best: F64, where: pt.Tensor[pt.int64, (N, M)]):
        r, t = pt.axis(0), pt.axis(1)
        _, h[r, t] = pt.associative_scan(_linear, (a[r, t], b[r, t]), axis=t)  # h_t = a_t h_{t-1} + b_t
        best[r, t], where[r, t] = pt.associative_scan(_first_max, (x[r, t], pt.cast(t, pt.int64)), axis=t)

    a, b, x = rng.uniform(0.5, 1.0, (6, 40)), rng.standard_normal((6, 40)), rng.integers(0, 5, (6, 40)) * 1.0
    h, best = np.zeros_like(a), np.zeros_like(a)
    where = np.zeros((6, 40), np.int64)
    scans2(a, b, x, h, best, where)
    want = b.copy()
    for t in range(1, a.shape[1]):
        want[:, t] = a[:, t] * want[:, t - 1] + b[:, t]
    np.testing.assert_allclose(h, want, rtol=1e-12)
    np.testing.assert_array_equal(best, np.maximum.accumulate(x, axis=1))
    firsts = np.array([[np.argmax(row[: t + 1]) for t in range(row.size)] for row in x])
    np.testing.assert_array_equal(where, firsts)
    assert "value 1" in scans2.ir("infer_types")

    jitted = pt.jit(lambda a, b: pt.associative_scan(_linear, (a, b), axis=1)[1], executor=pypto_executor)
    np.testing.assert_allclose(jitted(a, b), want, rtol=1e-12)

    n = 2 * 65536 + 5  # a long vector: in blocks (each block's pairs composed, then applied to its start)
    V = pt.dim("V")

    @pt.kernel(executor=pypto_executor)
    def long_linear(a: pt.Tensor[pt.float64, (V,)], b: pt.Tensor[pt.float64, (V,)], h: pt.Tensor[pt.float64, (V,)]):
        t = pt.axis(0)
        _, h[t] = pt.associative_scan(_linear, (a[t], b[t]), axis=t)

    la, lb = rng.uniform(0.99, 1.0, n), rng.standard_normal(n)
    lh = np.zeros(n)
    long_linear(la, lb, lh)
    ref = np.empty(n)
    acc = 0.0
    for t in range(n):  # (in plain Python: NumPy has no linear recurrence)
        acc = la[t] * acc + lb[t] if t else lb[t]
        ref[t] = acc
    np.testing.assert_allclose(lh, ref, rtol=1e-9, atol=1e-9)
    assert "split=blocks" in long_linear.ir("split_reductions")


def test_kernel_vjp_of_scans_matches_torch(pypto_executor, rng):
    """kernel.vjp of a kernel with a cumsum and a user's scan of pairs run from the end."""
    torch = pytest.importorskip("torch")

    @pt.kernel(executor=pypto_executor)
    def scans(x: pt.Tensor[pt.float64, (N, M)], a: pt.Tensor[pt.float64, (N, M)], y: pt.Tensor[pt.float64, (N, M)],
              z: pt.Tensor[pt.float64, (N, M)]):  # fmt: skip
        r, t = pt.axis(0), pt.axis(1)
        y[r, t] = pt.cumsum(pt.sin(x[r, t]), axis=t)
        _, z[r, t] = pt.associative_scan(lambda p, q: (p[0] * q[0], p[1] * q[0] + q[1]), (a[r, t], x[r, t] * 2.0),
                                         axis=t, reverse=True)  # fmt: skip

    x, a = rng.standard_normal((4, 9)), rng.uniform(-0.9, 0.9, (4, 9))
    (y, z), pullback = scans.vjp(x, a, np.zeros_like(x), np.zeros_like(x))
    dy, dz = rng.standard_normal(x.shape), rng.standard_normal(x.shape)
    gx, ga = pullback(dy, dz)
    X, A = torch.tensor(x, requires_grad=True), torch.tensor(a, requires_grad=True)
    Z = _sequential(lambda p, q: (p[0] * q[0], p[1] * q[0] + q[1]), [A, 2.0 * X], 1, True)[1]
    loss = (torch.cumsum(torch.sin(X), 1) * torch.tensor(dy)).sum() + (Z * torch.tensor(dz)).sum()
    want = torch.autograd.grad(loss, (X, A))
    np.testing.assert_allclose(z, Z.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx, want[0].numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ga, want[1].numpy(), rtol=1e-10, atol=1e-12)


def test_a_scan_inside_a_reduction_over_another_axis(pypto_executor, rng):
    """``sum over rows of (c[r] + cumsum along columns)``: the scan varies along the reduced rows too, so its
    temporary is over both axes (it was over the columns only, and lowering failed on the row axis)."""
    R, C = pt.dims("R C")

    @pt.kernel(executor=pypto_executor)
    def summed(c: pt.Tensor[pt.float64, (R,)], a: pt.Tensor[pt.float64, (R, C)], out: pt.Tensor[pt.float64, (C,)]):
        r, j = pt.axis(0), pt.axis(1)
        out[j] = pt.reduce_sum(c[r] + pt.cumsum(a[r, j], axis=j), axis=r)

    a, c = rng.standard_normal((5, 9)), rng.standard_normal(5)
    out = np.zeros(9)
    summed(c, a, out)
    np.testing.assert_allclose(out, (c[:, None] + np.cumsum(a, 1)).sum(0), rtol=1e-12)
