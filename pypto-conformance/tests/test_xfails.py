"""Expected failures from a file: parsing, matching, and their effect on a run."""

import pytest
from fake_backends import BROKEN_CODEGEN, plugin_source

from pypto_conformance.datafile import DataFileError
from pypto_conformance.xfails import XfailEntry, find_xfail, parse_xfails

XFAILS = """
[[xfail]]
case = "add"
backend = "broken"
reason = "adds by subtracting (known bug)"

[[xfail]]
case = "row_bias"
dtype = "int*"
backend = "broken"
reason = "crashes on integers"
run = false

[[xfail]]
case = "subtract"
dtype = "float32"
backend = "broken"
reason = "stale entry: subtract works"

[[xfail]]
case = "no_such_case"
reason = "matches nothing"
"""


def test_parse_and_match():
    entries = parse_xfails({"xfail": [{"case": "soft*", "backend": "open*", "reason": "why"}]}, "test")
    assert entries == [XfailEntry(case="soft*", reason="why", backend="open*")]
    assert find_xfail(entries, "softmax", "float32", "openmp") is entries[0]
    assert find_xfail(entries, "softmax", "float32", "tbb") is None
    assert find_xfail(entries, "log_softmax", "float32", "openmp") is None


@pytest.mark.parametrize(
    "entry,problem",
    [
        ({"case": "add"}, "reason"),
        ({"case": "add", "reason": "  "}, "reason"),
        ({"reason": "r"}, "'case'"),
        ({"case": "add", "reason": "r", "why": 1}, "unknown key"),
        ({"case": "add", "reason": "r", "run": "no"}, "'run' must be true or false"),
        ({"case": "add", "reason": "r", "dtype": 3}, "'dtype' must be a string"),
    ],
)
def test_entries_are_validated(entry, problem):
    with pytest.raises(DataFileError, match=problem):
        parse_xfails({"xfail": [entry]}, "xf.toml")


def test_xfail_file_on_a_run(plugin_site, run_cli, tmp_path):
    site = plugin_site("broken", plugin_source("broken", codegen=BROKEN_CODEGEN))
    xfails = tmp_path / "xfails.toml"
    xfails.write_text(XFAILS)
    run = run_cli("--backend", "broken", "-k", "add- or subtract- or row_bias", "--xfails", str(xfails), site=site)
    assert run.returncode == 1, run
    for row in run.results(case="add"):
        if row["dtype"] not in ("float32", "float64", "int32", "int64"):  # undeclared: skipped before any xfail
            assert row["outcome"] == "skipped" and "does not declare" in row["reason"]
        else:
            assert row["outcome"] == "xfailed" and row["reason"] == "adds by subtracting (known bug)"
    for dtype in ("int32", "int64"):
        (row,) = run.results(case="row_bias", dtype=dtype)
        assert row["outcome"] == "skipped" and "crashes on integers" in row["reason"]
    assert {r["outcome"] for r in run.results(case="row_bias", dtype="float32")} == {"failed"}
    (stale,) = run.results(case="subtract", dtype="float32")
    assert stale["outcome"] == "failed" and "XPASS(strict)" in stale["message"]
    assert run.report["xfails_unused"] == ["case='no_such_case' dtype='*' backend='*'"]
    assert "xfail entry matched nothing" in run.stdout


def test_bad_xfail_file_is_a_usage_error(run_cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[xfail]]\ncase = "add"\n')
    run = run_cli("--backend", "reference", "-k", "add-", "--xfails", str(bad))
    assert run.returncode == 4 and "needs a non-empty 'reason'" in run.stderr, run
