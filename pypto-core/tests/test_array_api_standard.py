"""The array API standard's namespace (``pypto.array_api``): each function against NumPy on arrays drawn by
hypothesis's array API strategies (made for this namespace), eager calls and calls inside ``@pt.jit``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.array_api import make_strategies_namespace

import pypto as pt
import pypto.array_api as xp

xps = make_strategies_namespace(xp)
EXAMPLES = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _floats(dtype=xp.float64, min_dims=1, max_dims=2, **elements):
    return xps.arrays(dtype, xps.array_shapes(min_dims=min_dims, max_dims=max_dims, max_side=6),
                      elements={"allow_nan": False, **elements})  # fmt: skip


def _close(got, want, rtol=1e-12, atol=1e-12):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


# the standard's name -> NumPy's function and the elements it is defined on
UNARY = {
    "abs": (np.abs, {}), "acos": (np.arccos, {"min_value": -1, "max_value": 1}),
    "asin": (np.arcsin, {"min_value": -1, "max_value": 1}), "atan": (np.arctan, {}), "ceil": (np.ceil, {}),
    "asinh": (np.arcsinh, {}), "acosh": (np.arccosh, {"min_value": 1}),
    "atanh": (np.arctanh, {"min_value": -1, "max_value": 1}), "signbit": (np.signbit, {}),
    "cos": (np.cos, {"min_value": -100, "max_value": 100}), "cosh": (np.cosh, {"min_value": -50, "max_value": 50}),
    "exp": (np.exp, {"min_value": -50, "max_value": 50}), "expm1": (np.expm1, {"min_value": -50, "max_value": 50}),
    "floor": (np.floor, {}), "isfinite": (np.isfinite, {}), "isinf": (np.isinf, {}), "isnan": (np.isnan, {}),
    "log": (np.log, {"min_value": 1e-300}), "log1p": (np.log1p, {"min_value": -0.5}),
    "log2": (np.log2, {"min_value": 1e-300}), "log10": (np.log10, {"min_value": 1e-300}),
    "negative": (np.negative, {}), "positive": (np.positive, {}), "round": (np.rint, {}), "sign": (np.sign, {}),
    "sin": (np.sin, {"min_value": -100, "max_value": 100}), "sinh": (np.sinh, {"min_value": -50, "max_value": 50}),
    "square": (np.square, {"min_value": -1e100, "max_value": 1e100}), "sqrt": (np.sqrt, {"min_value": 0}),
    "tan": (np.tan, {"min_value": -1.5, "max_value": 1.5}), "tanh": (np.tanh, {}), "trunc": (np.trunc, {}),
    "logical_not": (np.logical_not, {}),
}  # fmt: skip
BINARY = {
    "add": np.add, "atan2": np.arctan2, "divide": np.divide, "equal": np.equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "hypot": np.hypot, "less": np.less, "less_equal": np.less_equal,
    "maximum": np.maximum, "minimum": np.minimum, "multiply": np.multiply, "not_equal": np.not_equal,
    "subtract": np.subtract, "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor, "copysign": np.copysign, "logaddexp": np.logaddexp,
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions_match_numpy(name):
    fn, elements = UNARY[name]

    @EXAMPLES
    @given(_floats(**elements))
    def check(x):
        # float64 math: within a few ulps of NumPy's (the C library's) values
        _close(getattr(xp, name)(x), fn(x), rtol=4e-15, atol=1e-300)

    check()


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_functions_match_numpy_with_broadcasting(name):
    @EXAMPLES
    @given(xps.mutually_broadcastable_shapes(2, max_dims=2, max_side=5), st.data())
    def check(shapes, data):
        elements = {"allow_nan": False, "min_value": -1e6, "max_value": 1e6}
        a = data.draw(xps.arrays(xp.float64, shapes.input_shapes[0], elements=elements))
        b = data.draw(xps.arrays(xp.float64, shapes.input_shapes[1], elements=elements))
        _close(getattr(xp, name)(a, b), BINARY[name](a, b), rtol=4e-15, atol=0)

    check()


@EXAMPLES
@given(xps.arrays(xp.int32, xps.array_shapes(min_dims=1, max_dims=2, max_side=6)), st.integers(-5, 5))
def test_integer_arithmetic_with_python_numbers(x, k):
    """A Python number is weakly typed: the result keeps the array's dtype (as the standard says)."""
    _close(xp.add(x, k), x + np.int32(k))
    _close(xp.multiply(x, k), x * np.int32(k))
    _close(xp.bitwise_xor(x, xp.bitwise_invert(x)), np.bitwise_xor(x, np.invert(x)))
    if k >= 0:  # (the standard leaves negative counts to the implementation)
        _close(xp.bitwise_left_shift(x, k), np.left_shift(x, np.int32(k)))
        _close(xp.bitwise_right_shift(x, k), np.right_shift(x, np.int32(k)))
    if k != 0:
        _close(xp.floor_divide(x, k), x // np.int32(k))
        _close(xp.remainder(x, k), x % np.int32(k))


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "std"])
def test_statistics_along_axes(name):
    @EXAMPLES
    @given(_floats(min_value=-10, max_value=10), st.data())
    def check(x, data):
        axis = data.draw(st.none() | st.integers(0, x.ndim - 1) | st.just(tuple(range(x.ndim))))
        keepdims = data.draw(st.booleans())
        kw = {"axis": axis, "keepdims": keepdims}
        if name in ("var", "std"):
            n = x.size if axis is None else np.prod([x.shape[a] for a in np.atleast_1d(axis)])
            correction = data.draw(st.sampled_from([0.0, 1.0] if n > 1 else [0.0]))
            got, want = getattr(xp, name)(x, correction=correction, **kw), getattr(np, name)(x, ddof=correction, **kw)
        else:
            got, want = getattr(xp, name)(x, **kw), getattr(np, name)(x, **kw)
        _close(got, np.asarray(want), rtol=1e-10, atol=1e-10)

    check()


