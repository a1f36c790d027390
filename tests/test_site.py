"""The documentation site as a reader gets it: built once as CI builds it (mkdocs, warnings as errors),
then read as HTML. Whole one-line summaries, no empty ones, no type variables documented as
attributes, math typeset by a MathJax the site ships, wide tables and code in scrolling boxes, table
cells that wrap, code highlighted by Pygments when the site is built, one title per API page, site
pages cited as links, and a home page that lists every page.

tools/site.py opens the same site in headless Chromium and checks what is drawn.
"""

from __future__ import annotations

import html.parser
import importlib.util
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from tests import once

ROOT = Path(__file__).resolve().parent.parent
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})
MATH_PAGES = ["design", "poisson", "darcy", "fno_darcy", "trees"]  # pages whose formulas are written as $...$


@dataclass(eq=False)
class Element:
    """An HTML element, as much of one as these checks read."""

    tag: str
    attrs: dict[str, str]
    parent: Element | None = None
    children: list[Element | str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def iter(self) -> Iterator[Element]:
        """This element and every element inside it, in document order."""
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def select(self, tag: str, cls: str | None = None) -> list[Element]:
        return [e for e in self.iter() if e.tag == tag and (cls is None or cls in e.classes)]

    def ancestors(self) -> Iterator[Element]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def text(self, skip: Callable[[Element], bool] = lambda e: False) -> str:
        """The text inside, whitespace collapsed, leaving out the elements ``skip`` names."""
        parts: list[str] = []

        def walk(element: Element) -> None:
            for child in element.children:
                if isinstance(child, str):
                    parts.append(child)
                elif not skip(child):
                    walk(child)

        walk(self)
        return " ".join("".join(parts).split())


class _TreeBuilder(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("document", {})
        self.open = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs}, parent=self.open)
        self.open.children.append(element)
        if tag not in VOID:
            self.open = element

    def handle_endtag(self, tag: str) -> None:
        for node in [self.open, *self.open.ancestors()]:
            if node.tag == tag and node.parent is not None:
                self.open = node.parent
                return

    def handle_data(self, data: str) -> None:
        self.open.children.append(data)


def parse(path: Path) -> Element:
    builder = _TreeBuilder()
    builder.feed(path.read_text(encoding="utf-8"))
    builder.close()
    return builder.root


@dataclass
class Site:
    root: Path
    pages: dict[str, Element]  # by URL path: "", "design/", "api/linalg/"

    def body(self, page: str) -> Element:
        """The page's own content, without the theme's navigation."""
        return next(e for e in self.pages[page].iter() if e.attrs.get("itemprop") == "articleBody")

    def api_pages(self) -> list[str]:
        return [page for page in self.pages if page.startswith("api/")]


SITE = "site"
"""The site's directory, built once a run (``tests/once.py``)."""


def build(out: Path) -> None:
    """The site built into ``out`` as CI builds it."""
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    built = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr[-5000:]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The site, built once a run (``tests/once.py``: the xdist workers share it, and the run begins it
    early) and parsed."""
    out = once.directory(tmp_path_factory, SITE, build)
    folders = {path.parent.relative_to(out).as_posix(): path for path in sorted(out.glob("**/index.html"))}
    return Site(out, {("" if folder == "." else f"{folder}/"): parse(path) for folder, path in folders.items()})


def begin(tmp_path_factory: pytest.TempPathFactory) -> threading.Thread:
    """The ``site`` fixture's build begun in a thread (``once.begin``)."""
    return once.begin(tmp_path_factory, SITE, build)


def in_code(element: Element) -> bool:
    return element.tag in {"code", "pre"} or bool({"arithmatex", "doc-signature"} & element.classes)


def resolve(page: str, href: str) -> str:
    """The URL path (page and fragment) a link on ``page`` points to."""
    url = urlsplit(urljoin(f"http://site/{page}", href))
    return url.path.lstrip("/") + (f"#{url.fragment}" if url.fragment else "")


