"""The verifier run between passes: it checks the invariants each stage promises."""

from __future__ import annotations

from pypto.errors import IRVerificationError
from pypto.ir.kernel import KernelIR, ScalarParam
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
)
from pypto.ir.nodes import (
    ARITH_OPS,
    COMPARE_OPS,
    LOGIC_OPS,
    SCATTER_OPS,
    SORT_RESULTS,
    TRANSCENDENTAL,
    Binary,
    Cast,
    Expr,
    Extent,
    Gather,
    Load,
    Reduce,
    Scalar,
    Scan,
    Sort,
    Unary,
    Where,
    children,
    postorder,
)
from pypto.ir.ops import COMPLEX_PARTS

TYPED_AFTER = "infer_types"
SHAPED_AFTER = "infer_shapes"
REAL_AFTER = "complex_pairs"  # from here on no value, tensor or parameter is complex


def _fail(stage: str, msg: str) -> IRVerificationError:
    return IRVerificationError(f"IR verification failed after '{stage}': {msg}")


def verify_kernel(k: KernelIR, stage: str, done: set[str]) -> None:
    """Check a tensor-level kernel; ``done`` names the passes already run."""
    buffers = {p.name: p for p in k.tensor_params}
    buffers.update({t.name: t for t in k.temps})  # type: ignore[misc]
    scalars = {p.name for p in k.params if isinstance(p, ScalarParam)}
    axes = {a.index for a in k.axes}
    typed = TYPED_AFTER in done
    shaped = SHAPED_AFTER in done
    if REAL_AFTER in done:
        complex_left = [p.name for p in (*k.params, *k.temps) if p.dtype.is_complex]
        complex_left += [type(e).__name__ for s in (*k.stores, *k.scatters) for e in postorder(s) if e.dtype.is_complex or (
            isinstance(e, Unary) and e.op in COMPLEX_PARTS)]  # fmt: skip
        if complex_left:
            raise _fail(stage, f"complex values left: {', '.join(complex_left[:4])}")
    stores = k.stores if k.groups is None else tuple(s for g in k.groups for s in g.stores)
    for s in stores:
        if s.tensor not in buffers:
            raise _fail(stage, f"store into unknown tensor '{s.tensor}'")
        if len(s.index) != len(buffers[s.tensor].shape):
            raise _fail(stage, f"store into '{s.tensor}' has {len(s.index)} indices")
        for ix in s.index:
            if not ix.axis_set() <= axes:
                raise _fail(stage, f"store into '{s.tensor}' uses an undeclared axis")
        if typed and s.value.dtype != buffers[s.tensor].dtype:
            raise _fail(stage, f"store into '{s.tensor}': value {s.value.dtype} != {buffers[s.tensor].dtype}")
        for e in postorder(s.value):
            _check_expr(e, stage, buffers, scalars, axes, typed, shaped)
    for c in k.scatters:
        if c.tensor not in buffers or len(c.index) != len(buffers[c.tensor].shape):
            raise _fail(stage, f"scatter into '{c.tensor}' does not index it")
        if c.op not in SCATTER_OPS:
            raise _fail(stage, f"scatter into '{c.tensor}' with unknown operation {c.op!r}")
        if typed and any(ix.dtype is None or not ix.dtype.is_int for ix in c.index):
            raise _fail(stage, f"scatter into '{c.tensor}' has an index that is not an integer")
        for e in postorder(c):
            _check_expr(e, stage, buffers, scalars, axes, typed, shaped)
    if shaped:
        for a in k.axes:
            if a.extent is None:
                raise _fail(stage, f"axis {a.name} has no extent")
    if k.groups is not None:
        for g in k.groups:
            for s in g.stores:
                loops = {a for ix in s.index for a in ix.axis_set()}
                if loops != set(g.loops):
                    raise _fail(stage, f"store into '{s.tensor}' does not iterate over its nest's loops")
            for ax in (g.parallel, g.vector):
                if ax is not None and ax not in g.loops:
                    raise _fail(stage, "a nest is scheduled on an axis it does not loop over")


