"""The fuzzer's own model of the language: typing rules, the NumPy evaluation and its error bounds."""

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings

import pypto as pt
from pypto_conformance.fuzz import programs, rules, run_campaign
from pypto_conformance.fuzz.check import build_kernel, program_inputs
from pypto_conformance.fuzz.evaluate import evaluate
from pypto_conformance.fuzz.tree import Program, Tensor, binary, const, load, reduce, unary
from pypto_conformance.tolerances import default_table


def test_typing_rules():
    assert rules.promote("int32", "float32") == "float32"
    assert rules.promote("int64", "float32") == "float32"  # floats beat integers, never float64
    assert rules.promote("int32", "int64") == "int64"
    assert rules.with_weak("float32", "float") == "float32"  # x * 2.0 stays float32
    assert rules.with_weak("int64", "float") == "float32"
    assert rules.with_weak("int32", "int", 2**40) == "int64"
    assert rules.arith_result("div", "int32") == "float32"
    assert rules.arith_result("add", "bool") == "int32"
    assert rules.function_type("int64") == "float32"


def _program(root, m=3, n=4, store="full"):
    from pypto_conformance.fuzz.tree import tensors_of

    return Program(m, n, root, store, seed=7, tensors=tuple(tensors_of(root)))


def test_evaluation_matches_numpy_and_bounds_errors():
    x = load(Tensor("x0", "float32", "full", "signed"))
    r = load(Tensor("r1", "float32", "row", "positive"))
    p = _program(binary("add", binary("mul", x, const(2.0)), unary("log", r)))
    arrays = program_inputs(p)
    got = evaluate(p, arrays)
    # every node rounds to float32: x * 2 (exact), log(r) rounded, then their sum rounded
    log_r = np.log(arrays["r1"].astype(np.float64)).astype(np.float32)[None, :]
    want = (arrays["x0"].astype(np.float64) * 2 + log_r.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got.v, want)
    assert got.v.dtype == np.float32 and np.all(np.isfinite(got.e)) and np.all(got.e > 0) and np.all(got.e < 1e-5)


def test_ambiguous_comparisons_are_not_compared():
    x = load(Tensor("x0", "float32", "full", "grid"))
    exact = binary("lt", x, const(0.5))  # exact inputs: always decidable
    noisy = binary("lt", binary("mul", x, const(0.1)), const(0.05))  # 0.5 * 0.1 may round either way
    e_exact = evaluate(_program(exact), program_inputs(_program(exact))).e
    assert np.all(e_exact == 0)
    p = _program(noisy, m=33, n=33)
    arrays = program_inputs(p)
    e = evaluate(p, arrays).e
    ties = arrays["x0"] == 0.5
    assert ties.any() and np.all(np.isinf(e[ties])) and np.all(e[~ties] == 0)


def test_empty_reductions_give_identities():
    x = load(Tensor("x0", "int32", "full", "int_signed"))
    for op, want in (("sum", 0), ("max", np.iinfo(np.int32).min), ("min", np.iinfo(np.int32).max), ("prod", 1)):
        p = _program(reduce(op, x, ("j",), 3, 0), m=3, n=0, store="row")
        got = evaluate(p, program_inputs(p))
        assert got.v.tolist() == [want] * 3, op


