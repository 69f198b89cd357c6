"""Complex numbers (complex64, complex128) and the two-operand functions they are built on (atan2, hypot).

References compute in complex128 (or float64) with NumPy and round to the output's type. Kernel
annotations are evaluated when the factory runs, so this module must not use
``from __future__ import annotations``.
"""

import numpy as np

import pypto as pt

from .arrays import array_case
from .gradients import gradient_case
from .spec import COMPLEX, FLOATS, INTS, SIZES_1D, SIZES_2D, SIZES_3D, K, M, N, case
from .values import by_kind, complex_normal, normal, span, with_specials, with_values


def c128(x):
    return np.asarray(x).astype(np.complex128)


def edges(values, rest=None):
    """Complex values whose first elements are ``values`` (branch cuts, zeros, infinities), the rest normal."""
    rest = rest or complex_normal()

    def gen(rng, shape, dt):
        v = rest(rng, shape, dt)
        flat = v.reshape(-1)
        n = min(len(values), flat.size)
        flat[:n] = np.asarray(values[:n], np.complex128).astype(dt)
        return v

    return gen


def _arith_ref(a, b, x):
    a, b, x = c128(a), c128(b), np.asarray(x, np.float64)
    return {
        "s": a + b,
        "d": a - x,
        "p": a * b,
        "q": a / b,
        "r": x * a - 2.5j * b + (1 - 2j),
        "n": -np.conj(a) + np.real(b) * 1j,
    }


@case(dtypes=COMPLEX, sizes=SIZES_1D, reference=_arith_ref)
def complex_arithmetic(dt):
    """``+ - * /`` of complex values, with real operands (not widened) and weak complex scalars."""
    part = dt.part

    def complex_arithmetic(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], x: pt.Tensor[part, (N,)],
                           s: pt.Tensor[dt, (N,)], d: pt.Tensor[dt, (N,)], p: pt.Tensor[dt, (N,)],
                           q: pt.Tensor[dt, (N,)], r: pt.Tensor[dt, (N,)], n: pt.Tensor[dt, (N,)]):  # fmt: skip
        i = pt.axis(0)
        s[i] = a[i] + b[i]
        d[i] = a[i] - x[i]
        p[i] = a[i] * b[i]
        q[i] = a[i] / b[i]
        r[i] = x[i] * a[i] - 2.5j * b[i] + (1 - 2j)
        n[i] = -pt.conj(a[i]) + b[i].real * 1j

    return complex_arithmetic


# Smith's algorithm keeps quotients finite where |b|**2 overflows (parts of 1e25 in complex64, 1e200 in
# complex128), and a zero divisor gives NumPy's infinities and NaNs
_DIVISORS = (0, 1e25 + 1e25j, 3e25 - 1e24j, 1e-3 + 2e25j, 2 - 0j, -0.5j, 1e-30 + 1e-30j)


def _div_values(rng, shape, dt):
    scale = 1e200 if np.dtype(dt) == np.complex128 else 1e25
    mags = rng.choice(np.array([1e-3, 1.0, scale]), shape) * (
        rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    )
    return edges(_DIVISORS, lambda r, s, d: mags.astype(d))(rng, shape, dt)


@case(dtypes=COMPLEX, sizes=SIZES_1D, values={"b": _div_values, "a": edges((1 + 1j, 0, 1e20, -3j, 5 + 5j, 1, 7j))},
      reference=lambda a, b: {"q": c128(a) / c128(b)})  # fmt: skip
def complex_division(dt):
    """Division over huge and tiny divisors (no overflow on the way) and by zero."""

    def complex_division(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], q: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        q[i] = a[i] / b[i]

    return complex_division


_FUNCTION_EDGES = (0, -0.0 + 0j, 1, -1, 1j, -1j, -4 + 0j, complex(-4, -0.0), 3 - 4j, -2 + 1e-3j, 1e-20 + 1e-20j,
                   complex(np.inf, 0), complex(-np.inf, 0), complex(np.nan, 0), complex(0, np.inf),
                   complex(1, np.inf), complex(-np.inf, 1), complex(np.inf, np.nan))  # fmt: skip


def _functions_ref(z):
    z = c128(z)
    with np.errstate(all="ignore"):
        return {"e": np.exp(z), "lg": np.log(z), "sq": np.sqrt(z), "m": np.abs(z), "ang": np.angle(z),
                "re": z.real, "im": z.imag}  # fmt: skip


