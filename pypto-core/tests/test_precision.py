"""pt.set_precision / @pt.jit(precision=...): float32 contractions in "float32", "mixed" (bfloat16 operands,
float32 accumulation) and "highest" (float64 accumulation), each within its documented bound of the exact
(float64) product."""

import ml_dtypes
import numpy as np
import pytest

import pypto as pt

U32, U64, U_BF16 = 2.0**-24, 2.0**-53, 2.0**-8  # unit roundoffs


@pytest.fixture
def operands(rng):
    a = rng.standard_normal((48, 300)).astype(np.float32)
    b = rng.standard_normal((300, 40)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))  # sum of |a||b| per element
    return a, b, exact, scale


def bf16(x: np.ndarray) -> np.ndarray:
    """Rounded to bfloat16 (nearest, ties to even) by ml_dtypes, back in float64."""
    return x.astype(ml_dtypes.bfloat16).astype(np.float64)


def test_each_mode_is_within_its_documented_bound(operands):
    a, b, exact, scale = operands
    k = a.shape[1]
    results = {mode: pt.jit(lambda a, b: a @ b, precision=mode)(a, b) for mode in ("float32", "mixed", "highest")}
    err = {mode: np.abs(r.astype(np.float64) - exact) for mode, r in results.items()}
    assert np.all(err["float32"] <= k * U32 * scale)
    assert np.all(err["mixed"] <= (2 * U_BF16 + U_BF16**2 + k * U32) * scale)
    assert np.all(err["highest"] <= U32 * np.abs(exact) + k * U64 * scale)
    # the modes differ as they should: mixed loses the operands' low bits, highest rounds only once
    assert err["mixed"].max() > 100 * err["float32"].max()
    assert err["highest"].max() <= err["float32"].max()


def test_mixed_multiplies_the_operands_rounded_to_bfloat16(operands):
    a, b, _, _ = operands
    got = pt.jit(lambda a, b: a @ b, precision="mixed")(a, b).astype(np.float64)
    want = bf16(a) @ bf16(b)  # the same products, exactly; only the float32 accumulation differs
    scale = np.abs(bf16(a)) @ np.abs(bf16(b))
    assert np.all(np.abs(got - want) <= a.shape[1] * U32 * scale)


def test_set_precision_is_global_and_a_context_manager(operands):
    a, b, exact, _ = operands
    f = pt.jit(lambda a, b: pt.einsum("ik,kj->ij", a, b))
    assert pt.get_precision() == "float32"
    plain = f(a, b)
    with pt.set_precision("mixed"):
        assert pt.get_precision() == "mixed"
        mixed = f(a, b)  # compiled again for this mode
    assert pt.get_precision() == "float32"
    np.testing.assert_array_equal(f(a, b), plain)  # the float32 program, from the cache
    assert np.abs(mixed - exact).max() > 100 * np.abs(plain - exact).max()
    pt.set_precision("highest")
    try:
        assert np.abs(f(a, b) - exact).max() <= np.abs(plain - exact).max()
        # a function's own precision= wins over the process's
        np.testing.assert_array_equal(pt.jit(lambda a, b: a @ b, precision="float32")(a, b), plain)
    finally:
        pt.set_precision("float32")


def test_only_float32_contractions_change(rng):
    x = rng.standard_normal((20, 30))  # float64: never rounded
    w = rng.standard_normal((30, 10))
    with pt.set_precision("mixed"):
        np.testing.assert_allclose(pt.jit(lambda x, w: x @ w)(x, w), x @ w, rtol=1e-12, atol=1e-12)
        x32 = x.astype(np.float32)
        # elementwise work and reductions stay float32
        got = pt.jit(lambda x: (x * 3.0).sum(axis=1))(x32).astype(np.float64)
        wide = 3.0 * x32.astype(np.float64)
        assert np.all(np.abs(got - wide.sum(axis=1)) <= 2 * 30 * U32 * np.abs(wide).sum(axis=1))


def test_gradients_use_the_mode_too(operands):
    a, b, _, _ = operands
    f = pt.jit(lambda a, b: (a @ b).sum(), precision="mixed")
    ga = pt.grad(f)(a, b)
    want = np.ones((a.shape[0], b.shape[1])) @ bf16(b).T  # the backward product reads bfloat16 operands too
    np.testing.assert_allclose(ga, want, rtol=1e-5, atol=1e-4)


def test_bad_modes_are_typed_errors():
    with pytest.raises(pt.ArgumentError, match="unknown precision 'bf16'"):
        pt.set_precision("bf16")
    with pytest.raises(pt.ArgumentError, match="unknown precision"):
        pt.jit(lambda x: x, precision="half")
    assert pt.get_precision() == "float32"


def test_the_mode_shows_in_the_kernel(operands):
    a, b, _, _ = operands
    text = pt.jit(lambda a, b: a @ b, precision="mixed").ir(a, b, stage="infer_types")
    assert "cast(" in text and "bfloat16" in text
