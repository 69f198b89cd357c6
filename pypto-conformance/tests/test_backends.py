"""Choosing backends and turning capabilities into skip reasons (no plugins loaded)."""

import pytest

from pypto_conformance.backends import (
    BackendTarget,
    SelectionError,
    capability_skip,
    declaration_problems,
    select_backends,
)

ALL = frozenset({"bool", "int32", "int64", "float32", "float64"})


def target(name, available=True, dtypes=ALL, fp64=True, tolerances=None, reason=""):
    return BackendTarget(name, "1.0", available, reason, frozenset(dtypes), fp64, tolerances or {})


INSTALLED = [target("fast"), target("gpu", available=False, reason="no GPU"), target("reference")]


def test_selection():
    assert select_backends(None, INSTALLED) == INSTALLED
    assert select_backends("all", INSTALLED) == INSTALLED
    assert [t.name for t in select_backends("reference, fast", INSTALLED)] == ["reference", "fast"]
    with pytest.raises(SelectionError, match="installed but cannot run here: no GPU"):
        select_backends("gpu", INSTALLED)
    with pytest.raises(SelectionError, match=r"no such pypto backend .*installed: fast, gpu, reference"):
        select_backends("openmp", INSTALLED)
    with pytest.raises(SelectionError, match="no backend named"):
        select_backends(",", INSTALLED)


def test_capability_skip_reasons():
    assert capability_skip(target("a"), {"float32", "bool"}) is None
    small = target("small", dtypes={"float32"}, fp64=False)
    assert "fp64=False" in capability_skip(small, {"float64"})
    assert "does not declare dtype(s) bool, int32" in capability_skip(small, {"float32", "int32", "bool"})


def test_declaration_problems():
    assert declaration_problems(target("ok")) == []
    assert declaration_problems(target("f32", dtypes={"float32"}, fp64=False)) == []
    problems = declaration_problems(
        target("odd", dtypes={"float32", "complex256"}, tolerances={"float64": (1e-3,), "int8": (0, 0)})
    )
    text = "\n".join(problems)
    assert "complex256" in text and "fp64 is True" in text and "int8" in text and "(rtol, atol)" in text
