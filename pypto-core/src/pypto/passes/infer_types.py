"""Type inference: give every expression a dtype and make every conversion an explicit ``Cast``.

After this pass both operands of a ``Binary`` (and both branches of a ``Where``) have the same
dtype, transcendental functions see floats, weak Python scalars are typed ``Const`` nodes, and each
store's value has the output's dtype. Backends never need to know the promotion rules.
"""

from __future__ import annotations

from dataclasses import replace

from pypto import dtypes
from pypto.dtypes import DType
from pypto.errors import DTypeError, TracingError
from pypto.ir.affine import Affine
from pypto.ir.kernel import KernelIR, ScalarParam
from pypto.ir.nodes import (
    ARITH_OPS,
    COMPARE_OPS,
    LOGIC_OPS,
    TRANSCENDENTAL,
    Binary,
    Carry,
    Cast,
    Combine,
    Const,
    Expr,
    Extent,
    Gather,
    Index,
    Load,
    Node,
    Reduce,
    Scalar,
    Scan,
    Scatter,
    Sort,
    Store,
    Unary,
    Where,
    postorder,
    scan_bodies,
    transform,
)
from pypto.ir.ops import BINARY, COMPLEX_FUNCTIONS, COMPLEX_PARTS, FUNCTIONS2, LAST, LOOP, REDUCERS, SCANS, SHIFTS

_COMPLEX_BINARY = frozenset({"add", "sub", "mul", "div", "eq", "ne"})


def _is_weak(e: Expr) -> bool:
    """Python numbers, axis values and dim values adapt to the type of the other operand."""
    return (isinstance(e, Const) and e.weak) or isinstance(e, (Index, Extent))


def _weak_value(e: Expr):
    if isinstance(e, Const):
        return e.value
    return 0  # an integer of unknown value: behaves like a Python int


def _fix_const(e: Expr, dt: DType) -> Expr:
    """Give an expression the type ``dt``: retype a constant, otherwise insert a cast."""
    if e.dtype == dt:
        return e
    if isinstance(e, Const):
        v = e.value
        if dt.is_complex:
            v = complex(v)
        elif dt.is_float:
            v = float(v)
        elif dt.is_int:
            if isinstance(v, float) and not v.is_integer():
                return Cast(e, dtype=dt, loc=e.loc)
            v = int(v)
            lo, hi = dt.bounds
            if not lo <= v <= hi:
                raise DTypeError(
                    f"{e.loc}: the constant {e.value!r} does not fit in {dt}",
                    expected=f"a value from {lo} to {hi}",
                    got=e.value,
                    fix=f"use a smaller constant or compute in {dtypes.int64 if dt != dtypes.int64 else dtypes.float64}",
                )
        else:
            v = bool(v)
        return Const(v, weak=False, dtype=dt, loc=e.loc)
    return Cast(e, dtype=dt, loc=e.loc)


def _counts(e: Expr) -> bool:
    """Whether ``e`` is the count ``pt.reduce_mean`` divides by (a product of axis extents)."""
    if isinstance(e, Binary) and e.op == "mul":
        return _counts(e.a) and _counts(e.b)
    return isinstance(e, Extent)


def _common(a: Expr, b: Expr) -> DType:
    wa, wb = _is_weak(a), _is_weak(b)
    if wa and not wb:
        return dtypes.promote_weak(b.dtype, _weak_value(a) if isinstance(a, Const) else 0)
    if wb and not wa:
        return dtypes.promote_weak(a.dtype, _weak_value(b) if isinstance(b, Const) else 0)
    if wa and wb:
        # Both adapt: a float constant makes the result float32; integer values stay int64 for
        # axis/dim arithmetic and int32 for small literals.
        kinds = {a.dtype, b.dtype}
        if any(d.is_complex for d in kinds):
            return dtypes.complex64
        if any(d.is_float for d in kinds):
            return dtypes.DEFAULT_FLOAT
        if dtypes.int64 in kinds:
            return dtypes.int64
        return dtypes.promote(a.dtype, b.dtype)
    return dtypes.promote(a.dtype, b.dtype)


