"""pypto.testing, the helpers every package's tests share: importable without pytest, kernels that point
at their own source, the subprocess runner and the counting compiler."""

import math

import numpy as np
import pytest

import pypto as pt
from pypto.testing import (
    counting_compiler,
    np_layernorm,
    np_softmax,
    np_sum_exp,
    run_python,
    softmax,
    unavailable_script,
    vector_add,
)


def test_importable_without_pytest():
    code = "import sys; sys.modules['pytest'] = None\nimport pypto.testing\nprint('pytest' in sys.modules and sys.modules['pytest'] is not None)"
    assert run_python(code, check=True).stdout.strip() == "False"


def test_kernel_locations_are_in_pypto_testing():
    code = vector_add.get_code(backend="reference")
    assert "# kernels.py:" in code and "c[i] = a[i] + b[i]" in code


def test_references_keep_the_input_dtype(rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    assert np_softmax(x).dtype == np.float32 and np_softmax(x.astype(np.float64)).dtype == np.float64
    np.testing.assert_allclose(np_softmax(x).sum(1), 1, rtol=1e-6)
    assert np_sum_exp(x[0]).dtype == np.float64
    g, b = np.ones(5, np.float32), np.zeros(5, np.float32)
    y = np_layernorm(x, g, b)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.mean(1), 0, atol=1e-6)


def test_softmax_kernel_matches_its_reference(rng):
    x = rng.standard_normal((4, 9)).astype(np.float32)
    y = pt.empty_like(x)
    softmax(x, y)
    np.testing.assert_allclose(y, np_softmax(x), rtol=2e-6, atol=1e-7)


def test_run_python_environment_and_check(monkeypatch):
    monkeypatch.setenv("PT_TESTING_DROPPED", "1")
    code = """
        import os, sys
        print(os.environ.get("PT_TESTING_DROPPED"), os.environ.get("PT_TESTING_GIVEN"))
        sys.exit(int(os.environ.get("PT_TESTING_STATUS", "0")))
    """
    r = run_python(code, {"PT_TESTING_GIVEN": "yes"}, drop=("PT_TESTING_DROPPED",))
    assert r.returncode == 0 and r.stdout.split() == ["None", "yes"]
    assert run_python(code, {"PT_TESTING_STATUS": "3"}).returncode == 3
    with pytest.raises(AssertionError, match="exited with status 3"):
        run_python(code, {"PT_TESTING_STATUS": "3"}, check=True)


def test_run_py_fixture_sees_the_tests_executor_and_cache(run_py, pypto_executor, pypto_cache_dir):
    r = run_py("import os; print(os.environ['PYPTO_EXECUTOR'], os.environ['PYPTO_CACHE_DIR'])", check=True)
    assert r.stdout.split() == [pypto_executor, str(pypto_cache_dir)]


def test_counting_compiler_counts_and_compiles(tmp_path):
    try:
        cc = counting_compiler(tmp_path, "c")
    except pt.CompileError as e:
        pytest.skip(f"no C compiler: {e}")
    (tmp_path / "one.c").write_text("int one(void) { return 1; }\n")
    assert cc.count() == 0 and cc.invocations() == []
    for _ in range(2):
        r = run_python(
            f"import subprocess; subprocess.run([{cc.path!r}, '-c', 'one.c', '-o', 'one.o'], cwd={str(tmp_path)!r}, check=True)"
        )
        assert r.returncode == 0, r.stderr
    assert cc.count("one.c") == 2 and cc.count("other.c") == 0 and (tmp_path / "one.o").is_file()


def test_unavailable_script_reports_for_the_backend():
    r = run_python(unavailable_script("reference", "def k("), check=True)
    assert r.stdout.splitlines() == ["AVAILABLE True", "REASON ", "CODE"]  # ran: no UNAVAILABLE line
    r = run_python(unavailable_script("reference", "no such text"), check=True)
    assert r.stdout.endswith("\nNOCODE\n")


def test_ulp_error_counts_units_of_the_last_place():
    from pypto.testing import ulp_error

    one = np.float32(1.0)
    want = np.array([1.0, 1.0 + 2**-24, 1.0, np.inf, 4e38, np.nan, 1.0], np.float64)
    got = np.array([one, one, np.nextafter(one, np.float32(2)), np.inf, np.inf, np.nan, np.nan], np.float32)
    np.testing.assert_allclose(ulp_error(got, want), [0.0, 0.5, 1.0, 0.0, 0.0, 0.0, np.inf])


def test_generated_erf_coefficients_match_a_fresh_derivation():
    from pypto.targets.cpu.vmath import ERFCX_COEFFICIENTS, erfcx_coefficients

    fresh = erfcx_coefficients()
    frozen = [float.fromhex(c) for c in ERFCX_COEFFICIENTS]
    u = np.linspace(-1.0, 1.0, 1001)
    np.testing.assert_allclose(np.polyval(frozen, u), np.polyval(fresh, u), rtol=1e-13)
    x = 0.75 + (u + 1) * (4.0 - 0.75) / 2  # and the interpolant is erfcx to 3e-8 (math.erfc as reference):
    erfcx = np.array([math.exp(v * v) * math.erfc(v) for v in x])  # a term below 0.29 of erf, 0.1 ulp at most
    np.testing.assert_allclose(np.polyval(frozen, u), erfcx, rtol=3e-8)
