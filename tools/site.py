"""The documentation site in a real browser: build it, serve it on localhost, open pages in headless
Chromium, take screenshots, and check what a reader sees.

On each page it checks, in the browser, after MathJax has finished:

- every formula (``.arithmatex``, from ``$...$`` in the Markdown) was typeset by MathJax, with no
  TeX error, from the copy of MathJax the site ships (nothing is fetched from another host: the
  page is served from this machine only, and any request the server could not answer is reported);
- no table, code block, signature or displayed formula reaches past the right edge of the content
  column, and whatever is wider than its box scrolls (``overflow-x: auto``), so nothing is cut;
- tables wrap: their cells wrap their text (no ``white-space: nowrap``), no cell is wider than the
  column unless its table scrolls, and no table is wider than the column when its cells could wrap
  to fit (a table wider than the column is one whose narrowest layout, ``width: min-content``, is);
- code is highlighted: every code block is marked up by Pygments, those with keywords, comments,
  strings, numbers or prompts (a plain-text block has none), and some signature of an API page,
  have spans that Pygments' stylesheet colours differently from the block's text;
- the page has one title: one ``h1``, which no other heading repeats (the API pages' module name);
- the page as a whole does not scroll sideways.

It prints, per page, the widest table's width beside the column's, and writes a screenshot of
the window at the top of the page, one of the widest table, of the widest scrolling table or code
block, of the first highlighted code block and of the first formula, to the output directory
(default /tmp/site_shots).

    python tools/site.py                        # build the site, check and shoot the default pages
    python tools/site.py --api                  # ... and every API page
    python tools/site.py --out shots --pages design/ api/linalg/

Needs Chromium and its driver (Debian: ``apt-get install chromium chromium-driver``) and the
selenium package (``pip install selenium``), neither of which the project installs: this script is
run by hand, not by CI (tests/test_site.py checks the built HTML without a browser). The last
line is ``site: N pages, N formulas typeset, N code blocks highlighted, widest table N px in a N px
column, N problems``; the exit status is 1 if there is a problem.
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used, so that ``--help`` runs without selenium
    from selenium import webdriver

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the home page, the tour (its layout table of sentences), a page of formulas and tables, the task
# pages and the trees page (their result tables), the wide-table page, API pages with the formula
# table and long signatures
PAGES = ["", "tour/", "design/", "poisson/", "darcy/", "trees/", "mutants/", "api/linalg/", "api/nn/"]
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

# Resolves once MathJax has typeset the page, or "no MathJax" if it has not started 20 s after the
# page loaded (it may start a little after the load event, so it is polled for).
WAIT_FOR_MATHJAX = """
const done = arguments[arguments.length - 1];
const since = Date.now();
const wait = () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    MathJax.startup.promise.then(() => done("ok"), (error) => done("MathJax failed: " + error));
  } else if (Date.now() - since > 20000) {
    done("no MathJax");
  } else {
    setTimeout(wait, 50);
  }
};
wait();
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

// Tables wrap: cells that wrap, none wider than the column unless the table scrolls, no table wider
// than the column where its narrowest layout would fit.
const columnWidth = column.clientWidth;
const wraps = ["normal", "pre-wrap", "pre-line", "break-spaces"];
let widestTable = null;
for (const table of column.querySelectorAll("table")) {
  const scrolls = ["auto", "scroll"].includes(getComputedStyle(table).overflowX);
  const cells = [...table.querySelectorAll("td, th")];
  const nowrap = cells.filter((cell) => !wraps.includes(getComputedStyle(cell).whiteSpace));
  if (nowrap.length) {
    const value = getComputedStyle(nowrap[0]).whiteSpace;
    problems.push(`${nowrap.length} of ${cells.length} cells do not wrap (white-space ${value}): ${describe(table)}`);
  }
  for (const cell of cells) {
    const width = cell.getBoundingClientRect().width;
    if (width > columnWidth + 1 && !scrolls) {
      const size = `${Math.round(width)}px wide in a ${columnWidth}px column`;
      problems.push(`a cell ${size}, its table does not scroll: ${describe(cell)}`);
    }
  }
  const width = table.scrollWidth;
  const saved = table.style.cssText;
  table.style.width = "min-content";
  table.style.maxWidth = "none";
  const narrowest = table.getBoundingClientRect().width;
  table.style.cssText = saved;
  if (width > columnWidth + 1 && narrowest < width - 1) {
    const size = `${width}px wide in a ${columnWidth}px column, where it could be ${Math.round(narrowest)}px`;
    problems.push(`a table ${size}: ${describe(table)}`);
  }
  if (!widestTable || width > widestTable.width) {
    widestTable = {width: width, narrowest: Math.round(narrowest), text: describe(table)};
  }
}

// Code highlighted: every code block marked up by Pygments (div.highlight); those with keywords,
// comments, strings, numbers or prompts among its tokens (a plain-text block has no tokens) have
// spans whose colour is not the block's own, and so does some signature of an API page.
const coloured = (code) => {
  const colour = getComputedStyle(code).color;
  const spans = [...code.querySelectorAll("span")];
  return spans.some((span) => span.textContent.trim() && getComputedStyle(span).color !== colour);
};
const tokens = "span:is(.k, .kn, .kd, .kc, .c, .c1, .s, .s1, .s2, .mi, .mf, .gp, .nf, .nc)";
let highlighted = 0;
let signatures = 0;
let colouredSignatures = 0;
for (const code of column.querySelectorAll("pre > code")) {
  const block = code.closest(".highlight");
  const isColoured = coloured(code);
  highlighted += isColoured ? 1 : 0;
  if (!block) {
    problems.push(`code not marked up by Pygments: ${describe(code)}`);
  } else if (block.classList.contains("doc-signature")) {
    signatures += 1;
    colouredSignatures += isColoured ? 1 : 0;
  } else if (!isColoured && code.querySelector(tokens)) {
    problems.push(`code not coloured: ${describe(code)}`);
  }
}
if (signatures && !colouredSignatures) {
  problems.push(`none of the ${signatures} signatures is highlighted`);
}

