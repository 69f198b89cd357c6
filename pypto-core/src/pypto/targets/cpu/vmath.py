"""pypto's own float32 ``exp`` and ``erf``, and ``hypot``, for the CPU backends: vectorisable C of measured accuracy.

The C backends call glibc's vector math (libmvec) for most functions. Measured on every 61st float32 bit
pattern of both signs (70 million values, against float64 NumPy / ``math.erf``; ``benchmarks/vmath_accuracy.py``),
libmvec's AVX-512 ``expf`` is off by up to 2.56 ulp (0.9 % of inputs above 1 ulp) and its ``erff`` by up to
4 ulp (8 % above 1 ulp). These two are generated into the kernel instead (its helpers):

``pt_expf`` (float arithmetic, ``static inline``: the compiler inlines it into the ``omp simd`` loops, as fast
as libmvec's): ``x = n ln2 + r`` with ``n = rint(x log2 e)`` (a vector instruction; the ``1.5 * 2**23``
addition trick would not survive ``fastmath``) and ``ln2`` split in a short high part (``n * hi`` is exact)
and a low part;
``e**r - 1 = r + r**2 p(r)`` with ``p`` the Taylor polynomial of degree 5 (terms to ``r**7 / 7!``; the first
omitted term is below ``1.5e-9`` relative for ``|r| <= ln2 / 2``); the result scaled by ``2**n`` in two
halves (so that results down to the smallest subnormal are rounded once). Inputs are clamped to
``[-104, 89]``, beyond which the float32 result is 0 or infinity; NaN propagates. Measured: at most 1.02 ulp.

``pt_erff`` (in double, then rounded once to float32): for ``|x| < 0.75`` the Taylor series of
``erf(x) / x`` in ``x**2`` (10 terms, remainder below ``1e-9``); above, ``1 - exp(-x**2) erfcx(x)`` with
``erfcx(x) = exp(x**2) erfc(x)`` a Chebyshev interpolant of degree :data:`ERFCX_DEGREE` on ``[0.75, 4]``
(relative error 3e-8, on a term below 0.29; :func:`erfcx_coefficients` derives it from ``math.erfc``),
``exp`` by a double version of the same reduction (Taylor to ``r**7 / 7!``); beyond 4, erf is 1 in float32.
Measured: at most 0.58 ulp, at 3.4x the time of libmvec's ``erff`` (in cache, 16K values: 36 against
10.6 us); ``gelu`` over 16M float32 takes 20 ms instead of 12.6 ms (torch eager: 26-29 ms). It is a vector
function of its own (``noinline``; gcc makes its ``omp declare simd`` clone), not inlined: inlined into the
eight rows of a register-tiled contraction's epilogue it took 1.5 s of gcc for one unit.

Only float32 is generated; float64 keeps libm / libmvec, and so do ``fastmath`` kernels: reassociation would
undo the range reduction and the two-step scaling (``exp(88.4)`` became infinite), and libmvec's functions
are made for ``-ffast-math``.
"""

from __future__ import annotations

import math

from pypto.dtypes import DType, float32, float64

ERFCX_LO, ERFCX_HI, ERFCX_DEGREE = 0.75, 4.0, 12

# erfcx on [0.75, 4] in u = (2x - 4.75) / 3.25, monomial coefficients from the highest power down
# (erfcx_coefficients(); pypto-core/tests/test_testing.py checks they still match a fresh derivation)
ERFCX_COEFFICIENTS = (
    "0x1.e0b9e691cc421p-15", "-0x1.2cda4364929a9p-13", "0x1.5b121927ea830p-13", "-0x1.8bffd9c964ee0p-12",
    "0x1.181f8cc503df7p-10", "-0x1.36bac1dac5572p-9", "0x1.45bbf0b3c3815p-8", "-0x1.527f83326859ap-7",
    "0x1.5461473cc8ae6p-6", "-0x1.48fc5a7a4b0edp-5", "0x1.30d955910cec1p-4", "-0x1.0d7de2a98bebap-3",
    "0x1.c3987d04d0b9ep-3",
)  # fmt: skip


def erfcx_coefficients(degree: int = ERFCX_DEGREE) -> list[float]:
    """The Chebyshev interpolant of ``exp(x*x) * erfc(x)`` on ``[ERFCX_LO, ERFCX_HI]`` as monomials in
    ``u = (2x - lo - hi) / (hi - lo)``, highest power first (how :data:`ERFCX_COEFFICIENTS` was made)."""
    import numpy as np
    import numpy.polynomial.chebyshev as cheb

    f = np.vectorize(lambda x: math.exp(x * x) * math.erfc(x))
    c = cheb.Chebyshev.interpolate(f, degree, domain=[ERFCX_LO, ERFCX_HI])
    return [float(a) for a in cheb.cheb2poly(c.coef)[::-1]]


def _f32(v: float) -> str:
    import numpy as np

    return float.hex(float(np.float32(v))) + "f"


def _horner(var: str, coefficients: list[str], acc: str, ind: str) -> list[str]:
    out = [f"{ind}{acc} = {coefficients[0]};"]
    out += [f"{ind}{acc} = {acc} * {var} + {c};" for c in coefficients[1:]]
    return out