def test_sums_of_narrow_integers_use_the_default_integer():
    x = xp.asarray([100, 100, 100], dtype=xp.int8)
    assert xp.sum(x).dtype == xp.int64 and xp.sum(x) == 300  # (int8 arithmetic would wrap)
    assert xp.prod(xp.asarray([True, True])).dtype == xp.int64
    assert xp.sum(x, dtype=xp.int16).dtype == xp.int16
    assert xp.cumulative_sum(x).tolist() == [100, 200, 300]


def test_searching_sorting_and_cumulative_sums():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, (4, 9)).astype(np.float64)
    x[1, 3] = np.nan
    _close(xp.argmax(x, axis=1), np.argmax(x, axis=1))
    _close(xp.argmin(x, axis=0, keepdims=True), np.argmin(x, axis=0, keepdims=True))
    _close(xp.sort(x, axis=1), np.sort(x, axis=1))
    _close(xp.sort(x, axis=0, descending=True), np.flip(np.sort(x, axis=0), axis=0))  # (pypto: NaN first there)
    _close(xp.argsort(x, axis=1), np.argsort(x, axis=1, kind="stable"))
    _close(xp.where(x > 2, x, -1.0), np.where(x > 2, x, -1.0))
    _close(xp.cumulative_sum(x, axis=1), np.cumsum(x, axis=1))
    _close(xp.cumulative_sum(x, axis=0, include_initial=True),
           np.concatenate([np.zeros((1, 9)), np.cumsum(x, axis=0)]))  # fmt: skip
    assert xp.all(x > -1, axis=1).tolist() == [True, False, True, True]  # (NaN > -1 is false)
    assert xp.any(xp.isnan(x)) and not xp.any(xp.isnan(x[0]))
    row = np.sort(x[1])
    for side in ("left", "right"):
        _close(xp.searchsorted(row, x, side=side), np.searchsorted(row, x, side=side))
    order = np.argsort(x[2], kind="stable")
    _close(xp.searchsorted(x[2], x[0], sorter=order), np.searchsorted(x[2], x[0], sorter=order))


