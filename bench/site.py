"""The documentation site in a real browser: build it, serve it on localhost, open pages in headless
Chromium, take screenshots, and check what a reader sees.

On each page it checks, in the browser, after MathJax has finished:

- every formula (``.arithmatex``, from ``$...$`` in the Markdown) was typeset by MathJax, with no
  TeX error, from the copy of MathJax the site ships (nothing is fetched from another host: the
  page is served from this machine only, and any request the server could not answer is reported);
- no table, code block, signature or displayed formula reaches past the right edge of the content
  column, and whatever is wider than its box scrolls (``overflow-x: auto``), so nothing is cut;
- the page as a whole does not scroll sideways.

It writes, per page, a screenshot of the window at the top of the page, and one of the widest
table or code block and of the first formula, to the output directory (default /tmp/site_shots).

    python bench/site.py                        # build the site, check and shoot the default pages
    python bench/site.py --out shots --pages design/ api/linalg/

Needs Chromium and its driver (Debian: ``apt-get install chromium chromium-driver``) and the
selenium package (``pip install selenium``), neither of which the project installs: this script is
run by hand, not by CI (tests/test_site.py checks the built HTML without a browser). The last
line is ``site: N pages, N formulas typeset, N problems``; the exit status is 1 if there is a problem.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import importlib.util
import pathlib
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used, so that ``--help`` runs without selenium
    from selenium import webdriver

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the home page, a page of formulas and tables, the task pages, the wide-table page, API pages with
# the formula table and long signatures
PAGES = ["", "design/", "poisson/", "darcy/", "mutants/", "api/linalg/", "api/nn/"]
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

# Resolves once MathJax has typeset the page (or at once where there is no MathJax).
WAIT_FOR_MATHJAX = """
const done = arguments[arguments.length - 1];
if (!window.MathJax || !MathJax.startup || !MathJax.startup.promise) { done("no MathJax"); return; }
MathJax.startup.promise.then(() => done("ok"), (error) => done("MathJax failed: " + error));
"""

# What a reader would see wrong on the page, as a list of lines, and how many formulas MathJax typeset.
CHECK_PAGE = """
const problems = [];
const column = document.querySelector("[itemprop=articleBody]") || document.body;
const right = column.getBoundingClientRect().right;
let typeset = 0;
for (const formula of document.querySelectorAll(".arithmatex")) {
  if (!formula.querySelector("mjx-container")) {
    problems.push("formula not typeset: " + formula.textContent.trim().slice(0, 60));
  } else if (formula.querySelector("mjx-merror")) {
    problems.push("TeX error in: " + formula.textContent.trim().slice(0, 60));
  } else {
    typeset += 1;
  }
}
const describe = (el) => el.tagName.toLowerCase() + ": " + el.textContent.trim().replace(/\\s+/g, " ").slice(0, 60);
for (const el of column.querySelectorAll("table, pre, pre > code, .doc-signature, div.arithmatex, span.arithmatex")) {
  const box = el.getBoundingClientRect();
  if (box.width === 0) continue;
  if (box.right > right + 1) {
    problems.push(`past the column's right edge by ${Math.round(box.right - right)}px: ${describe(el)}`);
  }
  const overflow = getComputedStyle(el).overflowX;
  if (el.scrollWidth > el.clientWidth + 1 && !["auto", "scroll"].includes(overflow)) {
    problems.push(`cut (${el.scrollWidth}px in ${el.clientWidth}px, overflow-x ${overflow}): ${describe(el)}`);
  }
}
if (document.documentElement.scrollWidth > window.innerWidth + 1) {
  problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth}px in ${window.innerWidth}px`);
}
return {problems: problems, typeset: typeset};
"""

# The widest scrolling table or code block of the page (null if none is wider than its box).
WIDEST = """
let best = null;
for (const el of document.querySelectorAll("[itemprop=articleBody] :is(table, pre, pre > code)")) {
  const excess = el.scrollWidth - el.clientWidth;
  if (excess > 1 && (!best || excess > best.scrollWidth - best.clientWidth)) best = el;
}
return best;
"""


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the site quietly, remembering the requests it could not answer."""

    failures: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        self.failures.append(f"{code} {self.path}")
        super().send_error(code, message, explain)


@contextmanager
def serve(site: pathlib.Path) -> Iterator[tuple[str, list[str]]]:
    """The site served on a free localhost port: its base URL, and the list its failed requests go to."""
    failures: list[str] = []
    handler = type("Handler", (_Handler,), {"failures": failures})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", failures
    finally:
        server.shutdown()
        server.server_close()


def build(site: pathlib.Path) -> None:
    """Build the site as CI does (warnings are errors) into ``site``."""
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)]
    subprocess.run(command, cwd=ROOT, check=True)


def browser(chromium: str, chromedriver: str, width: int, height: int, profile: str) -> webdriver.Chrome:
    """Headless Chromium with a fresh profile, driven through chromedriver (no download of either)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in [*CHROMIUM_FLAGS, f"--window-size={width},{height}", f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
    driver.set_script_timeout(60)
    return driver


def check_page(driver: webdriver.Chrome, url: str, name: str, out: pathlib.Path) -> tuple[list[str], int]:
    """Open one page, wait for its math, screenshot it; return its problems and how many formulas were typeset."""
    from selenium.webdriver.common.by import By

    driver.get(url)
    state = driver.execute_async_script(WAIT_FOR_MATHJAX)
    result = driver.execute_script(CHECK_PAGE)
    problems: list[str] = list(result["problems"])
    if state != "ok":
        problems.insert(0, str(state))
    driver.save_screenshot(str(out / f"{name}.png"))
    widest = driver.execute_script(WIDEST)
    if widest is not None:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", widest)
        widest.screenshot(str(out / f"{name}-widest.png"))
    formulas = driver.find_elements(By.CSS_SELECTOR, ".arithmatex")
    if formulas:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", formulas[0])
        driver.save_screenshot(str(out / f"{name}-math.png"))
    return problems, int(result["typeset"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("/tmp/site_shots"))
    parser.add_argument("--site", type=pathlib.Path, help="a site already built (default: build one)")
    parser.add_argument("--pages", nargs="+", default=PAGES, help="paths under the site's root")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args()
    if importlib.util.find_spec("selenium") is None:  # before the build, which takes a while
        parser.error("needs the selenium package (pip install selenium)")
    for binary in (args.chromium, args.chromedriver):
        if not pathlib.Path(binary).exists():
            parser.error(f"no {binary} (Debian: apt-get install chromium chromium-driver)")
    args.out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory() as tmp:
        site = args.site or pathlib.Path(tmp) / "site"
        if args.site is None:
            build(site)
        total_problems = total_formulas = 0
        with serve(site) as (base, failures):
            driver = browser(
                args.chromium, args.chromedriver, args.width, args.height, str(pathlib.Path(tmp) / "profile")
            )
            try:
                for page in args.pages:
                    name = page.strip("/").replace("/", "_") or "home"
                    problems, formulas = check_page(driver, base + page, name, args.out)
                    total_formulas += formulas
                    total_problems += len(problems)
                    print(f"{page or '/'}: {formulas} formulas typeset, {len(problems)} problems")
                    for problem in problems:
                        print(f"    {problem}")
            finally:
                driver.quit()
            for failure in failures:
                print(f"request not answered: {failure}")
            total_problems += len(failures)
    print(f"screenshots in {args.out}")
    print(f"site: {len(args.pages)} pages, {total_formulas} formulas typeset, {total_problems} problems")
    return 1 if total_problems else 0


if __name__ == "__main__":
    sys.exit(main())