// One title: one h1, which no other heading repeats.
const headingText = (heading) => {
  const copy = heading.cloneNode(true);
  copy.querySelectorAll(".headerlink").forEach((link) => link.remove());
  return copy.textContent.trim().replace(/\\s+/g, " ");
};
const titles = [...column.querySelectorAll("h1")].map(headingText);
if (titles.length !== 1) {
  problems.push(`${titles.length} h1 titles: ${titles.join(" | ")}`);
}
for (const heading of column.querySelectorAll("h2, h3, h4, h5, h6")) {
  if (titles.includes(headingText(heading))) {
    problems.push(`the title is repeated by an ${heading.tagName.toLowerCase()}: ${headingText(heading)}`);
  }
}

if (document.documentElement.scrollWidth > window.innerWidth + 1) {
  problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth}px in ${window.innerWidth}px`);
}
return {problems: problems, typeset: typeset, highlighted: highlighted, column: columnWidth, widestTable: widestTable};
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

# The widest table of the page (null if it has none).
WIDEST_TABLE = """
let best = null;
for (const el of document.querySelectorAll("[itemprop=articleBody] table")) {
  if (!best || el.scrollWidth > best.scrollWidth) best = el;
}
return best;
"""

# The first code block that Pygments highlighted (null if none).
FIRST_CODE = """
return document.querySelector("[itemprop=articleBody] .highlight:not(.doc-signature) pre:has(span[class])");
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


@dataclass
class Table:
    """A table as drawn: its width (with what scrolls), its narrowest layout, the column's width."""

    width: int
    narrowest: int
    column: int
    text: str

    def __str__(self) -> str:
        return f"{self.width}px in a {self.column}px column"


@dataclass
class Page:
    """What the checks of one page found."""

    problems: list[str]
    typeset: int  # formulas
    highlighted: int  # code blocks and signatures with coloured spans
    widest_table: Table | None


def check_page(driver: webdriver.Chrome, url: str, name: str, out: pathlib.Path) -> Page:
    """Open one page, wait for its math, check it and screenshot it."""
    from selenium.webdriver.common.by import By

    driver.get(url)
    state = driver.execute_async_script(WAIT_FOR_MATHJAX)
    result = driver.execute_script(CHECK_PAGE)
    problems: list[str] = list(result["problems"])
    if state != "ok":
        problems.insert(0, str(state))
    table = result["widestTable"]
    widest_table = table and Table(int(table["width"]), int(table["narrowest"]), int(result["column"]), table["text"])
    driver.save_screenshot(str(out / f"{name}.png"))
    for script, suffix in [(WIDEST_TABLE, "table"), (WIDEST, "widest"), (FIRST_CODE, "code")]:
        element = driver.execute_script(script)
        if element is not None:
            driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)
            element.screenshot(str(out / f"{name}-{suffix}.png"))
    formulas = driver.find_elements(By.CSS_SELECTOR, ".arithmatex")
    if formulas:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", formulas[0])
        driver.save_screenshot(str(out / f"{name}-math.png"))
    return Page(problems, int(result["typeset"]), int(result["highlighted"]), widest_table)


def api_pages(site: pathlib.Path) -> list[str]:
    """The API pages of a built site, as paths under its root."""
    return sorted(f"{path.parent.relative_to(site).as_posix()}/" for path in site.glob("api/*/index.html"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("/tmp/site_shots"))
    parser.add_argument("--site", type=pathlib.Path, help="a site already built (default: build one)")
    parser.add_argument("--pages", nargs="+", default=PAGES, help="paths under the site's root")
    parser.add_argument("--api", action="store_true", help="check every API page too")
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
        pages = list(dict.fromkeys([*args.pages, *(api_pages(site) if args.api else [])]))
        total_problems = total_formulas = total_highlighted = 0
        widest: Table | None = None
        with serve(site) as (base, failures):
            driver = browser(
                args.chromium, args.chromedriver, args.width, args.height, str(pathlib.Path(tmp) / "profile")
            )
            try:
                for page in pages:
                    name = page.strip("/").replace("/", "_") or "home"
                    found = check_page(driver, base + page, name, args.out)
                    total_formulas += found.typeset
                    total_highlighted += found.highlighted
                    total_problems += len(found.problems)
                    table = found.widest_table
                    if table and (widest is None or table.width - table.column > widest.width - widest.column):
                        widest = table
                    print(
                        f"{page or '/'}: {found.typeset} formulas typeset, {found.highlighted} code blocks "
                        f"highlighted, widest table {table or 'none'}, {len(found.problems)} problems"
                    )
                    for problem in found.problems:
                        print(f"    {problem}")
            finally:
                driver.quit()
            for failure in failures:
                print(f"request not answered: {failure}")
            total_problems += len(failures)
    print(f"screenshots in {args.out}")
    if widest:
        print(f"widest table: {widest}, {widest.narrowest}px at its narrowest: {widest.text}")
    print(
        f"site: {len(pages)} pages, {total_formulas} formulas typeset, {total_highlighted} code blocks highlighted, "
        f"widest table {widest or 'none'}, {total_problems} problems"
    )
    return 1 if total_problems else 0


if __name__ == "__main__":
    sys.exit(main())
