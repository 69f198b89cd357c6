"""Declared capabilities drive skips (with the reason); nothing else may skip a result."""

from fake_backends import SKIPPING_LAUNCH, plugin_source


def test_capabilities_skips_and_declarations(plugin_site, run_cli):
    limited = 'Capabilities(dtypes=frozenset({"float32"}), fp64=False)'
    plugin_site("limited", plugin_source("limited", capabilities=limited))
    plugin_site("skipper", plugin_source("skipper", launch=SKIPPING_LAUNCH))
    plugin_site("odd", plugin_source("odd", capabilities='Capabilities(dtypes=frozenset({"float32", "complex256"}))'))
    site = plugin_site("offline", plugin_source("offline", probe='Availability(False, "no fake device attached")'))
    run = run_cli("--backend", "all", "-k", "add- or declaration or fuzz-int32", "--max-examples", "5", site=site)
    assert run.returncode == 1, run

    def outcome(case, dtype, backend):
        (row,) = run.results(case=case, dtype=dtype, backend=backend)
        return row

    # capabilities: what is not declared is skipped, with the reason
    assert outcome("add", "float32", "limited")["outcome"] == "passed"
    f64 = outcome("add", "float64", "limited")
    assert f64["outcome"] == "skipped" and "fp64=False" in f64["reason"]
    i32 = outcome("add", "int32", "limited")
    assert i32["outcome"] == "skipped" and "does not declare dtype(s) int32" in i32["reason"]
    assert outcome("fuzz", "int32", "limited")["outcome"] == "skipped"
    assert outcome("fuzz", "int32", "reference")["outcome"] == "passed"

    # a backend cannot skip what it claims: a skip raised while running is a failure
    skipped = outcome("add", "float32", "skipper")
    assert skipped["outcome"] == "failed" and "Skipped" in skipped["message"]
    assert outcome("fuzz", "int32", "skipper")["outcome"] == "failed"

    # declarations are checked; an unavailable backend is reported with its reason, not run
    odd = outcome("declaration", "-", "odd")
    assert odd["outcome"] == "failed" and "complex256" in odd["message"] and "fp64" in odd["message"]
    assert outcome("declaration", "-", "limited")["outcome"] == "passed"
    offline = outcome("declaration", "-", "offline")
    assert offline["outcome"] == "skipped" and "no fake device attached" in offline["reason"]
    assert not run.results(case="add", backend="offline")
    assert {b["name"] for b in run.report["backends"]} >= {"reference", "limited", "skipper", "odd", "offline"}
    assert "no fake device attached" in run.stdout


def test_unknown_or_unavailable_backend_is_a_usage_error(plugin_site, run_cli):
    site = plugin_site("offline", plugin_source("offline", probe='Availability(False, "no fake device attached")'))
    run = run_cli("--backend", "offline", site=site)
    assert run.returncode == 2 and "no fake device attached" in run.stderr, run
    run = run_cli("--backend", "nosuch", site=site)
    assert run.returncode == 2 and "no such pypto backend" in run.stderr and "reference" in run.stderr, run