class _Typer:
    def __init__(self, k: KernelIR):
        self.k = k
        self.memo: dict[int, tuple[Expr, Expr]] = {}
        self.written = {s.tensor for s in (*k.stores, *k.scatters)} if k is not None else set()
        self.scattered = {s.tensor for s in k.scatters} if k is not None else set()

    def err(self, e: Expr, msg: str, fix: str | None = None) -> TracingError:
        return TracingError(msg, e.loc, fix)

    def __call__(self, e: Expr) -> Expr:
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        r = self.visit(e)
        self.memo[id(e)] = (e, r)
        return r

    def visit(self, e: Expr) -> Expr:
        if isinstance(e, Const):
            if e.dtype is not None:
                return e
            return Const(e.value, weak=e.weak, dtype=dtypes.weak_scalar_type(e.value), loc=e.loc)
        if isinstance(e, (Index, Extent)):
            return type(e)(e.affine if isinstance(e, Index) else e.axis, dtype=dtypes.INDEX, loc=e.loc)
        if isinstance(e, Scalar):
            p = self.k.param(e.name)
            assert isinstance(p, ScalarParam)
            return Scalar(e.name, dtype=p.dtype, loc=e.loc)
        if isinstance(e, Load):
            p = self.k.buffer(e.tensor)
            return Load(e.tensor, e.index, dtype=p.dtype, loc=e.loc)
        if isinstance(e, Gather):
            return self.gather(e)
        if isinstance(e, Cast):
            x = self(e.x)
            if x.dtype == e.dtype:
                return x
            if x.dtype.is_complex and not (e.dtype.is_complex or e.dtype.is_bool):
                raise self.err(
                    e,
                    f"pt.cast of a {x.dtype} value to {e.dtype} would drop its imaginary part",
                    f"take the part you mean first: pt.cast(pt.real(z), pt.{e.dtype.name}) (or pt.abs(z))",
                )
            return Cast(x, dtype=e.dtype, loc=e.loc)
        if isinstance(e, Unary):
            return self.unary(e)
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Where):
            c, a, b = self(e.cond), self(e.a), self(e.b)
            if not c.dtype.is_bool:
                raise self.err(
                    e,
                    f"pt.where: the condition has type {c.dtype}, expected bool",
                    "use a comparison such as x[i] > 0 as the condition",
                )
            dt = _common(a, b)
            return Where(c, _fix_const(a, dt), _fix_const(b, dt), dtype=dt, loc=e.loc)
        if isinstance(e, Reduce) and e.op == LAST:  # a loop's result: its state's type
            body = self(e.body)
            return Reduce(e.op, body, e.axes, dtype=body.dtype, loc=e.loc)
        if isinstance(e, Reduce):
            body = self(e.body)
            dt = body.dtype
            if dt.is_complex and e.op != "sum":
                raise self.err(
                    e,
                    f"reduce_{e.op} of a complex expression (complex numbers have no order, and a product of "
                    "them is not supported yet)",
                    "reduce the real parts, the magnitudes (pt.abs) or the logarithms (pt.log) instead",
                )
            if dt.is_bool:  # the op table says what a reduction of booleans gives (a count) or that it is refused
                counted = REDUCERS[e.op].on_bool
                if counted is None:
                    raise self.err(e, f"reduce_{e.op} of a boolean expression", "use pt.cast(cond, pt.int32)")
                dt = dtypes.as_dtype(counted)
                body = _fix_const(body, dt)
            return Reduce(e.op, body, e.axes, dtype=dt, loc=e.loc)
        if isinstance(e, Scan) and e.op == LOOP:
            return self.loop(e)
        if isinstance(e, Scan) and e.combine is not None:
            return self.user_scan(e)
        if isinstance(e, Scan):  # typed as the reduction it runs (pypto.ir.ops.SCANS)
            name = SCANS[e.op].name
            body = self(e.body)
            dt = body.dtype
            if dt.is_complex and e.op != "sum":
                raise self.err(e, f"{name} of a complex expression (complex numbers have no order, and a product "
                               "of them is not supported yet)", "scan the real parts or the magnitudes (pt.abs)")  # fmt: skip
            if dt.is_bool:
                counted = REDUCERS[e.op].on_bool
                if counted is None:
                    raise self.err(e, f"{name} of a boolean expression", "use pt.cast(cond, pt.int32)")
                dt = dtypes.as_dtype(counted)
                body = _fix_const(body, dt)
            return Scan(e.op, body, e.axis, e.reverse, dtype=dt, loc=e.loc)
        if isinstance(e, Sort):  # the values keep their type; positions are int64 (NumPy's argsort)
            body = self(e.body)
            name = "topk" if e.top else "sort" if e.which == "values" else "argsort"
            if body.dtype.is_complex:
                raise self.err(e, f"pt.{name} of a complex expression (complex numbers have no order here)",
                               "order the real parts or the magnitudes (pt.abs)")  # fmt: skip
            dt = dtypes.int64 if e.which == "indices" else body.dtype
            return replace(e, body=body, dtype=dt)
        if isinstance(e, Carry):
            assert e.dtype is not None, "a combine function's argument outside pt.associative_scan"
            return e
        raise TypeError(f"infer_types: unexpected node {type(e).__name__}")

    def loop(self, e: Scan) -> Scan:
        """A sequential loop: each carried variable takes the type of its values before and after a step (Python
        numbers before the loop adapt, as in arithmetic: ``h = 0.0`` then ``h = a * h + x[t]`` carries x's type),
        found by typing the body until the types no longer change."""
        assert e.combine is not None
        bodies = [self(b) for b in scan_bodies(e)]
        init = [self(v) for v in e.init]
        k = len(init)
        dts: list[DType | None] = [None if _is_weak(v) else v.dtype for v in init]

        def typed(expr: Expr, guess: list[DType | None]) -> Expr:
            def leaf(n: Node) -> Node | None:
                if not isinstance(n, Carry):
                    return None
                if n.slot >= k:
                    return replace(n, dtype=bodies[n.slot - k].dtype)
                if guess[n.slot] is None:  # a Python number before the loop: weak, as that number
                    return init[n.slot]
                return replace(n, dtype=guess[n.slot])

            return _Typer(self.k)(transform(expr, leaf))  # type: ignore[arg-type]

        for _ in range(2 * k + 2):  # each round can only widen a type: it ends
            outs = [typed(x, dts) for x in e.combine.exprs]
            new = list(dts)
            for j, out in enumerate(outs):
                if _is_weak(out):
                    new[j] = new[j] or (init[j].dtype if not _is_weak(init[j]) else _common(init[j], out))
                elif new[j] is None:
                    new[j] = _common(init[j], out) if _is_weak(init[j]) else dtypes.promote(init[j].dtype, out.dtype)
                else:
                    new[j] = dtypes.promote(new[j], out.dtype)
            if new == dts:
                break
            dts = new
        final: list[DType] = [d if d is not None else init[j].dtype for j, d in enumerate(dts)]
        if any(d.is_complex for d in final):
            raise self.err(e, "a sequential loop carrying complex values is not supported yet",
                           "carry the real and imaginary parts as two variables (pt.real, pt.imag)")  # fmt: skip
        outs = [_fix_const(typed(x, list(final)), final[j]) for j, x in enumerate(e.combine.exprs)]
        init = [_fix_const(v, final[j]) for j, v in enumerate(init)]
        return Scan(e.op, bodies[0], e.axis, e.reverse, Combine(tuple(outs)), tuple(bodies[1:]), e.which,
                    tuple(init), dtype=final[e.which], loc=e.loc)  # fmt: skip

    def user_scan(self, e: Scan) -> Scan:
        """``pt.associative_scan``: the combine function's arguments have the types of the scanned values, and so
        must its results; it may use its arguments, numbers and scalar parameters only."""
        assert e.combine is not None
        bodies = [self(b) for b in scan_bodies(e)]
        dts = [b.dtype for b in bodies]
        k = len(bodies)
        if any(dt.is_complex for dt in dts):
            raise self.err(e, "pt.associative_scan of complex values is not supported yet",
                           "scan the real and imaginary parts as two real scans")  # fmt: skip
        outs = []
        for j, expr in enumerate(e.combine.exprs):
            for n in postorder(expr):
                if not isinstance(n, (Carry, Const, Unary, Binary, Where, Cast, Scalar)):
                    raise self.err(e, f"pt.associative_scan: the combine function reads {type(n).__name__.lower()} "
                                   "values; it may use only its arguments, numbers and scalar parameters",
                                   "compute what it needs into the scanned values first (scan a tuple)")  # fmt: skip
            typed = transform(expr, lambda n: replace(n, dtype=dts[n.slot % k]) if isinstance(n, Carry) else None)
            out = _Typer(self.k)(typed)  # type: ignore[arg-type]
            if out.dtype != dts[j] and isinstance(out, Const) and out.weak:
                out = _fix_const(out, dts[j])
            if out.dtype != dts[j]:
                which = f" value {j} of" if k > 1 else ""
                raise self.err(e, f"pt.associative_scan: the combine function returns {out.dtype} for{which} "
                               f"elements of type {dts[j]}", "return values of the scanned types (pt.cast if needed)")  # fmt: skip
            outs.append(out)
        return Scan(e.op, bodies[0], e.axis, e.reverse, Combine(tuple(outs)), tuple(bodies[1:]), e.which,
                    dtype=dts[e.which], loc=e.loc)  # fmt: skip

    def gather(self, e: Gather) -> Gather:
        """A read at computed indices: each index an integer; nothing it reads is written by the kernel (the
        indices are checked before the call writes anything, and the gathered values must be the caller's)."""
        index = self.indices(e)
        return Gather(e.tensor, index, dtype=self.k.buffer(e.tensor).dtype, loc=e.loc)

    def indices(self, e: Gather | Scatter) -> tuple[Expr, ...]:
        """The computed indices of a gather or a scatter, typed: integers, read from nothing the kernel writes."""
        index = []
        for pos, ix in enumerate(e.index):
            t = self(ix)
            if not t.dtype.is_int:
                where = f"{e.loc}: " if e.loc else ""
                raise DTypeError(
                    f"{where}tensor '{e.tensor}': index {pos} has type {t.dtype}, expected an integer type",
                    param=e.tensor,
                    expected="an integer index (int8 ... int64, uint8 ... uint64)",
                    got=str(t.dtype),
                    fix="convert it: pt.cast(v, pt.int64) (rounding toward zero), or index with an integer tensor",
                )
            if isinstance(t, Const):
                t = Index(Affine.constant(int(t.value)), dtype=dtypes.INDEX, loc=t.loc)
            index.append(t)
        kind = "gather" if isinstance(e, Gather) else "scatter"
        if kind == "gather" and e.tensor in self.scattered:
            raise self.err(
                e,  # type: ignore[arg-type]
                f"the kernel gathers from '{e.tensor}', which a scatter of this kernel writes after the stores",
                f"gather from '{e.tensor}' in a later kernel, once the scatter has run",
            )
        for n in (n for ix in index for n in postorder(ix) if isinstance(n, (Load, Gather))):
            if n.tensor in self.written:  # the indices are checked before the call: from the caller's values
                raise self.err(
                    e,  # type: ignore[arg-type]
                    f"the kernel computes an index of a {kind} from '{n.tensor}', which it also writes; the indices "
                    "are checked before the call writes anything, so they must come from the caller's values",
                    f"split the kernel in two: one writing '{n.tensor}', one {kind}ing with it",
                )
        return tuple(index)

    def scatter(self, s: Scatter) -> Scatter:
        """A scatter: typed indices, the value converted to the target's type, an accumulation the type has."""
        target = self.k.buffer(s.tensor)
        index = self.indices(s)
        v = self(s.value)
        for n in postorder(v):
            if isinstance(n, (Load, Gather)) and n.tensor in {c.tensor for c in self.k.scatters}:
                raise self.err(
                    s,  # type: ignore[arg-type]
                    f"the value scattered into '{s.tensor}' reads '{n.tensor}', which a scatter of this kernel "
                    "writes; scatters run one after another, so it would read a half-updated tensor",
                    "compute the values in an earlier kernel",
                )
        if not dtypes.can_store(v.dtype, target.dtype):
            raise DTypeError(
                f"{s.loc}: cannot scatter a {v.dtype} value into {target.dtype} tensor '{s.tensor}' implicitly",
                param=s.tensor,
                expected=str(target.dtype),
                got=str(v.dtype),
                fix=f"convert explicitly: pt.cast(value, pt.{target.dtype.name.rstrip('_')})",
            )
        if (s.op in ("max", "min") and target.dtype.is_complex) or (s.op == "add" and target.dtype.is_bool):
            what = "complex numbers have no order" if target.dtype.is_complex else "booleans do not add"
            raise self.err(
                s,  # type: ignore[arg-type]
                f"scatter_{s.op} into {target.dtype} tensor '{s.tensor}': {what}",
                "scatter into an integer or float tensor (pt.scatter_max of booleans is their 'or')",
            )
        return Scatter(s.tensor, index, _fix_const(v, target.dtype), s.op, loc=s.loc)

    def unary(self, e: Unary) -> Expr:
        x = self(e.x)
        dt = x.dtype
        if e.op in COMPLEX_PARTS:
            if dt.is_complex:
                rt = dt.part if COMPLEX_PARTS[e.op].part else dt
            else:  # NumPy's meaning on a real value: real(x) = conj(x) = x, imag(x) = 0, angle(x) = 0 or pi
                rt = dtypes.float_type_for(dt) if e.op == "angle" else dt
                x = _fix_const(x, rt) if e.op == "angle" else x
            return Unary(e.op, x, dtype=rt, loc=e.loc)
        if e.op in TRANSCENDENTAL:
            if dt.is_bool:
                raise self.err(e, f"pt.{e.op} of a boolean value", "convert first: pt.cast(b, float)")
            if dt.is_complex and e.op not in COMPLEX_FUNCTIONS:
                raise self.err(
                    e,
                    f"pt.{e.op} of a complex value is not supported",
                    f"complex values take {', '.join(f'pt.{n}' for n in sorted(COMPLEX_FUNCTIONS))}, pt.abs, "
                    "pt.conj, pt.real, pt.imag and pt.angle; apply pt.{e.op} to a part (pt.real(z)) if that is meant",
                )
            ft = dtypes.float_type_for(dt)
            return Unary(e.op, _fix_const(x, ft), dtype=ft, loc=e.loc)
        if e.op == "invert":
            if dt.is_inexact:
                raise self.err(e, "'~' applies to bool (logical not) and integers (bitwise not), not floats")
            return Unary("invert", x, dtype=dt, loc=e.loc)
        if e.op in ("neg", "abs"):
            if dt.is_bool:
                raise self.err(
                    e,
                    f"{'unary minus' if e.op == 'neg' else 'abs'} of a boolean value",
                    "use ~b for logical not, or pt.cast(b, pt.int32)",
                )
            if isinstance(x, Const) and x.weak and not (e.op == "abs" and dt.is_complex):
                v = -x.value if e.op == "neg" else abs(x.value)
                return Const(v, weak=True, dtype=x.dtype, loc=e.loc)
            return Unary(e.op, x, dtype=dt.part if e.op == "abs" else dt, loc=e.loc)
        raise TypeError(e.op)

    def binary(self, e: Binary) -> Expr:
        a, b = self(e.a), self(e.b)
        op = e.op
        if op == "div" and isinstance(a, Reduce) and a.op == "sum" and a.dtype.is_int and _counts(e.b):
            # pt.reduce_mean of integers: their sum is taken exactly (in int64) before the division
            a = Reduce("sum", _fix_const(a.body, dtypes.int64), a.axes, dtype=dtypes.int64, loc=a.loc)
        dt = _common(a, b)
        if dt.is_complex and op not in _COMPLEX_BINARY:
            what = "ordered" if op in COMPARE_OPS or op in ("maximum", "minimum") else "supported"
            raise self.err(
                e,
                f"'{op}' of complex values is not {what} (complex values take +, -, *, /, == and !=)",
                "compare or combine real parts (pt.real(z)) or magnitudes (pt.abs(z))",
            )
        if op in FUNCTIONS2 and not dt.is_float:
            dt = dtypes.DEFAULT_FLOAT  # like the math functions: integers are computed in float32
            if a.dtype.is_bool or b.dtype.is_bool:
                raise self.err(e, f"pt.{op} of a boolean value", "convert first: pt.cast(b, float)")
        if op in SHIFTS and (dt.is_inexact or dt.is_bool):
            raise self.err(e, f"'{BINARY[op].symbol}' shifts integers, not {dt}", "convert first: pt.cast(x, pt.int64)")
        if op in LOGIC_OPS:
            if dt.is_inexact:
                sym = {"and": "&", "or": "|", "xor": "^"}[op]
                raise self.err(
                    e, f"'{sym}' applies to bool and integer values, not {dt}", "combine comparisons: (x > 0) & (x < 1)"
                )
            return Binary(op, _fix_const(a, dt), _fix_const(b, dt), dtype=dt, loc=e.loc)
        if op in COMPARE_OPS:
            return Binary(op, _fix_const(a, dt), _fix_const(b, dt), dtype=dtypes.bool_, loc=e.loc)
        assert op in ARITH_OPS, op
        if dt.is_bool:
            if op in ("maximum", "minimum"):
                return Binary(op, a, b, dtype=dt, loc=e.loc)
            dt = dtypes.int32
        if op == "div" and not dt.is_inexact:
            dt = dtypes.DEFAULT_FLOAT  # true division of integers gives float32
        return Binary(op, _fix_const(a, dt), _fix_const(b, dt), dtype=dt, loc=e.loc)


