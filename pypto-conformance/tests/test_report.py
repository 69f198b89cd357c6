"""The JSON report and the printed table."""

from pypto_conformance.results import Record
from pypto_conformance.table import format_summary, format_table


def test_json_report_and_table(run_cli):
    run = run_cli("--backend", "reference", "-k", "add- or reduce_max_2d or declaration")
    assert run.returncode == 0, run
    report = run.report
    assert report["pypto_conformance"] == "0.1.0" and report["pypto_core"]
    assert report["summary"]["passed"] == len(report["results"]) == 25  # add, reduce_max_2d: 12 dtypes each
    assert report["summary"]["failed"] == 0
    (ref,) = [b for b in report["backends"] if b["name"] == "reference"]
    assert ref["available"] and "float64" in ref["dtypes"] and ref["fp64"] is True
    row = run.results(case="add", dtype="float32")[0]
    assert set(row) >= {"case", "dtype", "backend", "outcome", "max_abs_error", "max_rel_error", "tolerances"}
    assert row["tolerances"] == {"float32": {"rtol": 1e-5, "atol": 1e-6}}
    assert row["nodeid"].endswith("test_case[add-float32-reference]")
    # tolerances are reported per result dtype
    assert set(run.results(case="reduce_max_2d", dtype="int64")[0]["tolerances"]) == {"int64"}
    # the table: one row per result, with the errors
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("add ")]
    assert len(lines) == 12 and all("pass" in ln for ln in lines)
    assert "pypto-conformance: 25 passed" in run.stdout


def test_table_rows_show_reasons_and_errors():
    records = [
        Record("add", "float32", "cpu", "passed", max_abs_error=1.5e-7, max_rel_error=2e-7),
        Record("add", "float64", "cpu", "skipped", reason="backend 'cpu' declares fp64=False (capabilities.fp64)"),
        Record(
            "exp", "float32", "cpu", "failed", message="case 'exp' [float32] on backend 'cpu' disagrees:\n  - N=7: bad"
        ),
        Record("fuzz", "int32", "cpu", "passed", details={"examples": 300}),
    ]
    text = format_table(records)
    lines = text.splitlines()
    assert lines[0].split() == ["case", "dtype", "backend", "result", "max", "abs", "err", "max", "rel", "err", "note"]
    assert "1.50e-07" in lines[2] and "2.00e-07" in lines[2]
    assert "skip" in lines[3] and "fp64=False" in lines[3]
    assert "FAIL" in lines[4] and lines[4].endswith("N=7: bad")
    assert lines[5].endswith("300 random kernels")
    assert format_summary(records) == "2 passed, 1 failed, 1 skipped"
    assert format_table([]) == ""
