"""Text form of both IR levels, as shown by ``kernel.ir(stage)`` and ``PYPTO_DUMP_IR=1``.

The tensor IR prints as numbered values (``%3 = exp(%2)``), each shared subexpression once; the
loop IR prints as indented pseudo-code.
"""

from __future__ import annotations

from pypto.ir.affine import Affine
from pypto.ir.kernel import AxisNotEmpty, DimAtMost, DimEqual, GatherInBounds, IndexInBounds, KernelIR, TensorParam
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
    Binary,
    Bitcast,
    Carry,
    Cast,
    Const,
    Expr,
    Extent,
    Gather,
    Index,
    Load,
    Reduce,
    Scalar,
    Scan,
    Scatter,
    Sort,
    Unary,
    Where,
    postorder,
    transform,
)
from pypto.ir.ops import LOOP, binary_symbols, scan_name

_SYMBOL = binary_symbols()


def _dt(e: Expr) -> str:
    return f" : {e.dtype}" if e.dtype is not None else ""


def _shape(shape: tuple[Affine, ...]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def format_const(c: Const) -> str:
    v = c.value
    return ("weak " if c.weak and c.dtype is None else "") + repr(v)


def format_kernel(k: KernelIR) -> str:
    """The tensor-level IR of a kernel."""
    name = k.axis_name
    lines = []
    sig = []
    for p in k.params:
        if isinstance(p, TensorParam):
            sig.append(f"{p.name}: {p.dtype}{_shape(p.shape)} {p.role}")
        else:
            sig.append(f"{p.name}: {p.dtype} scalar")
    lines.append(f"kernel {k.name}({', '.join(sig)})")
    if k.hints is not None and not k.hints.empty:
        lines.append(f"  hints: {k.hints!r}")
    if k.groups is not None and any(g.schedule is not None for g in k.groups) and k.machine is not None:
        lines.append(f"  machine: {k.machine.describe()}")
    for a in k.axes:
        ext = f" in [0, {a.extent})" if a.extent is not None else ""
        src = f"  (from {a.extent_source})" if a.extent_source else ""
        lines.append(f"  axis {a.name} = pt.axis({a.index}){ext}{src}")
    for t in k.temps:
        lines.append(f"  temp {t.name}: {t.dtype}{_shape(t.shape)}")
    if k.scratch:
        lines.append(f"  scratch {', '.join(sorted(k.scratch))}   (outputs the caller does not read)")
    for b, a in k.shares:
        lines.append(f"  share {b} -> {a}   ({a}'s nests have all run before {b}'s first: one buffer)")
    for c in k.checks:
        if isinstance(c, DimEqual):
            lines.append(f"  check {c.a_source} == {c.b_source}   (both size axis {c.axis})")
        elif isinstance(c, IndexInBounds):
            lines.append(f"  check 0 <= {c.index.format(name)} < {c.size}   ({c.tensor} dim {c.position})")
        elif isinstance(c, GatherInBounds):
            lines.append(
                f"  check -{c.size} <= (gathered index) < {c.size}   ({c.tensor} dim {c.position}, before the call)"
            )
        elif isinstance(c, DimAtMost):
            lines.append(f"  check {c.a_source} <= {c.b_source}   ({c.what})")
        elif isinstance(c, AxisNotEmpty):
            lines.append(f"  check {name(c.axis)} not empty   ({c.what})")

    ids: dict[int, str] = {}

    def ref(e: Expr) -> str:
        if isinstance(e, Const):
            return format_const(e)
        if isinstance(e, Index):
            return e.affine.format(name)
        return ids[id(e)]

    def body(stores, indent: str) -> None:
        for s in stores:
            for e in postorder(s):
                if id(e) in ids or isinstance(e, (Const, Index)):
                    continue
                ids[id(e)] = f"%{len(ids)}"
                lines.append(f"{indent}{ids[id(e)]} = {_describe(e, ref, name)}{_dt(e)}")
            if isinstance(s, Scatter):
                op = {"add": "+=", "max": "max=", "min": "min=", "set": "= (unique)"}[s.op]
                plan = f"  # {s.plan.describe(name)}" if s.plan is not None else ""
                lines.append(
                    f"{indent}scatter {s.tensor}[{', '.join(ref(ix) for ix in s.index)}] {op} {ref(s.value)}{plan}"
                )
                continue
            idx = ", ".join(ix.format(name) for ix in s.index)
            lines.append(f"{indent}{s.tensor}[{idx}] = {ref(s.value)}")

    if k.groups is None:
        body(k.stores, "  ")
    else:
        for gi, g in enumerate(k.groups):
            ids.clear()  # number each nest's values afresh
            attrs = [f"loops=({', '.join(name(a) for a in g.loops)})"]
            if g.schedule is not None:
                attrs.append(f"schedule: {g.schedule.describe(name)}")
            if g.split is not None:
                attrs.append(f"split=blocks of {g.split.block}")
            if g.online is not None:
                axes = ", ".join(name(a) for rmax, _ in g.online.pairs for a in rmax.axes)
                attrs.append(f"online=({axes}) for rows >= {g.online.min_bytes} bytes, blocks of {g.online.block}")
            lines.append(f"  nest {gi} {' '.join(attrs)}:")
            lines += [f"    # {note}" for note in g.notes]
            body(g.stores, "    ")
    if k.scatters:
        ids.clear()
        lines.append("  scatters (after the stores, one after another):")
        body(k.scatters, "    ")
    return "\n".join(lines)


def _describe(e: Expr, ref, name) -> str:
    if isinstance(e, Load):
        return f"load {e.tensor}[{', '.join(ix.format(name) for ix in e.index)}]"
    if isinstance(e, Gather):
        return f"gather {e.tensor}[{', '.join(ref(ix) for ix in e.index)}]"
    if isinstance(e, Unary):
        return f"{e.op}({ref(e.x)})"
    if isinstance(e, Binary):
        if e.op in _SYMBOL:
            return f"{ref(e.a)} {_SYMBOL[e.op]} {ref(e.b)}"
        return f"{e.op}({ref(e.a)}, {ref(e.b)})"
    if isinstance(e, Where):
        return f"where({ref(e.cond)}, {ref(e.a)}, {ref(e.b)})"
    if isinstance(e, Cast):
        return f"cast({ref(e.x)}, {e.dtype})"
    if isinstance(e, Reduce):
        return f"reduce_{e.op}({ref(e.body)}, over {', '.join(name(a) for a in e.axes)})"
    if isinstance(e, Scan) and e.op == LOOP:  # the body over the variables a (at the step's start) and b (its values)
        assert e.combine is not None
        k, m = len(e.init), 1 + len(e.others)
        names = [f"a{j}" for j in range(k)] + [f"b{j}" for j in range(m)]
        leaf = {Carry: lambda n: names[n.slot], Scalar: lambda n: n.name}
        shown = ", ".join(format_expr(transform(x, lambda n: Var(leaf[type(n)](n)) if type(n) in leaf else None))  # type: ignore[arg-type]
                          for x in e.combine.exprs)  # fmt: skip
        values = ", ".join(ref(b) for b in (e.body, *e.others))
        start = ", ".join(ref(v) for v in e.init)
        return (
            f"loop(along {name(e.axis)}, from ({start}), values ({values}), step(({', '.join(names[:k])}), "
            f"({', '.join(names[k:])})) = ({shown}), variable {e.which})"
        )
    if isinstance(e, Scan):
        fn, k = "", 1 + len(e.others)
        if e.combine is not None:  # the function over its arguments a (the running values) and b (the elements)
            names = ["a", "b"] if k == 1 else [f"{c}{j}" for c in "ab" for j in range(k)]
            leaf = {Carry: lambda n: names[n.slot], Scalar: lambda n: n.name}
            exprs = [
                transform(x, lambda n: Var(leaf[type(n)](n)) if type(n) in leaf else None) for x in e.combine.exprs
            ]
            shown = ", ".join(format_expr(x) for x in exprs)  # type: ignore[arg-type]
            if k == 1:
                fn = f", fn(a, b) = {shown}"
            else:
                fn = f", fn(({', '.join(names[:k])}), ({', '.join(names[k:])})) = ({shown}), value {e.which}"
        bodies = ref(e.body) if k == 1 else f"({', '.join(ref(b) for b in (e.body, *e.others))})"
        return f"{scan_name(e.op)}({bodies}, along {name(e.axis)}{', reversed' if e.reverse else ''}{fn})"
    if isinstance(e, Sort):
        fname = "topk" if e.top else "sort" if e.which == "values" else "argsort"
        order = "descending" if e.descending else "ascending"
        what = f", {e.which}" if e.top else ""
        return f"{fname}({ref(e.body)}, along {name(e.axis)}, {order}{what}, positions along {name(e.out)})"
    if isinstance(e, Scalar):
        return f"scalar {e.name}"
    if isinstance(e, Extent):
        return f"extent({name(e.axis)})"
    if isinstance(e, Var):
        return e.name
    return type(e).__name__


# ---------------------------------------------------------------------------------------------
# Loop IR


def format_expr(e: Expr) -> str:
    """A loop-IR expression in infix form."""
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, Read):
        return f"{e.buffer}[{', '.join(format_expr(i) for i in e.index)}]"
    if isinstance(e, Unary):
        if e.op == "neg":
            return f"-({format_expr(e.x)})"
        return f"{e.op}({format_expr(e.x)})"
    if isinstance(e, Binary):
        if e.op in _SYMBOL:
            return f"({format_expr(e.a)} {_SYMBOL[e.op]} {format_expr(e.b)})"
        return f"{e.op}({format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, Where):
        return f"where({format_expr(e.cond)}, {format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({format_expr(e.x)})"
    if isinstance(e, Bitcast):
        return f"bits<{e.dtype}>({format_expr(e.x)})"
    if isinstance(e, Index):
        return str(e.affine)
    return f"<{type(e).__name__}>"