@case(dtypes=COMPLEX, sizes=SIZES_1D, values={"z": edges(_FUNCTION_EDGES, complex_normal(2.0))},
      functions=("exp", "log", "sqrt"), reference=_functions_ref)  # fmt: skip
def complex_functions(dt):
    """exp, log, sqrt, abs and angle of complex values, on both sides of the branch cut, at zeros and infinities,
    and the parts."""
    part = dt.part

    def complex_functions(z: pt.Tensor[dt, (N,)], e: pt.Tensor[dt, (N,)], lg: pt.Tensor[dt, (N,)],
                          sq: pt.Tensor[dt, (N,)], m: pt.Tensor[part, (N,)], ang: pt.Tensor[part, (N,)],
                          re: pt.Tensor[part, (N,)], im: pt.Tensor[part, (N,)]):  # fmt: skip
        i = pt.axis(0)
        e[i] = pt.exp(z[i])
        lg[i] = pt.log(z[i])
        sq[i] = pt.sqrt(z[i])
        m[i] = pt.abs(z[i])
        ang[i] = pt.angle(z[i])
        re[i] = pt.real(z[i])
        im[i] = z[i].imag

    return complex_functions


@case(dtypes=COMPLEX, sizes=SIZES_2D, tolerances={"complex64": (1e-4, 1e-5), "complex128": (1e-11, 1e-13)},
      reference=lambda x: {"s": c128(x).sum(1), "mu": c128(x).mean(0)})  # fmt: skip
def complex_reductions(dt):
    """reduce_sum over rows and reduce_mean over columns of complex values."""

    def complex_reductions(x: pt.Tensor[dt, (M, N)], s: pt.Tensor[dt, (M,)], mu: pt.Tensor[dt, (N,)]):
        i, j = pt.axis(0), pt.axis(1)
        s[i] = pt.reduce_sum(x[i, j], axis=j)
        mu[j] = pt.reduce_mean(x[i, j], axis=i)

    return complex_reductions


@case(dtypes=COMPLEX, sizes=SIZES_3D, tolerances={"complex64": (1e-4, 1e-5), "complex128": (1e-11, 1e-13)},
      reference=lambda a, b, w: {"c": c128(a) @ c128(b), "h": c128(a) @ np.asarray(w, np.float64)})  # fmt: skip
def complex_matmul(dt):
    """Complex matrix products (four real ones after complex_pairs), and a complex matrix times a real one."""
    part = dt.part

    def complex_matmul(a: pt.Tensor[dt, (M, K)], b: pt.Tensor[dt, (K, N)], w: pt.Tensor[part, (K, N)],
                       c: pt.Tensor[dt, (M, N)], h: pt.Tensor[dt, (M, N)]):  # fmt: skip
        i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
        c[i, j] = pt.reduce_sum(a[i, k] * b[k, j], axis=k)
        h[i, j] = pt.reduce_sum(a[i, k] * w[k, j], axis=k)

    return complex_matmul


def _same_or_not(rng, shape, dt):
    v = complex_normal()(rng, shape, dt)
    return np.where(rng.random(shape) < 0.5, v, v.real + 0j).astype(dt)  # equal real parts, imaginary differ


@case(dtypes=COMPLEX, sizes=SIZES_1D, values={"a": _same_or_not, "w": lambda rng, shape, dt: np.asarray(1.5 - 0.25j, dt)},
      reference=lambda a, b, w: {
          "eq": c128(a) == c128(b), "ne": c128(a) != c128(b), "y": np.where(c128(a) == c128(b), c128(a) * w, np.conj(w)),
          "nz": c128(a) - c128(a).real != 0})  # fmt: skip
def complex_compare(dt):
    """``==`` and ``!=`` compare both parts; pt.where selects complex values; a complex scalar parameter; a complex
    value cast to bool (nonzero)."""

    def complex_compare(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], w: dt, eq: pt.Tensor[bool, (N,)],
                        ne: pt.Tensor[bool, (N,)], y: pt.Tensor[dt, (N,)], nz: pt.Tensor[bool, (N,)]):  # fmt: skip
        i = pt.axis(0)
        eq[i] = a[i] == b[i]
        ne[i] = a[i] != b[i]
        y[i] = pt.where(a[i] == b[i], a[i] * w, pt.conj(w))
        nz[i] = pt.cast(a[i] - a[i].real, pt.bool_)

    return complex_compare


