// MathJax 3 for the Markdown extension pymdownx.arithmatex (generic mode, mkdocs.yml): typeset only
// the \(...\) and \[...\] it wraps in elements of class "arithmatex", nothing else on a page.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};
