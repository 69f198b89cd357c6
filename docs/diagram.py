"""The pipeline diagram of docs/architecture.md, drawn as SVG from the pipeline itself.

The stage names come from ``pypto.passes`` and the targets from the plugin registry, so the picture
cannot drift from what runs. The site build (a mkdocs hook, ``hooks:`` in mkdocs.yml) adds the SVG as
``pipeline.svg``; it is plain SVG with no script and no web font, so it renders without network access.
``python docs/diagram.py > pipeline.svg`` writes it by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

BOX_H, GAP, PAD, TITLE = 22, 8, 10, 22
CHAR_W = 7.2  # width of a character of the 12px monospace labels
COLORS = {"entry": "#e8f0fe", "tensor": "#fef7e0", "loop": "#e6f4ea", "target": "#fce8e6", "backend": "#f3e8fd"}


@dataclass
class Group:
    """A titled column of boxes, each a stage or a step."""

    title: str
    items: list[str]
    kind: str
    x: float = 0.0
    y: float = 0.0

    @property
    def width(self) -> float:
        longest = max([len(self.title), *(len(i) for i in self.items)])
        return longest * CHAR_W + 2 * PAD + 8

    @property
    def height(self) -> float:
        return TITLE + len(self.items) * (BOX_H + GAP) + PAD


def columns() -> list[list[Group]]:
    """The diagram's columns, left to right, read from the pipeline and the registry."""
    from pypto.passes import LOOP_PASSES, LOWER, PASSES
    from pypto.plugins import targets

    entries = Group(
        "front ends",
        ["@pt.kernel: trace the body", "@pt.jit: array graph, lower", "pt.grad: graph + adjoints",
         "pypto.dask: a kernel per layer"],
        "entry",
    )  # fmt: skip
    tensor = Group("tensor IR (PASSES)", ["traced", *(name for name, _ in PASSES)], "tensor")
    loops = Group("loop IR", [LOWER, *(name for name, _ in LOOP_PASSES)], "loop")
    tgts = [
        Group(f"target {t.name}", [n for n, _ in t.passes] or ["(no passes)"], "target") for t in targets().values()
    ]
    backend = Group(
        "pypto_compile: the backend",
        ["compile_key: cache key", "disk cache: hit -> launch", "codegen: render -> Source",
         "compile: build -> Artifact", "launch: load -> Launcher", "pypto_launch: every call"],
        "backend",
    )  # fmt: skip
    return [[entries], [tensor], [loops], tgts, [backend]]


def _box(x: float, y: float, w: float, h: float, fill: str, rx: int = 6, stroke: str = "#5f6368") -> str:
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{rx}" fill="{fill}" stroke="{stroke}"/>'


def _text(x: float, y: float, s: str, weight: str = "normal") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-weight="{weight}">{escape(s)}</text>'


def _arrow(x1: float, y1: float, x2: float, y2: float) -> str:
    mid = (x1 + x2) / 2
    return f'<path d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" marker-end="url(#arrow)"/>'


def render() -> str:
    """The diagram as an SVG document."""
    cols = columns()
    x, col_gap = 10.0, 46.0
    height = max(sum(g.height for g in col) + GAP * 3 * (len(col) - 1) for col in cols) + 20
    for col in cols:
        total = sum(g.height for g in col) + GAP * 3 * (len(col) - 1)
        y = (height - total) / 2
        width = max(g.width for g in col)
        for g in col:
            g.x, g.y = x, y
            y += g.height + GAP * 3
        for g in col:
            g.x += (width - g.width) / 2
        x += width + col_gap
    width = x - col_gap + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="the pypto compilation pipeline">',
        "<title>The pypto pipeline: front ends, tensor passes, loop passes, targets, the backend</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#5f6368"/></marker></defs>',
        '<g font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="12" fill="#202124">',
    ]
    edges: list[str] = []
    for left, right in zip(cols, cols[1:]):
        for a in left:
            for b in right:
                edges.append(_arrow(a.x + a.width, a.y + a.height / 2, b.x - 2, b.y + b.height / 2))
    for g in (g for col in cols for g in col):
        out.append(_box(g.x, g.y, g.width, g.height, COLORS[g.kind]))
        out.append(_text(g.x + PAD, g.y + 16, g.title, "bold"))
        for k, item in enumerate(g.items):
            by = g.y + TITLE + k * (BOX_H + GAP)
            out.append(_box(g.x + PAD / 2, by, g.width - PAD, BOX_H, "#ffffff", rx=4, stroke="#9aa0a6"))
            out.append(_text(g.x + PAD, by + 15, item))
            if k and g.kind != "entry":
                out.append(
                    f'<path d="M{g.x + 18:.1f},{by - GAP:.1f} L{g.x + 18:.1f},{by - 1:.1f}" marker-end="url(#arrow)" '
                    'stroke="#5f6368" fill="none"/>'
                )
    out.append('<g stroke="#5f6368" fill="none">')
    out.extend(edges)
    out.append("</g></g></svg>")
    return "\n".join(out) + "\n"


def on_files(files, config):  # mkdocs hook: add the generated diagram to the site
    from mkdocs.structure.files import File

    files.append(File.generated(config, "pipeline.svg", content=render()))
    return files


if __name__ == "__main__":
    print(render(), end="")
