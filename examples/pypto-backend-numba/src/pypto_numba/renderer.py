"""Loop IR → Python source for Numba: a loop a line, parallel loops as ``prange``.

The generated module defines the kernel function (arguments in loop-IR order: buffers, scalars,
dims), the helpers it calls, and ``_pt_parallel_work`` when the size of its parallel work can be
computed from the arguments. It runs in the namespace :func:`pypto_numba.launcher.namespace`
builds, where ``_np`` is NumPy, ``_math`` is ``math``, ``_prange`` is ``numba.prange``, ``_range``
is ``range`` and ``_pt_f32 _pt_f64 _pt_i32 _pt_i64`` ... are NumPy's scalar types. The underscores keep those
names apart from the kernel's own (parameter and dimension names never start with one), and the ``_pt_`` prefix
apart from the variables the passes make (``_i32``, ``_key7``: a stem and a counter).

Numba computes int32 arithmetic in int64 and turns ``float32 op float64`` into float64, so the
renderer spells every constant with its dtype and converts the result of int32 arithmetic back to
int32 (which also gives NumPy's wrap-around on overflow).
"""

from __future__ import annotations

import math

import numpy as np

from pypto.dtypes import DType, bool_, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32
from pypto.ir.loops import (
    Alloc,
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
    walk,
)
from pypto.ir.nodes import Binary, Bitcast, Cast, Const, Expr, Unary, Where, postorder
from pypto.ir.ops import FUNCTIONS2, binary_symbols
from pypto.ir.ops import MATH as FUNCTIONS
from pypto.ir.reducers import combine

from .helpers import helper_name, helper_source

SCALAR_TYPE = {float32: "_pt_f32", float64: "_pt_f64", int32: "_pt_i32", int64: "_pt_i64", int8: "_pt_i8", int16: "_pt_i16", uint8: "_pt_u8",
               uint16: "_pt_u16", uint32: "_pt_u32"}  # fmt: skip
ARRAY_DTYPE = {dt: f"_np.{dt.name}" for dt in (float32, float64, int8, int16, int32, int64, uint8, uint16, uint32)}
ARRAY_DTYPE[bool_] = "_np.bool_"
# the operators Python spells infix as pypto means them (the op table's C-infix set, and / on the float
# operands the typing pass gives it); floordiv, mod, maximum and minimum go through helpers
INFIX = binary_symbols(c_infix=True, also=("div",))
PARALLEL_KINDS = ("parallel", "parallel_vector")
WORK_FUNCTION = "_pt_parallel_work"
# the globals of the generated module (see launcher.namespace); a kernel must not be named like one
NAMESPACE_NAMES = frozenset({"_np", "_math", "_prange", "_range", "_max", "_helper", *SCALAR_TYPE.values()})


def _numba_name(f) -> str:
    """How generated Numba code calls a function of the op table (NumPy's ufunc where Python's math differs)."""
    return f.numba_name or f"_math.{f.c_name}"


def function_name(k: LoopKernel) -> str:
    """The name of the kernel's function in the generated module: the kernel's own, unless it is taken."""
    return f"_pt_kernel_{k.name}" if k.name in NAMESPACE_NAMES or k.name.startswith("_pt_") else k.name


def is_prange(s: Loop) -> bool:
    """Whether ``s`` becomes a ``prange`` loop: parallel and without accumulators.

    Numba recognises only its own spellings of a reduction (``acc += v``); a parallel loop that
    carries the loop IR's reductions (NaN-propagating max, for example) runs serially instead, and so does
    one holding atomic updates (a scatter compiled with ``deterministic=False``): Numba has no atomics.
    """
    return s.kind in PARALLEL_KINDS and not s.reductions and not any(isinstance(st, Update) for st in walk(s.body))