def _check_expr(e: Expr, stage, buffers, scalars, axes, typed: bool, shaped: bool) -> None:
    if isinstance(e, Load):
        if e.tensor not in buffers:
            raise _fail(stage, f"load from unknown tensor '{e.tensor}'")
        if len(e.index) != len(buffers[e.tensor].shape):
            raise _fail(stage, f"load from '{e.tensor}' has {len(e.index)} indices")
        for ix in e.index:
            if not ix.axis_set() <= axes:
                raise _fail(stage, f"load from '{e.tensor}' uses an undeclared axis")
    elif isinstance(e, Gather):
        if e.tensor not in buffers:
            raise _fail(stage, f"gather from unknown tensor '{e.tensor}'")
        if len(e.index) != len(buffers[e.tensor].shape):
            raise _fail(stage, f"gather from '{e.tensor}' has {len(e.index)} indices")
        if typed and any(ix.dtype is None or not ix.dtype.is_int for ix in e.index):
            raise _fail(stage, f"gather from '{e.tensor}' has an index that is not an integer")
    elif isinstance(e, Scalar) and e.name not in scalars:
        raise _fail(stage, f"unknown scalar parameter '{e.name}'")
    elif isinstance(e, Extent) and shaped:
        raise _fail(stage, "an extent was left unresolved")
    elif isinstance(e, Reduce) and not set(e.axes) <= axes:
        raise _fail(stage, "reduction over an undeclared axis")
    elif isinstance(e, Scan) and e.axis not in axes:
        raise _fail(stage, "scan along an undeclared axis")
    elif isinstance(e, Sort) and not {e.axis, e.out} <= axes:
        raise _fail(stage, "sort along an undeclared axis")
    elif isinstance(e, Sort) and (e.axis == e.out or e.which not in SORT_RESULTS):
        raise _fail(stage, "sort with its positions along its own row, or an unknown result")
    if not typed:
        return
    if e.dtype is None:
        raise _fail(stage, f"untyped {type(e).__name__}")
    if isinstance(e, Binary):
        if e.a.dtype != e.b.dtype:
            raise _fail(stage, f"'{e.op}' mixes {e.a.dtype} and {e.b.dtype}")
        if e.op in COMPARE_OPS and not e.dtype.is_bool:
            raise _fail(stage, f"comparison '{e.op}' is not boolean")
        if (e.op in ARITH_OPS or e.op in LOGIC_OPS) and e.dtype != e.a.dtype:
            raise _fail(stage, f"'{e.op}' result {e.dtype} != operand {e.a.dtype}")
    elif isinstance(e, Where):
        if not e.cond.dtype.is_bool or e.a.dtype != e.b.dtype or e.a.dtype != e.dtype:
            raise _fail(stage, "where: condition not boolean or branch types differ")
    elif isinstance(e, Unary):
        if e.op in TRANSCENDENTAL and not e.x.dtype.is_inexact:
            raise _fail(stage, f"{e.op} of a non-float")
        part = e.x.dtype.is_complex and (e.op == "abs" or (e.op in COMPLEX_PARTS and COMPLEX_PARTS[e.op].part))
        if e.dtype != (e.x.dtype.part if part else e.dtype if e.op == "angle" else e.x.dtype):
            raise _fail(stage, f"{e.op}: result type differs from operand")
    elif isinstance(e, Cast) and e.x.dtype == e.dtype:
        pass


def verify_loops(k: LoopKernel, stage: str = "lower") -> None:
    """Check that every name is defined before use and every buffer access has the right rank."""
    ranks = {a.name: len(a.shape) for a in k.args if a.kind == "buffer"}
    names = {a.name for a in k.args if a.kind != "buffer"}
    _check_stmt(k.body, stage, dict(ranks), set(names), set())


def _check_value(e: Expr, stage: str, ranks: dict, names: set) -> None:
    for n in postorder(e):
        if isinstance(n, Var) and n.name not in names:
            raise _fail(stage, f"'{n.name}' is used before it is defined")
        if isinstance(n, Read):
            if n.buffer not in ranks or ranks[n.buffer] != len(n.index):
                raise _fail(stage, f"bad read of '{n.buffer}'")
        if n.dtype is None:
            raise _fail(stage, f"untyped {type(n).__name__}")
        for c in children(n):
            if c.dtype is None:
                raise _fail(stage, "untyped operand")


def _check_stmt(s: Stmt, stage: str, ranks: dict, names: set, mutable: set) -> None:
    if isinstance(s, Block):
        names, mutable = set(names), set(mutable)
        for b in s.body:
            _check_stmt(b, stage, ranks, names, mutable)
            if isinstance(b, Let):
                names.add(b.name)
            elif isinstance(b, Declare):
                names.add(b.name)
                mutable.add(b.name)
    elif isinstance(s, Loop):
        _check_value(s.start, stage, ranks, names)
        _check_value(s.stop, stage, ranks, names)
        for acc, _ in s.reductions:
            if acc not in mutable:
                raise _fail(stage, f"loop reduces into undeclared '{acc}'")
        _check_stmt(s.body, stage, ranks, names | {s.var}, mutable)
    elif isinstance(s, (Let, Declare)):
        _check_value(s.value if isinstance(s, Let) else s.init, stage, ranks, names)
    elif isinstance(s, Assign):
        if s.name not in mutable:
            raise _fail(stage, f"assignment to '{s.name}', which is not a declared variable")
        _check_value(s.value, stage, ranks, names)
    elif isinstance(s, Write):
        if s.buffer not in ranks or ranks[s.buffer] != len(s.index):
            raise _fail(stage, f"bad write to '{s.buffer}'")
        if isinstance(s, Update) and s.op not in ("add", "max", "min"):
            raise _fail(stage, f"atomic update of '{s.buffer}' with unknown operation {s.op!r}")
        for i in s.index:
            _check_value(i, stage, ranks, names)
        _check_value(s.value, stage, ranks, names)
    elif isinstance(s, Alloc):
        for d in s.shape:
            _check_value(d, stage, ranks, names)
        _check_stmt(s.body, stage, {**ranks, s.buffer: len(s.shape)}, names, mutable)
    elif isinstance(s, If):
        _check_value(s.cond, stage, ranks, names)
        _check_stmt(s.then, stage, ranks, names, mutable)
        if s.orelse is not None:
            _check_stmt(s.orelse, stage, ranks, names, mutable)
    elif isinstance(s, Comment):
        pass
    else:
        raise _fail(stage, f"unknown statement {type(s).__name__}")