@case(dtypes=COMPLEX, sizes=SIZES_1D, inplace=("z",),
      reference=lambda z, w: {"z": (c128(z)[::-1] * 1j) * c128(w) + np.conj(c128(z)[::-1] * 1j)})  # fmt: skip
def complex_in_place(dt):
    """In-place updates of complex values: each part is computed from the old value (the real part waits in a
    temporary), reading other points of the output too; the second store sees the first."""

    def complex_in_place(z: pt.Tensor[dt, (N,)], w: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        z[i] = z[N - 1 - i] * 1j
        z[i] = z[i] * w[i] + pt.conj(z[i])

    return complex_in_place


def _casts_ref(x, z):
    other = np.complex64 if z.dtype == np.complex128 else np.complex128
    return {"w": c128(x), "o": c128(z).astype(other).astype(np.complex128), "b": c128(z) != 0}


@case(dtypes=COMPLEX, sizes=SIZES_1D, values={"x": normal(), "z": edges((0, 1j, 1, -0.0 + 0j))}, reference=_casts_ref)
def complex_casts(dt):
    """A real value stored into a complex output, the other complex width, and a complex value as a bool."""
    part = dt.part
    other = pt.complex64 if dt == pt.complex128 else pt.complex128

    def complex_casts(x: pt.Tensor[part, (N,)], z: pt.Tensor[dt, (N,)], w: pt.Tensor[dt, (N,)],
                      o: pt.Tensor[other, (N,)], b: pt.Tensor[bool, (N,)]):  # fmt: skip
        i = pt.axis(0)
        w[i] = x[i]
        o[i] = pt.cast(z[i], other)
        b[i] = pt.cast(z[i], pt.bool_)

    return complex_casts


# -- atan2, hypot and copysign, on every real type -----------------------------------------------------------------------

_SIGNED_ZEROS = (0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.0)
_PARTNERS = (0.0, 0.0, -0.0, -0.0, np.inf, -np.inf, np.inf, 2.0, 1.0, np.nan)


def _f64(x):
    return np.asarray(x, np.float64)


@case(dtypes=FLOATS + INTS, sizes=SIZES_1D, functions=("atan2", "hypot"),
      values={"a": by_kind(with_values(with_specials(normal(3.0)), _SIGNED_ZEROS), span(-50, 50)),
              "b": by_kind(with_values(with_specials(normal(3.0)), _PARTNERS), span(-50, 50))},
      reference=lambda a, b: {"t": np.arctan2(_f64(a), _f64(b)), "h": np.hypot(_f64(a), _f64(b))})  # fmt: skip
def atan2_hypot(dt):
    """pt.atan2 (by the signs of both operands, signed zeros included) and pt.hypot; integers computed in
    float32."""
    out = dt if dt in (pt.float32, pt.float64, pt.float16, pt.bfloat16) else pt.float32

    def atan2_hypot(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], t: pt.Tensor[out, (N,)],
                    h: pt.Tensor[out, (N,)]):  # fmt: skip
        i = pt.axis(0)
        t[i] = pt.atan2(a[i], b[i])
        h[i] = pt.hypot(a[i], b[i])

    return atan2_hypot


_DIVIDENDS = (5.5, -5.5, 0.0, -0.0, np.inf, 3.0, np.nan, 1e30, -7.25, 2.0)
_DIVISORS = (2.0, 2.0, 3.0, 3.0, 2.0, 0.0, 1.0, 3.0, -0.5, np.inf)


@case(dtypes=FLOATS, sizes=SIZES_1D, functions=("fmod",),
      values={"a": with_values(normal(10.0), _DIVIDENDS), "b": with_values(normal(3.0), _DIVISORS)},
      reference=lambda a, b: {"r": np.fmod(_f64(a), _f64(b))})  # fmt: skip
def fmod(dt):
    """pt.fmod: C's remainder, with the dividend's sign (-0.0 kept); NaN for a zero divisor or an infinite
    dividend, the dividend itself for an infinite divisor."""

    def fmod(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], r: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        r[i] = pt.fmod(a[i], b[i])

    return fmod