class NumbaRenderer:
    """Renders a :class:`~pypto.ir.loops.LoopKernel` as the source of a Python module for Numba."""

    indent_unit = "    "

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.helpers: dict[str, str] = {}
        self.dtypes: dict[str, DType] = {}  # buffer -> its element type
        self.flat: dict[str, str] = {}  # 0-d buffer -> its 1-element view (Numba's prange cannot index x[()])

    # -- types and literals ---------------------------------------------------------------------------
    def literal(self, value: object, dt: DType) -> str:
        """A constant of type ``dt``."""
        if dt.is_bool:
            return "True" if value else "False"
        if dt.is_int:
            v = int(value)  # type: ignore[call-overload]
            text = str(v) if v > -(2**63) else f"{-(2**63) + 1} - 1"  # 2**63 itself is no int64 literal
            return self.wrap(text, dt)
        f = float(value)  # type: ignore[arg-type]
        if math.isnan(f):
            text = "_math.nan"
        elif math.isinf(f):
            text = "_math.inf" if f > 0 else "-_math.inf"
        elif dt == float32:
            text = np.format_float_positional(np.float32(f), unique=True, trim="0")
            if len(text) > 16:  # 1e+30 rather than thirty-one digits
                text = np.format_float_scientific(np.float32(f), unique=True, trim="0")
            if float(np.float32(float(text))) != float(np.float32(f)):  # the short form must round-trip
                text = repr(float(np.float32(f)))
        else:
            text = repr(f)
        return f"_pt_f32({text})" if dt == float32 else text

    def wrap(self, text: str, dt: DType) -> str:
        """``text`` converted back to ``dt`` where Numba would have widened it (integers narrower than 64 bits)."""
        return f"{SCALAR_TYPE[dt]}({text})" if dt.is_int and dt != int64 else text

    def helper(self, op: str, dt: DType) -> str:
        """The name of helper ``op`` for ``dt``, rendering it the first time it is used."""
        name = helper_name(op, dt)
        if name not in self.helpers:
            self.helpers[name] = helper_source(op, dt, self.literal, self.wrap)
        return name

    # -- expressions ------------------------------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        """``e`` as an operand: parenthesised unless it is a name, a call or a subscript."""
        text, atomic = self._expr(e)
        return text if atomic else f"({text})"

    def top(self, e: Expr) -> str:
        """``e`` where no parentheses are needed (right of ``=``, in a call's arguments)."""
        return self._expr(e)[0]

    def _expr(self, e: Expr) -> tuple[str, bool]:
        if isinstance(e, Var):
            return e.name, True
        if isinstance(e, Const):
            text = self.literal(e.value, e.dtype)  # type: ignore[arg-type]
            return text, not text.startswith("-")
        if isinstance(e, Read):
            return self.read(e.buffer, e.index), True
        if isinstance(e, Cast):
            return self.cast(e)
        if isinstance(e, Bitcast):  # a NumPy scalar's view of its bits
            src, dt = e.x.dtype, e.dtype
            assert src is not None and dt is not None
            return f"{SCALAR_TYPE[src]}({self.top(e.x)}).view({ARRAY_DTYPE[dt]})", True
        if isinstance(e, Where):
            return f"{self.expr(e.a)} if {self.expr(e.cond)} else {self.expr(e.b)}", False
        if isinstance(e, Unary):
            return self.unary(e)
        if isinstance(e, Binary):
            return self.binary(e)
        raise TypeError(f"Numba renderer: unexpected expression {type(e).__name__}")

    def read(self, buffer: str, index: tuple[Expr, ...]) -> str:
        if buffer in self.flat:
            return f"{self.flat[buffer]}[0]"
        return f"{buffer}[{', '.join(self.top(i) for i in index)}]"

    def cast(self, e: Cast) -> tuple[str, bool]:
        dt, src = e.dtype, e.x.dtype
        assert dt is not None and src is not None
        if dt == src:
            return self._expr(e.x)
        if dt.is_bool:
            return f"{self.expr(e.x)} != {self.literal(0, src)}", False
        if src.is_float and dt.is_int:  # pt.cast's rule: out of range saturates, NaN gives 0
            return f"{self.helper('saturate', dt)}({self.top(e.x)})", True
        return f"{SCALAR_TYPE[dt]}({self.top(e.x)})", True

    def unary(self, e: Unary) -> tuple[str, bool]:
        dt = e.dtype
        assert dt is not None
        x, op = e.x, e.op
        if op == "neg":
            return (
                (self.wrap(f"-{self.expr(x)}", dt), True) if dt.is_int and dt != int64 else (f"-{self.expr(x)}", False)
            )
        if op == "invert":
            if dt.is_bool:
                return f"not {self.expr(x)}", False
            return (
                (self.wrap(f"~{self.expr(x)}", dt), True) if dt.is_int and dt != int64 else (f"~{self.expr(x)}", False)
            )
        if op == "abs":
            fn = self.helper("abs", dt) if dt.is_int else "_math.fabs"
            return f"{fn}({self.top(x)})", True
        f = FUNCTIONS.get(op)
        if f is not None and f.formula is not None:  # the op table defines it over other functions
            call = lambda name, arg: f"{_numba_name(FUNCTIONS[name])}({arg})"  # noqa: E731
            return f.formula(self.top(x), self.expr(x), call, self.literal(1.0, dt)), False
        if f is not None:  # the op table's functions are math-module functions of the same C name
            return f"{_numba_name(f)}({self.top(x)})", True
        raise TypeError(f"Numba renderer: unexpected unary operator {op!r}")

    def binary(self, e: Binary) -> tuple[str, bool]:
        dt = e.a.dtype  # operands share a type; comparisons give bool
        assert dt is not None
        op = e.op
        if op in ("maximum", "minimum", "floordiv", "mod", "lshift", "rshift"):
            return f"{self.helper(op, dt)}({self.top(e.a)}, {self.top(e.b)})", True
        if op in FUNCTIONS2:  # atan2, hypot: math-module functions of the same C name (fmod: NumPy's)
            fn = FUNCTIONS2[op].numba_name or f"_math.{FUNCTIONS2[op].function}"
            return f"{fn}({self.top(e.a)}, {self.top(e.b)})", True
        sym = INFIX[op]
        b = e.b
        if op == "add" and isinstance(b, Const) and dt.is_int and -(2 ** (dt.bits - 1)) < b.value < 0:
            sym, b = "-", Const(-b.value, dtype=dt)  # i + -1 reads better as i - 1
        text = f"{self.expr(e.a)} {sym} {self.expr(b)}"
        if dt.is_int and dt != int64 and op not in ("lt", "le", "gt", "ge", "eq", "ne"):
            return self.wrap(text, dt), True
        return text, False

    # -- statements -------------------------------------------------------------------------------------
    def emit(self, ind: int, text: str) -> None:
        self.lines.append(self.indent_unit * ind + text)

    def stmt(self, s: Stmt, ind: int) -> None:
        if isinstance(s, Block):
            if not s.body:
                self.emit(ind, "pass")
            for b in s.body:
                self.stmt(b, ind)
        elif isinstance(s, Loop):
            self.loop(s, ind)
        elif isinstance(s, Let):
            self.emit(ind, f"{s.name} = {self.top(s.value)}")
        elif isinstance(s, Declare):
            init = s.init if s.init.dtype == s.dtype else Cast(s.init, dtype=s.dtype)
            self.emit(ind, f"{s.name} = {self.top(init)}")
        elif isinstance(s, Assign):
            self.emit(ind, f"{s.name} = {self.top(s.value)}")
        elif isinstance(s, Update):  # in a loop that runs serially (is_prange): a plain read-modify-write
            old: Expr = Read(s.buffer, s.index, dtype=self.dtypes[s.buffer])
            wide = Cast(old, dtype=float32) if old.dtype.is_half else old
            new = combine({"add": "sum", "max": "max", "min": "min"}[s.op], wide, s.value)
            new = Cast(new, dtype=old.dtype) if new.dtype != old.dtype else new
            self.emit(ind, f"{self.read(s.buffer, s.index)} = {self.top(new)}")
        elif isinstance(s, Write):
            self.emit(ind, f"{self.read(s.buffer, s.index)} = {self.top(s.value)}")
        elif isinstance(s, Alloc):
            self.alloc(s, ind)
        elif isinstance(s, If):
            self.emit(ind, f"if {self.top(s.cond)}:")
            self.stmt(s.then, ind + 1)
            if s.orelse is not None:
                self.emit(ind, "else:")
                self.stmt(s.orelse, ind + 1)
        elif isinstance(s, Comment):
            self.emit(ind, "# " + " ".join(s.text.split()))
        else:
            raise TypeError(f"Numba renderer: unexpected statement {type(s).__name__}")

    def loop(self, s: Loop, ind: int) -> None:
        loop_range = "_prange" if is_prange(s) else "_range"
        note = ""
        if s.kind != "serial":
            note = f"  # {s.kind.replace('_', ' ')}"
            if s.kind in PARALLEL_KINDS and s.reductions:
                note += " (runs serially: it carries reductions)"
        self.emit(ind, f"for {s.var} in {loop_range}({self.top(s.start)}, {self.top(s.stop)}):{note}")
        self.stmt(s.body, ind + 1)

    def alloc(self, s: Alloc, ind: int) -> None:
        if s.shape:
            shape = "(" + ", ".join(self.top(d) for d in s.shape) + ",)"
        else:  # a 0-d temporary: one element, read and written as buf[0]
            shape = "(1,)"
            self.flat[s.buffer] = s.buffer
        self.emit(ind, f"{s.buffer} = _np.empty({shape}, dtype={ARRAY_DTYPE[s.dtype]})")
        self.stmt(s.body, ind)

    # -- the module -------------------------------------------------------------------------------------
    def render(self, k: LoopKernel) -> str:
        """The Python module for ``k``: the kernel function, its helpers, the work estimate."""
        self.lines, self.helpers = [], {}
        self.flat = {a.name: f"_pt_view_{a.name}" for a in k.args if a.kind == "buffer" and not a.shape}
        self.dtypes = {a.name: a.dtype for a in k.args if a.kind == "buffer"}
        self.dtypes.update({s.buffer: s.dtype for s in walk(k.body) if isinstance(s, Alloc)})
        names = ", ".join(a.name for a in k.args)
        self.emit(0, f"def {function_name(k)}({names}):")
        self.emit(1, f'"""pypto kernel {k.name}, generated for Numba by pypto-backend-numba (do not edit)."""')
        for buffer, view in self.flat.items():
            self.emit(1, f"{view} = {buffer}.reshape(1)")
        self.stmt(k.body, 1)
        out = ["\n".join(self.lines)]
        out += self.helpers.values()
        work = self.work_function(k)
        if work:
            out.append(work)
        return "\n\n\n".join(part.rstrip("\n") for part in out) + "\n"  # two blank lines between functions

    def work_function(self, k: LoopKernel) -> str | None:
        """``_pt_parallel_work(args)``: the estimated cost of the largest parallel loop nest.

        The launcher starts threads only when it reaches a threshold. ``None`` when the kernel has
        no ``prange`` loop, or when a parallel loop's cost is unknown (that kernel always runs
        its parallel version).
        """
        loops = [s for s in walk(k.body) if isinstance(s, Loop) and is_prange(s)]
        if not loops:
            return None
        args = {a.name for a in k.args}
        works = []
        for s in loops:
            if s.work is None or any(isinstance(n, Var) and n.name not in args for n in postorder(s.work)):
                return None
            works.append(self.top(s.work))
        body = works[0] if len(works) == 1 else f"_max({', '.join(works)})"
        params = ", ".join(a.name for a in k.args)
        return (
            f"def {WORK_FUNCTION}({params}):\n"
            f'    """Points times cost per point of the largest parallel loop nest (no Numba: plain Python)."""\n'
            f"    return {body}\n"
        )


def render_numba(k: LoopKernel) -> str:
    """The Numba module source for ``k``."""
    return NumbaRenderer().render(k)
