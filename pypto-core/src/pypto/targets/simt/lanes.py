"""Lane vectors for the SIMT renderer: a loop body computed on ``W`` consecutive points at once.

CPU OpenCL drivers (PoCL) run a work-group's work-items as a loop and vectorise across them only
for straight-line code without calls: a work-item's own loop, or a call to ``exp``, stays scalar.
Writing the body with OpenCL vector types (``float16``, ``vload16``, ``exp`` on a ``float16``)
gives them whole SIMD registers and their vector math library. Which bodies qualify is decided by
the ``plan_launch`` pass (:meth:`pypto.targets.simt.forms.StepForms.lane_form`: every value that
varies with the loop variable read or written contiguously, every operation with a vector form
here); this module prints the bodies it chose. Results match the scalar code except for the order
in which a reduction combines its values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pypto.dtypes import DType, int64
from pypto.ir.loops import Assign, Block, Comment, Let, Read, Stmt, Var, Write
from pypto.ir.nodes import COMPARE_OPS, Binary, Cast, Expr, Unary, Where
from pypto.ir.ops import FUNCTIONS2, MATH, binary_symbols
from pypto.ir.reducers import COMBINE_OP, identity
from pypto.targets.simt.analysis import deep

if TYPE_CHECKING:
    from pypto.targets.simt.render import SimtRenderer

_INFIX = binary_symbols(c_infix=True, also=("div",))  # vector types: "/" on the float lanes this module makes
_LANE_NAMES = "0123456789abcdef"


class LaneWriter:
    """Renders statements of one loop body for ``width`` consecutive values of ``var``.

    In the rendered code ``var`` holds the first lane's value; ``accs`` maps accumulators the body
    folds into to their reducer, and each gets a vector partial ``<acc>_v``.
    """

    def __init__(self, r: SimtRenderer, var: str, width: int, accs: dict[str, str]):
        self.r = r
        self.var = var
        self.w = width
        self.accs = accs
        self.varying: dict[str, DType] = {var: int64}

    # -- types ---------------------------------------------------------------------------------
    def vtype(self, dt: DType) -> str:
        return f"{self.r.ctype(dt)}{self.w}"

    def utype(self, dt: DType) -> str:
        return f"{self.r.unsigned_types[dt]}{self.w}"

    def varies(self, e: Expr) -> bool:
        return any(isinstance(n, Var) and n.name in self.varying for n in deep(e))

    def broadcast(self, text: str, dt: DType) -> str:
        return f"(({self.vtype(dt)})({text}))"

    def helper(self, key: str, source: str) -> str:
        self.r.helpers.setdefault(key, source)
        return key

    # -- expressions ------------------------------------------------------------------------------
    def vec(self, e: Expr) -> str:
        """``e`` as a vector of its type (uniform values are broadcast)."""
        assert e.dtype is not None
        if not self.varies(e):
            return self.broadcast(self.r.expr(e), e.dtype)
        return self._vec(e)

    def _vec(self, e: Expr) -> str:
        dt = e.dtype
        assert dt is not None
        if isinstance(e, Var):
            if e.name == self.var:
                lanes = ", ".join(str(i) for i in range(self.w))
                return f"({e.name} + ({self.vtype(int64)})({lanes}))"
            return e.name
        if isinstance(e, Read):
            return self.read(e)
        if isinstance(e, Cast):
            src = e.x.dtype
            x = self.vec(e.x)
            return x if src == dt else f"convert_{self.vtype(dt)}({x})"
        if isinstance(e, Where):
            return self.where(e)
        if isinstance(e, Unary):
            return self.unary(e, dt)
        assert isinstance(e, Binary), "plan_launch gave this loop a vector form"
        return self.binary(e, dt)

    def read(self, e: Read) -> str:
        r = self.r
        dt = e.dtype
        assert dt is not None
        if e.buffer in r.st.caches:
            return f"vload{self.w}(0, {r.st.caches[e.buffer]} + {r.cache_index(e)})"
        return f"vload{self.w}(0, {e.buffer} + {r.offset(e.buffer, e.index)})"

    def where(self, e: Where) -> str:
        dt = e.dtype
        assert dt is not None
        a, b = self.vec(e.a), self.vec(e.b)
        if not self.varies(e.cond):
            return f"({self.r.expr(e.cond)} ? {a} : {b})"
        c = e.cond
        assert isinstance(c, Binary) and c.op in COMPARE_OPS
        cdt = c.a.dtype
        assert cdt is not None
        mask = f"({self.vec(c.a)} {_INFIX[c.op]} {self.vec(c.b)})"
        if cdt.itemsize != dt.itemsize:  # masks are integers as wide as the compared values
            mask = f"convert_{'int' if dt.itemsize == 4 else 'long'}{self.w}({mask})"
        return f"select({b}, {a}, {mask})"

    def unary(self, e: Unary, dt: DType) -> str:
        x = self.vec(e.x)
        op = e.op
        if op == "neg":
            return self.wrap("-", dt, x, None) if dt.is_int else f"(-{x})"
        if op == "invert" and dt.is_int:
            return f"(~{x})"
        one = self.r.literal(1.0, dt)
        if op == "abs":
            return f"fabs({x})"
        f = MATH.get(op)
        if f is not None and f.formula is not None:  # a function defined over others (rsqrt, sigmoid)
            return f"({f.formula(x, x, lambda name, arg: f'{self.r.math_names[name]}({arg})', one)})"
        return f"{self.r.math_names[op]}({x})"

    def binary(self, e: Binary, dt: DType) -> str:
        op = e.op
        a, b = self.vec(e.a), self.vec(e.b)
        if op in ("add", "sub", "mul") and dt.is_int:
            return self.wrap(_INFIX[op], dt, a, b)
        if op in ("add", "sub", "mul", "div") and dt.is_float:
            return f"({a} {_INFIX[op]} {b})"
        if op in ("and", "or", "xor"):
            return f"({a} {_INFIX[op]} {b})"
        if op in ("maximum", "minimum"):
            return self.extreme(op, dt, a, b)
        assert op in FUNCTIONS2 and dt.is_float, "plan_launch gave this loop a vector form"
        return f"{self.r.math_names[FUNCTIONS2[op].function]}({a}, {b})"  # atan2, hypot: built-ins take vectors

    def wrap(self, sym: str, dt: DType, a: str, b: str | None) -> str:
        """Integer vector arithmetic with wrap-around (through the unsigned type of the same size)."""
        u = self.utype(dt)
        if b is None:
            return f"as_{self.vtype(dt)}(({u})(0) - as_{u}({a}))"
        return f"as_{self.vtype(dt)}(as_{u}({a}) {sym} as_{u}({b}))"

    def extreme(self, op: str, dt: DType, a: str, b: str) -> str:
        """NaN-propagating maximum/minimum of two vectors (integer ones use the built-ins)."""
        if dt.is_int:
            return f"{'max' if op == 'maximum' else 'min'}({a}, {b})"
        vt = self.vtype(dt)
        name = f"pt_v{op[:3]}_{vt}"
        cmp = ">" if op == "maximum" else "<"
        self.helper(
            name,
            f"{self.r.static_inline} {vt} {name}({vt} a, {vt} b) {{ return ((a {cmp} b) | (a != a)) ? a : b; }}",
        )
        return f"{name}({a}, {b})"

    def fold(self, op: str, dt: DType, acc: str, v: str) -> str:
        """``acc ⊕ v`` on vectors for reducer ``op``."""
        if op in ("max", "min"):
            return self.extreme("maximum" if op == "max" else "minimum", dt, acc, v)
        sym = "+" if op == "sum" else "*"
        return self.wrap(sym, dt, acc, v) if dt.is_int else f"{acc} {sym} {v}"

    def horizontal(self, op: str, dt: DType, v: str) -> str:
        """The lanes of ``v`` combined in order (a helper function per reducer and type)."""
        vt = self.vtype(dt)
        name = f"pt_lanes_{op}_{vt}"
        t = self.r.ctype(dt)
        lines = [f"{self.r.static_inline} {t} {name}({vt} v) {{", f"    {t} r = v.s0;"]
        for i in range(1, self.w):
            lines.append(f"    r = {self.r.combine_text(op, dt, 'r', f'v.s{_LANE_NAMES[i]}')};")
        lines += ["    return r;", "}"]
        self.helper(name, "\n".join(lines))
        return f"{name}({v})"

    # -- statements ------------------------------------------------------------------------------
    def declare_partials(self, ind: int) -> None:
        for acc, op in self.accs.items():
            dt = self.r.declared_types[acc]
            start = self.broadcast(self.r.literal(identity(op, dt).value, dt), dt)
            self.r.emit(ind, f"{self.vtype(dt)} {acc}_v = {start};")

    def combine_partials(self, ind: int) -> None:
        for acc, op in self.accs.items():
            dt = self.r.declared_types[acc]
            self.r.emit(ind, f"{acc} = {self.r.combine_text(op, dt, acc, self.horizontal(op, dt, f'{acc}_v'))};")

    def body(self, s: Stmt, ind: int) -> None:
        """The loop body's statements, each on ``width`` lanes."""
        for b in s.body if isinstance(s, Block) else (s,):
            self.stmt(b, ind)

    def stmt(self, s: Stmt, ind: int) -> None:
        r = self.r
        if isinstance(s, Block):
            self.body(s, ind)
        elif isinstance(s, Comment):
            return
        elif isinstance(s, Let):
            if not self.varies(s.value):
                r.stmt(s, ind)
                return
            dt = s.value.dtype
            assert dt is not None
            r.emit(ind, f"const {self.vtype(dt)} {s.name} = {self._vec(s.value)};")
            self.varying[s.name] = dt
        elif isinstance(s, Assign) and s.name in self.accs:
            v = s.value
            op = self.accs[s.name]
            assert isinstance(v, Binary) and v.op == COMBINE_OP[op], "plan_launch gave this loop a vector form"
            dt = r.declared_types[s.name]
            r.emit(ind, f"{s.name}_v = {self.fold(op, dt, f'{s.name}_v', self.vec(v.b))};")
        else:
            assert isinstance(s, Write), "plan_launch gave this loop a vector form"
            self.write(s, ind)

    def write(self, s: Write, ind: int) -> None:
        r = self.r
        value = self.vec(s.value)
        st = r.st
        if s.buffer in st.caches and st.last_writer.get(s.buffer) is not st.strided:
            r.emit(ind, f"vstore{self.w}({value}, 0, {st.caches[s.buffer]} + {r.cache_index(s)});")
            st.filled.add(s.buffer)
            if s.buffer in st.last_writer:
                return  # a later loop writes the row out
        r.emit(ind, f"vstore{self.w}({value}, 0, {s.buffer} + {r.offset(s.buffer, s.index)});")

    def fill_rows(self, rows: dict[str, tuple[Expr, ...]], ind: int) -> None:
        """Copy cached rows from global memory as the first loop reading them goes, a vector at a time."""
        r = self.r
        for buf, index in rows.items():
            read = Read(buf, index, dtype=r.buffers[buf][0])
            src = f"vload{self.w}(0, {buf} + {r.offset(buf, index)})"
            r.emit(ind, f"vstore{self.w}({src}, 0, {r.st.caches[buf]} + {r.cache_index(read)});")
