"""Sphinx extension: the book as a reader sees it (issue 18) and an appendix safe to publish (issue 14).

What it does while Jupyter Book builds:

* **Solutions appendix.** Each ``solutions/NN_*.ipynb`` page is built from
  `coursetools.release.book_solution_notebook`: worked solutions and outputs, but no hidden tests,
  no solution markers, no rubrics, and the title "Solution — Chapter N ...". The copy offered for
  download (``_sources/solutions/*.ipynb``) is replaced by the same version.
  ``BOOK_WITHOUT_SOLUTIONS=1 jupyter-book build .`` builds the book without the appendix.
* **Diagrams.** Mermaid is loaded as a classic script (``mermaid.min.js``, which also works when the
  book is opened from disk, where Chromium refuses ES modules) and drawn at its natural size,
  shrunk at most to ``MIN_DIAGRAM_SCALE`` (wider diagrams scroll), so node text stays readable.
* **Static widgets.** In the saved widget state every control is disabled, and one line above each
  widget says what it shows and how to get the live version.
* **No console errors.** The duplicated Thebe configuration is removed (Thebe is off), the widget
  manager's MathJax 2 call is served by MathJax 3, the theme mode is set, and the book has a favicon.
* **Consistent boxes.** Admonitions titled "Pitfall: ..." share one colour, "Misconception: ..." another.
* **The intro's chapter table** is made from README.md's chapter table, for the chapters that exist,
  with each chapter's own title as the link text.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import nbformat
from docutils import nodes
from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parent.parent
ASSETS = Path(__file__).resolve().parent / "assets"
WITHOUT_SOLUTIONS = "BOOK_WITHOUT_SOLUTIONS"
APPENDIX_CAPTION = "Appendix: solutions"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
STATIC_WIDGET_NOTE = (
    "Static view: the controls below are inactive and the readout and figure show the saved settings. "
    "To use the widget, run the notebook in JupyterLab."
)
BOX_KINDS = {  # title prefix -> (admonition class for the theme, class for the course's colour)
    "Pitfall": ("warning", "course-pitfall"),
    "Misconception": ("important", "course-misconception"),
}
THEME_KINDS = {"note", "warning", "danger", "caution", "attention", "error", "hint", "important", "tip", "seealso"}


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


# --- the appendix -----------------------------------------------------------------------------------


def _toc_without_solutions(config) -> None:
    """Point sphinx-external-toc at a copy of _toc.yml without the solutions appendix."""
    import yaml

    toc_path = Path(config.external_toc_path)
    toc_path = toc_path if toc_path.is_absolute() else ROOT / toc_path
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    toc["parts"] = [part for part in toc.get("parts", []) if part.get("caption") != APPENDIX_CAPTION]
    handle, name = tempfile.mkstemp(prefix="toc-without-solutions-", suffix=".yml")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        yaml.safe_dump(toc, out, sort_keys=False, allow_unicode=True)
    config.external_toc_path = name


def _is_solution(docname: str) -> bool:
    return docname.startswith("solutions/")


def _book_solution_text(text: str) -> str:
    from coursetools.release import book_solution_notebook

    return nbformat.writes(book_solution_notebook(nbformat.reads(text, as_version=4))) + "\n"


CHAPTER_TABLE = "<!-- chapter-table"
README_ROW = re.compile(r"^\| (\d\d) \| `(\d\d_\w+)` \| (.*?) \|", re.M)


def chapter_title(path: Path) -> str:
    """'# Chapter 3 — Scaled dot-product attention' -> 'Scaled dot-product attention'."""
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("# "):
            title = cell.source.split("\n", 1)[0][2:].strip()
            return re.sub(r"^Chapter \d+\s*[—:-]\s*", "", title)
    return path.stem[3:].replace("_", " ")


def chapter_table(root: Path = ROOT) -> str:
    """The intro's table: one row per chapter in README.md's table whose notebook exists."""
    rows = ["| # | chapter | what you build and measure |", "|---|---|---|"]
    for number, name, covers in README_ROW.findall((root / "README.md").read_text(encoding="utf-8")):
        notebook = root / "chapters" / f"{name}.ipynb"
        if notebook.exists():
            rows.append(f"| {int(number)} | [{chapter_title(notebook)}](chapters/{name}.ipynb) | {covers} |")
    return "\n".join(rows)


def _source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    if _is_solution(docname) and app.env.doc2path(docname).endswith(".ipynb"):
        source[0] = _book_solution_text(source[0])
    elif docname == "intro":
        for notebook in (ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"):  # rebuild when a title changes
            app.env.note_dependency(str(notebook))
        lines = source[0].split("\n")
        source[0] = "\n".join(chapter_table() if line.startswith(CHAPTER_TABLE) else line for line in lines)


def _replace_downloadable_sources(app: Sphinx, exception: Exception | None) -> None:
    """The .ipynb a reader downloads from a solution page is the published version, too."""
    if exception is not None or app.builder.format != "html":
        return
    for copy in (Path(app.outdir) / "_sources" / "solutions").glob("*.ipynb"):
        copy.write_text(_book_solution_text(copy.read_text(encoding="utf-8")), encoding="utf-8")


# --- the page as a reader sees it -----------------------------------------------------------------------


def _configure(app: Sphinx, config) -> None:
    if _truthy(os.environ.get(WITHOUT_SOLUTIONS)):
        _toc_without_solutions(config)
    # The theme's colour mode (its template variable; empty, the theme's script logs an error). Light:
    # the figures are drawn on white.
    config.html_context = {**(config.html_context or {}), "default_mode": "light"}
    config.html_favicon = str(ASSETS / "favicon.svg")
    config.mermaid_fullscreen = False
    if str(ASSETS) not in [str(p) for p in config.html_static_path]:
        config.html_static_path = [*config.html_static_path, str(ASSETS)]


def _box_colours(app: Sphinx, doctree: nodes.document) -> None:
    for box in doctree.findall(nodes.admonition):
        titles = [child for child in box.children if isinstance(child, nodes.title)]
        title = titles[0].astext().strip() if titles else ""
        for prefix, (kind, course_class) in BOX_KINDS.items():
            if title.startswith(prefix):
                keep = [c for c in box["classes"] if c not in THEME_KINDS and not c.startswith("course-")]
                box["classes"] = [*keep, kind, course_class]


def _widget_notes(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    for raw in list(doctree.findall(nodes.raw)):
        if WIDGET_VIEW in raw.astext() and raw.parent is not None:
            note = nodes.paragraph(STATIC_WIDGET_NOTE, STATIC_WIDGET_NOTE, classes=["course-static-widget-note"])
            raw.parent.insert(raw.parent.index(raw), note)


def disable_controls(state: dict) -> dict:
    """The saved widget state with every control disabled (models that have a ``disabled`` trait)."""
    models = {}
    for model_id, model in state.get("state", {}).items():
        if "disabled" in model.get("state", {}):
            model = {**model, "state": {**model["state"], "disabled": True}}
        models[model_id] = model
    return {**state, "state": models}


def _static_widgets(app: Sphinx, pagename: str, templatename, context, doctree) -> None:
    """Disable the controls in this page's saved widget state (runs before myst-nb adds it)."""
    from myst_nb.sphinx_ import NbMetadataCollector

    if not hasattr(app.env, "nb_metadata"):
        return
    js_files = NbMetadataCollector.get_js_files(app.env, pagename)
    entry = js_files.get("ipywidgets_state")
    if entry is None:
        return
    uri, kwargs = entry
    state = json.loads(kwargs["body"])
    js_files["ipywidgets_state"] = (uri, {**kwargs, "body": json.dumps(disable_controls(state))})


