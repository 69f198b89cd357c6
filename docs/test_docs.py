"""Every ```python block of the documentation runs, so the examples cannot rot.

One test per page: the page's blocks run in order in one namespace, as a reader would paste them.
Each block is compiled with the page as its file name and its own line numbers, so a failure points
at the line in the Markdown source (and pypto's tracing, which reads kernel source, sees it too).

Markers, as HTML comments that the rendered site does not show:

* ``<!-- skip-test -->`` on the line before a fence skips that block (only for code that needs
  hardware a test machine may lack); the test reports how many blocks it skipped.
* ``<!-- requires-backend: NAME ... -->`` anywhere on a page skips the whole page, with the reason,
  when one of those backends is not installed and available here.

Blocks run in a temporary working directory, with a fresh pypto cache and the ``PYPTO_*``
environment variables unset; what a page changes in ``os.environ`` is undone afterwards.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent
PAGES = sorted(DOCS.rglob("*.md"))
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
SKIP = "<!-- skip-test -->"
REQUIRES = re.compile(r"<!--\s*requires-backend:\s*(?P<names>[\w\s,-]+?)\s*-->")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language, first code line (1-based), text and skip marker."""

    lang: str
    line: int
    code: str
    skipped: bool
    indented: bool


def code_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order."""
    lines = text.splitlines()
    blocks: list[Block] = []
    k = 0
    while k < len(lines):
        m = FENCE.match(lines[k])
        if not m:
            k += 1
            continue
        fence, indent = m["fence"], m["indent"]
        previous = next((s.strip() for s in reversed(lines[:k]) if s.strip()), "")
        end = k + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = [s[len(indent) :] if s.startswith(indent) else s for s in lines[k + 1 : end]]
        blocks.append(Block(m["lang"].lower(), k + 2, "\n".join(body) + "\n", previous == SKIP, bool(indent)))
        k = end + 1
    return blocks


def required_backends(text: str) -> list[str]:
    """The backends a page declares with ``<!-- requires-backend: ... -->``."""
    names: list[str] = []
    for m in REQUIRES.finditer(text):
        names += m["names"].replace(",", " ").split()
    return names


def missing_backend(names: list[str]) -> str | None:
    """Why one of ``names`` cannot run here, or None when all can."""
    from pypto.plugins import get_registry

    registry = get_registry()
    for name in names:
        entry = registry.backends.get(name)
        if entry is None:
            return f"backend '{name}' is not installed"
        if not entry.availability.available:
            return f"backend '{name}' is unavailable: {entry.availability.reason}"
    return None


@pytest.fixture
def docs_environment(monkeypatch, tmp_path):
    """A clean pypto environment and working directory; ``os.environ`` is restored afterwards."""
    saved = dict(os.environ)
    for var in [v for v in os.environ if v.startswith("PYPTO_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "pypto-cache"))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)
    from pypto import reload_plugins

    reload_plugins()  # a page may have changed what is loaded


def test_pages_exist():
    assert PAGES, f"no Markdown pages under {DOCS}"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_page_examples_run(page: Path, docs_environment, capsys):
    text = page.read_text()
    blocks = code_blocks(text)
    indented = [b.line for b in blocks if b.lang == "python" and b.indented]
    assert not indented, f"{page.name}: indented python blocks at lines {indented} would not be tested"
    reason = missing_backend(required_backends(text))
    if reason:
        pytest.skip(f"{page.name}: {reason}")
    namespace: dict = {"__name__": f"docs.{page.stem}"}
    ran = skipped = 0
    for block in blocks:
        if block.lang != "python":
            continue
        if block.skipped:
            skipped += 1
            continue
        # padding keeps the Markdown line numbers, so tracebacks and pypto's messages point into the page
        source = "\n" * (block.line - 1) + block.code
        # dont_inherit: this module's `from __future__ import annotations` must not leak into the page
        exec(compile(source, str(page), "exec", dont_inherit=True), namespace)
        ran += 1
    with capsys.disabled():
        if skipped:
            print(f"\n{page.name}: {ran} blocks ran, {skipped} skipped (marked {SKIP})")


@pytest.mark.parametrize("backend", ["reference", "tbb", "numba", "opencl"])
def test_indirect_indexing_chapter_on_every_backend(backend: str, docs_environment, monkeypatch):
    """The indirect-indexing chapter's examples (gathers, scatters, their plans) on the other backends too (the
    test above runs every page on the default one)."""
    reason = missing_backend([backend])
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("PYPTO_EXECUTOR", backend)
    page = DOCS / "indirect.md"
    namespace: dict = {"__name__": "docs.indirect"}
    for block in code_blocks(page.read_text()):
        if block.lang == "python" and not block.skipped:
            exec(compile("\n" * (block.line - 1) + block.code, str(page), "exec", dont_inherit=True), namespace)


def test_training_chapter_shows_the_script_the_tests_run():
    """The data-parallel script in training.md is the one pypto-core/tests/test_distributed.py runs under torchrun."""
    script = DOCS.parent / "pypto-core" / "tests" / "distributed" / "train.py"
    blocks = [
        b.code for b in code_blocks((DOCS / "training.md").read_text()) if "pt.DistributedDataParallel(" in b.code
    ]
    assert blocks == [script.read_text()]


def test_the_numpy_list_is_what_the_dispatch_takes():
    """array-api.md's "Every NumPy name" list is generated from the dispatch tables: it must be up to date."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("numpy_support", DOCS / "numpy_support.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    page = (DOCS / "array-api.md").read_text()
    assert gen.page_with_list(page) == page, "the list is out of date: run python docs/numpy_support.py --write"
