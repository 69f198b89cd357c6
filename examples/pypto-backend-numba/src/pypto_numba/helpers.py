"""Small functions the generated code calls where Python's operators differ from NumPy's.

Each helper is rendered for one dtype (its literals carry that dtype, so Numba never widens a
float32 to float64) and only when the kernel uses it. They give the semantics every pypto
backend shares: ``maximum``/``minimum`` propagate NaN, and floor division and modulo follow
NumPy, including the cases that trap in C or raise in Python (an integer divided by zero gives 0,
the smallest integer divided by -1 wraps around).
"""

from __future__ import annotations

from collections.abc import Callable

from pypto.dtypes import DType

SUFFIX = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "b", "int8": "i8", "int16": "i16",
          "uint8": "u8", "uint16": "u16", "uint32": "u32"}  # fmt: skip


def helper_name(op: str, dt: DType) -> str:
    """The generated function's name, e.g. ``_pt_maximum_f32``."""
    return f"_pt_{op}_{SUFFIX[dt.name]}"


def helper_source(
    op: str, dt: DType, literal: Callable[[object, DType], str], wrap: Callable[[str, DType], str]
) -> str:
    """The source of helper ``op`` for values of type ``dt``.

    ``literal(value, dt)`` spells a constant of type ``dt``; ``wrap(text, dt)`` converts the
    result of integer arithmetic back to ``dt`` (Numba computes int32 arithmetic in int64).
    """
    fn = helper_name(op, dt)
    head = f"@_helper\ndef {fn}(a, b):\n"
    if op in ("maximum", "minimum"):
        cmp = ">" if op == "maximum" else "<"
        nan = " or a != a" if dt.is_float else ""  # a NaN operand wins, as in numpy.maximum
        return head + f"    return a if (a {cmp} b{nan}) else b\n"
    if op == "abs":
        return f"@_helper\ndef {fn}(a):\n    return {wrap('-a', dt)} if a < 0 else a\n"
    if op == "saturate":  # a float to the integer type dt: toward zero, beyond the range its bounds, NaN 0
        lo, hi = (literal(v, dt) for v in dt.bounds)
        return (
            f"@_helper\ndef {fn}(x):\n    if x != x:\n        return {literal(0, dt)}\n"
            f"    if x <= {dt.bounds[0]}:\n        return {lo}\n    if x >= {dt.bounds[1]}:\n        return {hi}\n"
            f"    return {wrap('x', dt) if dt.name != 'int64' else '_pt_i64(x)'}\n"
        )
    if op in ("lshift", "rshift"):  # NumPy's results for every count (LLVM's shifts are undefined beyond the width)
        over = f"b >= {dt.bits}" if dt.is_unsigned else f"b < 0 or b >= {dt.bits}"
        beyond = (
            literal(0, dt) if op == "lshift" or dt.is_unsigned else f"{literal(-1, dt)} if a < 0 else {literal(0, dt)}"
        )
        sym = "<<" if op == "lshift" else ">>"
        return head + f"    if {over}:\n        return {beyond}\n    return {wrap(f'a {sym} b', dt)}\n"
    if dt.is_unsigned and op in ("floordiv", "mod"):  # x // 0 == x % 0 == 0, like NumPy
        return (
            head
            + f"    if b == 0:\n        return {literal(0, dt)}\n    return {wrap('a // b' if op == 'floordiv' else 'a % b', dt)}\n"
        )
    if dt.is_float:
        return head + _float_division(op, dt, literal)
    zero = literal(0, dt)
    if op == "floordiv":  # x // 0 is 0 and MIN // -1 wraps, like NumPy (Python would raise)
        return head + (
            f"    if b == 0:\n        return {zero}\n"
            f"    if b == -1:\n        return {wrap('-a', dt)}\n"
            f"    return {wrap('a // b', dt)}\n"
        )
    if op == "mod":
        return head + (f"    if b == 0 or b == -1:\n        return {zero}\n    return {wrap('a % b', dt)}\n")
    raise KeyError(op)


def _float_division(op: str, dt: DType, literal: Callable[[object, DType], str]) -> str:
    """NumPy's float floor division and remainder (the sign rules of ``npy_divmod``)."""
    zero, one, half = literal(0.0, dt), literal(1.0, dt), literal(0.5, dt)
    if op == "floordiv":
        return (
            f"    if b == {zero}:\n        return a / b\n"
            f"    mod = _np.fmod(a, b)\n"
            f"    div = (a - mod) / b\n"
            f"    if mod != {zero} and ((b < {zero}) != (mod < {zero})):\n        div = div - {one}\n"
            f"    if div == {zero}:\n        return _np.copysign({zero}, a / b)\n"
            f"    fd = _np.floor(div)\n"
            f"    if div - fd > {half}:\n        fd = fd + {one}\n"
            f"    return fd\n"
        )
    if op == "mod":
        return (
            f"    r = _np.fmod(a, b)\n"
            f"    if b == {zero}:\n        return r\n"
            f"    if r != {zero}:\n"
            f"        if (b < {zero}) != (r < {zero}):\n            r = r + b\n"
            f"    else:\n        r = _np.copysign({zero}, b)\n"
            f"    return r\n"
        )
    raise KeyError(op)