def infer_types(k: KernelIR) -> KernelIR:
    """Assign dtypes, resolve weak scalars, insert explicit casts, check stores' types."""
    typer = _Typer(k)
    stores = []
    for s in k.stores:
        target = k.buffer(s.tensor)
        v = typer(s.value)
        if not dtypes.can_store(v.dtype, target.dtype):
            raise DTypeError(
                f"{s.loc}: cannot store a {v.dtype} value into {target.dtype} tensor '{s.tensor}' implicitly",
                param=s.tensor,
                expected=str(target.dtype),
                got=str(v.dtype),
                fix=f"convert explicitly: {s.tensor}[...] = pt.cast(value, pt.{target.dtype.name.rstrip('_')})"
                if not target.dtype.is_bool
                else "store a comparison, or convert with pt.cast(value, pt.bool_)",
            )
        stores.append(Store(s.tensor, s.index, _fix_const(v, target.dtype), loc=s.loc))
        scattered = {c.tensor for c in k.scatters}
        for n in postorder(s.value):
            if isinstance(n, (Load, Gather)) and n.tensor in scattered:
                raise TracingError(
                    f"the store into '{s.tensor}' reads '{n.tensor}', which a scatter of this kernel writes after "
                    "the stores",
                    s.loc,
                    "read it in a later kernel, once the scatter has run",
                )
    return k.replace(stores=tuple(stores), scatters=tuple(typer.scatter(c) for c in k.scatters))