def css_rules(css: str) -> list[tuple[str, dict[str, str]]]:
    """The rules of a stylesheet, one per selector: (selector, its declarations by property)."""
    rules: list[tuple[str, dict[str, str]]] = []
    for selectors, block in re.findall(r"([^{}]+)\{([^{}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S)):
        declarations = {
            name.strip().lower(): value.strip()
            for name, _, value in (declaration.partition(":") for declaration in block.split(";"))
            if value.strip()
        }
        rules.extend((" ".join(selector.split()), declarations) for selector in selectors.split(","))
    return rules


def specificity(selector: str) -> tuple[int, int, int]:
    """A simple selector list's specificity: (ids, classes and attributes and pseudo-classes, types)."""
    selector = re.sub(r"::[\w-]+", "", selector)
    types = len(re.findall(r"(?:^|[\s>+~])[a-zA-Z][\w-]*", selector))
    return selector.count("#"), len(re.findall(r"[.\[]|:(?!:)", selector)), types


def subject(selector: str) -> str:
    """What a selector selects: its last compound selector (``td``, ``th.field-name``, ``.field-name``)."""
    return re.split(r"[\s>+~]+", selector.strip())[-1]


def stylesheets(site: Site, page: str) -> list[str]:
    """The stylesheets a page links, in order, as paths under the site's root."""
    document = site.pages[page]
    return [
        resolve(page, link.attrs["href"])
        for link in document.select("link")
        if "stylesheet" in link.attrs.get("rel", "")
    ]


def first_paragraphs(site: Site) -> dict[str, str | None]:
    """For every object documented on the API pages (by page and anchor): its docstring's first paragraph.

    The module an API page is about has no heading of its own: its docstring comes first, under the
    page's title, which carries the module's anchor.
    """
    paragraphs: dict[str, str | None] = {}
    for page in site.api_pages():
        body = site.body(page)
        untitled = 0
        for element in body.iter():
            if "doc-object" not in element.classes:
                continue
            children = [c for c in element.children if isinstance(c, Element)]
            heading = next((c for c in children if "doc-heading" in c.classes), None)
            if heading is None:
                untitled += 1
                heading = body.select("h1")[0]
            contents = next(c for c in children if "doc-contents" in c.classes)
            docstring = [c for c in contents.children if isinstance(c, Element) and "doc-class-bases" not in c.classes]
            first = docstring[0] if docstring else None
            paragraphs[f"{page}#{heading.attrs['id']}"] = first.text() if first and first.tag == "p" else None
        assert untitled == 1, f"{page}: {untitled} objects without a heading, not just the page's module"
    return paragraphs


@dataclass
class Summary:
    page: str
    target: str  # page#anchor of the member it summarises
    dash: bool
    text: str | None  # None: the member is listed without a summary


def summaries(site: Site) -> list[Summary]:
    """Every one-line summary in the members lists of the API pages."""
    found = []
    for page in site.api_pages():
        for item in site.pages[page].select("li", "doc-section-item"):
            links = [a for a in item.iter() if a.tag == "a" and any(p.tag == "b" for p in a.ancestors())]
            description = next((d for d in item.select("div", "doc-md-description")), None)
            own_text = "".join(c for c in item.children if isinstance(c, str))
            found.append(
                Summary(
                    page,
                    resolve(page, links[0].attrs["href"]) if links else "",
                    "\N{EN DASH}" in own_text,
                    description.text() if description else None,
                )
            )
    return found


def test_every_summary_is_a_whole_sentence_of_its_docstring(site: Site) -> None:
    # mkdocstrings takes a member's summary from the first line of its docstring; at 100 columns
    # that line often stops mid-sentence ("A structure whose fmap applies functions at sample points
    # (a Cheb: its Chebyshev"). A summary is the docstring's first paragraph, or a prefix of it that
    # ends a sentence.
    paragraphs = first_paragraphs(site)
    listed = [s for s in summaries(site) if s.text]
    assert len(listed) > 300, "the API pages list their members with summaries"
    cut = []
    for summary in listed:
        text = summary.text or ""
        if not summary.target:  # a submodule not documented on the site: a sentence, brackets closed
            if not text.endswith((".", "!", "?")) or text.count("(") != text.count(")"):
                cut.append(f"{summary.page}: {text!r}")
            continue
        assert summary.target in paragraphs, f"{summary.page}: a summary of no documented object: {text}"
        paragraph = paragraphs[summary.target]
        whole = paragraph == text
        sentence = paragraph is not None and paragraph.startswith(text + " ") and text.endswith((".", "!", "?"))
        if not (whole or sentence):
            cut.append(f"{summary.target}: {text!r} of {paragraph!r}")
    assert not cut, f"{len(cut)} summaries are not whole sentences:\n" + "\n".join(cut[:10])
    # and most do end one: a summary that is a whole paragraph without a full stop is the exception
    unfinished = [s.text for s in listed if not (s.text or "").endswith((".", "!", "?", ":"))]
    assert len(unfinished) < len(listed) // 20, unfinished[:10]


def test_no_summary_is_empty(site: Site) -> None:
    # a member without a docstring is listed by name, not followed by a dash and nothing
    paragraphs = first_paragraphs(site)
    entries = summaries(site)
    empty = [s.target for s in entries if s.dash and not s.text]
    assert not empty, f"empty summaries: {empty[:10]}"
    # a member is listed without a summary exactly when it has no docstring
    for summary in entries:
        if summary.text is None and summary.target:
            assert paragraphs.get(summary.target) is None, f"{summary.target} has a docstring but no summary"
    assert any(s.text is None for s in entries), "undocumented methods (__call__ of nn's layers) are listed by name"


def test_type_variables_are_not_documented_as_attributes(site: Site) -> None:
    defines = re.compile(r"^\w+ = (?:typing\.)?(?:TypeVar|ParamSpec|TypeVarTuple)\(")
    signatures = [s.text() for page in site.api_pages() for s in site.pages[page].select("div", "doc-signature")]
    documented = [s for s in signatures if defines.match(s)]
    assert not documented, documented[:10]
    # they are there in the source, and signatures still name them
    assert re.search(r"^Summed = TypeVar\(", (ROOT / "applicative/protocols/kinds.py").read_text(), re.MULTILINE)
    assert any(s.startswith("dot(") and "Summed" in s for s in signatures)
    anchors = {e.attrs.get("id") for page in site.api_pages() for e in site.pages[page].iter()}
    assert "applicative.protocols.kinds.Summed" not in anchors
    assert "applicative.protocols.kinds.Measured" in anchors


def test_math_is_typeset_by_the_mathjax_the_site_ships(site: Site) -> None:
    for name in MATH_PAGES:
        page = f"{name}/"
        formulas = [e for e in site.body(page).iter() if "arithmatex" in e.classes]
        assert len(formulas) >= 3, f"{page}: formulas are marked up for MathJax"
        for formula in formulas:
            text = formula.text()
            assert (text.startswith("\\(") and text.endswith("\\)")) or (
                text.startswith("\\[") and text.endswith("\\]")
            )
        # no formula left as text with its dollars
        prose = site.body(page).text(skip=in_code)
        assert "$" not in prose, f"{page}: {prose[prose.index('$') - 40 : prose.index('$') + 40]!r}"
    mathjax = site.root / "js/mathjax/tex-chtml-full.js"
    assert mathjax.stat().st_size > 500_000, "MathJax itself is part of the site, not loaded from a CDN"
    assert "MathJax" in mathjax.read_text(encoding="utf-8")[-200_000:]
    assert len(list((site.root / "js/mathjax/output/chtml/fonts/woff-v2").glob("*.woff"))) >= 20
    config = (site.root / "js/mathjax-config.js").read_text()
    assert 'processHtmlClass: "arithmatex"' in config
    for page, document in site.pages.items():
        scripts = [resolve(page, s.attrs["src"]) for s in document.select("script") if "src" in s.attrs]
        assert "js/mathjax-config.js" in scripts, page
        assert "js/mathjax/tex-chtml-full.js" in scripts, page
        assert scripts.index("js/mathjax-config.js") < scripts.index("js/mathjax/tex-chtml-full.js")
        assert not [s for s in scripts if s.startswith("http")], f"{page} loads a script from another host"


def test_wide_tables_code_and_formulas_scroll_inside_the_content_column(site: Site) -> None:
    css = (site.root / "css/site.css").read_text()
    scrolling = {
        selector.strip()
        for selectors, declarations in re.findall(r"([^{}]+)\{([^}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S))
        if re.search(r"overflow-x:\s*auto", declarations)
        for selector in selectors.split(",")
    }
    assert {".rst-content table", ".rst-content pre", ".rst-content div.arithmatex"} <= scrolling
    for page in site.pages:
        assert "css/site.css" in stylesheets(site, page), page
        for element in site.body(page).iter():
            if element.tag in {"table", "pre"}:
                assert any("rst-content" in a.classes for a in element.ancestors()), page


def test_table_cells_wrap(site: Site) -> None:
    # The theme keeps a table's cells on one line (white-space: nowrap), so that a table of
    # sentences (the tour's layout table) ran to three times the column's width. Every such rule of
    # the theme's stylesheets is overridden by one of site.css, as specific and linked after it.
    for page in site.pages:
        styles = stylesheets(site, page)
        assert styles[-1] == "css/site.css", f"{page}: site.css comes last, to override the theme: {styles}"
    theme = [
        rule
        for name in stylesheets(site, "")[:-1]
        if (site.root / name).is_file()  # not one from another host (another test checks there is none)
        for rule in css_rules((site.root / name).read_text())
    ]
    ours = css_rules((site.root / "css/site.css").read_text())
    cell = re.compile(r"t[dh](\.[\w-]+)*|\.field-name")  # td, th, th.field-name, .field-name
    nowrap = [
        selector
        for selector, declarations in theme
        if declarations.get("white-space") == "nowrap" and "table" in selector and cell.fullmatch(subject(selector))
    ]
    assert ".wy-table-responsive table td" in nowrap, "the theme's rule for the cells of its responsive tables"
    wrapping = [selector for selector, declarations in ours if declarations.get("white-space") == "normal"]
    for selector in nowrap:
        overrides = [
            s
            for s in wrapping
            if subject(s).split(".")[0] == subject(selector).split(".")[0]
            and set(subject(selector).split(".")[1:]) <= set(subject(s).split(".")[1:])
            and specificity(s) >= specificity(selector)
        ]
        assert overrides, f"the theme's {selector} {{white-space: nowrap}} is not overridden by site.css"
    assert not [s for s, d in ours if d.get("white-space") == "nowrap" and subject(s) in {"td", "th"}]
    # what is still wider than the column scrolls (test above), and a number is not broken at the
    # hyphen of its exponent: the hook docs/_ext/table_numbers.py marks the numbers of table cells
    assert any(d.get("white-space") == "nowrap" for s, d in ours if subject(s) == ".number")
    exponent = re.compile(r"\d[eE][-+\N{MINUS SIGN}]?\d")
    for name in ["poisson/", "darcy/"]:
        cells = [c for table in site.body(name).select("table") for c in table.iter() if c.tag in {"td", "th"}]
        numbers = [span.text() for c in cells for span in c.select("span", "number")]
        assert len(numbers) > 20, f"{name}: its results tables' numbers are marked"
        assert all(exponent.search(number) for number in numbers), numbers
        loose = [c.text(skip=lambda e: "number" in e.classes or in_code(e)) for c in cells]
        assert not [text for text in loose if exponent.search(text)], f"{name}: a number in a table cell is not marked"


def test_code_is_highlighted_by_pygments_when_the_site_is_built(site: Site) -> None:
    # Highlighted by Pygments (pymdownx.highlight), coloured by css/pygments.css, not by highlight.js
    # from a CDN: the site works offline.
    pygments = css_rules((site.root / "css/pygments.css").read_text())
    colours = {selector: d["color"] for selector, d in pygments if "color" in d}
    for token in [".k", ".kn", ".c1", ".s1", ".mf", ".gp", ".nf", ".nc"]:  # keywords, comments, ..., prompts
        assert f".highlight {token}" in colours, token
    for page, document in site.pages.items():
        assert "css/pygments.css" in stylesheets(site, page), page
        links = [e.attrs.get("href", "") for e in document.select("link")] + [
            e.attrs.get("src", "") for e in document.select("script")
        ]
        assert not [link for link in links if link.startswith(("http:", "https:", "//"))], f"{page}: {links}"
        assert "hljs" not in document.text(), page
        # every code block is Pygments' div.highlight > pre > code
        for pre in site.body(page).select("pre"):
            assert pre.parent is not None
            assert "highlight" in pre.parent.classes, f"{page}: {pre.text()[:80]}"

    def tokens(block: Element) -> set[str]:
        return {c for span in block.select("span") for c in span.classes}

    # every Python block of the tour, in the order of docs/tour.md
    fences = re.findall(r"^```(\w*)$.*?^```$", (ROOT / "docs/tour.md").read_text(), re.MULTILINE | re.DOTALL)
    blocks = site.body("tour/").select("div", "highlight")
    assert len(blocks) == len(fences) > 0
    for language, block in zip(fences, blocks, strict=True):
        if language == "python":
            assert {"kn", "n", "p"} <= tokens(block), block.text()[:80]
        elif not language:
            assert not tokens(block), block.text()[:80]  # plain text: no tokens
    # an API page: the signatures, and the doctests (>>> prompts), as Python
    signatures = site.body("api/linalg/").select("div", "doc-signature")
    assert len(signatures) > 5
    functions = [s for s in signatures if re.match(r"\w+\(", s.text())]  # not an attribute's `X: T = f(...)`
    assert functions
    assert all("highlight" in s.classes and "nf" in tokens(s) for s in functions)
    doctests = [b for b in site.body("api/linalg/").select("div", "highlight") if b.text().startswith(">>>")]
    assert doctests
    assert all({"gp", "kn"} <= tokens(b) for b in doctests)


def test_each_api_page_has_one_title(site: Site) -> None:
    # The page's title names its module and carries its anchor; mkdocstrings does not repeat it as a
    # heading of its own (show_root_heading: false on the page's first ::: block).
    def heading_text(heading: Element) -> str:
        return heading.text(skip=lambda e: "headerlink" in e.classes)

    for page in site.pages:
        assert len(site.body(page).select("h1")) == 1, page
    for page in site.api_pages():
        body = site.body(page)
        (title,) = body.select("h1")
        module = heading_text(title)
        assert title.attrs.get("id") == module, f"{page}: its title {module!r} is not its module's anchor"
        assert re.fullmatch(r"(applicative|funcformer)(\.\w+)*", module), module
        headings = [e for e in body.iter() if re.fullmatch(r"h[2-6]", e.tag)]
        repeated = [heading_text(h) for h in headings if heading_text(h) == module]
        assert not repeated, f"{page}: the title {module!r} is repeated by a heading"
        assert headings, f"{page}: its members have headings"
    # other pages' links to a module's anchor land on its title
    links = {
        resolve(page, a.attrs["href"])
        for page in site.api_pages()
        for a in site.body(page).select("a")
        if "autorefs" in a.classes
    }
    assert {"api/linalg/#applicative.linalg", "api/instances/#applicative.instances"} <= links


def test_site_pages_are_cited_as_links_not_as_repository_paths(site: Site) -> None:
    page_path = re.compile(r"\bdocs/\w+\.md\b")
    repository_file = re.compile(r"(?<![\w/])(?:tests|bench)/\w+")
    for page in site.pages:
        prose = site.body(page).text(skip=in_code)
        assert not page_path.search(prose), f"{page}: {page_path.search(prose)}"
        if page.startswith("api/"):
            # other files of the repository, which an installed package lacks, are at least code
            assert not repository_file.search(prose), f"{page}: {repository_file.search(prose)}"
    # docstrings that cite a page link to it
    cited = {
        resolve(page, a.attrs["href"]).split("#")[0]
        for page in site.api_pages()
        for contents in site.pages[page].select("div", "doc-contents")
        for a in contents.select("a")
        if "autorefs" not in a.classes and "headerlink" not in a.classes
    }
    assert {"design/", "poisson/", "darcy/"} <= cited


def test_the_home_page_lists_every_page_of_the_navigation(site: Site) -> None:
    home = site.pages[""]
    menu = next(e for e in home.iter() if "wy-menu-vertical" in e.classes)
    navigation = {resolve("", a.attrs["href"]).split("#")[0] for a in menu.select("a")} - {""}
    assert {"design/", "darcy/", "api/learning/", "api/darcy/"} <= navigation
    assert navigation == {page for page in site.pages if page}, "every page of the site is in the navigation"
    listed = {resolve("", a.attrs["href"]).split("#")[0] for a in site.body("").select("a")}
    assert not navigation - listed, f"pages missing from the home page's list: {sorted(navigation - listed)}"


def _extension(name: str = "plain_docstrings") -> object:
    spec = importlib.util.spec_from_file_location(name, ROOT / f"docs/_ext/{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("paragraph", "first"),
    [
        ("One sentence. Another one.", "One sentence."),
        ("Ends at the end.", "Ends at the end."),
        ("A half-open [0, 1) interval. Next.", "A half-open [0, 1) interval."),
        ("Inside (brackets. Not here) but here. Next.", "Inside (brackets. Not here) but here."),
        ("A literal ``x. y`` is code. Next.", "A literal ``x. y`` is code."),
        ("A formula $x. y$ is math. Next.", "A formula $x. y$ is math."),
        ("Cached under $CACHE. Next.", "Cached under $CACHE."),
        ("Abbreviations, e.g. these, do not end it. Next.", "Abbreviations, e.g. these, do not end it."),
        ("s_ij = q_i . k_j.", "s_ij = q_i . k_j."),
        ("As in ``mul_mm``, ... or others. Next.", "As in ``mul_mm``, ... or others."),
        ("A sentence. x is lowercase.", "A sentence."),
    ],
)
def test_a_summary_is_the_first_sentence(paragraph: str, first: str) -> None:
    extension = _extension()
    first_sentence_end: Callable[[str], int] = getattr(extension, "first_sentence_end")  # noqa: B009
    assert paragraph[: first_sentence_end(paragraph)] == first
    summary_first: Callable[[str], str] = getattr(extension, "summary_first")  # noqa: B009
    wrapped = textwrap.fill(paragraph, 12, break_long_words=False, break_on_hyphens=False)  # over lines
    assert summary_first(wrapped + "\n\nMore.").splitlines()[0] == first


def test_numbers_in_table_cells_are_kept_whole_but_not_in_code_or_math() -> None:
    keep_numbers: Callable[[str], str] = getattr(_extension("table_numbers"), "keep_numbers")  # noqa: B009
    table = (
        "<table><tr><td>1.21e-6, \N{MINUS SIGN}2E+3 and 0.99</td><td><code>1e-3</code></td>"
        '<td><span class="arithmatex">\\(10^{-3} <span>1e-3</span> 2e-3\\)</span> x1e-3 4e-4.</td></tr></table>'
    )
    assert keep_numbers(table) == (
        '<table><tr><td><span class="number">1.21e-6</span>, <span class="number">\N{MINUS SIGN}2E+3</span> and '
        "0.99</td><td><code>1e-3</code></td>"
        '<td><span class="arithmatex">\\(10^{-3} <span>1e-3</span> 2e-3\\)</span> x1e-3 '
        '<span class="number">4e-4</span>.</td></tr></table>'
    )