def test_manipulation_and_linear_algebra():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    _close(xp.matmul(a, b), a @ b, rtol=1e-12)
    _close(xp.matrix_transpose(a), np.swapaxes(a, -1, -2))
    _close(xp.tensordot(a, b, axes=([0, 2], [0, 1])), np.tensordot(a, b, axes=([0, 2], [0, 1])), rtol=1e-12)
    _close(xp.vecdot(a, a), np.sum(a * a, axis=-1), rtol=1e-12)
    _close(xp.permute_dims(a, (2, 0, 1)), np.transpose(a, (2, 0, 1)))
    _close(xp.reshape(a, (6, 4)), a.reshape(6, 4))
    _close(xp.concat([a, a], axis=1), np.concatenate([a, a], axis=1))
    _close(xp.concat([a, b[:, :3, :4]], axis=None), np.concatenate([a.ravel(), b[:, :3, :4].ravel()]))
    _close(xp.stack([a, a], axis=-1), np.stack([a, a], axis=-1))
    _close(xp.expand_dims(a, axis=1), a[:, None])
    _close(xp.squeeze(a[:, :1], axis=1), a[:, 0])
    _close(xp.flip(a, axis=(0, 2)), np.flip(a, (0, 2)))
    _close(xp.roll(a, 2, axis=2), np.roll(a, 2, axis=2))
    _close(xp.repeat(a, 2, axis=1), np.repeat(a, 2, axis=1))
    _close(xp.repeat(a, xp.asarray([1, 0, 3]), axis=1), np.repeat(a, [1, 0, 3], axis=1))
    _close(xp.repeat(a, 3), np.repeat(a, 3))
    _close(xp.tile(a, (2, 1, 1, 2)), np.tile(a, (2, 1, 1, 2)))
    _close(xp.moveaxis(a, 0, -1), np.moveaxis(a, 0, -1))
    _close(xp.broadcast_to(a[:, :1], (2, 3, 4)), np.broadcast_to(a[:, :1], (2, 3, 4)))
    _close(xp.take(a, xp.asarray([3, 0, 0]), axis=2), np.take(a, [3, 0, 0], axis=2))
    _close(xp.tril(a[0], k=1), np.tril(a[0], 1))
    _close(xp.clip(a, -0.5, 0.5), np.clip(a, -0.5, 0.5))
    _close(xp.astype(a, xp.float32), a.astype(np.float32))
    assert [u.tolist() for u in xp.unstack(a[0])] == [r.tolist() for r in a[0]]


def test_creation_dtypes_and_namespace_information():
    assert xp.__array_api_version__ == "2023.12" and xp.float32 == np.dtype("float32")
    assert xp.zeros((2, 3)).dtype == xp.float64 and xp.full((2,), 3).dtype == xp.int64
    assert xp.full((2,), True).dtype == xp.bool and xp.ones_like(xp.asarray([1, 2], dtype=xp.int8)).dtype == xp.int8
    assert xp.arange(5).tolist() == [0, 1, 2, 3, 4] and xp.eye(3, k=1)[0, 1] == 1.0
    assert xp.isdtype(xp.int8, "signed integer") and not xp.isdtype(xp.uint8, ("real floating", "bool"))
    assert xp.isdtype(xp.float32, xp.float32) and xp.result_type(xp.int8, xp.float32) == xp.float32
    info = xp.__array_namespace_info__()
    assert info.default_device() == "cpu" and info.default_dtypes()["integral"] == xp.int64
    assert set(info.dtypes(kind="real floating")) == {"float32", "float64"}
    with pytest.raises(ValueError, match="host memory"):
        xp.zeros(3, device="cuda")


def test_what_the_namespace_cannot_compute_is_a_typed_error_naming_the_alternative():
    for name in ("nonzero", "unique_values", "unique_counts"):
        with pytest.raises(pt.TracingError, match=f"pypto.array_api.{name}") as e:
            getattr(xp, name)(xp.asarray([1.0, 2.0]))
        assert e.value.hint.startswith("instead:")
    assert set(xp.UNSUPPORTED).isdisjoint(xp.supported())


def test_inside_jit_the_namespace_builds_one_program():
    """Code written against a namespace (``xp``) compiles into fused kernels under ``@pt.jit``; the eager calls
    of the same code give the same values."""

    def standardize(x, xp):
        mu = xp.mean(x, axis=0)
        sd = xp.std(x, axis=0, correction=1)
        return xp.where(sd > 0, (x - mu) / sd, 0.0)

    x = np.random.default_rng(2).standard_normal((50, 4))
    want = standardize(x, np)
    fused = pt.jit(lambda v: standardize(v, xp))
    _close(fused(x), want, rtol=1e-12, atol=1e-12)
    assert len(fused.compiled(x).kernels) <= 2  # (not one program per operation)
    _close(standardize(x, xp), want, rtol=1e-12, atol=1e-12)


