"""The kernel language's typing rules, restated from its documentation (not imported from pypto).

``float`` is float32; mixing kinds gives the higher kind (bool < int < float), mixing widths the
wider, a signed with an unsigned integer the narrowest signed type holding both (int64 with uint64:
float64); Python scalars and axis values are weak and take the other operand's type (a Python float
meeting an integer gives float32); ``/`` on integers gives float32; the functions compute in the
operand's float type (float32 for integers); arithmetic on booleans gives int32; integer arithmetic
wraps around; a float converted to an integer saturates at the type's bounds (NaN gives 0); the 16-bit
floats are computed in float32 and rounded only where stored or explicitly converted. Complex numbers beat
every real kind and take the wider part (complex64 with float64: complex128; with any integer: the complex
type itself); a Python complex meeting a real type gives the complex type of its precision (complex128 for
float64, else complex64); ``abs``, ``angle``, ``real`` and ``imag`` of a complex value give its part type.
"""

from __future__ import annotations

import ml_dtypes  # noqa: F401 - registers NumPy's name "bfloat16" (the fuzzer's dtypes are names)

FLOAT_TYPES = ("float32", "float64", "float16", "bfloat16")
HALF_TYPES = ("float16", "bfloat16")  # stored in 16 bits, computed in float32, rounded where stored or cast
INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
COMPLEX_TYPES = ("complex64", "complex128")
PART = {"complex64": "float32", "complex128": "float64"}  # the type of each part
KIND = {"bool": 0, **{t: 1 for t in INT_TYPES}, **{t: 2 for t in FLOAT_TYPES}, **{t: 3 for t in COMPLEX_TYPES}}
BITS = {"bool": 8, **{t: int(t.removeprefix("u").removeprefix("int")) for t in INT_TYPES}, "float32": 32, "float64": 64,
        "float16": 16, "bfloat16": 16, "complex64": 64, "complex128": 128}  # fmt: skip
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}

FUNCTIONS = ("exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "erf", "sigmoid")
COMPLEX_FUNCTIONS = ("exp", "log", "sqrt")  # the functions defined for complex operands
PARTS = ("abs", "angle", "real", "imag")  # complex -> its part type
ARITH = ("add", "sub", "mul", "div", "floordiv", "mod", "maximum", "minimum")
COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC = ("and", "or", "xor")

# the spelling of each operator in kernel source
SYMBOL = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "//",
    "mod": "%",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "&",
    "or": "|",
    "xor": "^",
}


def is_float(dt: str) -> bool:
    return KIND[dt] == 2


def is_complex(dt: str) -> bool:
    return KIND[dt] == 3


def is_inexact(dt: str) -> bool:
    """A float or a complex type (true division, functions)."""
    return KIND[dt] >= 2


def part(dt: str) -> str:
    """The type of each part of a complex type; a real type's own type."""
    return PART.get(dt, dt)


def complex_of(dt: str) -> str:
    """The complex type whose parts hold ``dt``'s values."""
    return "complex128" if dt in ("float64", "complex128") else "complex64"


def is_int(dt: str) -> bool:
    return KIND[dt] == 1


def is_unsigned(dt: str) -> bool:
    return dt.startswith("uint")


def promote(a: str, b: str) -> str:
    """Two strong (array-derived) types: the higher kind wins, then the wider type; a signed and an unsigned
    integer meet in the narrowest signed type holding both (float64 for int64 with uint64)."""
    if a == b:
        return a
    if is_complex(a) or is_complex(b):  # the complex one, widened to complex128 by float64
        c, r = (a, b) if is_complex(a) else (b, a)
        return "complex128" if r in ("float64", "complex128") else c
    if KIND[a] != KIND[b]:
        return a if KIND[a] > KIND[b] else b
    if is_int(a) and is_unsigned(a) != is_unsigned(b):
        s, u = (b, a) if is_unsigned(a) else (a, b)
        if BITS[s] > BITS[u]:
            return s
        return f"int{2 * BITS[u]}" if BITS[u] < 64 else "float64"
    if BITS[a] == BITS[b]:  # float16 and bfloat16: neither holds the other
        return "float32"
    return a if BITS[a] >= BITS[b] else b


def compute(dt: str) -> str:
    """The type values of type ``dt`` are computed in: float32 for the 16-bit floats."""
    return "float32" if dt in HALF_TYPES else dt


def with_weak(strong: str, weak_kind: str, value: float = 0) -> str:
    """A strong type meeting a weak Python scalar (or an axis value, an integer) of ``weak_kind``."""
    if weak_kind == "int":
        if strong == "bool":
            return "int32" if -(2**31) <= value < 2**31 else "int64"
        if strong == "int32" and not -(2**31) <= value < 2**31:
            return "int64"
        return strong
    if weak_kind == "complex":
        return strong if is_complex(strong) else complex_of(strong)
    return strong if is_inexact(strong) else "float32"


def arith_result(op: str, operands: str) -> str:
    """The result type of an arithmetic operator whose operands were converted to ``operands``."""
    if operands == "bool" and op not in ("maximum", "minimum"):
        operands = "int32"
    if op == "div" and not is_inexact(operands):
        return "float32"
    return operands


def function_type(dt: str) -> str:
    """The type a function computes in for an operand of type ``dt`` (a complex type keeps its own)."""
    return dt if is_inexact(dt) else "float32"


def unit_roundoff(dt: str) -> float:
    """Half a unit in the last place relative to 1: the error bound of one correctly rounded operation."""
    dt = part(dt)
    return EPS[dt] / 2 if is_float(dt) else 0.0
