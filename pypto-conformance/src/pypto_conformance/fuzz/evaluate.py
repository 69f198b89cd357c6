"""Evaluating a random kernel with NumPy, independently of pypto, with a running error bound.

Every node yields its value in the node's dtype (computed in float64 and rounded, or exactly for
integers) and ``e``, a per-element bound on how far any correct implementation may be from that
value: rounding of each operation, libm accuracy of functions, summation order in reductions,
amplified by each operation's local sensitivity. Where a discontinuous operation (a comparison,
a floor, a float-to-int cast) could go either way within that bound, ``e`` is infinite and the
element is not compared. For a complex node ``e`` bounds the modulus of the error (values computed
in complex128); ``log``, ``sqrt`` and ``angle`` are ambiguous within ``e`` of their branch cut
(where the sign of a zero imaginary part decides the result).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import rules
from .tree import AxisValue, Binary, Const, Convert, Load, Node, Power, Program, Reduce, Select, Unary

F64 = np.float64
C128 = np.complex128
FUNCTION_ULPS = 8  # libm accuracy allowed per function call, in units of roundoff
_erf = np.vectorize(math.erf, otypes=[np.float64])


@dataclass
class Approx:
    """A value and its per-element error bound (0: exact; inf: not determined)."""

    v: np.ndarray
    e: np.ndarray


def _clean(e: np.ndarray) -> np.ndarray:
    """NaN bounds (0 * inf) mean 'unknown'."""
    e = np.asarray(e, dtype=F64)
    return np.where(np.isnan(e), np.inf, e)


def _exact_like(v: np.ndarray) -> np.ndarray:
    return np.zeros(np.shape(v), F64)


class Evaluator:
    """Evaluates the nodes of one program on concrete input arrays."""

    def __init__(self, program: Program, arrays: dict[str, np.ndarray]):
        self.m, self.n = program.m, program.n
        self.arrays = arrays
        self.memo: dict[int, tuple[Node, Approx]] = {}

    def __call__(self, node: Node) -> Approx:
        hit = self.memo.get(id(node))
        if hit is None:
            with np.errstate(all="ignore"):
                result = self.visit(node)
            hit = (node, Approx(np.asarray(result.v), _clean(result.e)))
            self.memo[id(node)] = hit
        return hit[1]

    # -- conversions -------------------------------------------------------------------------
    def typed(self, node: Node, t: str) -> Approx:
        """The node's value converted to ``t`` as the language converts operands."""
        x = self(node)
        if node.weak:  # a Python scalar or an axis value takes the type (its compute type: 0.1 meeting a float16
            return Approx(np.asarray(x.v).astype(_c(t)), x.e)  # value is float32's 0.1, not float16's)
        if node.dtype == t:
            return x
        return self.converted(x, t)

    @staticmethod
    def converted(x: Approx, t: str) -> Approx:
        """A strong value converted to ``t`` (the conversion itself is exact or correctly rounded)."""
        v = np.asarray(x.v).astype(t)
        e = x.e
        if rules.is_inexact(t) and np.any(e > 0):  # an uncertain input may round either way
            e = e + np.where(e > 0, rules.unit_roundoff(t) * np.abs(v).astype(F64), 0.0)
        return Approx(v, e)

    # -- nodes ---------------------------------------------------------------------------------
    def visit(self, node: Node) -> Approx:
        if isinstance(node, Load):
            v = node.tensor.view(self.arrays[node.tensor.name], self.arrays.get(node.tensor.index_name or ""))
            return Approx(v, _exact_like(v))
        if isinstance(node, Const):
            v = np.full((1, 1), node.value)
            return Approx(v, _exact_like(v))
        if isinstance(node, AxisValue):
            return self.axis_value(node)
        if isinstance(node, Unary):
            return self.unary(node)
        if isinstance(node, Binary):
            return self.binary(node)
        if isinstance(node, Power):
            return self.power(node)
        if isinstance(node, Select):
            c = self(node.cond)
            a, b = self.typed(node.a, node.dtype), self.typed(node.b, node.dtype)
            v = np.where(c.v, a.v, b.v).astype(_c(node.dtype))
            e = np.where(np.isinf(c.e), np.inf, np.where(c.v, a.e, b.e))
            return Approx(v, e)
        if isinstance(node, Convert):
            return self.convert(node)
        if isinstance(node, Reduce):
            return self.reduce(node)
        raise TypeError(f"unknown node {type(node).__name__}")

    def axis_value(self, node: AxisValue) -> Approx:
        i = np.arange(self.m, dtype=np.int64)[:, None]
        j = np.arange(self.n, dtype=np.int64)[None, :]
        v = {
            "i": i,
            "i + 1": i + 1,
            "M - 1 - i": self.m - 1 - i,
            "j": j,
            "2 * j": 2 * j,
            "N - 1 - j": self.n - 1 - j,
        }[node.form]
        return Approx(v, _exact_like(v))

    def unary(self, node: Unary) -> Approx:
        if rules.is_complex(node.x.dtype):
            return self.complex_unary(node)
        if node.op in ("neg", "abs", "invert"):
            x = self(node.x)
            if node.op == "neg":
                v = np.negative(x.v)
            elif node.op == "abs":
                v = np.abs(x.v)
            else:
                v = np.logical_not(x.v) if node.dtype == "bool" else np.invert(x.v)
            return Approx(v.astype(_c(node.dtype)), x.e)
        x = self.typed(node.x, node.dtype)
        x64, ex = np.asarray(x.v, F64), x.e
        op = node.op
        if op == "exp":
            r = np.exp(x64)
            e = np.abs(r) * np.expm1(ex)
        elif op == "log":
            r = np.log(x64)
            e = np.where(x64 - ex > 0, -np.log1p(-ex / x64), np.inf)
        elif op == "sqrt":
            r = np.sqrt(x64)
            low = np.maximum(x64 - ex, 0.0)
            den = np.sqrt(x64 + ex) + np.sqrt(low)
            e = np.where(ex == 0, 0.0, (ex + np.minimum(ex, x64)) / np.where(den > 0, den, 1.0))
        elif op == "rsqrt":
            r = 1.0 / np.sqrt(x64)
            d = x64 - ex
            e = np.where(
                d > 0, ex / (np.sqrt(x64 * np.maximum(d, 0)) * (np.sqrt(x64) + np.sqrt(np.maximum(d, 0)))), np.inf
            )
        elif op == "tanh":
            r, e = np.tanh(x64), np.minimum(ex, 2.0)
        elif op == "sin":
            r, e = np.sin(x64), np.minimum(ex, 2.0)
        elif op == "cos":
            r, e = np.cos(x64), np.minimum(ex, 2.0)
        elif op == "erf":
            r, e = _erf(x64), np.minimum(1.13 * ex, 2.0)
        elif op == "sigmoid":
            r, e = 1.0 / (1.0 + np.exp(-x64)), np.minimum(0.25 * ex, 1.0)
        else:
            raise ValueError(op)
        v = r.astype(_c(node.dtype))
        scale = np.abs(v.astype(F64))
        if op in ("tanh", "sin", "cos", "erf", "sigmoid", "log"):
            scale = np.maximum(scale, 1.0)  # accuracy is absolute near the function's zeros
        return Approx(v, e + FUNCTION_ULPS * _u(node.dtype) * scale)

    def binary(self, node: Binary) -> Approx:
        op = node.op
        t = node.dtype if op == "div" else node.operand
        a, b = self.typed(node.a, t), self.typed(node.b, t)
        if op in rules.COMPARE:
            fn = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}
            fn |= {"eq": np.equal, "ne": np.not_equal}
            v = fn[op](a.v, b.v)
            spread = a.e + b.e
            wide = C128 if rules.is_complex(t) else F64
            diff = np.abs(np.asarray(a.v, wide) - np.asarray(b.v, wide))
            return Approx(v, np.where((spread > 0) & (diff <= spread), np.inf, 0.0))
        if rules.is_complex(t):
            return self.complex_binary(node, a, b)
        if not rules.is_float(t):
            return self.integer_binary(node, a, b)
        a64, b64 = np.asarray(a.v, F64), np.asarray(b.v, F64)
        u = _u(node.dtype)
        if op in ("floordiv", "mod"):
            return self.float_floor(node, a, b, a64, b64, u)
        if op == "add":
            r, e = a64 + b64, a.e + b.e
        elif op == "sub":
            r, e = a64 - b64, a.e + b.e
        elif op == "mul":
            r, e = a64 * b64, np.abs(a64) * b.e + np.abs(b64) * a.e + a.e * b.e
        elif op == "div":
            r = a64 / b64
            d = np.abs(b64) - b.e
            e = np.where(d > 0, (a.e + np.abs(r) * b.e) / np.where(d > 0, d, 1.0), np.inf)
        elif op == "maximum":
            return Approx(np.maximum(a.v, b.v).astype(_c(node.dtype)), np.maximum(a.e, b.e))
        elif op == "minimum":
            return Approx(np.minimum(a.v, b.v).astype(_c(node.dtype)), np.maximum(a.e, b.e))
        else:
            raise ValueError(op)
        v = r.astype(_c(node.dtype))
        return Approx(v, e + u * np.abs(v.astype(F64)))

    def float_floor(self, node: Binary, a: Approx, b: Approx, a64, b64, u: float) -> Approx:
        """``//`` and ``%`` on floats (NumPy semantics); ambiguous where the quotient may round across an integer."""
        q = a64 / b64
        d = np.abs(b64) - b.e
        width = np.where(d > 0, (a.e + np.abs(q) * b.e) / np.where(d > 0, d, 1.0), np.inf)
        width = width + 4 * (u + rules.unit_roundoff("float64")) * np.abs(q)
        exact = (a.e == 0) & (b.e == 0) & (np.fmod(a64, b64) == 0)
        ambiguous = (np.abs(q - np.round(q)) <= width) & ~exact
        ct = _c(node.dtype)
        av, bv = np.asarray(a.v).astype(ct), np.asarray(b.v).astype(ct)
        if node.op == "floordiv":
            v = np.floor_divide(av, bv)
            return Approx(v, np.where(ambiguous, np.inf, 0.0))
        v = np.remainder(av, bv)
        k = np.floor(q)
        e = a.e + np.abs(k) * b.e + 2 * u * (np.abs(k * b64) + np.abs(b64) + np.abs(v.astype(F64)))
        return Approx(v, np.where(ambiguous, np.inf, e))

    def integer_binary(self, node: Binary, a: Approx, b: Approx) -> Approx:
        op = node.op
        e = np.where(np.isfinite(a.e) & np.isfinite(b.e), 0.0, np.inf)
        if node.operand == "bool":
            v = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op](a.v, b.v)
            return Approx(v, e)
        wide = _wide(node.operand)  # exact, or wrapping around modulo 2**64 (then converted: modulo 2**bits)
        x, y = np.asarray(a.v, wide), np.asarray(b.v, wide)
        safe = np.where(y == 0, 1, y).astype(wide)
        r = {
            "add": lambda: x + y,
            "sub": lambda: x - y,
            "mul": lambda: x * y,
            "floordiv": lambda: np.where(y == 0, 0, x // safe),
            "mod": lambda: np.where(y == 0, 0, x % safe),
            "maximum": lambda: np.maximum(x, y),
            "minimum": lambda: np.minimum(x, y),
            "and": lambda: x & y,
            "or": lambda: x | y,
            "xor": lambda: x ^ y,
        }[op]()
        return Approx(r.astype(node.dtype), e)

    def power(self, node: Power) -> Approx:
        k = node.k
        if k == 0:  # x ** 0 is 1, whatever x is
            v = np.ones((1, 1), node.dtype)
            return Approx(v, _exact_like(v))
        x = self.typed(node.x, node.dtype)
        if rules.is_complex(node.dtype):  # |z**n - w**n| <= n max(|z|, |w|)**(n - 1) |z - w|
            z, ex, n = np.asarray(x.v, C128), x.e, abs(k)
            r = z**k
            if k > 0:
                e = n * (np.abs(z) + ex) ** (n - 1) * ex
            else:  # the products of z**n, then one division
                d = np.abs(z) - ex
                e = np.where(d > 0, n * np.where(d > 0, d, 1.0) ** (-n - 1) * ex, np.inf)
            v = r.astype(node.dtype)
            return Approx(v, e + 4 * (2 * n + 1) * _u(node.dtype) * np.abs(v.astype(C128)))
        if not rules.is_float(node.dtype):
            r = np.asarray(x.v, _wide(node.dtype)) ** k
            return Approx(r.astype(node.dtype), np.where(np.isfinite(x.e), 0.0, np.inf))
        x64, ex = np.asarray(x.v, F64), x.e
        n = abs(k)
        r = x64**k
        if k > 0:
            e = n * (np.abs(x64) + ex) ** (n - 1) * ex
        else:
            d = np.abs(x64) - ex
            e = np.where(d > 0, n * np.where(d > 0, d, 1.0) ** (-n - 1) * ex, np.inf)
        v = r.astype(_c(node.dtype))
        return Approx(v, e + (2 * n + 1) * _u(node.dtype) * np.abs(v.astype(F64)))

    def convert(self, node: Convert) -> Approx:
        x = self(node.x)
        src, t = node.x.dtype, node.dtype
        if t == "bool":
            v = np.asarray(x.v) != 0
            unsure = (x.e > 0) & (x.e >= np.abs(np.asarray(x.v, F64)))
            return Approx(v, np.where(unsure, np.inf, 0.0))
        if rules.is_int(t) and rules.is_float(src):  # toward zero, saturating at the type's bounds, NaN 0
            x64 = np.asarray(x.v, F64)
            info = np.iinfo(t)
            low, high = x64 <= info.min, x64 >= info.max
            inside = np.trunc(np.where(np.isnan(x64) | low | high, 0.0, x64)).astype(t)
            v = np.where(low, info.min, np.where(high, info.max, inside)).astype(t)
            flips = np.trunc(x64 - x.e) != np.trunc(x64 + x.e)
            return Approx(v, np.where(flips | np.isinf(x.e), np.inf, 0.0))
        return self.converted(x, t)

    def reduce(self, node: Reduce) -> Approx:
        x = self(node.x)
        shape = (self.m, self.n)
        axes = tuple(0 if a == "i" else 1 for a in node.over)
        xv = np.broadcast_to(np.asarray(x.v), shape)
        xe = np.broadcast_to(x.e, shape)
        kept = tuple(1 if k in axes else s for k, s in enumerate(shape))
        t, op = _c(node.dtype), node.op
        if node.count == 0:
            return Approx(np.full(kept, _identity(op, t), dtype=t), np.zeros(kept))
        unknown = np.isinf(np.max(xe, axis=axes, keepdims=True))
        if rules.is_complex(t):  # sum and mean: each part a float sum
            u = rules.unit_roundoff(t)
            z = xv.astype(C128)
            s = np.sum(z, axis=axes, keepdims=True)
            e = np.sum(xe, axis=axes, keepdims=True) + 2 * node.count * u * np.sum(np.abs(z), axis=axes, keepdims=True)
            if op == "mean":
                s, e = s / node.count, e / node.count
            v = s.astype(t)
            return Approx(v, e + 2 * u * np.abs(v.astype(C128)))
        if not rules.is_float(t):
            x64 = xv.astype(_wide(t))
            r = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[op](x64, axis=axes, keepdims=True)
            return Approx(r.astype(t), np.where(unknown, np.inf, 0.0))
        u = rules.unit_roundoff(t)
        if op == "mean" and not rules.is_float(node.x.dtype):  # the exact integer sum meets the count as float32
            s = np.sum(xv.astype(np.int64), axis=axes, keepdims=True).astype(t)
            v = (s.astype(F64) / node.count).astype(t)
            return Approx(v, np.where(unknown, np.inf, u * np.abs(v.astype(F64))))
        x64 = xv.astype(F64)
        if op in ("max", "min"):
            r = (np.max if op == "max" else np.min)(xv, axis=axes, keepdims=True)
            return Approx(r.astype(t), np.max(xe, axis=axes, keepdims=True))
        if op == "prod":
            r = np.prod(x64, axis=axes, keepdims=True)
            den = np.abs(x64) - xe
            rel = np.sum(np.where(den > 0, xe / np.where(den > 0, den, 1.0), np.inf), axis=axes, keepdims=True)
            v = r.astype(t)
            return Approx(v, np.abs(r) * (rel + node.count * u) + u * np.abs(v.astype(F64)))
        s = np.sum(x64, axis=axes, keepdims=True)
        e = np.sum(xe, axis=axes, keepdims=True) + node.count * u * np.sum(np.abs(x64), axis=axes, keepdims=True)
        if op == "mean":
            s, e = s / node.count, e / node.count
        v = s.astype(t)
        return Approx(v, e + 2 * u * np.abs(v.astype(F64)))

    # -- complex numbers (e bounds the modulus of the error) -------------------------------------
    def complex_binary(self, node: Binary, a: Approx, b: Approx) -> Approx:
        op = node.op
        za, zb = np.asarray(a.v, C128), np.asarray(b.v, C128)
        if op in ("add", "sub"):
            r, e, rounding = (za + zb if op == "add" else za - zb), a.e + b.e, 2
        elif op == "mul":  # the parts' rounding is relative to |a||b| = |ab|
            r, e, rounding = za * zb, np.abs(za) * b.e + np.abs(zb) * a.e + a.e * b.e, 4
        elif op == "div":  # Smith's algorithm: a few roundings relative to |a / b|
            r = za / zb
            d = np.abs(zb) - b.e
            e = np.where(d > 0, (a.e + np.abs(r) * b.e) / np.where(d > 0, d, 1.0), np.inf)
            rounding = 8
        else:
            raise ValueError(f"operator {op} on complex operands")
        v = r.astype(node.dtype)
        return Approx(v, e + rounding * _u(node.dtype) * np.abs(v.astype(C128)))

    def complex_unary(self, node: Unary) -> Approx:
        x = self(node.x)
        z, ex, op = np.asarray(x.v, C128), x.e, node.op
        u = _u(node.dtype)
        if op in ("neg", "conj", "real", "imag"):  # exact
            r = {"neg": np.negative, "conj": np.conj, "real": np.real, "imag": np.imag}[op](z)
            return Approx(np.asarray(r).astype(node.dtype), ex)
        size = np.abs(z)
        # within ex of the negative real axis (or of 0) the result jumps: the sign of a zero decides it
        cut = ((np.abs(z.imag) <= ex) & (z.real < ex)) | (size <= ex)
        if op == "abs":
            r, e = size, ex
        elif op == "angle":
            r = np.angle(z)
            e = np.where(cut, np.inf, 0.5 * np.pi * ex / np.where(size > 0, size, 1.0))
        elif op == "exp":  # |exp(z + d) - exp(z)| <= |exp(z)| (exp(|d|) - 1)
            r = np.exp(z)
            e = np.abs(r) * np.expm1(ex)
        elif op == "log":  # |log(z + d) - log(z)| <= |d| / (|z| - |d|) away from the cut
            r = np.log(z)
            d = size - ex
            e = np.where(cut | (d <= 0), np.inf, ex / np.where(d > 0, d, 1.0))
        elif op == "sqrt":  # |sqrt(z + d) - sqrt(z)| <= 2|d| / sqrt|z| away from 0 and the cut
            r = np.sqrt(z)
            near0 = size <= 2 * ex
            e = np.where(near0, 2 * np.sqrt(3 * ex), 2 * ex / np.sqrt(np.where(near0, 1.0, size)))
            e = np.where(cut & ~near0 & (z.real < 0), np.inf, e)
        else:
            raise ValueError(f"function {op} of a complex operand")
        v = np.asarray(r).astype(node.dtype)
        scale = np.abs(v.astype(C128))
        if op in ("log", "angle"):
            scale = np.maximum(scale, 1.0)  # accuracy is absolute near the function's zeros
        return Approx(v, e + FUNCTION_ULPS * u * scale)


def _c(t: str) -> str:
    """The type a node's value is computed in (float32 for the 16-bit floats: they are rounded only where
    stored or converted)."""
    return rules.compute(t)


def _u(t: str) -> float:
    """The unit roundoff of one operation on values of type ``t``."""
    return rules.unit_roundoff(rules.compute(t))


def _wide(t: str) -> type:
    """The 64-bit type integer arithmetic of type ``t`` is evaluated in."""
    return np.uint64 if rules.is_unsigned(t) else np.int64


def _identity(op: str, t: str):
    if op == "sum":
        return 0
    if op == "prod":
        return 1
    if op == "mean":
        return complex(np.nan, np.nan) if rules.is_complex(t) else np.nan
    if rules.is_float(t):
        return -np.inf if op == "max" else np.inf
    info = np.iinfo(t)
    return info.min if op == "max" else info.max


def evaluate(program: Program, arrays: dict[str, np.ndarray]) -> Approx:
    """The program's output (shaped like the ``out`` parameter) and its error bound."""
    result = Evaluator(program, arrays)(program.root)
    full = (program.m, program.n)
    if program.store in ("full", "trans"):
        v, e = np.broadcast_to(result.v, full), np.broadcast_to(result.e, full)
        if program.store == "trans":
            v, e = v.T, e.T
    else:
        keep = {"row": (program.m, 1), "col": (1, program.n), "all": (1, 1)}[program.store]
        shape = program.out_shape()
        v = np.broadcast_to(result.v, keep).reshape(shape)
        e = np.broadcast_to(result.e, keep).reshape(shape)
    return Approx(np.ascontiguousarray(v).astype(program.out_dtype), np.ascontiguousarray(e))
