"""The documentation site as a reader gets it: built once as CI builds it (mkdocs, warnings as errors),
then read as HTML. Whole one-line summaries, no empty ones, no type variables documented as
attributes, math typeset by a MathJax the site ships, wide tables and code in scrolling boxes, site
pages cited as links, and a home page that lists every page.

bench/site.py opens the same site in headless Chromium and checks what is drawn.
"""

from __future__ import annotations

import html.parser
import importlib.util
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})
MATH_PAGES = ["design", "poisson", "darcy", "trees"]  # pages whose formulas are written as $...$


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


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    built = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr[-5000:]
    folders = {path.parent.relative_to(out).as_posix(): path for path in sorted(out.glob("**/index.html"))}
    return Site(out, {("" if folder == "." else f"{folder}/"): parse(path) for folder, path in folders.items()})


def in_code(element: Element) -> bool:
    return element.tag in {"code", "pre"} or bool({"arithmatex", "doc-signature"} & element.classes)


def resolve(page: str, href: str) -> str:
    """The URL path (page and fragment) a link on ``page`` points to."""
    url = urlsplit(urljoin(f"http://site/{page}", href))
    return url.path.lstrip("/") + (f"#{url.fragment}" if url.fragment else "")


def first_paragraphs(site: Site) -> dict[str, str | None]:
    """For every object documented on the API pages (by page and anchor): its docstring's first paragraph."""
    paragraphs: dict[str, str | None] = {}
    for page in site.api_pages():
        for heading in site.pages[page].iter():
            if "doc-heading" not in heading.classes or "id" not in heading.attrs or heading.parent is None:
                continue
            contents = next(
                c for c in heading.parent.children if isinstance(c, Element) and "doc-contents" in c.classes
            )
            docstring = [c for c in contents.children if isinstance(c, Element) and "doc-class-bases" not in c.classes]
            first = docstring[0] if docstring else None
            paragraphs[f"{page}#{heading.attrs['id']}"] = first.text() if first and first.tag == "p" else None
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
    for page, document in site.pages.items():
        styles = [
            resolve(page, link.attrs["href"])
            for link in document.select("link")
            if "stylesheet" in link.attrs.get("rel", "")
        ]
        assert "css/site.css" in styles, page
        for element in site.body(page).iter():
            if element.tag in {"table", "pre"}:
                assert any("rst-content" in a.classes for a in element.ancestors()), page


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


def _extension() -> object:
    spec = importlib.util.spec_from_file_location("plain_docstrings", ROOT / "docs/_ext/plain_docstrings.py")
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
