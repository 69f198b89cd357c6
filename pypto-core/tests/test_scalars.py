"""Numbers passed to ``@pt.jit`` functions are runtime arguments: one program for every value, weakly typed,
usable as indices and window starts; where the trace needs a value, the program is specific to it."""

import numpy as np
import pytest

import pypto as pt


def _jit(fn, executor, **kw):
    return pt.jit(fn, executor=executor, **kw)


def test_a_new_value_runs_the_same_program(pypto_executor, rng):
    x = rng.standard_normal(16).astype(np.float32)
    step = _jit(lambda x, lr, momentum: x - lr * x * momentum, pypto_executor)
    for lr, m in ((0.1, 0.9), (0.5, 0.0), (2.0, -1.5)):
        got = step(x, lr, m)
        assert got.dtype == np.float32  # the Python numbers are weak: x's type
        np.testing.assert_allclose(got, x - np.float32(lr) * x * np.float32(m), rtol=1e-6)
    assert len(step._cache) == 1


def test_weak_and_numpy_scalars_follow_numpy_types(pypto_executor):
    x = np.arange(4, dtype=np.float32)
    f = _jit(lambda x, s: x * s, pypto_executor)
    assert f(x, 3).dtype == np.float32  # a Python int beside float32
    assert f(x, np.float64(0.5)).dtype == np.float64  # a NumPy scalar keeps its dtype (NumPy 2's rule)
    np.testing.assert_allclose(f(x, np.float64(0.1)), x.astype(np.float64) * 0.1, rtol=1e-15)
    g = _jit(lambda x, a: np.exp(a) * x + a, pypto_executor)  # a number alone keeps float64, then converts
    np.testing.assert_allclose(g(x, 1.5), np.exp(1.5) * x + np.float32(1.5), rtol=1e-6)


def test_runtime_index_and_window(pypto_executor):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)

    def f(x, t):
        return x[t] * 2, x[:, t : t + 3].sum(axis=1)

    g = _jit(f, pypto_executor)
    for t in range(4):
        a, b = g(x, t)
        np.testing.assert_array_equal(a, x[t] * 2)
        np.testing.assert_array_equal(b, x[:, t : t + 3].sum(axis=1))
    assert len(g._cache) == 1
    with pytest.raises(pt.IndexError, match="out of bounds"):
        g(x, 4)  # the window t:t + 3 past the end (NumPy would shorten it)
    with pytest.raises(pt.IndexError, match="out of bounds"):
        g(x, -1)


def test_several_runtime_indices_keep_numpys_axis_order(pypto_executor):
    """Runtime integers and windows together, with slices and '...' between them: each is taken along its own
    axis, as NumPy's basic indexing places it (x[t, :, s:s + 4] has shape (n1, 4), not an advanced index's
    (4, n1)); one program for every value."""
    x = np.arange(3 * 5 * 10, dtype=np.float64).reshape(3, 5, 10)
    cases = [
        (lambda a, t, s: a[t, :, s : s + 4], lambda a, t, s: a[t, :, s : s + 4]),
        (lambda a, t, s: a[t : t + 2, s], lambda a, t, s: a[t : t + 2, s]),
        (lambda a, t, s: a[t : t + 2, 1:4, s : s + 3], lambda a, t, s: a[t : t + 2, 1:4, s : s + 3]),
        (lambda a, t, s: a[..., s : s + 2] * a[t, None, 0, s], lambda a, t, s: a[..., s : s + 2] * a[t, None, 0, s]),
    ]
    for fn, want in cases:
        g = _jit(fn, pypto_executor)
        for t, s in ((0, 0), (1, 4), (1, 2)):
            np.testing.assert_array_equal(g(x, t, s), want(x, t, s))
        assert len(g._cache) == 1
    with pytest.raises(pt.IndexError, match="out of bounds"):
        _jit(cases[0][0], pypto_executor)(x, 0, 7)  # the window s:s + 4 past the end


def test_updates_at_runtime_positions(pypto_executor):
    """x.at[t].set(v), x[t, s:s + 4] = v and x[:, s:s + 3] += v with runtime t and s: a select at the positions
    found at the call (bounds-checked), one program for every value; the caller's array is not changed."""
    x = np.arange(60.0).reshape(6, 10)

    def step(u, t, s):
        u = u.at[t].multiply(0.5)
        u[t, s : s + 4] = np.arange(4.0)
        u[:, s : s + 3] += 1.0
        return u

    g = _jit(step, pypto_executor)
    for t, s in ((0, 0), (5, 6), (-2, 3)):
        want = x.copy()
        want[t] *= 0.5
        want[t, s : s + 4] = np.arange(4.0)
        want[:, s : s + 3] += 1.0
        np.testing.assert_array_equal(g(x, t, s), want)
    assert len(g._cache) == 1 and x[0, 0] == 0.0
    with pytest.raises(pt.IndexError, match="out of bounds"):
        g(x, 6, 0)  # the row
    with pytest.raises(pt.IndexError, match="out of bounds"):
        g(x, 0, 7)  # the window s:s + 4


def test_a_value_the_trace_needs_makes_the_program_specific(pypto_executor, rng):
    x = rng.standard_normal(8).astype(np.float32)

    def f(x, n, k):
        for _ in range(n):
            x = x * 0.5
        if k > 2:
            return x.reshape(2, -1).sum(1) * k
        return x[:2] * k

    g = _jit(f, pypto_executor)
    for n, k in ((1, 3.0), (2, 3.0), (2, 1.0), (1, 3.0)):
        np.testing.assert_allclose(g(x, n, k), f(x, n, k), rtol=1e-6)
    assert g._static == {1, 2}  # both were needed: one program per (n, k)
    assert len(g._cache) == 3


def test_static_argnames(pypto_executor):
    x = np.arange(6, dtype=np.float32)
    g = _jit(lambda x, s: x * s, pypto_executor, static_argnames="s")
    g(x, 1.0), g(x, 2.0)
    assert len(g._cache) == 2
    with pytest.raises(pt.ArgumentError, match="did you mean 'scale'"):
        pt.jit(lambda x, scale: x * scale, static_argnames=("scal",))


def test_integer_power_specialises_on_the_exponent(pypto_executor):
    x = np.linspace(-2, 2, 9).astype(np.float32)
    p = _jit(lambda x, k: x**k, pypto_executor)
    for k in (2, 3, -1):
        np.testing.assert_allclose(p(x + 3, k), (x + 3) ** np.float32(k), rtol=1e-6)


def test_runtime_number_with_dask_arrays():
    da = pytest.importorskip("dask.array")
    x = np.arange(10, dtype=np.float32)
    f = pt.jit(lambda x, s: x * s + 1)
    got = f(da.from_array(x, chunks=4), 0.5).compute()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, x * 0.5 + 1)
