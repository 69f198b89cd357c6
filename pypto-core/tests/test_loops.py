"""Sequential loops in kernels: ``for t in pt.range(n)`` with variables carried from step to step, and ``while`` on
a per-element condition, compared with the same loops run by Python/NumPy on the same inputs."""

import numpy as np
import pytest

import pypto as pt

R, T, N, H, W = pt.dims("R T N H W")


def _iir(x, a, h0):
    """``h = a * h + x[:, t]`` along the rows' steps, in NumPy: every step's value and the last."""
    h = h0.copy()
    out = np.zeros_like(x)
    for t in range(x.shape[1]):
        h = a * h + x[:, t]
        out[:, t] = h
    return out, h


def test_recurrence_per_row_stores_each_step_and_the_last(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def iir(x: pt.Tensor[pt.float32, (R, T)], a: pt.Tensor[pt.float32, (R,)], h0: pt.Tensor[pt.float32, (R,)],
            y: pt.Tensor[pt.float32, (R, T)], last: pt.Tensor[pt.float32, (R,)]):  # fmt: skip
        r = pt.axis(0)
        h = h0[r]
        for t in pt.range(T):
            h = a[r] * h + x[r, t]
            y[r, t] = h
        last[r] = h

    for rows, steps in [(5, 17), (3, 1), (4, 0), (33, 300)]:
        x = rng.standard_normal((rows, steps)).astype(np.float32)
        a = rng.uniform(-0.95, 0.95, rows).astype(np.float32)
        h0 = rng.standard_normal(rows).astype(np.float32)
        y, last = np.zeros_like(x), np.full(rows, np.nan, np.float32)
        iir(x, a, h0, y, last)
        want, want_last = _iir(x, a, h0)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(last, want_last, rtol=1e-5, atol=1e-5)  # no step: the value before the loop
    assert "loop(along t, from" in iir.ir("traced") and "reduce_last" in iir.ir("traced")
    lowered = iir.ir("lower")  # one nest runs the steps, storing y at each and last after them
    assert lowered.count("for t in") == 1 and "the loop also stores y[r, t] at each step" in lowered


def test_rnn_cell_several_variables_a_branch_and_the_step_number(pypto_executor, rng):
    """Two carried variables updated together (each step reads both old values), an if on a traced value inside
    the body (a select), the loop variable used as a number, and a loop from a nonzero start."""

    @pt.kernel(executor=pypto_executor)
    def cell(x: pt.Tensor[pt.float64, (R, T)], w: pt.Tensor[pt.float64, (R,)], h_out: pt.Tensor[pt.float64, (R,)],
             c_out: pt.Tensor[pt.float64, (R,)], peak: pt.Tensor[pt.float64, (R, T)]):  # fmt: skip
        r = pt.axis(0)
        h, c, best = 0.0, 1.0, -np.inf
        for t in pt.range(1, T):
            h, c = pt.tanh(w[r] * h + x[r, t] - 0.1 * c), 0.5 * c + h * x[r, t - 1]
            if x[r, t] > best:
                best = x[r, t] + 0.25 * t
            peak[r, t] = best
        h_out[r], c_out[r] = h, c

    x = rng.standard_normal((6, 40))
    w = rng.uniform(-1.0, 1.0, 6)
    h_out, c_out, peak = np.zeros(6), np.zeros(6), np.zeros((6, 40))
    cell(x, w, h_out, c_out, peak)
    h, c, best = np.zeros(6), np.ones(6), np.full(6, -np.inf)
    want_peak = np.zeros((6, 40))
    for t in range(1, 40):
        h, c = np.tanh(w * h + x[:, t] - 0.1 * c), 0.5 * c + h * x[:, t - 1]
        best = np.where(x[:, t] > best, x[:, t] + 0.25 * t, best)
        want_peak[:, t] = best
    np.testing.assert_allclose(h_out, h, rtol=1e-12)
    np.testing.assert_allclose(c_out, c, rtol=1e-12)
    np.testing.assert_allclose(peak, want_peak, rtol=1e-12)


def test_types_of_carried_variables(pypto_executor):
    """A Python number before the loop takes the type of what the body computes (as in arithmetic); a counter of
    Python ints stays an integer."""

    @pt.kernel(executor=pypto_executor)
    def count(x: pt.Tensor[pt.float64, (R, T)], total: pt.Tensor[pt.float64, (R,)], n: pt.Tensor[pt.int64, (R,)]):
        r = pt.axis(0)
        s, k = 0, 0
        for t in pt.range(T):
            s = s + x[r, t]
            k = k + 1
        total[r], n[r] = s, k

    x = np.arange(12.0).reshape(3, 4) / 3.0
    total, n = np.zeros(3), np.zeros(3, np.int64)
    count(x, total, n)
    np.testing.assert_array_equal(total, sum(x[:, t] for t in range(4)))  # summed in order, in float64
    np.testing.assert_array_equal(n, [4, 4, 4])
    assert "float64" in count.ir("infer_types").split("total[r]")[0]


def _mandelbrot(cr, ci, limit):
    out = np.zeros((len(ci), len(cr)), np.int32)
    for a, y in enumerate(ci):
        for b, x in enumerate(cr):
            zr = zi = 0.0
            n = 0
            while zr * zr + zi * zi <= 4.0 and n < limit:
                zr, zi = zr * zr - zi * zi + x, 2.0 * zr * zi + y
                n += 1
            out[a, b] = n
    return out


LIMIT = 40


def test_while_on_a_per_element_condition_mandelbrot(pypto_executor):
    @pt.kernel(executor=pypto_executor)
    def mandelbrot(cr: pt.Tensor[pt.float64, (W,)], ci: pt.Tensor[pt.float64, (H,)], out: pt.Tensor[pt.int32, (H, W)]):
        i, j = pt.axis(0), pt.axis(1)
        zr, zi, n = 0.0, 0.0, 0
        while zr * zr + zi * zi <= 4.0 and n < LIMIT:
            zr, zi = zr * zr - zi * zi + cr[j], 2.0 * zr * zi + ci[i]
            n += 1
        out[i, j] = n

    for h, w in ((31, 47), (3, 16), (2, 1)):  # (on the C backends a row's points run 16 at a time in SIMD lanes:
        cr, ci = np.linspace(-2.0, 0.6, w), np.linspace(-1.2, 1.2, h)  # full blocks, a short last one, one point)
        out = np.zeros((h, w), np.int32)
        mandelbrot(cr, ci, out)
        np.testing.assert_array_equal(out, _mandelbrot(cr, ci, LIMIT))
    want = _mandelbrot(np.linspace(-2.0, 0.6, 47), np.linspace(-1.2, 1.2, 31), LIMIT)
    assert 0 < (want == LIMIT).mean() < 1  # both kinds of points: escaped and bounded
    assert "if " in mandelbrot.ir("lower")  # a step is skipped once the element's condition fails
    if pypto_executor in ("openmp", "tbb"):  # the while_lanes pass: the lanes' states in local arrays
        assert "local alloc" in mandelbrot.ir("while_lanes", backend=pypto_executor)


def test_while_newton_iteration_with_bound_written_either_way(pypto_executor, rng):
    """Newton's iteration for sqrt until converged, bounded by ``max_iter > k`` (the limit on the left), from a
    start that is a traced value; elements converge after different numbers of steps."""

    @pt.kernel(executor=pypto_executor)
    def newton(a: pt.Tensor[pt.float64, (N,)], root: pt.Tensor[pt.float64, (N,)], steps: pt.Tensor[pt.int32, (N,)]):
        i = pt.axis(0)
        x = pt.maximum(a[i], 1.0)
        k = 0
        while pt.abs(x * x - a[i]) > 1e-12 * a[i] and 30 > k:
            x = 0.5 * (x + a[i] / x)
            k += 1
        root[i], steps[i] = x, k

    a = np.concatenate([[1.0, 4.0], rng.uniform(0.01, 1e6, 50)])
    root, steps = np.zeros_like(a), np.zeros(a.shape, np.int32)
    newton(a, root, steps)
    want_root, want_steps = a.copy(), np.zeros(a.shape, np.int32)
    for q, v in enumerate(a):
        x, k = max(v, 1.0), 0
        while abs(x * x - v) > 1e-12 * v and 30 > k:
            x, k = 0.5 * (x + v / x), k + 1
        want_root[q], want_steps[q] = x, k
    np.testing.assert_allclose(root, want_root, rtol=1e-14)
    np.testing.assert_array_equal(steps, want_steps)
    assert steps.min() == 0 and steps.max() > 5
    np.testing.assert_allclose(root, np.sqrt(a), rtol=1e-11)


def test_store_at_every_step_into_one_element_keeps_the_last(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def last_value(x: pt.Tensor[pt.float32, (R, T)], y: pt.Tensor[pt.float32, (R,)]):
        r = pt.axis(0)
        s = 0.0
        for t in pt.range(T):
            s = s + x[r, t]
            y[r] = s * 2.0  # stored at every step: the last step's value stays (none when there is no step)

    x = rng.standard_normal((4, 9)).astype(np.float32)
    y = np.zeros(4, np.float32)
    last_value(x, y)
    np.testing.assert_allclose(y, 2.0 * x.sum(axis=1), rtol=1e-5)
    y = np.full(4, 3.0, np.float32)
    last_value(np.zeros((4, 0), np.float32), y)
    np.testing.assert_array_equal(y, 3.0)


def test_gradient_of_a_recurrence_through_kernel_vjp(pypto_executor, rng):
    """kernel.vjp of a loop of two coupled variables (one through tanh) that stores a value at every step and its
    variables after the last one, against torch's autograd of the same loop: every input's cotangent, for several
    numbers of steps (one, none)."""
    torch = pytest.importorskip("torch")

    @pt.kernel(executor=pypto_executor)
    def cell(x: pt.Tensor[pt.float64, (R, T)], w: pt.Tensor[pt.float64, (R,)], h0: pt.Tensor[pt.float64, (R,)],
             y: pt.Tensor[pt.float64, (R, T)], last: pt.Tensor[pt.float64, (R,)]):  # fmt: skip
        r = pt.axis(0)
        h, c = h0[r], 1.0
        for t in pt.range(T):
            h, c = pt.tanh(w[r] * h + x[r, t] - 0.1 * c), 0.5 * c + h * x[r, t]
            y[r, t] = h * h
        last[r] = h + 2.0 * c

    for rows, steps in [(5, 13), (3, 1), (4, 0)]:
        x, w, h0 = rng.standard_normal((rows, steps)), rng.uniform(-1.5, 1.5, rows), rng.standard_normal(rows)
        (y, last), pullback = cell.vjp(x, w, h0, np.zeros_like(x), np.zeros(rows))
        dy, dlast = rng.standard_normal(y.shape), rng.standard_normal(rows)
        dx, dw, dh0 = pullback(dy, dlast)
        X, Wt, H0 = (torch.tensor(v, requires_grad=True) for v in (x, w, h0))
        h, c, ys = H0, torch.ones(rows, dtype=torch.float64), []
        for t in range(steps):
            h, c = torch.tanh(Wt * h + X[:, t] - 0.1 * c), 0.5 * c + h * X[:, t]
            ys.append(h * h)
        Y = torch.stack(ys, 1) if ys else torch.zeros((rows, 0), dtype=torch.float64)
        loss = (Y * torch.tensor(dy)).sum() + ((h + 2.0 * c) * torch.tensor(dlast)).sum()
        want = torch.autograd.grad(loss, (X, Wt, H0), allow_unused=True, materialize_grads=True)
        np.testing.assert_allclose(y, Y.detach().numpy(), rtol=1e-12)
        for got, ref in zip((dx, dw, dh0), want):
            np.testing.assert_allclose(got, ref.numpy(), rtol=1e-10, atol=1e-12)


def test_gradient_through_a_while_loop(pypto_executor, rng):
    """The derivative of Newton's iteration for the square root (a while loop on a per-element condition: each
    element stops after its own number of steps) against torch's autograd of the same loop, and against the
    derivative of the square root it converges to; float32 loop of one variable against torch's too."""
    torch = pytest.importorskip("torch")

    @pt.kernel(executor=pypto_executor)
    def newton(a: pt.Tensor[pt.float64, (N,)], root: pt.Tensor[pt.float64, (N,)]):
        i = pt.axis(0)
        x = pt.maximum(a[i], 1.0)
        k = 0
        while pt.abs(x * x - a[i]) > 1e-12 * a[i] and k < 40:
            x = 0.5 * (x + a[i] / x)
            k += 1
        root[i] = x

    a = rng.uniform(0.05, 50.0, 37)
    root, pullback = newton.vjp(a, np.zeros_like(a))
    g = rng.standard_normal(a.shape)
    (da,) = pullback(g)
    A = torch.tensor(a, requires_grad=True)
    x, k = torch.clamp(A, min=1.0), 0
    while k < 40:
        x = torch.where(torch.abs(x * x - A) > 1e-12 * A, 0.5 * (x + A / x), x)
        k += 1
    (want,) = torch.autograd.grad((x * torch.tensor(g)).sum(), (A,))
    np.testing.assert_allclose(root, np.sqrt(a), rtol=1e-12)
    np.testing.assert_allclose(da, want.numpy(), rtol=1e-9)
    np.testing.assert_allclose(da, g * 0.5 / np.sqrt(a), rtol=1e-6)  # the fixed point's derivative

    @pt.kernel(executor=pypto_executor)
    def decay(x: pt.Tensor[pt.float32, (R, T)], a: pt.Tensor[pt.float32, (R,)], y: pt.Tensor[pt.float32, (R, T)]):
        r = pt.axis(0)
        s = 0.0
        for t in pt.range(T):
            s = a[r] * s + pt.exp(-x[r, t])
            y[r, t] = s

    x, a = rng.standard_normal((6, 50)).astype(np.float32), rng.uniform(0.5, 0.99, 6).astype(np.float32)
    y, pullback = decay.vjp(x, a, np.zeros_like(x))
    dy = rng.standard_normal(x.shape).astype(np.float32)
    dx, da = pullback(dy)
    X, At = torch.tensor(x, requires_grad=True), torch.tensor(a, requires_grad=True)
    s, ys = torch.zeros(6), []
    for t in range(50):
        s = At * s + torch.exp(-X[:, t])
        ys.append(s)
    want = torch.autograd.grad((torch.stack(ys, 1) * torch.tensor(dy)).sum(), (X, At))
    assert dx.dtype == np.float32 and da.dtype == np.float32
    np.testing.assert_allclose(dx, want[0].numpy(), rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(da, want[1].numpy(), rtol=2e-4, atol=2e-3)


def test_python_loops_stay_python():
    """A for over anything else than pt.range is Python's loop (unrolled while tracing); pt.range of ints outside a
    kernel is Python's range; a concrete while condition runs Python's while."""

    @pt.jit
    def powers(x):
        acc = x
        for _ in pt.range(3):
            acc = acc * x
        k = 0
        while k < 2:
            acc = acc + 1.0
            k += 1
        return acc

    x = np.arange(4.0)
    np.testing.assert_allclose(powers(x), x**4 + 2.0)
    assert list(pt.range(2, 5)) == [2, 3, 4]


def test_what_a_sequential_loop_cannot_do_is_a_typed_error():
    @pt.kernel(executor="reference")
    def unbounded(x: pt.Tensor[pt.float64, (N,)], y: pt.Tensor[pt.float64, (N,)]):
        i = pt.axis(0)
        v = x[i]
        while v > 1.0:
            v = v / 2.0
        y[i] = v

    with pytest.raises(pt.TracingError, match="needs a bound on its steps") as e:
        unbounded.ir()
    assert "n < max_iter" in e.value.hint
    assert e.value.loc.lineno == unbounded.fn.__code__.co_firstlineno + 4

    @pt.kernel(executor="reference")
    def stores_in_while(x: pt.Tensor[pt.float64, (N,)], y: pt.Tensor[pt.float64, (N,)]):
        i = pt.axis(0)
        v, n = x[i], 0
        while v > 1.0 and n < 10:
            v, n = v / 2.0, n + 1
            y[i] = v

    with pytest.raises(pt.TracingError, match="a store inside a 'while' loop"):
        stores_in_while.ir()

    @pt.kernel(executor="reference")
    def data_bound(x: pt.Tensor[pt.float64, (N,)], k: int, y: pt.Tensor[pt.float64, (N,)]):
        i = pt.axis(0)
        v = x[i]
        for _ in pt.range(k):
            v = v * 2.0
        y[i] = v

    with pytest.raises(pt.TracingError, match="pt.range: stop must be a Python int or a size"):
        data_bound.ir()

    @pt.kernel(executor="reference")
    def breaks_midway(x: pt.Tensor[pt.float64, (R, T)], y: pt.Tensor[pt.float64, (R,)]):
        r = pt.axis(0)
        v = 0.0
        for t in pt.range(T):
            if v > 3.0:
                if v > 4.0:
                    break
                v = v - 1.0
            v = v + x[r, t]
        y[r] = v

    with pytest.raises(pt.TracingError, match="may break or continue only at the end of an if.s branch"):
        breaks_midway.ir()

    @pt.kernel(executor="reference")
    def reduces_state(x: pt.Tensor[pt.float64, (R, T)], y: pt.Tensor[pt.float64, (R,)]):
        r, c = pt.axis(0), pt.axis(1)
        v = 0.0
        for _ in pt.range(3):
            v = pt.reduce_sum(x[r, c] * v, axis=c)
        y[r] = v

    with pytest.raises(pt.TracingError, match="carried value is read by reduce"):
        reduces_state.ir()

    @pt.kernel(executor="reference")
    def local_only(x: pt.Tensor[pt.float64, (R, T)], y: pt.Tensor[pt.float64, (R,)]):
        r = pt.axis(0)
        for t in pt.range(T):
            tmp = x[r, t]
        y[r] = tmp

    with pytest.raises(pt.TracingError, match="'tmp' has no value here: it is assigned only inside a sequential"):
        local_only.ir()

    with pytest.raises(pt.TracingError, match="takes .stop. or .start, stop."):
        pt.range(1, 2, 3)


def _python_first_over(x, limit):
    """The loop of test_break_and_continue_in_a_sequential_loop, in Python (float32 as the kernel computes)."""
    ys, lasts, counts = np.zeros_like(x), np.zeros(len(x), x.dtype), np.zeros(len(x), np.int32)
    for r in range(len(x)):
        h, n = x.dtype.type(0), 0
        for t in range(x.shape[1]):
            if x[r, t] < 0.1:
                continue
            h = x.dtype.type(h + x[r, t])
            ys[r, t] = h
            n += 1
            if h > limit:
                break
        lasts[r], counts[r] = h, n
    return ys, lasts, counts


def test_break_and_continue_in_a_sequential_loop(pypto_executor, rng):
    """``break`` and ``continue`` at the end of an if's branch: the AST pass carries a flag (a select per step,
    as the while loop's), so each row stops at its own step; stores made before the break are kept."""

    @pt.kernel(executor=pypto_executor)
    def first_over(x: pt.Tensor[pt.float32, (R, T)], limit: float, y: pt.Tensor[pt.float32, (R, T)],
                   last: pt.Tensor[pt.float32, (R,)], steps: pt.Tensor[pt.int32, (R,)]):  # fmt: skip
        r = pt.axis(0)
        h = 0.0
        n = 0
        for t in pt.range(T):
            if x[r, t] < 0.1:
                continue
            h = h + x[r, t]
            y[r, t] = h
            n = n + 1
            if h > limit:
                break
        last[r] = h
        steps[r] = n

    x = rng.random((6, 20)).astype(np.float32)
    y, last, steps = np.zeros_like(x), np.zeros(6, np.float32), np.zeros(6, np.int32)
    first_over(x, 2.5, y, last, steps)
    want = _python_first_over(x, 2.5)
    np.testing.assert_allclose(y, want[0], rtol=1e-6)
    np.testing.assert_allclose(last, want[1], rtol=1e-6)
    np.testing.assert_array_equal(steps, want[2])
    assert 0 < steps.min() and steps.max() < 20  # (the rows did stop early, at different steps)


def test_newton_iterations_stop_at_their_tolerance(pypto_executor):
    """The everyday iterative solver: a fixed number of iterations at most, ``break`` once converged; each element
    its own count, and the state after its last iteration."""

    @pt.kernel(executor=pypto_executor)
    def sqrt_newton(a: pt.Tensor[pt.float64, (N,)], root: pt.Tensor[pt.float64, (N,)],
                    iters: pt.Tensor[pt.int32, (N,)]):  # fmt: skip
        i = pt.axis(0)
        x = 1.0
        n = 0
        for _ in pt.range(60):
            dx = (x * x - a[i]) / (2.0 * x)
            x = x - dx
            n = n + 1
            if pt.abs(dx) < 1e-12 * x:
                break
        root[i] = x
        iters[i] = n

    a = np.array([2.0, 9.0, 1e6, 0.25, 1.0])
    root, iters = np.zeros(5), np.zeros(5, np.int32)
    sqrt_newton(a, root, iters)
    want = []
    for v in a:
        x, n = 1.0, 0
        for _ in range(60):
            dx = (x * x - v) / (2.0 * x)
            x, n = x - dx, n + 1
            if abs(dx) < 1e-12 * x:
                break
        want.append(n)
    np.testing.assert_allclose(root, np.sqrt(a), rtol=1e-15)
    assert iters.tolist() == want and iters[-1] == 1 and iters[2] > 10
    if pypto_executor in ("openmp", "tbb"):  # the points in SIMD lanes, blocks of them on the threads
        assert "local alloc" in sqrt_newton.ir("while_lanes", backend=pypto_executor)


def test_break_in_a_while_loop_and_in_a_jit_function(pypto_executor):
    @pt.kernel(executor=pypto_executor)
    def collatz(x: pt.Tensor[pt.int64, (N,)], steps: pt.Tensor[pt.int32, (N,)], peak: pt.Tensor[pt.int64, (N,)]):
        i = pt.axis(0)
        v = x[i]
        n = 0
        top = v
        while n < 500:
            if v == 1:
                break
            v = pt.where(v % 2 == 0, v // 2, 3 * v + 1)
            top = pt.maximum(top, v)
            n += 1
        steps[i] = n
        peak[i] = top

    x = np.arange(1, 50, dtype=np.int64)
    steps, peak = np.zeros(49, np.int32), np.zeros(49, np.int64)
    collatz(x, steps, peak)
    for v0, n_got, top_got in zip(x.tolist(), steps.tolist(), peak.tolist()):
        v, n, top = v0, 0, v0
        while n < 500 and v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            top, n = max(top, v), n + 1
        assert (n_got, top_got) == (n, top), v0

    @pt.jit(executor=pypto_executor)
    def capped(x):  # in @pt.jit, pt.range of ints unrolls: the break's flag selects the later steps' updates
        total = x * 0
        for _ in pt.range(6):
            total = total + x
            if total.sum() > 10:
                break
        return total

    np.testing.assert_allclose(capped(np.ones(3)), np.full(3, 4.0))
    np.testing.assert_allclose(capped(np.full(3, 0.1)), np.full(3, 0.6))


def test_gradient_through_a_loop_that_breaks(rng):
    @pt.kernel(executor="reference")
    def grow(x: pt.Tensor[pt.float64, (R, T)], a: pt.Tensor[pt.float64, (R,)], y: pt.Tensor[pt.float64, (R,)]):
        r = pt.axis(0)
        h = 0.0
        for t in pt.range(T):
            h = pt.tanh(a[r] * h + x[r, t])
            if h > 0.9:
                break
        y[r] = h

    x, a = rng.standard_normal((4, 12)), np.array([0.5, 1.5, -0.7, 2.0])
    y, pullback = grow.vjp(x, a, np.empty(4))
    dx, da = pullback(np.ones(4))
    eps = 1e-7
    for r in range(4):  # a finite difference in a[r] (the break's step does not move for so small a change)
        bumped = a.copy()
        bumped[r] += eps
        y2 = np.empty(4)
        grow(x, bumped, y2)
        np.testing.assert_allclose(da[r], (y2[r] - y[r]) / eps, rtol=1e-5, atol=1e-9)


def test_while_loops_of_an_inner_axis_run_in_simd_lanes(pypto_executor, rng):
    """The per-point while loops of an inner axis run a block of points at a time in SIMD lanes on the C backends
    (the ``while_lanes`` pass; the Mandelbrot test above checks escape counts): a float32 state halved to at most
    1, exact, each point its own number of steps, including the last block's, shorter than the lanes."""
    limit = 60

    @pt.kernel(executor=pypto_executor)
    def halving(x: pt.Tensor[pt.float32, (H, W)], v: pt.Tensor[pt.float32, (H, W)], n: pt.Tensor[pt.int32, (H, W)]):
        i, j = pt.axis(0), pt.axis(1)
        value, k = x[i, j], 0
        while pt.abs(value) > 1.0 and k < limit:
            value = value * 0.5
            k += 1
        v[i, j] = value
        n[i, j] = k

    for h, w in ((7, 37), (3, 16), (2, 1)):
        x = (rng.standard_normal((h, w)) * 1e6).astype(np.float32)
        x[0, 0] = np.inf
        v, k = np.zeros_like(x), np.zeros((h, w), np.int32)
        halving(x, v, k)
        want_v, want_k = x.copy(), np.zeros((h, w), np.int32)
        for _ in range(limit):
            go = (np.abs(want_v) > 1.0) & (want_k < limit)
            want_v, want_k = np.where(go, want_v * np.float32(0.5), want_v), want_k + go
        np.testing.assert_array_equal(v, want_v)
        np.testing.assert_array_equal(k, want_k)
    if pypto_executor in ("openmp", "tbb"):
        assert "local alloc" in halving.ir("while_lanes", backend=pypto_executor)
