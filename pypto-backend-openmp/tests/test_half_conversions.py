"""Conversions of the 16-bit floats in generated C: bit-exact against NumPy (float16) and ml_dtypes (bfloat16)."""

import numpy as np
import pytest

import pypto as pt

N = pt.dim("N")


def _float32_sweep(rng: np.random.Generator) -> np.ndarray:
    """Random float32 bit patterns, exact ties of both 16-bit types, and the special values of both."""
    bits = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    bf16_ties = np.arange(0x3F800000, 0x3F900000, 0x8000, dtype=np.uint32) | 0x8000  # halfway between bfloat16s
    f16_ties = (
        rng.integers(0x33000000, 0x47800000, 1 << 14, dtype=np.uint64).astype(np.uint32) & ~np.uint32(0x1FFF)
    ) | 0x1000
    special = np.array([0, 0x7F800000, 0x7FC00000, 0x7F800001, 0x00000001, 0x7F7FFFFF,  # zero, inf, NaNs, extremes
                        0x477FF000, 0x477FEFFF, 0x477FE000,  # float16: 65520 rounds to inf, just below does not
                        0x38800000, 0x387FFFFF, 0x33800000, 0x33000000, 0x33000001, 0x32FFFFFF],  # its subnormals
                       np.uint32)  # fmt: skip
    return np.concatenate([bits, bf16_ties, f16_ties, special, special | 0x80000000]).view(np.float32)


@pytest.mark.parametrize("dt", [pt.float16, pt.bfloat16], ids=str)
def test_rounding_to_half_types_is_bit_exact(dt):
    @pt.kernel
    def narrow(x: pt.Tensor[pt.float32, (N,)], out: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        out[i] = pt.cast(x[i], dt)

    @pt.kernel
    def widen(x: pt.Tensor[dt, (N,)], out: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        out[i] = pt.cast(x[i], pt.float32)

    x = _float32_sweep(np.random.default_rng(7))
    out = np.empty(x.size, dt.numpy)
    with np.errstate(all="ignore"):
        want = x.astype(dt.numpy)
    narrow(x, out)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(out), nan)
    np.testing.assert_array_equal(out.view(np.uint16)[~nan], want.view(np.uint16)[~nan])  # ties to even, overflow inf
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(dt.numpy)  # every 16-bit pattern
    back = np.empty(every.size, np.float32)
    widen(every, back)
    want = every.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(back), nan)
    np.testing.assert_array_equal(back.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def test_generated_code_converts_at_loads_and_stores():
    @pt.kernel
    def k(x: pt.Tensor[pt.bfloat16, (N,)], y: pt.Tensor[pt.float16, (N,)], out: pt.Tensor[pt.bfloat16, (N,)]):
        i = pt.axis(0)
        out[i] = x[i] * y[i]

    code = k.get_code()
    assert "const uint16_t *restrict x" in code and "const uint16_t *restrict y" in code  # their bits
    assert "pt_bf16_f32(x[" in code and "pt_f16_f32(y[" in code  # widened where loaded
    assert "] = pt_f32_bf16(" in code  # rounded where stored