def _expf_source(si: str) -> str:
    ln2_hi = 0x163 / 512  # 0.693359375: 9 bits, so n * hi is exact for |n| < 2**15
    taylor = [_f32(1 / math.factorial(k)) for k in range(7, 1, -1)]  # 1/7! ... 1/2!
    return "\n".join([
        "/* e**x in float32, at most 1.02 ulp (pypto.targets.cpu.vmath) */",
        f"{si} float pt_f32_from_bits(int32_t b) {{ float f; __builtin_memcpy(&f, &b, 4); return f; }}",
        "#pragma omp declare simd notinbranch",
        f"{si} float pt_expf(float x) {{",
        "    x = x < -104.0f ? -104.0f : x;",
        "    x = x > 89.0f ? 89.0f : x;",
        f"    const float nf = __builtin_rintf(x * {_f32(1 / math.log(2))});",
        "    const int32_t n = (int32_t)nf, n1 = n >> 1, n2 = n - n1;",
        f"    const float r = (x - nf * {_f32(ln2_hi)}) - nf * {_f32(math.log(2) - ln2_hi)};",
        "    float p;",
        *_horner("r", taylor, "p", "    "),
        "    p = r + (r * r) * p; /* e**r - 1 */",
        "    const float s1 = pt_f32_from_bits((n1 + 127) << 23), s2 = pt_f32_from_bits((n2 + 127) << 23);",
        "    return (s1 + s1 * p) * s2;",
        "}",
    ])  # fmt: skip


def _erff_source() -> str:
    small = [
        float.hex(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))) for n in range(9, -1, -1)
    ]
    q = [float.hex(1 / math.factorial(k + 1)) for k in range(6, -1, -1)]  # (e**r - 1) / r to r**6 / 7!
    lo, hi = ERFCX_LO, ERFCX_HI
    return "\n".join([
        "/* erf(x) in float32, computed in double and rounded once: at most 0.58 ulp (pypto.targets.cpu.vmath) */",
        "#pragma omp declare simd notinbranch",
        "static __attribute__((noinline)) float pt_erff(float xf) {",
        "    const double x = xf < 0.0f ? -(double)xf : (double)xf, x2 = x * x;",
        "    double s;",
        *_horner("x2", small, "s", "    "),
        "    s = x * s; /* the Taylor series, below 0.75 */",
        f"    const double xl = x > {hi!r} ? {hi!r} : (x < {lo!r} ? {lo!r} : x);",
        f"    const double u = (2.0 * xl - {lo + hi!r}) * {float.hex(1 / (hi - lo))};",
        "    double c;",
        *_horner("u", list(ERFCX_COEFFICIENTS), "c", "    "),
        "    /* exp(-xl * xl) = 2**n e**r */",
        "    const double y = -xl * xl, nd = __builtin_rint(y * 0x1.71547652b82fep0);",
        "    const double r = (y - nd * 0x1.62e42fefa39efp-1) - nd * 0x1.abc9e3b39803fp-56;",
        "    double q;",
        *_horner("r", q, "q", "    "),
        "    const int64_t sb = (int64_t)((int32_t)nd + 1023) << 52;",
        "    double scale;",
        "    __builtin_memcpy(&scale, &sb, 8);",
        "    const double big = 1.0 - (scale + scale * (r * q)) * c;",
        f"    const float v = (float)(x < {lo!r} ? s : big);",
        "    return xf != xf ? xf : (xf < 0.0f ? -v : v);",
        "}",
    ])  # fmt: skip


def _hypot_source(fn: str, static_inline: str) -> str:
    """``hypot`` as branch-free arithmetic the compiler vectorises (libm's is a call per value, libmvec has none):
    float32 in double (the squares of float32's range fit, so nothing overflows; rounded once at the end),
    float64 scaled by the larger magnitude; an infinite operand gives infinity even beside a NaN (C99)."""
    if fn == "pt_hypotf":
        return "\n".join([
            "/* hypot in float32: squares and sum in double (no overflow), rounded once (pypto.targets.cpu.vmath) */",
            f"{static_inline} float pt_hypotf(float a, float b) {{",
            "    const double x = (double)a, y = (double)b;",
            "    const float h = (float)__builtin_sqrt(x * x + y * y);",
            "    return (__builtin_fabsf(a) == __builtin_inff() || __builtin_fabsf(b) == __builtin_inff()) ? "
            "__builtin_inff() : h;",
            "}",
        ])  # fmt: skip
    return "\n".join([
        "/* hypot in float64: the larger magnitude times sqrt(1 + r**2) (pypto.targets.cpu.vmath) */",
        f"{static_inline} double pt_hypot(double a, double b) {{",
        "    const double x = __builtin_fabs(a), y = __builtin_fabs(b);",
        "    const double m = x > y ? x : y, n = x > y ? y : x, r = n / m;",
        "    const double h = m == 0.0 ? n : m * __builtin_sqrt(1.0 + r * r);",
        "    return (x == __builtin_inf() || y == __builtin_inf()) ? __builtin_inf() : h;",
        "}",
    ])  # fmt: skip


OWN: dict[tuple[str, DType], str] = {
    ("exp", float32): "pt_expf",
    ("erf", float32): "pt_erff",
    ("hypot", float32): "pt_hypotf",
    ("hypot", float64): "pt_hypot",
}
"""The functions generated here instead of calling libm / libmvec: (operation, dtype) -> C name."""


def source(fn: str, static_inline: str) -> str:
    """The C (or C++) definition of ``fn`` (a value of :data:`OWN`)."""
    if fn in ("pt_hypotf", "pt_hypot"):
        return _hypot_source(fn, static_inline)
    return _expf_source(static_inline) if fn == "pt_expf" else _erff_source()


__all__ = ["OWN", "source", "erfcx_coefficients", "ERFCX_COEFFICIENTS", "ERFCX_DEGREE"]
