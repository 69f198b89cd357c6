"""The reliability catalogue: bad inputs, odd arrays and faults, each with its expected outcome, on every backend.

Every case states what must happen: either a typed :class:`pypto.PyptoError` whose message names the
parameter (checked by a regular expression), or the right answer (checked against NumPy). Each case runs
on reference, openmp, tbb, opencl and numba (a backend that is not installed or not available here is
skipped with its reason). ``CATALOGUE`` is also what ``docs/reliability.md`` lists.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import pypto as pt

BACKENDS = ("reference", "openmp", "tbb", "opencl", "numba")
N, M = pt.dims("N M")


def _scale(x: pt.Tensor[float, (N,)], s: float, y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = x[i] * s


def _rowsum(x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (M,)]):
    i, j = pt.axis(0), pt.axis(1)
    y[i] = pt.reduce_sum(x[i, j], axis=j)


def _ints(a: pt.Tensor[pt.int32, (N,)], b: pt.Tensor[pt.int32, (N,)], q: pt.Tensor[pt.int32, (N,)],
          r: pt.Tensor[pt.int32, (N,)], t: pt.Tensor[pt.int32, (N,)]):  # fmt: skip
    i = pt.axis(0)
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]
    t[i] = a[i] + b[i]


def _named(name: str, body: str, params: str = "x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]") -> Any:
    ns: dict[str, Any] = {}
    exec(f"def {name}({params}):\n    i = pt.axis(0)\n{body}", {"pt": pt, "N": N, "math": math}, ns)  # noqa: S102
    return ns[name]


_kernels: dict[tuple[str, str], Any] = {}


def kernel(fn: Callable, backend: str) -> Any:
    key = (getattr(fn, "__name__", "?") + str(id(fn)), backend)
    if key not in _kernels:
        _kernels[key] = pt.kernel(fn, executor=backend)
    return _kernels[key]


@dataclass(frozen=True)
class Case:
    """One entry: ``run(backend)`` and what it must give (``error``: a type and a message pattern; else
    ``check(result)`` holds, or no error at all)."""

    name: str
    what: str  # the situation, in words (docs/reliability.md)
    run: Callable[[str], Any]
    error: tuple[type, str] | None = None
    check: Callable[[Any], bool] | None = None


def f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


def _scale_into(backend: str, x: Any, s: Any, y: Any, **kw: Any) -> Any:
    kernel(_scale, backend)(x, s, y, **kw)
    return y


def _readonly() -> np.ndarray:
    a = np.zeros(4, np.float32)
    a.flags.writeable = False
    return a


def _overlap(backend: str) -> Any:
    z = np.arange(9, dtype=np.float32)
    return _scale_into(backend, z[1:], 2.0, z[:-1])


def _same_array(backend: str) -> Any:
    z = np.arange(5, dtype=np.float32)
    return _scale_into(backend, z, 2.0, z)


def _ints_case(backend: str) -> Any:
    a = np.array([7, -7, 5, 2**31 - 1], np.int32)
    b = np.array([0, 2, 0, 1], np.int32)
    q, r, t = (np.zeros(4, np.int32) for _ in range(3))
    kernel(_ints, backend)(a, b, q, r, t)
    return q.tolist(), r.tolist(), t.tolist()


def _rowsum_of(backend: str, x: np.ndarray) -> np.ndarray:
    y = np.zeros(x.shape[0], np.float32)
    kernel(_rowsum, backend)(x, y)
    return y


def _renamed(name: str) -> Callable[[str], Any]:
    fn = _named(name, "    y[i] = x[i] * 2.0\n")

    def run(backend: str) -> Any:
        return _scale_like(kernel(fn, backend))

    return run


def _scale_like(k: Any) -> np.ndarray:
    y = np.zeros(3, np.float32)
    k(f32(1, 2, 3), y)
    return y


def _trace_error(name: str, body: str, params: str | None = None) -> Callable[[str], Any]:
    def run(backend: str) -> Any:
        fn = _named(name, body, params) if params else _named(name, body)
        return _scale_like(pt.kernel(fn, executor=backend))

    return run


def _jit(backend: str, fn: Callable, *args: Any) -> Any:
    return pt.jit(fn, executor=backend)(*args)


def _gather(x: pt.Tensor[float, (N,)], idx: pt.Tensor[pt.int64, (N,)], y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = x[idx[i]]


def _histogram(bins: pt.Tensor[pt.int32, (N,)], w: pt.Tensor[float, (N,)], counts: pt.Tensor[float, (M,)]):
    i = pt.axis(0)
    counts[bins[i]] += w[i]


def _untouched(run: Callable[[np.ndarray], Any], out: np.ndarray) -> Any:
    """``run(out)``; when it raises, ``out`` must hold what it held before (then the error goes on)."""
    before = out.copy()
    try:
        return run(out)
    except pt.PyptoError:
        assert np.array_equal(out, before, equal_nan=True), "an output was written before the error"
        raise


def _gather_at(backend: str, idx: list[int]) -> Any:
    k = kernel(_gather, backend)
    return _untouched(lambda y: (k(X, np.array(idx, np.int64), y), y)[1], np.full(4, 7.0, np.float32))


def _histogram_at(backend: str, bins: list[int]) -> Any:
    k = kernel(_histogram, backend)
    b = np.array(bins, np.int32)
    return _untouched(lambda c: (k(b, np.ones(len(b), np.float32), c), c)[1], np.full(3, 0.5, np.float32))


X = f32(1, 2, 3, 4)
Y4 = np.zeros(4, np.float32)
col = np.arange(12, dtype=np.float32).reshape(3, 4)

CATALOGUE: list[Case] = [
    # -- dtypes, ranks, shapes ----------------------------------------------------------------------------------
    Case(
        "wrong_dtype",
        "a float64 array for a float32 parameter",
        lambda b: _scale_into(b, X.astype(np.float64), 2.0, np.zeros(4, np.float32)),
        (pt.DTypeError, r"argument 'x' has dtype float64, expected float32"),
    ),
    Case(
        "float16",
        "a float16 array",
        lambda b: _scale_into(b, X.astype(np.float16), 2.0, np.zeros(4, np.float32)),
        (pt.DTypeError, r"'x' has dtype float16"),
    ),
    Case(
        "complex",
        "a complex array",
        lambda b: _scale_into(b, X.astype(np.complex64), 2.0, np.zeros(4, np.float32)),
        (pt.DTypeError, r"'x'"),
    ),
    Case(
        "bool_array",
        "a bool array for a float parameter",
        lambda b: _scale_into(b, X > 2, 2.0, np.zeros(4, np.float32)),
        (pt.DTypeError, r"'x'"),
    ),
    Case(
        "wrong_rank",
        "a 2-d array for a 1-d parameter",
        lambda b: _scale_into(b, np.zeros((2, 2), np.float32), 2.0, np.zeros(4, np.float32)),
        (pt.ShapeError, r"'x'"),
    ),
    Case(
        "shape_mismatch",
        "input and output of different lengths",
        lambda b: _scale_into(b, X, 2.0, np.zeros(5, np.float32)),
        (pt.ShapeError, r"N"),
    ),
    Case(
        "dims_contradict",
        "N=5 passed for arrays of length 4",
        lambda b: _scale_into(b, X, 2.0, np.zeros(4, np.float32), N=5),
        (pt.ShapeError, r"N = 5"),
    ),
    Case(
        "unknown_keyword",
        "a keyword argument the kernel does not have",
        lambda b: _scale_into(b, X, 2.0, np.zeros(4, np.float32), K=5),
        (pt.ArgumentError, r"K"),
    ),
    # -- layouts, aliasing, read-only, masks ----------------------------------------------------------------------
    Case(
        "strided_input",
        "a strided view as input (x[::2])",
        lambda b: _scale_into(b, np.arange(8, dtype=np.float32)[::2], 2.0, np.zeros(4, np.float32)),
        check=lambda r: np.array_equal(r, [0, 4, 8, 12]),
    ),
    Case(
        "negative_stride_input",
        "a reversed view as input (x[::-1])",
        lambda b: _scale_into(b, X[::-1], 2.0, np.zeros(4, np.float32)),
        check=lambda r: np.array_equal(r, [8, 6, 4, 2]),
    ),
    Case(
        "fortran_input",
        "a Fortran-ordered 2-d input",
        lambda b: _rowsum_of(b, np.asfortranarray(col)),
        check=lambda r: np.array_equal(r, col.sum(1)),
    ),
    Case(
        "strided_output",
        "a strided view as output (y[::2]): written through",
        lambda b: _scale_into(b, X, 2.0, np.zeros(8, np.float32)[::2]),
        check=lambda r: np.array_equal(r, [2, 4, 6, 8]),
    ),
    Case(
        "same_array",
        "the output is the input (y is x): elementwise, so allowed",
        _same_array,
        check=lambda r: np.array_equal(r, [0, 2, 4, 6, 8]),
    ),
    Case(
        "overlapping_views",
        "output and input overlap without being the same array",
        _overlap,
        (pt.AliasingError, r"output 'y' overlaps input 'x'"),
    ),
    Case(
        "read_only_output",
        "a read-only output",
        lambda b: _scale_into(b, X, 2.0, _readonly()),
        (pt.ArgumentError, r"output 'y' is read-only"),
    ),
    Case(
        "masked_input",
        "a masked array as input (its mask would be ignored)",
        lambda b: _scale_into(b, np.ma.masked_array(X, [0, 1, 0, 0]), 2.0, np.zeros(4, np.float32)),
        (pt.ArgumentError, r"'x' is a masked array"),
    ),
    Case(
        "masked_output",
        "a masked array as output",
        lambda b: _scale_into(b, X, 2.0, np.ma.masked_array(np.zeros(4, np.float32), [0, 1, 0, 0])),
        (pt.ArgumentError, r"'y' is a masked array"),
    ),
    # -- sizes and values ---------------------------------------------------------------------------------------
    Case("zero_size", "arrays of length 0", lambda b: _scale_into(b, f32(), 2.0, f32()), check=lambda r: r.size == 0),
    Case(
        "empty_reduction",
        "a sum over an axis of length 0 (rows of nothing)",
        lambda b: _rowsum_of(b, np.zeros((3, 0), np.float32)),
        check=lambda r: np.array_equal(r, [0, 0, 0]),
    ),
    Case(
        "nan_inf",
        "NaN and infinities in the input",
        lambda b: _scale_into(b, f32(np.nan, np.inf, -np.inf, 1), 2.0, np.zeros(4, np.float32)),
        check=lambda r: np.isnan(r[0]) and r[1] == np.inf and r[2] == -np.inf and r[3] == 2,
    ),
    Case(
        "int_wrap_and_div_zero",
        "int32 overflow (wraps) and integer division by zero (0, as documented)",
        _ints_case,
        check=lambda r: r == ([0, -4, 0, 2**31 - 1], [0, 1, 0, 0], [7, -5, 5, -(2**31)]),
    ),
    Case(
        "float_scalar_overflow",
        "1e300 for a float32 scalar (it would become inf)",
        lambda b: _scale_into(b, X, 1e300, np.zeros(4, np.float32)),
        (pt.DTypeError, r"'s' = 1e\+300 does not fit"),
    ),
    Case(
        "inf_scalar",
        "an explicit inf scalar is passed on",
        lambda b: _scale_into(b, X, math.inf, np.zeros(4, np.float32)),
        check=lambda r: np.all(np.isinf(r)),
    ),
    # -- Python values where arrays are expected -------------------------------------------------------------
    Case(
        "list_input",
        "a Python list as input (converted)",
        lambda b: _scale_into(b, [1.0, 2.0, 3.0, 4.0], 2.0, np.zeros(4, np.float32)),
        check=lambda r: np.array_equal(r, [2, 4, 6, 8]),
    ),
    Case(
        "list_output",
        "a Python list as output (results would be lost)",
        lambda b: _scale_into(b, X, 2.0, [0.0] * 4),
        (pt.ArgumentError, r"'y'"),
    ),
    Case(
        "none_array",
        "None for an array",
        lambda b: _scale_into(b, None, 2.0, np.zeros(4, np.float32)),
        (pt.ArgumentError, r"'x'"),
    ),
    Case(
        "scalar_for_array",
        "a number for an array",
        lambda b: _scale_into(b, 3.0, 2.0, np.zeros(4, np.float32)),
        (pt.ArgumentError, r"'x'"),
    ),
    Case(
        "string_scalar",
        "a string for a float scalar",
        lambda b: _scale_into(b, X, "2", np.zeros(4, np.float32)),
        (pt.DTypeError, r"'s'"),
    ),
    Case(
        "array_for_scalar",
        "an array for a float scalar",
        lambda b: _scale_into(b, X, X, np.zeros(4, np.float32)),
        (pt.PyptoError, r"'s'"),
    ),
    Case(
        "missing_argument",
        "an argument left out",
        lambda b: kernel(_scale, b)(X, 2.0),
        (pt.ArgumentError, r"missing argument\(s\): y"),
    ),
    Case(
        "extra_argument",
        "one argument too many",
        lambda b: kernel(_scale, b)(X, 2.0, np.zeros(4, np.float32), np.zeros(4, np.float32)),
        (pt.ArgumentError, r"argument"),
    ),
    Case(
        "unknown_executor",
        "an executor name that is not installed",
        lambda b: pt.kernel(_scale, executor="openmpp")(X, 2.0, np.zeros(4, np.float32)),
        (pt.BackendNotFound, r"Did you mean 'openmp'"),
    ),
    # -- names ----------------------------------------------------------------------------------------------------
    Case(
        "kernel_named_keyword",
        "a kernel named like a C keyword (`int`)",
        _renamed("int"),
        check=lambda r: np.array_equal(r, [2, 4, 6]),
    ),
    Case(
        "kernel_named_libm",
        "a kernel named like a C library function (`exp`)",
        _renamed("exp"),
        check=lambda r: np.array_equal(r, [2, 4, 6]),
    ),
    Case(
        "kernel_named_non_ascii",
        "a kernel named `ядро` (non-ASCII)",
        _renamed("ядро"),
        check=lambda r: np.array_equal(r, [2, 4, 6]),
    ),
    Case(
        "param_named_non_ascii",
        "parameters named `данные`, `выход`",
        _trace_error(
            "k", "    выход[i] = данные[i] * 2.0\n", "данные: pt.Tensor[float, (N,)], выход: pt.Tensor[float, (N,)]"
        ),
        check=lambda r: np.array_equal(r, [2, 4, 6]),
    ),
    Case(
        "param_named_libm",
        "a parameter named `exp` (a function the generated code calls)",
        _trace_error("k", "    y[i] = exp[i]\n", "exp: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]"),
        (pt.TracingError, r"parameter name 'exp' is a function the generated code calls"),
    ),
    Case(
        "param_named_c_keyword",
        "a parameter named `double`",
        _trace_error("k", "    y[i] = double[i]\n", "double: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]"),
        (pt.TracingError, r"parameter name 'double' is reserved"),
    ),
    # -- tracing ----------------------------------------------------------------------------------------------------
    Case(
        "if_on_value",
        "`if` on a traced value in a function without source (built by `exec`: not rewritten)",
        _trace_error("k", "    if x[i] > 0:\n        y[i] = x[i]\n"),
        (pt.TracingError, r"pt.where"),
    ),
    Case(
        "while_on_value",
        "`while` on a traced value in a function without source",
        _trace_error("k", "    while x[i] > 0:\n        y[i] = x[i]\n"),
        (pt.TracingError, r"<string>:3: Python control flow .* on a traced value(.|\n)*pt\.where"),
    ),
    Case(
        "bool_of_value",
        "`bool()` of a traced value",
        _trace_error("k", "    y[i] = x[i] * bool(x[i])\n"),
        (pt.TracingError, r"<string>:3: Python control flow .* on a traced value(.|\n)*pt\.where"),
    ),
    Case(
        "unsupported_function",
        "`math.exp` of a traced value",
        _trace_error("k", "    y[i] = math.exp(x[i])\n"),
        (pt.TracingError, r"pt.exp"),
    ),
    # -- the array API -------------------------------------------------------------------------------------------
    Case(
        "jit_masked",
        "a masked array passed to a jit function",
        lambda b: _jit(b, lambda a: a * 2, np.ma.masked_array(X, [0, 1, 0, 0])),
        (pt.ArgumentError, r"masked array"),
    ),
    Case(
        "jit_arg_count",
        "a jit function called with too few arguments",
        lambda b: _jit(b, lambda a, c: a + c, X),
        (pt.ArgumentError, r"takes 2 argument"),
    ),
    Case(
        "jit_broadcast",
        "operands that do not broadcast",
        lambda b: _jit(b, lambda a, c: a + c, X, f32(1, 2, 3)),
        (pt.ShapeError, r"do not broadcast"),
    ),
    # -- indices read from data ------------------------------------------------------------------------------
    Case(
        "gather_out_of_range",
        "a gathered index past the end (`x[idx[i]]`, idx = 4 for 4 elements): the output untouched",
        lambda b: _gather_at(b, [0, 1, 4, 2]),
        (pt.IndexError, r"index 4 \(from idx\[i\] at i=2\) is out of bounds for x.shape\[0\] = 4; nothing was written"),
    ),
    Case(
        "gather_negative_past_start",
        "a negative index past the start (-5 for 4 elements): the output untouched",
        lambda b: _gather_at(b, [-1, -4, -5, 0]),
        (pt.IndexError, r"index -5 .* out of bounds for x.shape\[0\] = 4"),
    ),
    Case(
        "gather_negative_indices",
        "negative indices within range count from the end, as NumPy's",
        lambda b: _gather_at(b, [-1, -4, 3, 0]),
        check=lambda r: np.array_equal(r, X[[-1, -4, 3, 0]]),
    ),
    Case(
        "scatter_out_of_range",
        "a scatter-add whose last index is past the end: none of the earlier updates lands",
        lambda b: _histogram_at(b, [0, 1, 1, 2, 3]),
        (pt.IndexError, r"index 3 \(from bins\[i\] at i=4\) is out of bounds for counts.shape\[0\] = 3"),
    ),
    Case(
        "scatter_same_index",
        "every point scattered onto one element (all-same indices): they all add up",
        lambda b: _histogram_at(b, [2] * 1000),
        check=lambda r: np.array_equal(r, [0.5, 0.5, 1000.5]),
    ),
    Case(
        "scatter_empty_indices",
        "an empty index array: the target is left as it was",
        lambda b: _histogram_at(b, []),
        check=lambda r: np.array_equal(r, [0.5, 0.5, 0.5]),
    ),
    Case(
        "store_through_index",
        "a plain store through an index read from data (`y[idx[i]] = v`)",
        _trace_error(
            "plain_scatter",
            "    y[idx[i]] = x[i]\n",
            "x: pt.Tensor[float, (N,)], idx: pt.Tensor[pt.int64, (N,)], y: pt.Tensor[float, (N,)]",
        ),
        (pt.TracingError, r"several points may write the same element"),
    ),  # fmt: skip
    Case(
        "float_index",
        "a float array used as an index",
        _trace_error(
            "float_index",
            "    y[i] = x[f[i]]\n",
            "x: pt.Tensor[float, (N,)], f: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]",
        ),
        (pt.DTypeError, r"expected an integer type"),
    ),  # fmt: skip
    Case(
        "jit_index_out_of_range",
        "integer-array indexing past the end inside @pt.jit",
        lambda b: _jit(b, lambda a, i: a[i], X, np.array([0, 9])),
        (pt.IndexError, r"index 9 .* out of bounds for a.shape\[0\] = 4"),
    ),
    Case(
        "jit_boolean_mask",
        "boolean-mask indexing inside @pt.jit (a data-dependent shape)",
        lambda b: _jit(b, lambda a: a[a > 2], X),
        (pt.TracingError, r"(?s)boolean mask.*pt.where"),
    ),
    Case(
        "jit_data_dependent_if",
        "Python `if` on an array inside @pt.jit",
        lambda b: _jit(b, lambda a: a if a.sum() > 0 else -a, X),
        (pt.TracingError, r"pt.where"),
    ),
]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    name = request.param
    if name not in pt.list_backends():
        pytest.skip(f"backend '{name}' is not installed in this environment")
    info = pt.get_runtime_info()["backends"][name]
    if not info.get("available"):
        pytest.skip(f"backend '{name}' is unavailable here: {info.get('reason')}")
    return name


@pytest.mark.parametrize("case", CATALOGUE, ids=[c.name for c in CATALOGUE])
def test_catalogue(case: Case, backend: str) -> None:
    if case.error is not None:
        kind, pattern = case.error
        with pytest.raises(kind, match=pattern):
            case.run(backend)
        return
    with np.errstate(all="ignore"):
        result = case.run(backend)
    if case.check is not None:
        assert case.check(result), f"{case.name} on {backend}: got {result!r}"


def test_the_catalogue_is_large_enough() -> None:
    assert len(CATALOGUE) >= 40
    assert len({c.name for c in CATALOGUE}) == len(CATALOGUE)


def test_generated_code_indexes_with_64_bits() -> None:
    """More than 2**31 elements: every index in generated C is an int64_t (a strided view stays in bounds)."""
    k = pt.kernel(_rowsum, executor="reference")
    for backend, index_type in (("openmp", "int64_t"), ("tbb", "int64_t"), ("opencl", "long")):
        if backend not in pt.list_backends():
            continue
        code = k.get_code(backend)
        loops = [line for line in code.splitlines() if line.strip().startswith("for (")]
        assert loops and all(index_type in line for line in loops), (backend, loops[:3])