def test_an_eager_program_serves_every_size(monkeypatch):
    from pypto.array.function import JitFunction

    calls = []
    compile_ = JitFunction._compile
    monkeypatch.setattr(JitFunction, "_compile", lambda self, *a: calls.append(self.__name__) or compile_(self, *a))
    rng = np.random.default_rng(3)
    for n in (5, 17, 300):
        a, b = rng.standard_normal((n, 3)), rng.standard_normal((3, 2))
        _close(xp.exp(xp.matmul(a, b)), np.exp(a @ b), rtol=1e-12)
        _close(xp.sum(a, axis=1), a.sum(axis=1), rtol=1e-12)
    assert sorted(set(calls)) == sorted(calls) and len(calls) <= 3  # each program compiled once (or cached)


# -- against the standard's reference implementation (array-api-strict, at the namespace's version) ---------------
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"]


@pytest.fixture
def strict():
    aps = pytest.importorskip("array_api_strict")
    previous = aps.get_array_api_strict_flags()
    aps.set_array_api_strict_flags(api_version=xp.__array_api_version__)
    yield aps
    aps.set_array_api_strict_flags(**previous)


def test_every_function_of_the_standard_is_in_the_namespace(strict):
    """Each name of the standard's namespace (the reference implementation's, at our version; not its extensions
    or its own flag functions) is in ``pypto.array_api``, computed or in ``UNSUPPORTED`` with its reason."""
    own = {"ArrayAPIStrictFlags", "Device", "get_array_api_strict_flags", "set_array_api_strict_flags",
           "reset_array_api_strict_flags", "linalg", "fft"}  # fmt: skip
    info = strict.__array_namespace_info__()
    names = {n for n in strict.__all__ if n not in own and not n.startswith("_") and _in_version(strict, n)}
    assert {"take_along_axis", "reciprocal"}.isdisjoint(names) and {"cumulative_sum", "abs"} <= names
    missing = sorted(n for n in names if not hasattr(xp, n))
    assert not missing, f"names of the {xp.__array_api_version__} standard missing from pypto.array_api: {missing}"
    computed = set(xp.supported())
    assert all(n in computed or n in xp.UNSUPPORTED for n in names if callable(getattr(strict, n)) and
               not isinstance(getattr(strict, n), type) and n not in ("finfo", "iinfo"))  # fmt: skip
    assert set(info.default_dtypes()) == set(xp.__array_namespace_info__().default_dtypes())


def _in_version(strict, name):
    """Whether the reference implementation's ``name`` belongs to the version its flags select (a function of a
    later version raises saying so when called)."""
    fn = getattr(strict, name)
    if not callable(fn) or isinstance(fn, type) or name in ("finfo", "iinfo"):
        return True
    try:
        fn()
    except RuntimeError as e:
        return "requires API version" not in str(e)
    except Exception:  # (the arguments missing)
        return True
    return True


def test_type_promotion_matches_the_standard(strict):
    """``result_type`` for every pair of the standard's dtypes that the standard defines (a mix of integer and
    float kinds is left to the implementation), and the dtype that adding two arrays gives inside one program."""
    pairs = []
    for a in DTYPES:
        for b in DTYPES:
            try:
                want = strict.result_type(getattr(strict, a), getattr(strict, b))
            except TypeError:
                continue
            want = str(want).rsplit(".", 1)[-1]  # (array_api_strict.int16)
            pairs.append((a, b, want))
            assert str(xp.result_type(getattr(xp, a), getattr(xp, b))) == want, (a, b)
    arrays = [np.ones(2, dtype=d) for d in DTYPES]

    def sums(*xs):
        at = dict(zip(DTYPES, xs))
        return tuple(xp.add(at[a], at[b]) if "bool" not in (a, b) else xp.logical_or(at[a], at[b]) for a, b, _ in
                     pairs if ("bool" in (a, b)) == (a == b == "bool") or "bool" not in (a, b))  # fmt: skip

    got = pt.jit(sums)(*arrays)
    kept = [p for p in pairs if ("bool" in p[:2]) == (p[0] == p[1] == "bool") or "bool" not in p[:2]]
    assert len(got) == len(kept) > 60
    for (a, b, want), g in zip(kept, got):
        assert str(g.dtype) == want, (a, b, g.dtype, want)
