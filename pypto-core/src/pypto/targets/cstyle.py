"""The C-family renderer: loop IR → C-like source. Backends configure it or override a few methods.

One printer serves C (OpenMP), C++ (TBB), CUDA and OpenCL. A backend subclass mostly sets
attributes — the type names, the pointer qualifiers, how a math function is spelled — and overrides
``loop_header`` (pragmas, or a different mapping of parallel loops) and ``signature`` where its
language differs. Semantics that C does not give for free are rendered as small helper functions,
emitted only when used: NaN-propagating max/min, floor division and modulo with Python/NumPy
semantics (integer division by zero gives 0 instead of trapping). Integer overflow wraps, as in
NumPy: C-family backends compile with wrap-around semantics (``-fwrapv``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from pypto import dtypes
from pypto.dtypes import DType, bfloat16, bool_, float16, float32, float64, int64, integer_spellings
from pypto.ir.loops import (
    Alloc,
    Argument,
    Assign,
    Block,
    Comment,
    Declare,
    If,
    Let,
    Loop,
    LoopKernel,
    Read,
    Stmt,
    Update,
    Var,
    Write,
)
from pypto.ir.nodes import Binary, Bitcast, Cast, Const, Expr, Unary, Where
from pypto.ir.ops import FUNCTIONS, FUNCTIONS2, MATH, SHIFTS, binary_symbols
from pypto.ir.reducers import combine

_INFIX = binary_symbols(c_infix=True)
_PREC = {"*": 13, "/": 13, "%": 13, "+": 12, "-": 12, "<": 10, "<=": 10, ">": 10, ">=": 10, "==": 9, "!=": 9,
         "&": 8, "^": 7, "|": 6}  # fmt: skip


def _suffix(dt: DType) -> str:
    if dt.is_int:  # i8 ... i64, u8 ... u64
        return f"{dt.kind}{dt.bits}"
    return {"float32": "f32", "float64": "f64", "bool": "b", "float16": "f16", "bfloat16": "bf16"}[dt.name]


# 16-bit floats are held as their bits (uint16_t) and converted with integer and float32 operations that
# vectorise on any x86-64 (gcc 12 converts _Float16 one value at a time, and has no __bf16 arithmetic). All
# four are bit-exact against NumPy and ml_dtypes: nearest, ties to even; float16 overflows to infinity;
# NaN stays a quiet NaN; subnormals kept.
C_HALF_HELPERS = {
    # float16: exponent and mantissa moved into place, then one multiply by 2^112 rebiases the exponent
    # (exactly, subnormal halves included); infinities and NaNs are moved as they are
    "pt_f16_f32": """static inline float pt_f16_f32(uint16_t h) {
    const uint32_t em = (uint32_t)(h & 0x7fffu) << 13;
    union { uint32_t u; float f; } v = { em };
    v.f *= 0x1p112f;
    const uint32_t bits = (h & 0x7c00u) == 0x7c00u ? (0x7f800000u | em) : v.u;
    union { uint32_t u; float f; } r = { bits | ((uint32_t)(h & 0x8000u) << 16) };
    return r.f;
}""",
    # normal halves: 13 mantissa bits dropped with round to nearest even and the exponent rebiased in one
    # integer add; subnormal halves: adding 0.5 lines the value up with the half's last place and the FPU
    # rounds; 65520 and above round to infinity
    "pt_f32_f16": """static inline uint16_t pt_f32_f16(float x) {
    union { float f; uint32_t u; } v = { x };
    const uint32_t sign = (v.u >> 16) & 0x8000u, a = v.u & 0x7fffffffu;
    const uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    union { uint32_t u; float f; } s = { a };
    s.f += 0.5f;
    uint32_t h = a < 0x38800000u ? s.u - 0x3f000000u : normal;
    h = a >= 0x477ff000u ? 0x7c00u : h;
    h = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x3ffu)) : h;
    return (uint16_t)(sign | h);
}""",
    # bfloat16 is the upper half of a float32: widening is a shift, narrowing rounds to nearest even
    "pt_bf16_f32": """static inline float pt_bf16_f32(uint16_t h) {
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}""",
    "pt_f32_bf16": """static inline uint16_t pt_f32_bf16(float x) {
    union { uint32_t u; float f; } v;
    v.f = x;
    const uint32_t rounded = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16;
    return (uint16_t)((v.u & 0x7fffffffu) > 0x7f800000u ? ((v.u >> 16) | 0x40u) : rounded);
}""",
}


class CRenderer:
    """Renders a :class:`~pypto.ir.loops.LoopKernel` as a C function (C99 by default)."""

    # -- settings a backend overrides --------------------------------------------------------------
    includes: tuple[str, ...] = ("<stdint.h>", "<stdbool.h>", "<stdlib.h>", "<math.h>")
    function_prefix = ""  # e.g. 'extern "C" ' or '__kernel '
    restrict = "restrict"  # C99; C++/CUDA spell it __restrict__
    buffer_qualifier = ""  # OpenCL: "__global "
    index_type = "int64_t"
    # float16 and bfloat16 values are their bits; the half_compute pass leaves them only in casts
    types = {float32: "float", float64: "double", bool_: "bool", float16: "uint16_t", bfloat16: "uint16_t",
             **integer_spellings({n: f"int{n}_t" for n in (8, 16, 32, 64)}, "u")}  # fmt: skip
    buffer_types: dict[DType, str] = {}  # element types of buffers when they differ from ``types``
    # 16-bit floats held as their bits: (widening helper, narrowing helper) each, sources in ``half_helpers``
    half_conversions: dict[DType, tuple[str, str]] = {
        float16: ("pt_f16_f32", "pt_f32_f16"),
        bfloat16: ("pt_bf16_f32", "pt_f32_bf16"),
    }
    half_helpers: dict[str, str] = C_HALF_HELPERS
    static_inline = "static inline"
    math_suffix_f32 = "f"  # expf, logf ...; OpenCL uses overloads (no suffix)
    math_names = {
        **{f.name: f.c_name for f in FUNCTIONS if f.c_name},  # the op table's <math.h> functions
        **{op.function: op.function for op in FUNCTIONS2.values()},  # atan2, hypot
        "abs": "fabs",
        "floor": "floor",
        "fmod": "fmod",
        "copysign": "copysign",
    }
    infinity = "INFINITY"
    nan = "NAN"
    status_type = "int"
    indent_unit = "    "

    def __init__(self) -> None:
        self.helpers: dict[str, str] = {}
        # functions the kernel calls (outlined loop nests), after the helpers: (declarator, body) each, the
        # declarator without storage class ("int pt_nest1(int64_t pt_begin, ...)"), the body "{ ... }"
        self.functions: list[tuple[str, str]] = []
        self.rendered: tuple[LoopKernel, list[str]] | None = None  # the last kernel rendered and its body lines
        self.lines: list[str] = []
        self.buffers: dict[str, tuple[DType, tuple[Expr, ...]]] = {}

    # -- types and literals -------------------------------------------------------------------------
    def ctype(self, dt: DType) -> str:
        return self.types[dt]

    def buffer_ctype(self, dt: DType) -> str:
        return self.buffer_types.get(dt, self.types[dt])

    def literal(self, value: object, dt: DType) -> str:
        if dt.is_bool:
            return "true" if value else "false"
        if dt.is_int:
            v = int(value)  # type: ignore[call-overload]
            if dt.is_unsigned and dt.bits >= 32:  # unsigned arithmetic from the literal on (wraps by definition)
                return f"{v % 2**dt.bits}u" if dt.bits == 32 else f"{v % 2**64}ULL"
            lim = 2 ** (dt.bits - 1)
            if v == -lim and dt.bits >= 32:
                return f"({self.literal(-lim + 1, dt)} - 1)"
            return f"{v}" if dt.bits <= 32 or abs(v) < 2**31 else f"{v}LL"
        f = float(value)  # type: ignore[arg-type]
        if dt in self.half_conversions:  # its bits (a folded constant stored into a 16-bit buffer)
            with np.errstate(all="ignore"):
                return f"(({self.ctype(dt)})0x{int(np.asarray(f, np.float32).astype(dt.numpy).view(np.uint16)):04x})"
        if dt.is_half:
            return f"(({self.ctype(dt)}){self.literal(f, float32)})"
        if math.isnan(f):
            return self.nan if dt == float32 else f"(({self.ctype(dt)}){self.nan})"
        if math.isinf(f):
            inf = self.infinity if dt == float32 else f"(({self.ctype(dt)}){self.infinity})"
            return inf if f > 0 else f"(-{inf})"
        if dt == float32:
            text = np.format_float_positional(np.float32(f), unique=True, trim="0")
            if len(text) > 16:
                text = np.format_float_scientific(np.float32(f), unique=True, trim="0")
            return text + "f"
        text = repr(f)
        return text if ("." in text or "e" in text) else text + ".0"

    def math_fn(self, name: str, dt: DType) -> str:
        base = self.math_names[name]
        return base + self.math_suffix_f32 if dt == float32 else base

    # -- helpers (emitted once, only when used) ----------------------------------------------------
    def helper(self, name: str, dt: DType) -> str:
        fn = f"pt_{name}_{_suffix(dt)}"
        if fn not in self.helpers:
            self.helpers[fn] = self.helper_source(name, dt, fn)
        return fn

    def helper_source(self, name: str, dt: DType, fn: str) -> str:
        t = self.ctype(dt)
        si = self.static_inline
        if name in ("max", "min"):
            op = ">" if name == "max" else "<"
            if dt.is_float:  # NaN wins, like numpy.maximum
                return f"{si} {t} {fn}({t} a, {t} b) {{ return (a {op} b || a != a) ? a : b; }}"
            return f"{si} {t} {fn}({t} a, {t} b) {{ return a {op} b ? a : b; }}"
        if name in SHIFTS:  # NumPy's results for every count (C leaves counts outside [0, bits) undefined)
            u = self.ctype(getattr(dtypes, f"uint{dt.bits}"))
            over = f"b >= {dt.bits}" if dt.is_unsigned else f"b < 0 || b >= {dt.bits}"
            if name == "lshift":  # shifted as unsigned: a negative value's bits move as they are
                return f"{si} {t} {fn}({t} a, {t} b) {{ return ({over}) ? 0 : ({t})(({u})a << b); }}"
            beyond = "0" if dt.is_unsigned else "(a < 0 ? -1 : 0)"
            return f"{si} {t} {fn}({t} a, {t} b) {{ return ({over}) ? {beyond} : ({t})(a >> b); }}"
        if name in ("floordiv", "mod") and dt.is_unsigned:  # x // 0 == x % 0 == 0, like NumPy (no trap)
            return f"{si} {t} {fn}({t} a, {t} b) {{ return b == 0 ? 0 : a {'/' if name == 'floordiv' else '%'} b; }}"
        if name == "floordiv":
            if dt.is_int:  # floor semantics; x // 0 == 0 and MIN // -1 wraps, like NumPy (no trap)
                return (
                    f"{si} {t} {fn}({t} a, {t} b) {{\n"
                    f"    if (b == 0) return 0;\n"
                    f"    if (b == -1) return -a;\n"
                    f"    {t} q = a / b;\n"
                    f"    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;\n"
                    f"    return q;\n}}"
                )
            fm, fl, cs = self.math_fn("fmod", dt), self.math_fn("floor", dt), self.math_fn("copysign", dt)
            half = self.literal(0.5, dt)
            zero = self.literal(0.0, dt)
            one = self.literal(1.0, dt)
            return (
                f"{si} {t} {fn}({t} a, {t} b) {{\n"
                f"    if (b == {zero}) return a / b;\n"
                f"    {t} mod = {fm}(a, b);\n"
                f"    {t} div = (a - mod) / b;\n"
                f"    if (mod != {zero} && ((b < {zero}) != (mod < {zero}))) div -= {one};\n"
                f"    if (div == {zero}) return {cs}({zero}, a / b);\n"
                f"    {t} fd = {fl}(div);\n"
                f"    if (div - fd > {half}) fd += {one};\n"
                f"    return fd;\n}}"
            )
        if name == "mod":
            if dt.is_int:
                return (
                    f"{si} {t} {fn}({t} a, {t} b) {{\n"
                    f"    if (b == 0 || b == -1) return 0;\n"
                    f"    {t} r = a % b;\n"
                    f"    if (r != 0 && ((r < 0) != (b < 0))) r += b;\n"
                    f"    return r;\n}}"
                )
            fm, cs = self.math_fn("fmod", dt), self.math_fn("copysign", dt)
            zero = self.literal(0.0, dt)
            return (
                f"{si} {t} {fn}({t} a, {t} b) {{\n"
                f"    {t} r = {fm}(a, b);\n"
                f"    if (b == {zero}) return r;\n"
                f"    if (r != {zero}) {{ if ((b < {zero}) != (r < {zero})) r += b; }}\n"
                f"    else r = {cs}({zero}, b);\n"
                f"    return r;\n}}"
            )
        if name == "iabs":
            return f"{si} {t} {fn}({t} a) {{ return a < 0 ? ({t})-a : a; }}"
        raise KeyError(name)

    # -- expressions ----------------------------------------------------------------------------------
    def expr(self, e: Expr, prec: int = 0) -> str:
        """``e`` as C, parenthesised when its precedence is below ``prec``."""
        text, p = self._expr(e)
        return f"({text})" if p < prec else text

    def _expr(self, e: Expr) -> tuple[str, int]:
        atom = 100
        if isinstance(e, Var):
            return e.name, atom
        if isinstance(e, Const):
            text = self.literal(e.value, e.dtype)  # type: ignore[arg-type]
            return text, (atom if not text.startswith(("(", "-")) else 14)
        if isinstance(e, Read):
            return f"{e.buffer}[{self.offset(e.buffer, e.index)}]", atom
        if isinstance(e, Cast):
            return self.cast(e)
        if isinstance(e, Bitcast):
            return self.bitcast(e)
        if isinstance(e, Where):
            return f"{self.expr(e.cond, 4)} ? {self.expr(e.a, 4)} : {self.expr(e.b, 3)}", 3
        if isinstance(e, Unary):
            return self.unary(e)
        if isinstance(e, Binary):
            return self.binary(e)
        raise TypeError(f"C renderer: unexpected expression {type(e).__name__}")

    def cast(self, e: Cast) -> tuple[str, int]:
        src, dst = e.x.dtype, e.dtype
        assert src is not None and dst is not None
        bits = self.half_conversions
        if src.is_float and dst.is_int:  # pt.cast's rule: out of range saturates, NaN gives 0
            x, now = self.expr(e.x), src
            if src in bits:
                x, now = f"{self.half_helper(bits[src][0])}({x})", float32
            return f"{self.saturating_cast(now, dst)}({x})", 100
        if src not in bits and dst not in bits:
            return f"({self.ctype(dst)})" + self.expr(e.x, 14), 14
        x, now = self.expr(e.x), src
        if src in bits:  # its bits to a float32
            x, now = f"{self.half_helper(bits[src][0])}({x})", float32
        if dst in bits:  # a float32 rounded to its bits
            x = x if now == float32 else f"({self.ctype(float32)})({x})"
            return f"{self.half_helper(bits[dst][1])}({x})", 100
        return (x, 100) if dst == float32 else (f"({self.ctype(dst)})({x})", 14)

    def bitcast(self, e: Bitcast) -> tuple[str, int]:
        """The bits of a value as another type of the same width: a cast of a 16-bit float held as its bits, a
        union otherwise (C99, OpenCL C and CUDA all read a union's other member as the same bits)."""
        src, dst = e.x.dtype, e.dtype
        assert src is not None and dst is not None and src.bits == dst.bits
        if src == dst:
            return self._expr(e.x)
        if self.ctype(src) == self.ctype(dst) or (src in self.half_conversions or dst in self.half_conversions):
            return f"({self.ctype(dst)})" + self.expr(e.x, 14), 14
        fn = f"pt_bits_{_suffix(dst)}_{_suffix(src)}"
        if fn not in self.helpers:
            t, f = self.ctype(dst), self.ctype(src)
            self.helpers[fn] = (
                f"{self.static_inline} {t} {fn}({f} x) {{ union {{ {f} from; {t} to; }} u; u.from = x; return u.to; }}"
            )
        return f"{fn}({self.expr(e.x)})", 100

    def saturating_cast(self, src: DType, dst: DType) -> str:
        """The helper converting a float of type ``src`` to the integer type ``dst`` toward zero, the values
        beyond ``dst``'s range to its bounds and NaN to 0 (C leaves those undefined; NumPy gives what the
        machine's instruction gives)."""
        fn = f"pt_sat_{_suffix(dst)}_{_suffix(src)}"
        if fn not in self.helpers:
            t, f = self.ctype(dst), self.ctype(src)
            lo, hi = dst.bounds
            lo_t, hi_t = self.literal(lo, dst), self.literal(hi, dst)
            self.helpers[fn] = (
                f"{self.static_inline} {t} {fn}({f} x) {{\n"
                f"    return x != x ? ({t})0 : x <= ({f}){lo_t} ? {lo_t} : x >= ({f}){hi_t} ? {hi_t} : ({t})x;\n}}"
            )
        return fn

    def half_helper(self, name: str) -> str:
        """The name of a 16-bit float conversion (:attr:`half_helpers`), emitted once when used."""
        self.helpers.setdefault(name, self.half_helpers[name])
        return name

    def unary(self, e: Unary) -> tuple[str, int]:
        dt = e.dtype
        assert dt is not None
        x = e.x
        op = e.op
        if op in ("neg", "invert") and dt.is_narrow_int:  # computed in int: back to the type, wrapping around
            return f"({self.ctype(dt)})({'-' if op == 'neg' else '~'}{self.expr(x, 14)})", 14
        if op == "neg":
            return "-" + self.expr(x, 14), 14
        if op == "invert":
            return ("!" if dt.is_bool else "~") + self.expr(x, 14), 14
        if op == "abs":
            if dt.is_unsigned:
                return self.expr(x, 14), 14
            if dt.is_int:
                return f"{self.helper('iabs', dt)}({self.expr(x)})", 100
            return f"{self.math_fn('abs', dt)}({self.expr(x)})", 100
        f = MATH.get(op)
        if f is not None and f.formula is not None:  # a function defined over others (rsqrt, sigmoid)
            call = lambda name, arg: f"{self.math_fn(name, dt)}({arg})"  # noqa: E731
            return f.formula(self.expr(x), self.expr(x, 14), call, self.literal(1.0, dt)), f.precedence
        return f"{self.math_fn(op, dt)}({self.expr(x)})", 100

    def binary(self, e: Binary) -> tuple[str, int]:
        dt = e.a.dtype
        assert dt is not None
        op = e.op
        if op in ("maximum", "minimum"):
            fn = self.helper("max" if op == "maximum" else "min", dt)
            return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})", 100
        if op in ("floordiv", "mod") or op in SHIFTS:
            return f"{self.helper(op, dt)}({self.expr(e.a)}, {self.expr(e.b)})", 100
        if op in FUNCTIONS2:  # atan2, hypot
            return f"{self.math_fn(FUNCTIONS2[op].function, dt)}({self.expr(e.a)}, {self.expr(e.b)})", 100
        sym = "/" if op == "div" else _INFIX[op]
        p = _PREC[sym]
        if op == "add" and isinstance(e.b, Const) and e.b.dtype.is_int and not dt.is_unsigned and e.b.value < 0:
            text = f"{self.expr(e.a, 12)} - {-e.b.value}"
        else:
            text = f"{self.expr(e.a, p)} {sym} {self.expr(e.b, p + 1)}"
        if op in ("add", "sub", "mul") and dt.is_narrow_int:  # computed in int: back to the type, wrapping around
            return f"({self.ctype(dt)})({text})", 14
        return text, p

    def offset(self, buffer: str, index: tuple[Expr, ...]) -> str:
        """Row-major flat offset of ``index`` in ``buffer``."""
        shape = self.buffers[buffer][1]
        if not index:
            return "0"
        acc: Expr = index[0]
        for dim, ix in zip(shape[1:], index[1:]):
            acc = Binary("add", Binary("mul", acc, dim, dtype=int64), ix, dtype=int64)
        return self.expr(acc)

    # -- statements ----------------------------------------------------------------------------------
    def emit(self, ind: int, text: str) -> None:
        self.lines.append(self.indent_unit * ind + text)

    def stmt(self, s: Stmt, ind: int) -> None:
        if isinstance(s, Block):
            for b in s.body:
                self.stmt(b, ind)
        elif isinstance(s, Loop):
            self.loop(s, ind)
        elif isinstance(s, Let):
            self.emit(ind, f"const {self.ctype(s.value.dtype)} {s.name} = {self.expr(s.value)};")  # type: ignore[arg-type]
        elif isinstance(s, Declare):
            self.emit(ind, f"{self.ctype(s.dtype)} {s.name} = {self.expr(s.init)};")
        elif isinstance(s, Assign):
            self.emit(ind, f"{s.name} = {self.expr(s.value)};")
        elif isinstance(s, Update):
            self.update(s, ind)
        elif isinstance(s, Write):
            self.emit(ind, f"{s.buffer}[{self.offset(s.buffer, s.index)}] = {self.expr(s.value)};")
        elif isinstance(s, Alloc):
            self.alloc(s, ind)
        elif isinstance(s, If):
            self.emit(ind, f"if ({self.expr(s.cond)}) {{")
            self.stmt(s.then, ind + 1)
            if s.orelse is not None:
                self.emit(ind, "} else {")
                self.stmt(s.orelse, ind + 1)
            self.emit(ind, "}")
        elif isinstance(s, Comment):
            self.emit(ind, "/* " + s.text.replace("*/", "* /") + " */")
        else:
            raise TypeError(f"C renderer: unexpected statement {type(s).__name__}")

    def update_value(self, s: Update, old: str, value: str) -> Expr:
        """The element's new value after an atomic update: ``old ⊕ value`` (a 16-bit float widened, combined in
        float32 and rounded), as IR over variables named ``old`` and ``value``."""
        dt = self.buffers[s.buffer][0]
        wide: Expr = Var(old, dtype=dt)
        if dt.is_half:
            wide = Cast(wide, dtype=float32)
        new = combine({"add": "sum", "max": "max", "min": "min"}[s.op], wide, Var(value, dtype=s.value.dtype))
        return Cast(new, dtype=dt) if new.dtype != dt else new

    def update(self, s: Update, ind: int) -> None:
        """An atomic update with the compiler's ``__atomic`` builtins (C and C++ alike): an integer sum is one
        ``fetch_add``; anything else a compare-and-swap loop on the element's bytes (NaN included)."""
        dt = self.buffers[s.buffer][0]
        t, ref = self.ctype(dt), f"{s.buffer}[{self.offset(s.buffer, s.index)}]"
        if dt.is_int and s.op == "add":
            self.emit(ind, f"__atomic_fetch_add(&{ref}, ({t})({self.expr(s.value)}), __ATOMIC_RELAXED);")
            return
        new = self.expr(self.update_value(s, "_pt_o", "_pt_v"))
        self.emit(ind, "{")
        self.emit(ind + 1, f"const {self.ctype(s.value.dtype)} _pt_v = {self.expr(s.value)};")  # type: ignore[arg-type]
        self.emit(ind + 1, f"{t} *_pt_p = &{ref}, _pt_o, _pt_n;")
        self.emit(ind + 1, "__atomic_load(_pt_p, &_pt_o, __ATOMIC_RELAXED);")
        self.emit(ind + 1, f"do _pt_n = {new}; while (!__atomic_compare_exchange(_pt_p, &_pt_o, &_pt_n, 1, "
                           "__ATOMIC_RELAXED, __ATOMIC_RELAXED));")  # fmt: skip
        self.emit(ind, "}")

    def loop_header(self, s: Loop, ind: int) -> None:
        """Lines before the ``for`` (pragmas); plain C has none."""

    def loop(self, s: Loop, ind: int) -> None:
        self.loop_header(s, ind)
        it = self.index_type
        self.emit(ind, f"for ({it} {s.var} = {self.expr(s.start)}; {s.var} < {self.expr(s.stop, 10)}; {s.var}++) {{")
        self.stmt(s.body, ind + 1)
        self.emit(ind, "}")

    def alloc(self, s: Alloc, ind: int) -> None:
        t = self.buffer_ctype(s.dtype)
        count = " * ".join(self.expr(d, 13) for d in s.shape) or "1"
        self.buffers[s.buffer] = (s.dtype, s.shape)
        if s.local:  # a small constant shape: on the stack, where the compiler may keep it in registers
            self.emit(ind, "{")
            self.emit(ind + 1, f"{t} {s.buffer}[{count}];")
            self.stmt(s.body, ind + 1)
            self.emit(ind, "}")
            return
        self.emit(ind, f"{t} *{s.buffer} = ({t} *)malloc(sizeof({t}) * (size_t)({count} > 0 ? {count} : 1));")
        self.emit(ind, f"if ({s.buffer} == NULL) {{ pt_status = 1; }} else {{")
        self.stmt(s.body, ind + 1)
        self.emit(ind + 1, f"free({s.buffer});")
        self.emit(ind, "}")

    # -- whole kernel -----------------------------------------------------------------------------------
    def param(self, a: Argument, noalias: bool) -> str:
        if a.kind != "buffer":  # a 16-bit float scalar arrives as a float32 (its value, already rounded)
            return f"{self.ctype(a.dtype.compute)} {a.name}"
        const = "const " if a.role == "in" else ""
        ptr = f"*{self.restrict} " if noalias and self.restrict else "*"
        return f"{self.buffer_qualifier}{const}{self.buffer_ctype(a.dtype)} {ptr}{a.name}"

    def signature(self, k: LoopKernel) -> str:
        params = ", ".join(self.param(a, k.noalias) for a in k.args)
        return f"{self.function_prefix}{self.status_type} {k.name}({params})"

    def prelude(self) -> list[str]:
        """Text before the helpers: includes and anything the backend needs."""
        return [f"#include {h}" for h in self.includes]

    def body(self, k: LoopKernel) -> list[str]:
        """The function body's lines (renders into ``self.lines``)."""
        self.emit(1, f"{self.status_type} pt_status = 0;")
        self.stmt(k.body, 1)
        self.emit(1, "return pt_status;")
        return self.lines

    def render(self, k: LoopKernel) -> str:
        """The complete translation unit for ``k``."""
        self.helpers.clear()
        self.functions = []
        self.lines = []
        self.buffers = {a.name: (a.dtype, a.shape) for a in k.args if a.kind == "buffer"}
        body = self.body(k)
        self.rendered = (k, body)
        return self.assemble(k, [f"static {d} {b}" for d, b in self.functions])

    def assemble(self, k: LoopKernel, functions: Iterable[str]) -> str:
        """The translation unit holding the kernel function, with ``functions`` (definitions or prototypes)
        before it."""
        assert self.rendered is not None and self.rendered[0] is k
        out = [
            f"/* pypto kernel {k.name}: generated code, do not edit */",
            *self.prelude(),
            "",
            *self.extra_declarations(k),
            *self.helpers.values(),
            "",
            *functions,
            self.signature(k) + " {",
            *self.rendered[1],
            "}",
            *self.epilogue(k),
        ]
        return "\n".join(out) + "\n"

    hidden = '__attribute__((visibility("hidden"))) '  # functions shared between the units of one object

    def units(self, k: LoopKernel, parts: int, first_load: int = 0) -> list[str]:
        """The kernel last rendered as up to ``parts`` translation units, compiled apart (in parallel) and
        linked into one object: the kernel function in the first, its functions spread over all of them by
        size (in lines; ``first_load``: lines' worth the caller will add to the first unit). Every unit has the
        includes, the :meth:`shared_declarations`, the helpers and a prototype of every function. One unit
        (the text :meth:`render` returned) when there is nothing to spread."""
        assert self.rendered is not None and self.rendered[0] is k
        if parts < 2 or not self.functions:
            return [self.assemble(k, [f"static {d} {b}" for d, b in self.functions])]
        sizes = [b.count("\n") + 1 for _, b in self.functions]
        load, bins = [len(self.rendered[1]) + first_load] + [0] * (parts - 1), [[] for _ in range(parts)]
        for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
            j = min(range(parts), key=load.__getitem__)
            bins[j].append(i)
            load[j] += sizes[i]
        protos = [f"{self.hidden}{d};" for d, _ in self.functions]
        defs = [f"{self.hidden}{d} {b}" for d, b in self.functions]
        first = self.assemble(k, [*protos, *(defs[i] for i in sorted(bins[0]))])
        rest = [
            "\n".join([f"/* pypto kernel {k.name}: generated code, part {n + 1} */", *self.prelude(), "",
                       *self.shared_declarations(k), *self.helpers.values(), "", *protos,
                       *(defs[i] for i in sorted(b))]) + "\n"
            for n, b in enumerate(x for x in bins[1:] if x)
        ]  # fmt: skip
        return [first, *rest]

    def shared_declarations(self, k: LoopKernel) -> Iterable[str]:
        """Declarations every translation unit of a split kernel needs (those of :meth:`extra_declarations`
        that define nothing)."""
        return ()

    def extra_declarations(self, k: LoopKernel) -> Iterable[str]:
        """Declarations between the includes and the helpers (vector-math prototypes, globals)."""
        return ()

    def epilogue(self, k: LoopKernel) -> Iterable[str]:
        """Text after the kernel function (entry points, wrappers)."""
        return ()
