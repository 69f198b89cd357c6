"""The module layout keeps its promises: every module imports alone, module-level imports form no cycle
(a module may use its own package's other modules), the registry never imports the runtime, and
``import pypto`` loads nothing but the package itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pypto

ROOT = Path(pypto.__file__).parent


def modules() -> dict[str, Path]:
    out = {}
    for f in sorted(ROOT.rglob("*.py")):
        parts = list(f.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def module_imports(name: str, path: Path, known: dict[str, Path], *, inside_functions: bool = False) -> set[str]:
    """The pypto modules ``name`` imports when it is loaded (not in functions or TYPE_CHECKING blocks);
    with ``inside_functions``, also those its functions import when they run."""
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

    def add(node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
            return
        base = node.module or ""
        if node.level:
            base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
        found.add(base)
        found.update(f"{base}.{a.name}" for a in node.names)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                add(node)
            elif inside_functions and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        add(inner)

    visit(ast.parse(path.read_text()).body)
    closed = set()
    for m in found:
        parts = m.split(".")
        closed.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in closed if m in known and m != name}


def test_module_level_imports_form_no_cycle():
    known = modules()
    graph = {m: module_imports(m, p, known) for m, p in known.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for dep in sorted(graph[m]):
            if m.startswith(dep + "."):  # its own package: loaded first by Python anyway
                continue
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def tangles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The groups of modules that import each other, directly or not (strongly connected, more than one)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(frozenset(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_no_cycle_hides_behind_imports_inside_functions():
    known = modules()
    graph = {
        m: {d for d in module_imports(m, p, known, inside_functions=True) if not m.startswith(d + ".")}
        for m, p in known.items()
    }
    found = tangles(graph)
    assert not found, "modules that import each other (inside functions too): " + "; ".join(
        " <-> ".join(sorted(t)) for t in found
    )
    assert tangles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]  # the finder finds


def test_the_registry_and_the_cache_never_import_the_runtime():
    known = modules()
    for name in ("pypto.plugins", "pypto.cache", "pypto.compiler", "pypto.backend_api", "pypto.hookspecs"):
        deps = module_imports(name, known[name], known, inside_functions=True)
        assert not any(d.startswith("pypto.runtime") for d in deps), (name, deps)


def _import_alone(name: str) -> str | None:
    r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True)
    return None if r.returncode == 0 else f"{name}: {r.stderr.strip().splitlines()[-1]}"


def test_every_module_imports_alone():
    names = [m for m in modules() if not m.endswith("__main__")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = [f for f in pool.map(_import_alone, names) if f]
    assert not failures, "\n".join(failures)


def test_import_pypto_loads_only_the_package():
    code = "import sys, pypto; print(sorted(m for m in sys.modules if m.startswith('pypto')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["pypto", "pypto._version"]