def _page_scripts(app: Sphinx, pagename: str, templatename, context, doctree) -> None:
    """Drop scripts that only raise errors here; add the course's script and style."""
    scripts = context.get("script_files", [])

    def unwanted(script) -> bool:
        body = getattr(script, "attributes", {}).get("body", "") or ""
        name = getattr(script, "filename", None) or str(script)
        return ("THEBE_JS_URL" in body or "sphinx-thebe.js" in str(name)
                or "import mermaid from" in body)

    scripts[:] = [s for s in scripts if not unwanted(s)]
    has_diagram = doctree is not None and any("mermaid" in n.get("classes", []) or n.tagname == "mermaid"
                                              for n in doctree.findall(nodes.Element))
    if has_diagram:
        app.add_js_file("offline/mermaid/mermaid.min.js", priority=600)
    app.add_js_file("course/course.js", priority=601)
    app.add_css_file("course/course.css", priority=900)


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _configure, priority=800)  # before sphinx-external-toc reads the toc (900)
    app.connect("source-read", _source_read)
    app.connect("doctree-read", _box_colours)
    app.connect("doctree-resolved", _widget_notes)
    app.connect("html-page-context", _static_widgets, priority=400)  # before myst-nb's (500)
    app.connect("html-page-context", _page_scripts, priority=900)  # after sphinxcontrib-mermaid's (500)
    app.connect("build-finished", _replace_downloadable_sources)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