_LOGADD = (0.0, -np.inf, np.inf, np.inf, -np.inf, 1.0, -1000.0, 40.0, np.nan, 2.0)
_LOGADD_PARTNERS = (0.0, -np.inf, np.inf, -np.inf, 3.0, 1.0, -999.0, -40.0, 1.0, np.nan)


def _sign_ref(a, b, la, lb):
    with np.errstate(all="ignore"):
        c = np.copysign(_f64(a), _f64(b))
        return {"c": c, "s": np.signbit(c), "z": np.signbit(_f64(b)), "l": np.logaddexp(_f64(la), _f64(lb))}


@case(dtypes=FLOATS + INTS, sizes=SIZES_1D, functions=("copysign", "log1p", "exp"),
      values={"a": by_kind(with_values(with_specials(normal(3.0)), _SIGNED_ZEROS), span(-50, 50)),
              "b": by_kind(with_values(with_specials(normal(3.0)), _PARTNERS), span(-50, 50)),
              "la": by_kind(with_values(normal(10.0), _LOGADD), span(-50, 50)),
              "lb": by_kind(with_values(normal(10.0), _LOGADD_PARTNERS), span(-50, 50))},
      reference=_sign_ref)  # fmt: skip
def copysign_signbit_logaddexp(dt):
    """pt.copysign (the sign of -0.0 and of a NaN operand moved too: ``s`` checks the result's sign bit),
    pt.signbit (-0.0 and negative NaN set) and pt.logaddexp (equal infinities, far apart operands, NaN);
    integers computed in float32."""
    out = dt if dt in (pt.float32, pt.float64, pt.float16, pt.bfloat16) else pt.float32

    def copysign_signbit_logaddexp(a: pt.Tensor[dt, (N,)], b: pt.Tensor[dt, (N,)], la: pt.Tensor[dt, (N,)],
                                   lb: pt.Tensor[dt, (N,)], c: pt.Tensor[out, (N,)], s: pt.Tensor[pt.bool_, (N,)],
                                   z: pt.Tensor[pt.bool_, (N,)], l: pt.Tensor[out, (N,)]):  # fmt: skip  # noqa: E741
        i = pt.axis(0)
        c[i] = pt.copysign(a[i], b[i])
        s[i] = pt.signbit(pt.copysign(a[i], b[i]))
        z[i] = pt.signbit(b[i])
        l[i] = pt.logaddexp(la[i], lb[i])

    return copysign_signbit_logaddexp


# -- complex programs of whole arrays --------------------------------------------------------------------------


@array_case(
    shapes=({"a": (1, 1), "b": (1, 1)}, {"a": (9, 33), "b": (33, 17)}),
    reference=lambda a, b: (
        np.abs(a @ b).mean(axis=1),
        np.einsum("ik,kj->j", a, np.conj(b)),
        (a * 1j - a.real * 2).sum(0),
    ),
    dtypes=COMPLEX,
    tolerances={
        "complex64": (2e-4, 2e-5),
        "complex128": (1e-10, 1e-12),
        "float32": (2e-4, 2e-5),
        "float64": (1e-10, 1e-12),
    },  # fmt: skip
)
def complex_program(a, b):
    """A complex matrix product and its magnitudes' mean, an einsum with a conjugate, a weak complex scalar."""
    return pt.abs(a @ b).mean(axis=1), pt.einsum("ik,kj->j", a, pt.conj(b)), (a * 1j - pt.real(a) * 2).sum(0)


def _chain_ref(z, w):
    e = np.exp(z * 0.3) / (z + 3) + np.sqrt(z) * np.log(z + 5j) + np.conj(z)
    return float((np.abs(e @ w) ** 2).sum() + np.angle(z).sum() + (e.real * e.imag).sum())


@gradient_case(shape={"z": (5,), "w": (5, 3)}, reference=_chain_ref, dtypes=COMPLEX)
def complex_chain(z, w):
    """The gradient (JAX's convention) through exp, division, sqrt, log, conj, a complex matrix product, abs,
    angle and the parts."""
    e = pt.exp(z * 0.3) / (z + 3) + pt.sqrt(z) * pt.log(z + 5j) + pt.conj(z)
    return (pt.abs(e @ w) ** 2).sum() + pt.angle(z).sum() + (e.real * e.imag).sum()
