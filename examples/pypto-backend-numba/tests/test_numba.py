"""The Numba backend: registration, the generated Python, and semantics shared with every backend.

Each test compares with NumPy on the same inputs. The conformance suite (``pypto-conformance
--backend numba``) covers the whole language; these tests cover what is particular to this backend:
its declaration, its steps (codegen, compile, launch), its source, both compiled variants (serial and ``prange``) and the
helpers.
"""

import ast

import numpy as np
import pytest

import pypto as pt
from pypto.backend_api import PLUGIN_API_VERSION, Artifact, Source
from pypto.ir.loops import Loop, walk
from pypto.plugins import get_registry
from pypto.testing import N, np_softmax, np_sum_exp, softmax, sum_exp
from pypto_numba import plugin
from pypto_numba.launcher import NumbaLauncher, namespace
from pypto_numba.plugin import BACKEND
from pypto_numba.renderer import NAMESPACE_NAMES, NumbaRenderer


@pytest.fixture(params=["serial", "parallel"])
def variant(request, monkeypatch):
    """Run a test with the single-threaded compilation, then with prange on every call."""
    if request.param == "parallel":
        monkeypatch.setenv("PYPTO_NUMBA_PARALLEL_MIN_WORK", "0")
    else:
        monkeypatch.setenv("PYPTO_NUMBA_PARALLEL_MIN_WORK", str(2**62))
    return request.param


def test_declared_through_the_entry_point():
    assert "numba" in pt.list_backends()
    info = pt.get_runtime_info()["backends"]["numba"]
    assert info["available"] and info["distribution"] == "pypto-backend-numba"
    assert 0 < info["priority"] < 100  # above the reference, below the C backends
    assert plugin.PYPTO_PLUGIN_API == PLUGIN_API_VERSION
    assert plugin.pypto_backends() == [BACKEND] and get_registry().backend("numba") is BACKEND


def test_spec():
    spec = BACKEND.spec
    assert spec.name == BACKEND.name == "numba" and spec.plugin_api == PLUGIN_API_VERSION
    assert spec.target is None  # the core's loop IR, no target passes
    assert not spec.cacheable  # the artifact is source; Numba compiles it in each process
    assert spec.probe().available and spec.info is not None and "numba" in spec.info()["compiler"]
    assert BACKEND.compile_key(pt.kernel(executor="numba")(softmax.fn).program()) == ""


def test_the_plugin_module_does_not_import_numba(run_py):
    proc = run_py(
        """
        import sys
        import pypto as pt
        from pypto.testing import softmax
        from pypto_numba.plugin import BACKEND
        program = pt.kernel(executor="numba")(softmax.fn).program()
        source = BACKEND.render(program)
        BACKEND.build(program, source)
        assert "numba" not in sys.modules, "rendering and building must not import numba"
        print("ok")
        """
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_four_steps_by_hand(variant):
    program = pt.kernel(executor="numba")(softmax.fn).program()
    assert program.target is None
    assert all(s.threads_if is None and s.streaming is None for s in walk(program.loops.body) if isinstance(s, Loop))
    source = BACKEND.render(program)
    assert isinstance(source, Source) and source.display == source.text
    artifact = BACKEND.build(program, source)
    assert isinstance(artifact, Artifact) and artifact.data.decode() == source.text
    launcher = BACKEND.load(program, artifact)
    assert launcher.parallel is not None  # softmax has prange loops: both variants are compiled
    x = np.random.default_rng(2).standard_normal((37, 129)).astype(np.float32)
    y = np.empty_like(x)
    launcher(x, y, *x.shape)  # buffers, then dims: the loop IR's argument order
    np.testing.assert_allclose(y, np_softmax(x), rtol=1e-5, atol=1e-7)


def test_generated_source_is_python_with_prange():
    kernel = pt.kernel(executor="numba")(softmax.fn)
    source = kernel.get_code()
    ast.parse(source)
    assert "def softmax(x, y, M, N):" in source
    assert "_prange(0, M)" in source and "_pt_maximum_f32" in source
    assert "float64" not in source  # float32 constants are spelled _pt_f32(...)


def test_softmax_both_variants(variant):
    kernel = pt.kernel(executor="numba")(softmax.fn)
    x = np.random.default_rng(0).standard_normal((37, 129)).astype(np.float32)
    x[3, 5] = np.nan
    y = pt.empty_like(x)
    kernel(x, y)
    with np.errstate(invalid="ignore"):
        want = np_softmax(x)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)
    assert np.isnan(y[3]).all()  # the row max propagates NaN


def test_full_reduction_split_into_blocks(variant):
    kernel = pt.kernel(executor="numba")(sum_exp.fn)
    x = np.random.default_rng(1).standard_normal(100_003).astype(np.float32)
    out = np.zeros(1, np.float32)
    kernel(x, out)
    np.testing.assert_allclose(out[0], np_sum_exp(x), rtol=1e-5)