def format_loops(k: LoopKernel) -> str:
    """The loop IR of a kernel as indented pseudo-code."""
    args = []
    for a in k.args:
        if a.kind == "buffer":
            shape = ", ".join(format_expr(s) for s in a.shape)
            args.append(f"{a.name}: {a.dtype}[{shape}] {a.role}")
        else:
            args.append(f"{a.name}: {a.dtype} {a.kind}")
    lines = [f"def {k.name}({', '.join(args)}):{'' if k.noalias else '  # outputs may alias inputs'}"]
    _format_stmt(k.body, "  ", lines)
    if k.device is not None:
        lines += _format_device(k)
    return "\n".join(lines)


def _format_device(k: LoopKernel) -> list[str]:
    """The device kernels of a split (``split_kernels``), one line each, in launch order."""
    d = k.device
    assert d is not None
    out = [f"device kernels of {k.name}:"]
    for i, st in enumerate(d.steps):
        what = f"parallel loop over {st.loop.var}" if st.loop is not None else f"{len(st.stmts)} statement(s)"
        when = " and ".join(("" if holds else "not ") + format_expr(c) for c, holds in st.when)
        launch = f"  [{st.launch.describe(format_expr)}]" if st.launch is not None else ""
        out.append(f"  {k.name}_k{i}: {what}" + (f"  when {when}" if when else "") + launch)
    if d.temps:
        out.append("  device buffers: " + ", ".join(f"{n}: {dt}[{', '.join(format_expr(e) for e in shape)}]"
                                                    for n, dt, shape in d.temps))  # fmt: skip
    if d.slots:
        out.append("  scalars passed between kernels: " + ", ".join(f"{n}: {dt}" for n, dt in d.slots))
    if d.lanes > 1:
        out.append(f"  vector form printed over {d.lanes} lanes")
    return out