def test_generated_kernels_are_valid_and_deterministic():
    sources = []

    @settings(
        max_examples=40,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(programs("int64"))
    def collect(program):
        sources.append(program.source())
        kernel = pt.kernel(executor="reference")(build_kernel(program))
        assert "kernel fuzz_kernel" in kernel.ir("infer_types")

    collect()
    first, sources[:] = list(sources), []
    collect()
    assert sources == first and len(set(first)) > 20


def test_campaign_on_the_reference_backend():
    tol = default_table()
    outcome = run_campaign(
        "reference", "float64", frozenset(rules.KIND), 30, lambda dt, fns: tol.resolve(dt, functions=fns)
    )
    assert outcome.ok, outcome.message
    assert outcome.details["examples"] == 30 and outcome.details["elements_compared"] > 0


def test_complex_typing_rules_agree_with_pypto():
    from pypto import dtypes

    names = [*rules.COMPLEX_TYPES, "float16", "float32", "float64", "int8", "int32", "int64", "uint64", "bool"]
    for a in names:
        for b in names:
            if "complex" in a or "complex" in b:
                assert rules.promote(a, b) == dtypes.promote(dtypes.as_dtype(a), dtypes.as_dtype(b)).name, (a, b)
    assert rules.with_weak("float32", "complex") == "complex64"  # x * 1j
    assert rules.with_weak("float64", "complex") == "complex128"
    assert rules.with_weak("int64", "complex") == "complex64"
    assert rules.with_weak("complex64", "float") == "complex64"
    assert rules.arith_result("div", "complex64") == "complex64"
    assert rules.function_type("complex128") == "complex128" and rules.unit_roundoff("complex64") == 2.0**-24


def test_complex_evaluation_matches_numpy():
    z = load(Tensor("x0", "complex64", "full", "complex_signed"))
    w = load(Tensor("r1", "complex64", "row", "complex_signed"))
    d = load(Tensor("c2", "float32", "col", "positive"))
    shifted = binary("add", binary("mul", w, const(0.125)), const(1.5))  # modulus at least 1
    root = binary("add", binary("mul", z, d), binary("div", unary("log", shifted), const(0.5 + 1j)))
    p = _program(root)
    arrays = program_inputs(p)
    got = evaluate(p, arrays)
    z64, w64, d64 = (arrays[k].astype(np.complex128) for k in ("x0", "r1", "c2"))
    want = z64 * d64[:, None] + np.log(w64[None, :] * 0.125 + 1.5) / (0.5 + 1j)
    assert got.v.dtype == np.complex64
    np.testing.assert_allclose(got.v, want, rtol=1e-6, atol=1e-6)
    assert np.all(np.abs(got.v - want) <= got.e) and np.all(got.e < 1e-4)


def test_complex_branch_cuts_are_ambiguous():
    # grid values put points exactly on the negative real axis, where the sign of a zero imaginary part picks
    # the result of sqrt, log and angle: those elements are not compared; the rest are, with finite bounds
    z = load(Tensor("x0", "complex128", "full", "complex_grid"))
    for op in ("sqrt", "angle"):
        p = _program(unary(op, z), m=17, n=17)
        arrays = program_inputs(p)
        e = evaluate(p, arrays).e
        v = arrays["x0"]
        on_cut = (v.imag == 0) & (v.real < 0)
        assert on_cut.any() and np.all(np.isinf(e[on_cut])), op
        assert np.all(np.isfinite(e[~on_cut & (v != 0)])), op


def test_complex_kernels_are_drawn():
    sources = []

    @settings(max_examples=150, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(programs("complex64"))
    def collect(program):
        sources.append(program.source())

    collect()
    text = "\n".join(sources)
    for spelling in ("pt.complex64", "pt.log(", "pt.sqrt(", "pt.exp(", " / ", "pt.reduce_sum", "j)"):
        assert spelling in text, spelling


def test_complex_campaign_on_the_reference_backend():
    tol = default_table()
    for family in rules.COMPLEX_TYPES:
        outcome = run_campaign(
            "reference", family, frozenset(rules.KIND), 30, lambda dt, fns: tol.resolve(dt, functions=fns)
        )
        assert outcome.ok, outcome.message
        assert outcome.details["examples"] == 30 and outcome.details["elements_compared"] > 0


def test_gathered_tensors_read_through_random_index_arrays():
    """A row table read at an index per ``i`` (negative ones from the end) and a column picked per ``(i, j)``:
    the kernel the fuzzer writes and its evaluation both read what NumPy's indexing reads."""
    rows, picked = Tensor("g0", "float32", "gather", "signed"), Tensor("p1", "int32", "pick", "int_signed")
    program = _program(binary("add", load(rows), load(picked)), m=6, n=4)
    source = program.source()
    assert "g0[g0_ix[i], j]" in source and "p1[i, p1_ix[i, j]]" in source
    assert "g0_ix: pt.Tensor[pt.int64, (M,)]" in source and "p1_ix: pt.Tensor[pt.int32, (M, N)]" in source
    arrays = program_inputs(program)
    assert arrays["g0_ix"].min() < 0 <= arrays["g0_ix"].max() < 7  # negative indices are drawn
    picks = np.take_along_axis(arrays["p1"], arrays["p1_ix"].astype(np.intp), 1)
    want = arrays["g0"][arrays["g0_ix"]] + picks.astype(np.float32)  # float32 + int32 is float32 in pypto
    np.testing.assert_array_equal(evaluate(program, arrays).v, want)
    out = np.zeros((6, 4), np.float32)
    pt.kernel(executor="reference")(build_kernel(program))(**arrays, out=out)
    np.testing.assert_array_equal(out, want)
