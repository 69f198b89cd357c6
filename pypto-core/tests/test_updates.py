"""Functional updates in ``@pt.jit``: NumPy's ``x[idx] = v`` / ``x[idx] += v`` (rewritten into updates) and
JAX's ``x.at[idx].set/add/...``, compared with NumPy running the same code; gradients against torch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto as pt


def _jit(fn, executor):
    return pt.jit(fn, executor=executor)


def stencil(b):
    a = b * 1.0
    a[1:-1] = 0.5 * (b[:-2] + b[2:])
    a[0] = 7
    a[::3] += 1
    a[-1] -= a[0]
    return a


def jacobi(u, f):
    v = u * 1
    v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) + f[1:-1, 1:-1]
    v[:, 0] = u[:, 1]
    v[::2, 1::3] = u[::2, :-1:3] * 2
    v[::-1, -1] *= f[:, -1]
    v[..., 2] = v[..., 2:3].T[0]
    return v


def heat(u):
    for _ in range(5):
        un = u * 1
        u[1:-1] = un[1:-1] + 0.1 * (un[2:] - 2 * un[1:-1] + un[:-2])
    return u


@pytest.mark.parametrize("fn,shapes", [(stencil, [(11,)]), (jacobi, [(7, 9), (7, 9)]), (heat, [(13,)])],
                         ids=["stencil", "jacobi", "heat time loop"])  # fmt: skip
def test_numpy_inplace_code_runs_as_written(pypto_executor, rng, fn, shapes):
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    kept = [a.copy() for a in args]
    got = _jit(fn, pypto_executor)(*args)
    for a, k in zip(args, kept):  # the caller's arrays are not changed
        np.testing.assert_array_equal(a, k)
    np.testing.assert_allclose(got, fn(*[a.copy() for a in args]), rtol=1e-5, atol=1e-6)


def test_two_dimensional_interior_update_writes_one_buffer():
    """Nested cuts are stored straight into the result: the interior is computed where it is stored, in the
    buffer the boundary rows and columns are copied into (no inner block stored and copied again)."""
    u = np.zeros((7, 9), np.float32)
    text = pt.jit(jacobi).ir(u, u, stage="optimize_loops")
    interior = next(line.strip() for line in text.splitlines() if "(0.25 *" in line and "# " not in line)
    buf = interior.split("[")[0]
    assert interior.startswith(f"{buf}[(i") and f"{buf}[0, i" in text and f"{buf}[6, i" in text, interior


ELEMENT = st.one_of(
    st.integers(-6, 5),
    st.builds(
        slice, st.none() | st.integers(-7, 7), st.none() | st.integers(-7, 7), st.sampled_from([None, 1, 2, 3, -1, -2])
    ),  # fmt: skip
)


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    key=st.lists(ELEMENT, min_size=1, max_size=3),
    values=st.sampled_from(["array", "number", "broadcast"]),
    op=st.sampled_from(["=", "+=", "*=", "-="]),
)
def test_random_slicing_updates_match_numpy(shape, key, values, op):
    key = tuple(key[: len(shape)])
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    try:
        picked = x[key]
    except IndexError:
        return  # an index NumPy refuses (out of bounds): the same error is tested below
    if values == "array":
        v = np.linspace(-1, 1, picked.size, dtype=np.float32).reshape(picked.shape)
    elif values == "broadcast":  # along the last axis only (or one value for a single element)
        v = np.linspace(-1, 1, picked.shape[-1], dtype=np.float32) if picked.ndim else np.float32(0.5)
    else:
        v = np.float32(2.5)

    def f(x, v):
        y = x * 1
        if op == "=":
            y[key] = v
        elif op == "+=":
            y[key] += v
        elif op == "*=":
            y[key] *= v
        else:
            y[key] -= v
        return y

    got = pt.jit(f)(x, np.asarray(v))
    np.testing.assert_allclose(got, f(x.copy(), v), rtol=1e-6, atol=1e-6)


def test_at_methods_match_numpy(pypto_executor, rng):
    x = rng.standard_normal((6, 8)).astype(np.float32)
    y = rng.standard_normal(8).astype(np.float32)

    def f(x, y):
        a = x.at[2:5].add(y[:3, None]).at[::2].max(0.25).at[1].set(-1).at[:, -1].min(0.0)
        b = x.at[:, ::3].multiply(y[::3]).at[0, 0].divide(4.0).at[-1].subtract(1.0).at[3].power(2)
        return a, b, x.at[1:3].get()

    a, b, g = _jit(f, pypto_executor)(x, y)
    ra = x.copy()
    ra[2:5] += y[:3, None]
    ra[::2] = np.maximum(ra[::2], 0.25)
    ra[1] = -1
    ra[:, -1] = np.minimum(ra[:, -1], 0)
    rb = x.copy()
    rb[:, ::3] *= y[::3]
    rb[0, 0] /= 4
    rb[-1] -= 1
    rb[3] **= 2
    np.testing.assert_allclose(a, ra, rtol=1e-6)
    np.testing.assert_allclose(b, rb, rtol=1e-6)
    np.testing.assert_array_equal(g, x[1:3])


def test_update_result_is_used_inside_the_function(pypto_executor, rng):
    """A slice update is elementwise (no scatter): it can be read, reduced and updated again."""
    x = rng.standard_normal((5, 4)).astype(np.float32)

    def f(x):
        y = x.at[1:4].add(1.0)
        return np.exp(y).sum(axis=1) + y.at[0].set(0.0).max()

    r = x.copy()
    r[1:4] += 1
    r2 = r.copy()
    r2[0] = 0
    np.testing.assert_allclose(_jit(f, pypto_executor)(x), np.exp(r).sum(1) + r2.max(), rtol=1e-5)


def test_integer_index_updates_and_dtypes(pypto_executor):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)

    def f(x):
        y = x + 0
        y[0] = 7.9  # a float stored in an integer array is truncated (as NumPy's assignment)
        y[1, 2] += 0.5  # one element: NumPy converts the float result too
        y[2] //= 2
        return y

    got = _jit(f, pypto_executor)(x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, f(x.copy()))


def test_update_inside_traced_if_selects(pypto_executor, rng):
    x = rng.random(6).astype(np.float32)

    def f(x):
        y = x * 1
        if x.sum() > 3:
            y[0] = 100
        else:
            y[-1] = -100
        return y

    for scale in (1.0, 10.0):
        np.testing.assert_allclose(_jit(f, pypto_executor)(x * scale), f(x * scale), rtol=1e-6)


def test_numpy_array_made_inside_is_updated_with_traced_values(pypto_executor, rng):
    x = rng.standard_normal(8).astype(np.float32)

    def f(x):
        a = np.zeros(8, dtype=np.float32)
        a[1:] = x[:-1]
        a[0] += 3
        return a

    np.testing.assert_allclose(_jit(f, pypto_executor)(x), f(x), rtol=1e-6)


def test_plain_python_containers_keep_python_semantics():
    def f(x):
        parts = [None, None]
        parts[0] = x * 2
        parts[1] = x + 1
        d = {}
        d["k"] = parts[0]
        d["k"] += 1
        return parts[1] + d["k"]

    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(pt.jit(f)(x), f(x))


def test_gradient_through_updates_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal(8)

    def loss(x):
        y = x * x
        y[1:-1] = 0.5 * (x[:-2] + x[2:]) * y[1:-1]
        y[::2] *= 3.0
        y[3] = np.sin(x[3])
        return y.sum()

    xt = torch.tensor(x, requires_grad=True)
    y = xt * xt
    y = torch.cat([y[:1], 0.5 * (xt[:-2] + xt[2:]) * y[1:-1], y[-1:]])
    y = y * torch.tensor([3.0 if k % 2 == 0 else 1.0 for k in range(8)], dtype=torch.float64)
    y = torch.cat([y[:3], torch.sin(xt[3:4]), y[4:]])
    y.sum().backward()
    np.testing.assert_allclose(pt.grad(loss)(x), xt.grad.numpy(), rtol=1e-10)


def test_errors_say_what_to_write():
    x = np.arange(6, dtype=np.float32)
    i = np.array([1, 1, 3])

    def scatter_set(x, i):
        return x.at[i].set(1.0)

    with pytest.raises(pt.TracingError, match=r"(?s)only \.add.*x\.at\[idx\]\.add\(v - x\[idx\]\)"):
        pt.jit(scatter_set)(x, i)

    def shape(x):
        y = x * 1
        y[1:3] = x[:3]
        return y

    with pytest.raises(pt.ShapeError, match=r"values of shape \(3,\) cannot be broadcast to the indexed shape \(2,\)"):
        pt.jit(shape)(x)

    def kind(x):
        k = (x * 10).astype(np.int32)
        k[1:3] += 0.5
        return k

    with pytest.raises(pt.TracingError, match="float32, which cannot be stored in the int32 array"):
        pt.jit(kind)(x)

    def bounds(x):
        y = x * 1
        y[6] = 0
        return y

    with pytest.raises(pt.ShapeError, match="index 6 is out of bounds for axis 0 of size 6"):
        pt.jit(bounds)(x)

    def helper(y):
        y[0] = 1

    def calls(x):
        y = x * 1
        helper(y[1:])  # NumPy would write through the view: an update of an expression cannot be written back
        return y

    with pytest.raises(pt.TracingError, match=r"helper\(\) updates its argument 1 in place, which is not a variable"):
        pt.jit(calls)(x)

    def boxed(x):
        y = x * 1
        helper(*[y])
        return y

    with pytest.raises(pt.TracingError, match=r"helper\(\) updates its argument 1 in place"):
        pt.jit(boxed)(x)

    def listed(x):
        y = x * 1
        helper([y][0])  # (an element of a container)
        return y

    with pytest.raises(pt.TracingError, match=r"helper\(\) updates its argument 1 in place"):
        pt.jit(listed)(x)

    class Holder:
        pass

    def attribute(x):
        h = Holder()
        h.y = x * 1
        h.y[0] = 1  # an attribute is not a variable: not rewritten, in the caller or in a helper
        return h.y

    with pytest.raises(pt.TracingError, match=r"x = x\.at\[idx\]\.set\(v\)"):
        pt.jit(attribute)(x)


# NumPy code that updates arrays in helper functions: the caller's array changes (the functions are shared by the
# NumPy run and the jit run below)
def set_boundary(u, value=0.0):
    u[0] = value
    u[-1] = value


def relax(u, v, *, weight):
    u[1:-1] = (1 - weight) * v[1:-1] + weight * 0.5 * (v[:-2] + v[2:])
    set_boundary(u, value=v[1])  # a helper the helper calls


def advance(u):
    relax(u, u * 1, weight=0.5)
    u *= 0.5
    return u


class Boundaries:
    def __init__(self, left):
        self.left = left

    def apply(self, u):
        u[:2] = self.left


def simulate(x):
    u = x * 1
    for _ in range(3):
        relax(u, u * 1, weight=0.25)
    Boundaries(3.0).apply(u=u)
    if x[0] > 0.5:  # (traced in the jit run: both branches, selected)
        set_boundary(u, 1.0)
    w = advance(u)  # (the same array as u)
    total = advance(u * 1).sum()  # a helper called inside an expression, updating a temporary
    return u, w, total


def test_updates_in_called_functions_match_numpy(pypto_executor, rng):
    for first in (0.2, 0.9):
        x = rng.random(12).astype(np.float32)
        x[0] = first
        expect = simulate(x)
        got = _jit(simulate, pypto_executor)(x)
        for g, e in zip(got, expect):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[0], got[1])


def test_gradient_through_updates_in_called_functions_matches_torch(rng):
    torch = pytest.importorskip("torch")

    def loss(x):
        u = x * 1
        relax(u, x * x, weight=0.25)
        set_boundary(u, value=x[3])
        return (u * u).sum()

    x = rng.random(9)
    xt = torch.tensor(x, requires_grad=True)
    loss(xt).backward()
    np.testing.assert_allclose(pt.grad(loss)(x), xt.grad.numpy(), rtol=1e-10)


def test_aliases_are_not_updated():
    """An update rebinds the variable it names; another name for the old array keeps the old values (the one
    difference from NumPy, documented)."""

    def f(x):
        y = x * 1
        z = y
        y[0] = 5
        return y, z

    x = np.zeros(3, np.float32)
    y, z = pt.jit(f)(x)
    np.testing.assert_array_equal(y, [5, 0, 0])
    np.testing.assert_array_equal(z, [0, 0, 0])


def test_which_called_functions_are_rewritten():
    """The user's functions are, installed or not (a package of helpers in site-packages); the array libraries'
    and the standard library's are not."""
    import json

    from pypto.lang.control import _own_code

    namespace = {}
    exec(compile("def helper(u):\n    u[0] = 1\n", "/opt/env/lib/python3.11/site-packages/mine/h.py", "exec"),
         namespace)  # fmt: skip
    assert _own_code(namespace["helper"]) and _own_code(set_boundary)
    assert not _own_code(json.dumps) and not _own_code(_own_code)  # (the standard library's, pypto's)