def test_integer_semantics_match_numpy(variant):
    @pt.kernel(executor="numba")
    def iops(a: pt.Tensor[int, (N,)], b: pt.Tensor[int, (N,)], o: pt.Tensor[int, (5, N)]):
        i = pt.axis(0)
        o[0, i] = a[i] // b[i]
        o[1, i] = a[i] % b[i]
        o[2, i] = a[i] * b[i] + 2147483647  # wraps around like NumPy
        o[3, i] = pt.maximum(a[i], b[i])
        o[4, i] = abs(a[i])

    a = np.array([7, -7, 7, -7, 5, -(2**31), -(2**31), 0], np.int32)
    b = np.array([2, 2, -2, -2, 0, -1, 3, 0], np.int32)
    o = np.empty((5, a.size), np.int32)
    iops(a, b, o)
    with np.errstate(all="ignore"):
        want = [a // b, a % b, a * b + np.int32(2147483647), np.maximum(a, b), np.abs(a)]
    for row, w in enumerate(want):
        np.testing.assert_array_equal(o[row], w)


def test_float_semantics_match_numpy(variant):
    @pt.kernel(executor="numba")
    def fops(a: pt.Tensor[float, (N,)], b: pt.Tensor[float, (N,)], o: pt.Tensor[float, (5, N)]):
        i = pt.axis(0)
        o[0, i] = a[i] // b[i]
        o[1, i] = a[i] % b[i]
        o[2, i] = pt.maximum(a[i], b[i])
        o[3, i] = pt.minimum(a[i], b[i])
        o[4, i] = a[i] * 0.1 + 1  # weak scalars: float32 arithmetic, never float64

    a = np.array([7.5, -7.5, 7.5, -0.0, 1.0, np.nan, 3.0, -2.0], np.float32)
    b = np.array([2.0, 2.0, -2.0, 3.0, 0.0, 1.0, np.nan, np.inf], np.float32)
    o = np.empty((5, a.size), np.float32)
    fops(a, b, o)
    with np.errstate(all="ignore"):
        want = [a // b, a % b, np.maximum(a, b), np.minimum(a, b), a * np.float32(0.1) + np.float32(1)]
    for row, w in enumerate(want):
        np.testing.assert_array_equal(o[row], w)


def test_zero_dimensional_buffers_and_fastmath(variant):
    @pt.kernel(executor="numba", fastmath=True)
    def scale(x: pt.Tensor[float, (N,)], s: pt.Tensor[float, ()], y: pt.Tensor[float, (N,)], t: pt.Tensor[float, ()]):
        i = pt.axis(0)
        y[i] = x[i] * s[()]
        t[()] = pt.reduce_sum(x[i], axis=i)

    x, s = np.arange(5, dtype=np.float32), np.array(3.0, np.float32)
    y, t = pt.empty(5), np.zeros((), np.float32)
    scale(x, s, y, t)
    np.testing.assert_array_equal(y, 3 * x)
    assert t == x.sum()


def test_threads_and_threshold(monkeypatch):
    monkeypatch.setenv("PYPTO_NUM_THREADS", "1")
    program = pt.kernel(executor="numba")(softmax.fn).program()
    launcher = BACKEND.load(program, BACKEND.build(program, BACKEND.render(program)))
    assert isinstance(launcher, NumbaLauncher) and launcher.parallel is not None
    small, large = np.ones((2, 3), np.float32), np.ones((1024, 1024), np.float32)
    assert launcher.choose((small, small, 2, 3)) is launcher.serial
    assert launcher.choose((large, large, 1024, 1024)) is launcher.parallel
    assert launcher.threads == 1
    out = np.empty_like(large)
    launcher(large, out, 1024, 1024)
    np.testing.assert_allclose(out, np_softmax(large), rtol=1e-6)


def test_kernel_names_never_shadow_the_generated_modules_globals():
    assert set(namespace()) == NAMESPACE_NAMES

    def _range(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = x[i] + 1.0

    kernel = pt.kernel(executor="numba")(_range)
    # pypto never gives a kernel a name starting with "_", so it cannot clash with the module's helpers
    assert kernel.name == "k_range" and kernel.name not in NAMESPACE_NAMES
    assert "def k_range(x, y, N):" in kernel.get_code()
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(kernel(x, pt.empty(3)), x + 1)


def test_compile_errors_are_pypto_errors():
    launcher = NumbaLauncher("broken", "def broken(x):\n    x[0] = undefined_name\n", parallel=False)
    with pytest.raises(pt.CompileError, match="Numba could not compile kernel 'broken'"):
        launcher(np.zeros(1, np.float32))


@pytest.mark.parametrize(
    "value,dtype,text",
    [
        (0.1, pt.float32, "_pt_f32(0.1)"),
        (float("-inf"), pt.float32, "_pt_f32(-_math.inf)"),
        (float("nan"), pt.float64, "_math.nan"),
        (-(2**31), pt.int32, "_pt_i32(-2147483648)"),
        (-(2**63), pt.int64, "-9223372036854775807 - 1"),
        (True, pt.bool_, "True"),
    ],
)
def test_literals_keep_their_dtype(value, dtype, text):
    assert NumbaRenderer().literal(value, dtype) == text
