"""Open the built site in a headless Chromium with every other host unreachable, as an offline or firewalled
reader would, and check what a reader sees:

* no page requests anything from another host, no page request fails, no page logs a script error;
* on the architecture page the pipeline diagram is loaded and drawn (its image decoded, at least 400 pixels
  wide on the page), and opened on its own it draws every core stage's name as visible text.

    python docs/check_browser.py site [--screenshot architecture.png]

The browser is Playwright's Chromium, or the one ``PYPTO_BROWSER`` names, or a ``chromium``/``google-chrome``
on ``PATH`` (Debian: ``apt-get install chromium``). Without one the check says so and exits 1 when
``PYPTO_REQUIRE_BROWSER=1`` (CI), else 0 after printing that it did not run.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

DIAGRAM_MIN_WIDTH = 400  # CSS pixels the diagram takes on the architecture page (it is drawn ~900 wide)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


def find_browser() -> str | None:
    """A Chromium executable: ``PYPTO_BROWSER``, else one on ``PATH``, else Playwright's own download."""
    named = os.environ.get("PYPTO_BROWSER")
    if named:
        return named
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            path = p.chromium.executable_path
        return path if Path(path).is_file() else None
    except Exception:  # noqa: BLE001 - Playwright missing or without a downloaded browser: none found
        return None


def serve(site: Path) -> tuple[ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def check(site: Path, browser: str, screenshot: Path | None) -> list[str]:
    from playwright.sync_api import sync_playwright

    from pypto.passes import STAGES

    server, root = serve(site)
    local = urlparse(root).netloc
    problems: list[str] = []
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    try:
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
            context = chromium.new_context(viewport={"width": 1280, "height": 900})
            current = [""]

            def route(r) -> None:  # every request of every page passes here: only the local server answers
                url = r.request.url
                if urlparse(url).scheme in ("http", "https", "ws", "wss") and urlparse(url).netloc != local:
                    problems.append(f"{current[0]} requests {url} from another host")
                    r.abort()
                else:
                    r.continue_()

            context.route("**/*", route)
            page = context.new_page()
            page.on("pageerror", lambda e: problems.append(f"{current[0]}: script error {e}"))
            page.on("console", lambda m: problems.append(f"{current[0]}: console {m.type}: {m.text}")
                    if m.type == "error" else None)  # fmt: skip
            page.on("response", lambda r: problems.append(f"{current[0]}: {r.url} answered {r.status}")
                    if r.status >= 400 else None)  # fmt: skip
            for rel in pages:
                if rel == "404.html":
                    continue
                current[0] = rel
                page.goto(root + rel, wait_until="networkidle")
            current[0] = "architecture/index.html"
            page.goto(root + "architecture/", wait_until="networkidle")
            img = page.locator('img[src$="pipeline.svg"]')
            if img.count() != 1:
                problems.append(f"the architecture page shows {img.count()} pipeline diagrams, not 1")
            else:
                img.scroll_into_view_if_needed()
                drawn = img.evaluate("i => [i.complete, i.naturalWidth, i.getBoundingClientRect().width]")
                if not drawn[0] or not drawn[1]:
                    problems.append("the pipeline diagram on the architecture page is not decoded")
                elif drawn[2] < DIAGRAM_MIN_WIDTH:
                    problems.append(f"the pipeline diagram is {drawn[2]:.0f} px wide on the page")
                if screenshot is not None:
                    img.screenshot(path=str(screenshot))
            current[0] = "pipeline.svg"
            page.goto(root + "pipeline.svg", wait_until="networkidle")
            shown = page.evaluate(
                """() => [...document.querySelectorAll('text')]
                       .filter(t => { const b = t.getBBox(); return b.width > 0 && b.height > 0; })
                       .map(t => t.textContent)"""
            )
            problems += [f"pipeline.svg does not draw the stage {s}" for s in STAGES if s not in shown]
            chromium.close()
    finally:
        server.shutdown()
    problems = list(dict.fromkeys(problems))  # the architecture page is opened twice
    print(f"browser check: {len(pages)} pages opened in {Path(browser).name}, {len(problems)} problems")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", type=Path, nargs="?", default=Path("site"))
    ap.add_argument("--screenshot", type=Path, help="save the diagram as the page draws it (PNG)")
    args = ap.parse_args(argv)
    browser = find_browser()
    if browser is None:
        required = os.environ.get("PYPTO_REQUIRE_BROWSER") == "1"
        print(
            "browser check: NOT RUN, no Chromium found (install one: apt-get install chromium, or set "
            "PYPTO_BROWSER to a Chromium executable)"
            + ("; PYPTO_REQUIRE_BROWSER=1 makes this a failure" if required else ""),
            file=sys.stderr,
        )
        return 1 if required else 0
    problems = check(args.site, browser, args.screenshot)
    for p in problems:
        print("browser check:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
