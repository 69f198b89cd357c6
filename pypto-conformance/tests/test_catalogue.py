"""The catalogue covers the language as the issue asks, with references that do not use pypto."""

import inspect

import numpy as np
import pytest

import pypto as pt
from pypto_conformance.cases import all_cases, get_case
from pypto_conformance.cases.spec import kernel_params
from pypto_conformance.runner import case_data, run_case
from pypto_conformance.tolerances import default_table

CASES = all_cases()


def _source(case) -> str:
    return inspect.getsource(case.factory)


def _all_sizes():
    for case in CASES:
        for dims in case.sizes:
            yield case, dims


def test_size_and_names():
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)
    assert all(c.doc for c in CASES), [c.name for c in CASES if not c.doc]


@pytest.mark.parametrize(
    "token",
    [" + ", " - ", " * ", " / ", " // ", " % ", "**", "-x[i]", "abs(", " < ", " <= ", " > ", " >= ", " == ", " != "]
    + [" & ", " | ", " ^ ", "~"]
    + [f"pt.{f}" for f in ("exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "erf", "sigmoid")]
    + ["pt.where", "pt.maximum", "pt.minimum", "pt.cast", "pt.abs"]
    + [f"reduce_{r}" for r in ("sum", "max", "min", "prod", "mean")]
    + ["[i + 1]", "[N - 1 - i]", "[2 * i]", "[c, r]", "b[c]", "s[r]", "(4, 8)", "axis=(r, c)"],
)
def test_every_feature_is_exercised(token):
    text = "\n".join(_source(c) for c in CASES)
    if token.startswith("pt.") and token[3:] in ("exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "erf", "sigmoid"):
        assert get_case(token[3:]).functions == {token[3:]}  # generated per function
    else:
        assert token in text


def test_dtypes_shapes_and_the_large_case():
    dtypes = {d for c in CASES for d in c.dtypes}
    assert {"float32", "float64", "int32", "int64", "bool"} <= dtypes
    sizes = {v for _, dims in _all_sizes() for v in dims.values()}
    assert {0, 1, 7, 127, 1031} <= sizes
    assert any(v % 8 and v % 16 and v > 16 for v in sizes)
    assert 24 in sizes  # a multiple of 8 that is not one of 16
    large = [c for c in CASES if c.slow]
    assert large and all(max(d.get("N", 0) for d in c.sizes) >= 16 * 2**20 for c in large)
    assert any(not dims for _, dims in _all_sizes())  # static shapes
    for rank in (1, 2, 3):
        for op in ("sum", "max", "min", "prod", "mean"):
            case = get_case(f"reduce_{op}_{rank}d")
            assert "full" in {p.name for p in kernel_params(case.build("float32"))}
            assert kernel_params(case.build("float32"))[-1].shape[0].evaluate({}) == 1  # a (1,) output


def test_references_are_independent_of_pypto():
    for case in CASES:
        names = set(case.reference.__code__.co_names)
        assert not names & {"pt", "pypto"}, case.name


def test_semantics_encoded_in_references():
    # an all -inf softmax row gives NaN, exactly like the same formula in NumPy
    _, expected = case_data(get_case("softmax_all_neginf"), "float32", 1)
    y = expected["y"]
    assert np.isnan(y[0]).all() and not np.isnan(y[1]).any() and y[1][0] == 0  # -inf among finite values gives 0
    # empty reductions give the identity
    _, expected = case_data(get_case("empty_reduction_identities"), "int32", 0)
    assert (expected["s"] == 0).all() and (expected["p"] == 1).all()
    assert (expected["mx"] == np.iinfo(np.int32).min).all() and (expected["mn"] == np.iinfo(np.int32).max).all()
    assert np.isnan(expected["me"]).all() and expected["me"].dtype == np.float32
    # integer division by zero gives 0; floor semantics for negative operands
    inputs, expected = case_data(get_case("floor_divide"), "int32", 3)
    zero = inputs["b"] == 0
    assert zero.any() and (expected["c"][zero] == 0).all()
    assert expected["c"][1] == -4 and inputs["a"][1] == -7 and inputs["b"][1] == 2


def test_kernels_trace_for_every_dtype():
    for case in CASES:
        for dtype in case.dtypes:
            text = pt.kernel(executor="reference")(case.build(dtype)).ir("infer_types")
            assert "kernel" in text, case.name


def test_a_case_runs_and_reports_errors():
    outcome = run_case(get_case("gelu_tanh"), "float32", "reference", lambda dt: default_table().resolve(dt))
    assert outcome.ok, outcome.message
    assert outcome.max_abs is not None and outcome.max_abs < 1e-5
    assert set(outcome.tolerances) == {"float32"}
