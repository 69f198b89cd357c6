"""Control flow on traced values: ``if``/``elif``/``else``, ``and``/``or``/``not`` and ``x if c else y`` in kernels
and jit functions, compared with NumPy (``np.where`` of the same branches) and, for gradients, torch autograd."""

import numpy as np
import pytest

import pypto as pt

N, M = pt.dims("N M")


def _piecewise(x):
    """NumPy's value of the branches the kernels below write."""
    return np.where((x > 1.0) & ~(x > 2.0), x * 3.0, np.where((x < -1.0) | (x == 0.0), -x, x + 100.0))


def test_if_elif_else_in_a_kernel_is_the_select_of_its_branches(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def piecewise(x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (N,)], z: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        v = x[i]
        if v > 1.0 and not v > 2.0:
            w = v * 3.0
        elif v < -1.0 or v == 0.0:
            w = -v
        else:
            w = v + 100.0
        y[i] = w
        z[i] = w if i < 3 else 7.0  # an axis in a condition

    @pt.kernel(executor=pypto_executor)
    def selects(x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        v = x[i]
        y[i] = pt.where((v > 1.0) & (v <= 2.0), v * 3.0, pt.where((v < -1.0) | (v == 0.0), -v, v + 100.0))

    x = np.concatenate([rng.uniform(-3, 3, 61), [0.0, 1.0, 2.0, -1.0]]).astype(np.float32)
    y, z, w = np.empty_like(x), np.empty_like(x), np.empty_like(x)
    piecewise(x, y, z)
    selects(x, w)
    np.testing.assert_array_equal(y, w)  # the same program as the pt.where form
    np.testing.assert_array_equal(y, _piecewise(x))
    np.testing.assert_array_equal(z, np.where(np.arange(x.size) < 3, _piecewise(x), 7.0))
    assert "where(" in piecewise.ir("traced")


def test_nested_ifs_variables_kept_and_numbers_in_branches(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def clamp_count(x: pt.Tensor[pt.float64, (M, N)], lo: float, y: pt.Tensor[pt.float64, (M, N)],
                    n: pt.Tensor[pt.int32, (M, N)]):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        v = x[r, c]
        k = 0  # a Python number before the if: selected against the branches' values
        if v < lo:
            v = lo
            k = 1
        else:
            if v > 1.0:
                if c == 0:
                    k = 3
                else:
                    k = 2
                v = 1.0
        y[r, c] = v
        n[r, c] = k

    x = rng.uniform(-2, 2, (5, 9))
    y, n = np.empty_like(x), np.empty(x.shape, np.int32)
    clamp_count(x, -0.5, y, n)
    np.testing.assert_array_equal(y, np.clip(x, -0.5, 1.0))
    want = np.where(x < -0.5, 1, np.where(x > 1.0, np.where(np.arange(9) == 0, 3, 2), 0))
    np.testing.assert_array_equal(n, want)


def test_concrete_conditions_keep_python_semantics():
    """A condition on a Python value (a closure, a scalar argument's shape, a flag) runs one branch, as Python
    does: the other is not traced at all, and ``and``/``or`` short-circuit."""
    traced = []
    use_exp = False

    def note(v):
        traced.append(v)
        return v

    @pt.kernel(executor="reference")
    def act(x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        if use_exp and note("exp"):
            y[i] = pt.exp(x[i])  # a store in a branch: fine when the condition is concrete
        elif not use_exp or note("never"):
            y[i] = note(x[i]) * 2.0

    x = np.arange(4, dtype=np.float32)
    y = np.empty_like(x)
    act(x, y)
    np.testing.assert_array_equal(y, x * 2.0)
    assert len(traced) == 1 and not isinstance(traced[0], str)  # neither "exp" nor "never" was evaluated


def test_if_in_jit_functions_and_their_gradients_match_torch(pypto_executor, rng):
    torch = pytest.importorskip("torch")

    def f(x, w):
        h = x @ w
        if h.mean() > 0.0:  # a traced scalar: both branches traced, selected
            y = pt.tanh(h) * 2.0
        else:
            y = pt.sin(h)
        return (pt.where(h > 0.5, y, h * h) if x.shape[0] > 2 else y).sum()  # a concrete test on a shape

    x, w = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    for sign in (1.0, -1.0):
        value = pt.jit(f, executor=pypto_executor)(x, w * sign)
        gx, gw = pt.jit(pt.grad(f, argnums=(0, 1)), executor=pypto_executor)(x, w * sign)
        tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w * sign, requires_grad=True)
        h = tx @ tw
        y = torch.where(h.mean() > 0, torch.tanh(h) * 2.0, torch.sin(h))
        want = torch.where(h > 0.5, y, h * h).sum()
        want.backward()
        np.testing.assert_allclose(value, want.item(), rtol=1e-12)
        np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_stores_in_a_traced_branch_write_only_where_it_is_taken(pypto_executor, rng):
    """A store inside a traced ``if`` keeps the element's value where the branch is not taken (it becomes
    ``y[i] = where(c, v, y[i])``); a scatter-add in a branch adds only where it is taken."""

    @pt.kernel(executor=pypto_executor)
    def branchy(x: pt.Tensor[pt.float64, (N,)], bins: pt.Tensor[pt.int32, (N,)], y: pt.Tensor[pt.float64, (N,)],
                z: pt.Tensor[pt.float64, (N,)], counts: pt.Tensor[pt.int64, (M,)]):  # fmt: skip
        i = pt.axis(0)
        if x[i] > 0.5:
            y[i] = x[i] * 2.0
            counts[bins[i]] += 1
        elif x[i] < -0.5:
            z[i] = z[i] * 10.0  # reads the element's old value
        else:
            y[i] = 0.0
            z[i] = -1.0

    x, bins = rng.uniform(-1, 1, 40), rng.integers(0, 5, 40).astype(np.int32)
    y0, z0 = rng.standard_normal(40), rng.standard_normal(40)
    y, z, counts = y0.copy(), z0.copy(), np.zeros(5, np.int64)
    branchy(x, bins, y, z, counts)
    hi, lo = x > 0.5, x < -0.5
    np.testing.assert_array_equal(y, np.where(hi, x * 2.0, np.where(lo, y0, 0.0)))
    np.testing.assert_array_equal(z, np.where(hi, z0, np.where(lo, z0 * 10.0, -1.0)))
    np.testing.assert_array_equal(counts, np.bincount(bins[hi], minlength=5))


def test_what_a_traced_if_cannot_do_is_a_typed_error():
    @pt.kernel
    def max_in_branch(x: pt.Tensor[pt.float32, (N,)], b: pt.Tensor[pt.int32, (N,)], y: pt.Tensor[pt.float32, (M,)]):
        i = pt.axis(0)
        if x[i] > 0.0:
            pt.scatter_max(y[b[i]], x[i])

    with pytest.raises(pt.TracingError, match="pt.scatter_max inside an 'if' on a traced value") as e:
        max_in_branch.ir()
    assert e.value.loc.lineno == max_in_branch.fn.__code__.co_firstlineno + 4
    assert "pt.where" in e.value.hint

    @pt.kernel
    def one_branch(x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        if x[i] > 0.0:
            v = x[i]
        y[i] = v

    with pytest.raises(pt.TracingError, match="'v' has no value here: it is assigned in only one branch") as e:
        one_branch.ir()
    assert "give v a value before the if" in e.value.hint

    @pt.kernel(executor="reference")
    def loop_in_branch(x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        acc = 0.0
        if x[i] > 0.0:
            for k in range(3):  # k: assigned in one branch only, never used after the if: fine
                acc = acc + x[i] * k
        y[i] = acc

    x = np.array([1.0, -1.0, 2.0], np.float32)
    y = np.empty_like(x)
    loop_in_branch(x, y)
    np.testing.assert_array_equal(y, np.where(x > 0, x * 3.0, 0.0))

    def early_return(x):
        if x.sum() > 0.0:
            return x
        return -x

    with pytest.raises(pt.TracingError, match="whose branch returns") as e:
        pt.jit(early_return)(np.ones(3))
    assert e.value.loc.lineno == early_return.__code__.co_firstlineno + 1

    def differs(x):
        if x.sum() > 0.0:
            shape = "a"
        else:
            shape = "b"
        return x if shape == "a" else x

    with pytest.raises(pt.TracingError, match="variable 'shape' differs between the branches"):
        pt.jit(differs)(np.ones(3))

    def loop(x):
        while x.sum() > 0.0:  # while on a traced array: each element would need its own steps (a kernel's loop)
            x = x - 1.0
        return x

    with pytest.raises(pt.TracingError, match="a 'while' loop on a traced array") as e:
        pt.jit(loop)(np.ones(3))
    assert e.value.loc.lineno == loop.__code__.co_firstlineno + 1 and "@pt.kernel" in e.value.hint


def test_functions_without_source_and_closures(rng):
    """A function built by exec has no source to rewrite: concrete control flow works, traced is the old error.
    A rewritten function keeps its closure cells live (a later change is seen) and its defaults."""
    namespace: dict = {}
    exec("def f(x, k=2.0):\n    if k > 1.0:\n        return x * k\n    return x\n", {}, namespace)  # noqa: S102
    x = rng.standard_normal(5)
    np.testing.assert_allclose(pt.jit(namespace["f"])(x), x * 2.0)
    exec("def g(x):\n    if x.sum() > 0:\n        x = -x\n    return x\n", {}, namespace)  # noqa: S102
    with pytest.raises(pt.TracingError, match="truth value"):
        pt.jit(namespace["g"])(x)

    scale = 2.0

    def h(x, offset=1.0):
        if x.max() > 0.0:
            y = x * scale + offset
        else:
            y = x
        return y

    np.testing.assert_allclose(pt.jit(h)(np.abs(x)), np.abs(x) * 2.0 + 1.0)
    scale = 5.0  # noqa: F841 - read through the closure at the next trace
    np.testing.assert_allclose(pt.jit(h)(np.abs(x) + 1.0), (np.abs(x) + 1.0) * 5.0 + 1.0)


# -- argmax / argmin ------------------------------------------------------------------------------------------


def _with_ties_and_nans(rng, shape, dtype):
    x = rng.integers(-3, 4, shape).astype(dtype)  # few values: many ties
    if np.dtype(dtype).kind == "f":
        x.flat[rng.choice(x.size, x.size // 7, replace=False)] = np.nan
        x.flat[rng.choice(x.size, 3, replace=False)] = -0.0
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8, np.bool_])
def test_argmax_argmin_in_kernels_match_numpy(pypto_executor, rng, dtype):
    """First occurrence among ties, the first NaN where a row has one (NumPy's rules), every dtype."""
    dt = pt.dtypes.from_numpy(np.dtype(dtype))

    @pt.kernel(executor=pypto_executor)
    def arg(x: pt.Tensor[dt, (M, N)], hi: pt.Tensor[pt.int64, (M,)], lo: pt.Tensor[pt.int64, (N,)]):
        r, c = pt.axis(0), pt.axis(1)
        hi[r] = pt.argmax(x[r, c], axis=c)
        lo[c] = pt.argmin(x[r, c], axis=r)

    x = _with_ties_and_nans(rng, (9, 37), dtype) if dtype is not np.bool_ else rng.random((9, 37)) > 0.8
    hi, lo = np.empty(9, np.int64), np.empty(37, np.int64)
    arg(x, hi, lo)
    np.testing.assert_array_equal(hi, np.argmax(x, axis=1))
    np.testing.assert_array_equal(lo, np.argmin(x, axis=0))


def test_argmax_argmin_in_jit_match_numpy(pypto_executor, rng):
    x = _with_ties_and_nans(rng, (4, 6, 5), np.float32)
    x[1, :, 2] = np.nan  # a column all NaN
    f = pt.jit(lambda x: (pt.argmax(x, axis=1), x.argmin(axis=-1), x.argmax(), pt.argmin(x, axis=0, keepdims=True),
                          pt.argmax(x, keepdims=True), (x > 1).argmax(axis=2)), executor=pypto_executor)  # fmt: skip
    want = (np.argmax(x, axis=1), np.argmin(x, axis=-1), np.argmax(x), np.argmin(x, axis=0, keepdims=True),
            np.argmax(x, keepdims=True), (x > 1).argmax(axis=2))  # fmt: skip
    for got, w in zip(f(x), want):
        assert got.dtype == np.int64 and got.shape == np.shape(w)
        np.testing.assert_array_equal(got, w)
    ints = rng.integers(0, 3, 50).astype(np.int64)
    assert pt.jit(lambda v: v.argmin(), executor=pypto_executor)(ints) == np.argmin(ints)


def test_argmax_errors_are_typed():
    with pytest.raises(pt.ShapeError, match="empty sequence"):
        pt.jit(lambda x: pt.argmax(x, axis=1))(np.ones((3, 0)))
    with pytest.raises(pt.TracingError, match="axis must be an int or None"):
        pt.jit(lambda x: pt.argmax(x, axis=(0, 1)))(np.ones((3, 2)))
    with pytest.raises(pt.TracingError, match="complex"):
        pt.jit(lambda x: x.argmax())(np.ones(3, np.complex64))

    @pt.kernel
    def two_axes(x: pt.Tensor[pt.float32, (M, N)], i: pt.Tensor[pt.int64, (1,)]):
        r, c = pt.axis(0), pt.axis(1)
        i[0] = pt.argmax(x[r, c], axis=(r, c))

    with pytest.raises(pt.TracingError, match="one axis at a time"):
        two_axes.ir()

    @pt.kernel
    def rows(x: pt.Tensor[pt.float32, (M, N)], i: pt.Tensor[pt.int64, (M,)]):
        r, c = pt.axis(0), pt.axis(1)
        i[r] = pt.argmax(x[r, c], axis=c)

    out = np.full(3, 7, np.int64)
    with pytest.raises(pt.ShapeError, match="pt.argmax over axis 'c', which is empty"):
        rows(np.ones((3, 0), np.float32), out)  # NumPy raises too; nothing is written
    assert (out == 7).all()
    rows(np.ones((0, 4), np.float32), np.empty(0, np.int64))  # no rows: nothing to do