def _format_stmt(s: Stmt, ind: str, out: list[str]) -> None:
    if isinstance(s, Block):
        for b in s.body:
            _format_stmt(b, ind, out)
    elif isinstance(s, Loop):
        red = ""
        if s.reductions:
            red = " reduce(" + ", ".join(f"{op}: {v}" for v, op in s.reductions) + ")"
        if s.scans:
            red += " scan(" + ", ".join(f"{op}: {v}" for v, op in s.scans) + ")"
        kind = "" if s.kind == "serial" else s.kind.replace("_", " ") + " "
        notes = ""
        if s.threads_if is not None:
            notes += f"  # threads if {format_expr(s.threads_if)}"
        if s.dynamic:
            notes += ("  #" if not notes else ";") + " iterations to the next free thread"
        if s.streaming is not None:
            st = s.streaming
            notes += ("  #" if not notes else ";") + (
                f" stream {', '.join(st.buffers)} if >= {st.min_bytes} bytes, blocks of {st.block}"
            )
        out.append(f"{ind}{kind}for {s.var} in {format_expr(s.start)}..{format_expr(s.stop)}{red}:{notes}")
        _format_stmt(s.body, ind + "  ", out)
    elif isinstance(s, Let):
        out.append(f"{ind}let {s.name} = {format_expr(s.value)}")
    elif isinstance(s, Declare):
        out.append(f"{ind}var {s.name}: {s.dtype} = {format_expr(s.init)}")
    elif isinstance(s, Assign):
        out.append(f"{ind}{s.name} = {format_expr(s.value)}")
    elif isinstance(s, Update):
        op = {"add": "+=", "max": "max=", "min": "min="}.get(s.op, s.op)
        out.append(f"{ind}atomic {s.buffer}[{', '.join(format_expr(i) for i in s.index)}] {op} {format_expr(s.value)}")
    elif isinstance(s, Write):
        out.append(f"{ind}{s.buffer}[{', '.join(format_expr(i) for i in s.index)}] = {format_expr(s.value)}")
    elif isinstance(s, Alloc):
        local = "local " if s.local else ""
        out.append(f"{ind}{local}alloc {s.buffer}: {s.dtype}[{', '.join(format_expr(d) for d in s.shape)}]:")
        _format_stmt(s.body, ind + "  ", out)
    elif isinstance(s, If):
        out.append(f"{ind}if {format_expr(s.cond)}:")
        _format_stmt(s.then, ind + "  ", out)
        if s.orelse is not None:
            out.append(f"{ind}else:")
            _format_stmt(s.orelse, ind + "  ", out)
    elif isinstance(s, Comment):
        out.append(f"{ind}# {s.text}")
    else:
        out.append(f"{ind}<{type(s).__name__}>")
