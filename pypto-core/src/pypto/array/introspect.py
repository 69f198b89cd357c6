"""Looking inside array programs: ``pt.show_graph`` and ``pt.check_memory``.

``pt.show_graph(f, *args)`` draws the traced program of ``f`` for these arguments: one node per
operation, grouped into the loop nests the compiler fuses them into (one cluster per nest, the
arrays it stores in a box), custom ops named on their nodes. ``pt.check_memory(f, *args)`` lists the
bytes of the inputs, the results and every temporary the plan allocates, and the peak.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pypto.array.function import Compiled, JitFunction
from pypto.array.graph import Array
from pypto.errors import ArgumentError
from pypto.ir.ops import scan_name

_OP_LABEL = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "lt": "<", "le": "<=",
    "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&", "or": "|", "xor": "^", "neg": "-x",
}  # fmt: skip


def _jit_of(f: Any, what: str) -> JitFunction:
    standalone = getattr(f, "_standalone", None)  # a custom op on its own
    if isinstance(standalone, JitFunction):
        return standalone
    program = getattr(f, "jit", None)  # a gradient (pt.grad, pt.value_and_grad): its compiled program
    if isinstance(program, JitFunction):
        return program
    if isinstance(f, JitFunction):
        return f
    raise ArgumentError(
        f"{what}: expected a @pt.jit function or a @pt.custom_op, got {f!r}",
        param="f",
        expected="a function decorated with @pt.jit (or a custom op, or a pt.grad of one)",
        got=type(f).__name__,
        fix="decorate it with @pt.jit first",
    )


def _label(node: Array) -> str:
    if node.op == "input":
        text = str(node.attrs)
    elif node.op in ("unary", "binary"):
        text = _OP_LABEL.get(node.attrs, node.attrs)
    elif node.op == "reduce":
        op, axes, _ = node.attrs
        text = f"{op}(axis={axes[0] if len(axes) == 1 else axes})"
    elif node.op == "scan":
        op, axis, reverse = node.attrs[:3]
        text = f"{scan_name(op)}(axis={axis}{', reversed' if reverse else ''})"
    elif node.op == "sort":
        axis, which, flag, top = node.attrs
        text = f"{'topk' if top else 'sort'} {which}(axis={axis}{', descending' if flag else ''})"
    elif node.op == "contract":
        subs, out, _, mode = node.attrs
        text = f"einsum {','.join(subs)}->{out}" + (f" ({mode})" if mode != "float32" else "")
    elif node.op == "cast":
        text = f"cast {node.attrs.name}"
    elif node.op == "custom":
        text = f"{node.attrs[0].op_name} (own vjp)"
    elif node.op == "fill":
        text = f"fill {node.attrs}"
    else:
        text = node.op
    return f"{text}\\n{node.dtype.name}{list(node.shape)}"


@dataclass
class Graph:
    """The operation graph of a jit function for one signature, as Graphviz DOT text."""

    dot: str
    nests: int

    def __str__(self) -> str:
        return self.dot

    def render(self, path: str | Path, format: str | None = None) -> Path:  # noqa: A002 - graphviz's name
        """Write an image (``svg``, ``png`` ... from the suffix or ``format``) with Graphviz; returns its path."""
        path = Path(path)
        fmt = format or path.suffix.lstrip(".") or "svg"
        try:
            import graphviz
        except ImportError:
            raise ArgumentError(
                "rendering a graph needs the 'graphviz' Python package",
                param="path",
                expected="graphviz installed",
                got=str(path),
                fix="pip install graphviz (and the Graphviz programs, e.g. apt install graphviz), "
                "or use the DOT text: str(graph)",
            ) from None
        if shutil.which("dot") is None:
            raise ArgumentError(
                "rendering a graph needs the Graphviz 'dot' program on PATH",
                param="path",
                expected="Graphviz installed",
                got=str(path),
                fix="install Graphviz (apt install graphviz, brew install graphviz), or use the DOT text: str(graph)",
            )
        out = graphviz.Source(self.dot).render(outfile=str(path), format=fmt, cleanup=True)
        return Path(out)

    def _repr_svg_(self) -> str | None:  # notebooks show the picture where Graphviz is installed
        try:
            import graphviz
        except ImportError:
            return None
        if shutil.which("dot") is None:
            return None
        return graphviz.Source(self.dot).pipe(format="svg").decode()


def _nests(c: Compiled) -> list[tuple[tuple[str, ...], str]]:
    """For each loop nest of the compiled kernel: the buffers it stores and its pattern."""
    kir = c.kernel.compilation().final
    out = []
    for g in kir.groups or ():
        names = tuple(dict.fromkeys(s.tensor for s in g.stores))
        out.append((names, g.schedule.pattern if g.schedule is not None else ""))
    return out


def show_graph(f: Any, *args: Any, path: str | Path | None = None) -> Graph:
    """The operation graph of ``f`` traced for ``args``, with the fused loop nests as clusters.

    Returns a :class:`Graph` (``str(graph)`` is DOT text); with ``path``, also writes the picture
    (``.svg``, ``.png`` ...) where Graphviz is installed.
    """
    c = _jit_of(f, "pt.show_graph").compiled(*args)
    plan = c.plan
    nests = _nests(c)
    nest_of = {name: k for k, (names, _) in enumerate(nests) for name in names}
    buffers = {b.name: b for b in plan.buffers}
    stored_as = {id(b.node): b.name for b in plan.buffers if b.node is not None and b.kind != "input"}
    lines = [f'digraph "{c.kernel.name}" {{', "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
    members: dict[int, list[tuple[str | None, str]]] = {}
    outside: list[str] = []
    ids = {id(n): f"n{k}" for k, n in enumerate(plan.nodes)}
    for node in plan.nodes:
        nid = ids[id(node)]
        if node.op == "input":
            outside.append(f'  {nid} [label="{_label(node)}", shape=ellipse, style=filled, fillcolor="#e8f0fe"];')
            continue
        homes = plan.computed_in.get(id(node), [])
        buf = stored_as.get(id(node))
        extra = ""
        if buf is not None:
            kind = buffers[buf].kind
            extra = f', shape=box, style="filled,bold", fillcolor="{"#d7f5dd" if kind == "output" else "#fff4cc"}"'
            label = f"{_label(node)}\\n-> {buf} ({'result' if kind == 'output' else 'temporary'})"
            homes = [buf]
        else:
            label = _label(node)
        line = f'  {nid} [label="{label}"{extra}];'
        k = nest_of.get(homes[0]) if homes else None
        if k is None:
            outside.append(line)
        else:
            members.setdefault(k, []).append((node.name, line))
    lines += outside
    for k, (names, pattern) in enumerate(nests):
        lines.append(f"  subgraph cluster_{k} {{")
        lines.append(f'    label="nest {k}: {pattern} -> {", ".join(names)}"; style=rounded; color="#888888";')
        ops: dict[str | None, list[str]] = {}
        for op, ln in members.get(k, []):
            ops.setdefault(op, []).append(ln)
        for j, (op, lns) in enumerate(ops.items()):
            if op is None:
                lines += ["  " + ln for ln in lns]
                continue
            lines.append(f"    subgraph cluster_{k}_{j} {{")
            lines.append(f'      label="{op}"; style="dashed"; color="#3366cc"; fontcolor="#3366cc";')
            lines += ["    " + ln for ln in lns]
            lines.append("    }")
        lines.append("  }")
    edges = dict.fromkeys(
        f"  {ids[id(a)]} -> {ids[id(node)]};" for node in plan.nodes for a in node.args if isinstance(a, Array)
    )
    lines += list(edges)
    lines.append("}")
    graph = Graph("\n".join(lines) + "\n", len(nests))
    if path is not None:
        graph.render(path)
    return graph


@dataclass(frozen=True)
class MemoryEntry:
    name: str
    kind: str  # "input", "result" or "temporary"
    shape: tuple[int, ...]
    dtype: str
    nbytes: int  # what the call allocates for it: 0 for a temporary kept in another's memory (``shares``)
    shares: str | None = None  # the temporary whose buffer holds it (the plan_memory pass)


@dataclass(frozen=True)
class MemoryReport:
    """The arrays one call of a jit function reads, writes and allocates, and the peak of them."""

    function: str
    entries: tuple[MemoryEntry, ...]

    def total(self, kind: str) -> int:
        return sum(e.nbytes for e in self.entries if e.kind == kind)

    @property
    def inputs(self) -> int:
        return self.total("input")

    @property
    def outputs(self) -> int:
        return self.total("result")

    @property
    def temporaries(self) -> int:
        return self.total("temporary")

    @property
    def peak(self) -> int:
        """Bytes the call holds at once: its inputs, results and temporaries, each allocated for the whole call
        (temporaries that share a buffer counted once)."""
        return self.inputs + self.outputs + self.temporaries

    @property
    def shared(self) -> int:
        """Temporaries kept in another's buffer (no allocation of their own)."""
        return sum(e.shares is not None for e in self.entries)

    def __str__(self) -> str:
        from rich.console import Console
        from rich.table import Table

        t = Table(title=f"memory of {self.function}")
        for col in ("array", "kind", "shape", "dtype"):
            t.add_column(col)
        t.add_column("bytes", justify="right")
        for e in self.entries:
            t.add_row(e.name, e.kind, str(e.shape), e.dtype, f"in {e.shares}" if e.shares else f"{e.nbytes:,}")
        for label, n in (("inputs", self.inputs), ("results", self.outputs), ("temporaries", self.temporaries),
                         ("peak", self.peak)):  # fmt: skip
            t.add_row(label, "", "", "", f"{n:,}", style="bold" if label == "peak" else None)
        console = Console(width=100, record=True, file=_Null())
        console.print(t)
        return console.export_text()


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass


