"""Tolerances as data: defaults, function, backend and case levels, and override files."""

import pytest
from fake_backends import BROKEN_CODEGEN, plugin_source

from pypto_conformance.datafile import DataFileError
from pypto_conformance.tolerances import Tolerance, ToleranceTable, default_table, load_tolerances


def test_defaults_and_levels():
    table = default_table()
    assert table.resolve("float32") == Tolerance(1e-5, 1e-6)
    assert table.resolve("float64") == Tolerance(1e-12, 1e-14)
    assert table.resolve("int32").exact and table.resolve("bool").exact
    assert table.resolve("float32", functions=["erf"]) == Tolerance(4e-5, 4e-6)  # libm room for erf
    assert table.resolve("float32", functions=["exp"]) == Tolerance(1e-5, 1e-6)
    declared = {"float32": (1e-3, 0.0)}
    assert table.resolve("float32", backend="fast", backend_declared=declared) == Tolerance(1e-3, 1e-6)
    assert table.resolve("float32", case="long_sum", case_declared={"float32": (1e-4, 1e-5)}) == Tolerance(1e-4, 1e-5)
    # levels only loosen: a tighter backend or case value does not go below the dtype default
    assert table.resolve("float32", backend="b", backend_declared={"float32": (0, 0)}) == Tolerance(1e-5, 1e-6)


def test_override_file_replaces_named_entries(tmp_path):
    f = tmp_path / "tol.toml"
    f.write_text(
        "[dtype.float32]\nrtol = 0.0\natol = 0.0\n"
        '[backend.fast.float32]\nrtol = 0.5\natol = 0.0\n[case."soft*".float64]\nrtol = 1e-3\natol = 0.0\n'
    )
    table = load_tolerances(f)
    assert table.resolve("float32") == Tolerance(0, 0)
    assert table.resolve("float32", functions=["erf"]) == Tolerance(4e-5, 4e-6)  # not named: kept
    # the file's backend entry replaces what the backend declared
    assert table.resolve("float32", backend="fast", backend_declared={"float32": (9.0, 9.0)}) == Tolerance(0.5, 0)
    assert table.resolve("float64", case="softmax", case_declared={"float64": (0.9, 0)}) == Tolerance(1e-3, 1e-14)
    json_file = tmp_path / "tol.json"
    json_file.write_text('{"dtype": {"float64": {"rtol": 1e-9, "atol": 0}}}')
    assert load_tolerances(json_file).resolve("float64") == Tolerance(1e-9, 0)


@pytest.mark.parametrize(
    "data,problem",
    [
        ({"dtype": {"complex256": {"rtol": 1}}}, "unknown dtype"),
        ({"dtype": {"float32": {"rtol": -1}}}, "must be a number >= 0"),
        ({"dtype": {"float32": {"rtol": "big"}}}, "must be a number >= 0"),
        ({"dtype": {"float32": {"rtol": 1, "slack": 2}}}, "unknown key"),
        ({"precision": {}}, "unknown section"),
        ({"function": {"float32": {"exp": [1, 2, 3]}}}, "expected"),
    ],
)
def test_files_are_validated(data, problem):
    with pytest.raises(DataFileError, match=problem):
        ToleranceTable.from_mapping(data, "tol.toml")


def test_tolerances_on_a_run(plugin_site, run_cli, tmp_path):
    plugin_site("broken", plugin_source("broken", codegen=BROKEN_CODEGEN))
    tolerant = 'Capabilities(tolerances={"float32": (1e9, 1e9)})'
    site = plugin_site("tolerant", plugin_source("tolerant", codegen=BROKEN_CODEGEN, capabilities=tolerant))
    f = tmp_path / "tol.toml"
    f.write_text(
        "[backend.broken.float32]\nrtol = 1e9\natol = 1e9\n"  # anything goes for broken float32 results
        '[dtype.float32]\nrtol = 0.0\natol = 0.0\n[case."softmax".float32]\nrtol = 0.0\natol = 0.0\n'
    )
    run = run_cli(
        "--backend", "reference,broken,tolerant", "-k", "add- or softmax-float32", "--tolerances", str(f), site=site
    )
    assert run.returncode == 1, run
    outcome = {(r["case"], r["dtype"], r["backend"]): r for r in run.report["results"]}
    assert outcome["add", "float32", "broken"]["outcome"] == "passed"  # loosened by the file
    assert outcome["add", "float32", "tolerant"]["outcome"] == "passed"  # loosened by the declaration
    assert outcome["add", "float32", "tolerant"]["tolerances"] == {"float32": {"rtol": 1e9, "atol": 1e9}}
    assert outcome["add", "float64", "broken"]["outcome"] == "failed"  # other dtypes keep their tolerance
    tight = outcome["softmax", "float32", "reference"]
    assert tight["outcome"] == "failed" and "rtol=0 atol=0" in tight["message"], tight
    assert outcome["add", "float32", "reference"]["outcome"] == "passed"  # exact, so still fine


def test_bad_tolerance_file_is_a_usage_error(run_cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[dtype.float32]\nrtol = -1\n")
    run = run_cli("--backend", "reference", "-k", "add-", "--tolerances", str(bad))
    assert run.returncode == 4 and "rtol must be a number >= 0" in run.stderr, run
