"""Check a built site reads without network access: no page loads a script, style, font, image or frame
from another host, and the pipeline diagram is there, parses as SVG and names every core stage.

    python docs/check_offline.py site
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

LOADING = {"script": "src", "img": "src", "iframe": "src", "link": "href", "source": "src", "embed": "src"}


class Loads(HTMLParser):
    """The URLs a page loads (not the links a reader may follow)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "link" and a.get("rel") not in ("stylesheet", "preload", "icon", "modulepreload", "manifest"):
            return
        url = a.get(LOADING.get(tag, ""))
        if url:
            self.urls.append(url)
        style = a.get("style") or ""
        if "url(http" in style.replace(" ", ""):
            self.urls.append(style)


def main(site: Path) -> int:
    problems = []
    pages = sorted(site.rglob("*.html"))
    for page in pages:
        parser = Loads()
        parser.feed(page.read_text(encoding="utf-8"))
        problems += [
            f"{page.relative_to(site)} loads {u}" for u in parser.urls if u.startswith(("http:", "https:", "//"))
        ]
    for css in site.rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        if "@import url(http" in text.replace(" ", "") or "fonts.googleapis" in text:
            problems.append(f"{css.relative_to(site)} imports from another host")
    svg = site / "pipeline.svg"
    if not svg.is_file():
        problems.append("pipeline.svg is missing")
    else:
        root = ET.parse(svg).getroot()
        words = {t.text for t in root.iter("{http://www.w3.org/2000/svg}text")}
        from pypto.passes import STAGES

        problems += [f"pipeline.svg does not show the stage {s}" for s in STAGES if s not in words]
        if root.find(".//{http://www.w3.org/2000/svg}script") is not None:
            problems.append("pipeline.svg contains a script")
    arch = (site / "architecture" / "index.html").read_text(encoding="utf-8")
    if "pipeline.svg" not in arch:
        problems.append("the architecture page does not show pipeline.svg")
    for p in problems:
        print("offline check:", p, file=sys.stderr)
    print(f"offline check: {len(pages)} pages, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "site")))