def check_memory(f: Any, *args: Any) -> MemoryReport:
    """The bytes of ``f``'s inputs, results and temporaries for a call with ``args``, and the peak."""
    c, sizes = _jit_of(f, "pt.check_memory").lookup(args)
    kinds = {"input": "input", "output": "result", "temp": "temporary"}
    rows: list[MemoryEntry] = []
    for part in (c, *c.steps):  # a program reading a scatter's result runs steps first (their results: temporaries)
        last = part is c
        inputs = 0
        for k, b in enumerate(part.plan.buffers):
            if b.source is not None:  # a flat view of an input is the input
                continue
            if b.kind == "input":
                inputs += 1
                if not last or inputs > part.plan.n_inputs:  # listed once: where the call or a step makes it
                    continue
            shape = b.node.shape if b.node is not None else b.shape
            nbytes = b.nbytes
            if sizes is not None and part.specs is not None:  # a shape-generic program: this call's sizes
                shape = part.shape_of(k, sizes)
                nbytes = math.prod(shape) * b.dtype.itemsize
            kind = kinds[b.kind] if last else "temporary"
            owner = part.shared.get(k)
            if owner is not None:  # kept in another temporary's buffer: allocated once, there
                rows.append(MemoryEntry(b.name, kind, shape, b.dtype.name, 0, part.plan.buffers[owner].name))
                continue
            rows.append(MemoryEntry(b.name, kind, shape, b.dtype.name, nbytes))
    entries = tuple(rows)
    return MemoryReport(c.kernel.name, entries)
