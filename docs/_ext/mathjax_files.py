"""MkDocs hook (mkdocs.yml): ship MathJax with the site, so that its math renders without a CDN.

MathJax 3 comes from the Python package django-static-mathjax (a copy of MathJax's own
distribution, Apache-2.0; a documentation dependency in pyproject.toml). The site gets the one
combined component it loads, ``tex-chtml-full.js`` (TeX input with every extension, so nothing is
fetched on demand, and HTML output), the web fonts that output uses, and MathJax's licence, under
``js/mathjax/`` in the layout MathJax expects (its fonts beside it, under ``output/chtml/fonts``).
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

SCRIPT = "tex-chtml-full.js"
FONTS = "output/chtml/fonts/woff-v2"
DEST = "js/mathjax"


def mathjax_root() -> Path:
    """The directory of MathJax's distribution that django-static-mathjax installs."""
    spec = find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("MathJax is missing: pip install django-static-mathjax (pyproject.toml, [dev])")
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = mathjax_root()
    es5 = root / "es5"
    sources = {SCRIPT: es5 / SCRIPT, "LICENSE": root / "LICENSE"}
    sources |= {f"{FONTS}/{font.name}": font for font in sorted((es5 / FONTS).glob("*.woff"))}
    for name, source in sources.items():
        files.append(File.generated(config, f"{DEST}/{name}", abs_src_path=str(source)))
    return files
