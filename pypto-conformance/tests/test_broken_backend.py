"""A deliberately broken backend (a - b for a + b) is caught by the catalogue and by the fuzzer."""

import datetime
import os

from fake_backends import BROKEN_CODEGEN, plugin_source

# not in a backend's default capabilities
UNDECLARED = ("float16", "bfloat16", "int8", "int16", "uint8", "uint16", "uint32", "uint64")


def test_broken_backend_fails_with_readable_errors(plugin_site, run_cli):
    site = plugin_site("broken", plugin_source("broken", codegen=BROKEN_CODEGEN))
    run = run_cli(
        "--backend", "broken", "-k", "add- or subtract- or row_bias or fuzz-float32", "--max-examples", "100", site=site
    )
    assert run.returncode != 0, run

    # the report names every failing case, with the size, the element, got and expected
    for dtype in ("float32", "float64", "int32", "int64"):
        (add,) = run.results(case="add", dtype=dtype, backend="broken")
        assert add["outcome"] == "failed", add
        assert "case 'add'" in add["message"] and "got" in add["message"] and "expected" in add["message"]
        assert "N=7" in add["message"]
        (bias,) = run.results(case="row_bias", dtype=dtype)
        assert bias["outcome"] == "failed"
    float_add = run.results(case="add", dtype="float32")[0]
    assert "values outside tolerance" in float_add["message"] and "rtol=1e-05" in float_add["message"]
    assert float_add["max_abs_error"] > 0.1
    assert "must be exact" in run.results(case="add", dtype="int32")[0]["message"]

    # subtraction does not go through '+': it still passes
    rows = run.results(case="subtract")
    assert {r["outcome"] for r in rows if r["dtype"] not in UNDECLARED} == {"passed"}
    assert all("does not declare" in r["reason"] for r in rows if r["dtype"] in UNDECLARED)  # default capabilities

    # the fuzzer finds it too, and shows the smallest kernel it shrank to
    (fuzz,) = run.results(case="fuzz", dtype="float32")
    assert fuzz["outcome"] == "failed", fuzz
    assert "def fuzz_kernel(" in fuzz["message"] and "smallest failing kernel" in fuzz["message"]

    # the printed table lists the failures
    assert "FAIL" in run.stdout and "row_bias" in run.stdout
    assert run.report["summary"]["failed"] == 9
    # when and where: the report says both
    assert datetime.datetime.fromisoformat(run.report["date"]).utcoffset() == datetime.timedelta(0)
    assert f"{os.cpu_count()} CPUs" in run.report["machine"]
