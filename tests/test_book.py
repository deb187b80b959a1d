"""The book: it builds with warnings as errors, publishes no hidden test, and every page passes the
reader's checks of issue 18 in a real browser (Chromium, 1366 px), over HTTP and opened from disk."""

from __future__ import annotations

import html
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from browser import (
    PROBLEM_KEYS,
    audit,
    chromium,
    external_requests,
    layout,
    require_chromium,
    static_server,
    tab,
    wait_until_rendered,
)
from course_paths import CHAPTERS, ROOT, SOLUTIONS
from machine_load import scaled

from coursetools import notebooks
from coursetools.release import BEGIN_HIDDEN, BEGIN_SOLUTION, END_HIDDEN, END_SOLUTION

pytestmark = pytest.mark.book

ELSEWHERE = ("cdn.jsdelivr.net", "cdnjs.cloudflare.com", "unpkg.com", "fonts.googleapis")


def readme_book_commands() -> list[str]:
    """The ```bash blocks of the README's "## Build the book" section: the build, then the instructor's build."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.split(r"^## ", readme.split("\n## Build the book\n", 1)[1], maxsplit=1, flags=re.M)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)\n```", section, re.S)]


def readme_build_argv(command: str) -> tuple[dict[str, str], list[str]]:
    """One README build command as (environment assignments, argv), `.venv/bin/` meaning this environment.

    Issue 27: the book was tested through `jupyter-book build ROOT`, never through the command the README
    gives, so a README command that builds nothing (or no longer hides the solutions) passed the tests."""
    *before, build = [part.strip() for part in command.split("&&")]
    assert before in ([], ["npm ci"]), f"README: only `npm ci` may come before the build: {command!r}"
    words = shlex.split(build)
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words[:3] == [".venv/bin/jupyter-book", "build", "."], f"README's build command: {command!r}"
    return env, [str(Path(sys.executable).with_name("jupyter-book")), *words[1:]]


def test_the_readme_builds_the_book_after_npm_ci():
    blocks = readme_book_commands()
    assert blocks[0].startswith("npm ci && "), blocks[0]
    assert readme_build_argv(blocks[0])[0] == {}, "the plain build sets no variable"
    assert readme_build_argv(blocks[1])[0] == {"BOOK_WITHOUT_SOLUTIONS": "1"}, blocks[1]


def _build(out: Path, command: str) -> Path:
    """The README's build ``command`` as written, run in the repository (its `.` is the repository), with
    the output moved to ``out`` and warnings as errors (``--path-output out -W -n --keep-going`` appended)."""
    env, argv = readme_build_argv(command)
    result = subprocess.run(
        [*argv, "--path-output", str(out), "-W", "-n", "--keep-going"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(600),  # a backstop against a hang, longer on a busy machine
        env={**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1", **env},
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, "book build failed:\n" + log[-4000:]
    assert "WARNING" not in log, "the book build warned:\n" + log[-4000:]
    return out / "_build" / "html"


@pytest.fixture(scope="module")
def built_book(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("book"), readme_book_commands()[0])


def _pages(book: Path) -> list[str]:
    """Every page a reader can open (not the redirect, the index or the search page)."""
    skip = {"index.html", "genindex.html", "search.html"}
    return sorted(p.relative_to(book).as_posix() for p in book.rglob("*.html")
                  if p.name not in skip and not {"_static", "_sources"} & set(p.relative_to(book).parts))


def test_every_chapter_and_solution_has_a_page(built_book):
    for path in SOLUTIONS:
        for folder in ("chapters", "solutions"):
            assert (built_book / folder / path.with_suffix(".html").name).exists(), f"{folder}/{path.stem}"
    for page in ("intro.html", "notation.html", "faq.html"):
        assert (built_book / page).exists()


def test_book_references_no_other_host_in_scripts_and_styles(built_book):
    for page in _pages(built_book):
        text = (built_book / page).read_text()
        for needle in ELSEWHERE:
            assert needle not in text, f"{page}: {needle}"


def _hidden_test_lines() -> set[str]:
    """Lines of hidden tests that occur nowhere else in the solutions (so finding one is a leak)."""
    hidden, visible = set(), set()
    for path in SOLUTIONS:
        for cell in notebooks.read(path).cells:
            inside = False
            for line in cell.source.split("\n"):
                stripped = line.strip()
                if stripped in (BEGIN_HIDDEN, END_HIDDEN):
                    inside = stripped == BEGIN_HIDDEN
                    continue
                # a trailing comment does not make a line different code (the scan below looks for substrings)
                stripped = stripped.split("  #", 1)[0].strip()
                if inside and len(stripped) >= 12 and not stripped.startswith("#"):
                    hidden.add(stripped)
                elif not inside:
                    visible.add(stripped)
    shown = "\n".join(visible)
    # a hidden line found inside a visible line (a short continuation such as `atol=1e-12))`) reveals nothing
    return {line for line in hidden - visible if line not in shown}


def _published_files(book: Path) -> list[Path]:
    return [p for p in book.rglob("*") if p.is_file() and p.suffix in (".html", ".js", ".ipynb", ".txt", ".json")
            and "offline" not in p.parts]


def test_published_book_has_no_hidden_tests_or_markers(built_book):
    """Issue 14.4: every published file (pages, search index, downloadable notebooks) is scanned."""
    hidden = _hidden_test_lines()
    assert hidden, "no hidden tests found in solutions/: the scan would prove nothing"
    markers = (BEGIN_SOLUTION, END_SOLUTION, BEGIN_HIDDEN, END_HIDDEN, "BEGIN HIDDEN", "END HIDDEN")
    files = _published_files(built_book)
    assert any(p.suffix == ".ipynb" and "solutions" in p.parts for p in files), "downloads not scanned"
    for path in files:
        raw = path.read_text(errors="replace")
        text = html.unescape(re.sub(r"<[^>]+>", "", raw)) if path.suffix == ".html" else raw
        if path.suffix == ".ipynb":
            text = "\n".join(cell.source for cell in notebooks.read(path).cells)
        for marker in markers:
            assert marker not in text, f"{path.relative_to(built_book)}: {marker}"
        for line in hidden:
            assert line not in text, f"{path.relative_to(built_book)} publishes a hidden test: {line!r}"
        assert '"rubric"' not in raw or path.suffix != ".ipynb", f"{path.relative_to(built_book)}: a rubric"


def test_solution_pages_are_titled_as_solutions(built_book):
    for path in SOLUTIONS:
        page = (built_book / "solutions" / path.with_suffix(".html").name).read_text()
        title = html.unescape(re.search(r"<h1>(.*?)<", page, re.S).group(1)).strip()
        assert title.startswith("Solution — Chapter "), title
        chapter = (built_book / "chapters" / path.with_suffix(".html").name).read_text()
        assert not html.unescape(re.search(r"<h1>(.*?)<", chapter, re.S).group(1)).startswith("Solution")


def test_book_without_the_solutions_appendix(tmp_path):
    """The instructor's build (README): the appendix is not built, linked or searchable."""
    book = _build(tmp_path, readme_book_commands()[1])
    assert not (book / "solutions").exists()
    assert (book / "chapters" / CHAPTERS[0].with_suffix(".html").name).exists()
    for page in _pages(book):
        assert 'href="solutions/' not in (book / page).read_text() and 'href="../solutions/' not in \
            (book / page).read_text(), f"{page} links to the appendix"
    assert "Solution —" not in (book / "searchindex.js").read_text()


# --- in a browser ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    require_chromium()
    with chromium() as instance:
        yield instance


@pytest.fixture(scope="module")
def served_book(built_book):
    with static_server(built_book) as base:
        yield base


def _page_report(browser, url: str, name: str) -> dict:
    with tab(browser, name) as t:
        t.page.goto(url, wait_until="load")
        wait_until_rendered(t.page)
        found = audit(t)
        found["external"] = external_requests(t.requests)
        problems = {key: found[key] for key in (*PROBLEM_KEYS, "external") if found[key]}
        assert not problems, f"{url}: {problems}"
        return found


BOOK_PAGES = sorted(
    [f"chapters/{p.stem}.html" for p in CHAPTERS] + [f"solutions/{p.stem}.html" for p in SOLUTIONS]
    + ["intro.html", "notation.html", "faq.html", "tolerances.html", "performance.html"]
)
_box_colours: dict[str, set[str]] = {}


@pytest.mark.browser
@pytest.mark.parametrize("page", BOOK_PAGES)
def test_every_page_passes_the_reader_checks_over_http(browser, served_book, built_book, page):
    """Issue 18, items 1-5: no raw $, diagram text >= 11 px, inactive static controls, no console
    error, no code, output or table wider than its column at 1366 px; nothing requested elsewhere."""
    assert (built_book / page).exists(), page
    found = _page_report(browser, f"{served_book}/{page}", f"book_{page.replace('/', '_')}")
    source = ROOT / page.replace(".html", ".ipynb")
    if source.exists():
        text = source.read_text()
        assert found["maths"] > 0, "MathJax typeset nothing"
        if "```mermaid" in text:
            assert found["diagrams"] >= 1
        if "application/vnd.jupyter.widget-view+json" in text:
            assert found["widgets"] >= 1 and found["widgetNotes"] == found["widgets"], \
                "every static widget has the note saying how to use it live"
    for kind, colour in found["boxes"]:
        if kind in ("Pitfall", "Misconception"):
            _box_colours.setdefault(kind, set()).add(colour)


_layouts: dict[str, dict] = {}


def _layout(browser, served_book: str, page: str) -> dict:
    """The page's layout report (browser.layout) at 1366 px, measured once for the tests below."""
    if page not in _layouts:
        with tab(browser, f"layout_{page.replace('/', '_')}") as t:
            t.page.goto(f"{served_book}/{page}", wait_until="load")
            wait_until_rendered(t.page)
            _layouts[page] = layout(t)
    return _layouts[page]


TABLE_PAGE = """<html><body><main><article class="bd-article" style="width: 757px"><section><h2>Costs</h2>
<div class="pst-scrollable-table-container" style="overflow-x: auto"><table><tr><th>sub-block</th><th>{last}</th></tr>
<tr><td>attention</td><td style="white-space: nowrap">{cell}</td></tr></table></div></section></article></main></body></html>"""


@pytest.mark.browser
def test_the_layout_check_finds_a_table_wider_than_the_column(browser):
    """Issue 30 review: ch06's cost table (782 px) and the performance page's benchmark table (839 px, its last
    column "GFLOP/s torch SDPA" hidden) sat in boxes that scroll, and the check passed them. A table wider than
    the text column is now `cut`; the same table that fits is not."""
    with tab(browser, "layout_tables") as t:
        t.page.set_content(TABLE_PAGE.format(last="cost per layer", cell="O(T d)"))
        assert layout(t)["cut"] == []
        t.page.set_content(TABLE_PAGE.format(last="GFLOP/s torch SDPA", cell="x" * 200))
        cut = layout(t)["cut"]
        assert len(cut) == 1 and cut[0].startswith('table in "Costs"') and "GFLOP/s torch SDPA" in cut[0], cut


@pytest.mark.browser
@pytest.mark.parametrize("page", BOOK_PAGES)
def test_no_equation_diagram_or_image_is_cut_at_1366_px(browser, served_book, page):
    """Issue 30.2: every display equation, Mermaid diagram, image and table fits its column, and the column
    does not scroll sideways (ch05's rotation matrix lost its second column, ch01's BPTT product and
    ch06's third decoder update were cut, ch02's projection diagram was 30 px too wide)."""
    found = _layout(browser, served_book, page)
    if (ROOT / page.replace(".html", ".ipynb")).exists():
        assert found["checked"]["equations"] > 0, f"{page}: no display equation measured"
    cut = found["cut"]
    assert len(cut) == 0, f"{page}: {len(cut)} cut at 1366 px:\n" + "\n".join(cut)


@pytest.mark.browser
@pytest.mark.parametrize("page", BOOK_PAGES)
def test_no_code_or_text_output_line_wraps_at_1366_px(browser, served_book, page):
    """Issue 30.3: a wrapped code line restarts at column 0 and reads as mis-indented Python, and a
    wrapped text table loses its columns: every line of an input cell or a text output stays one line
    (a long one scrolls inside its own box)."""
    found = _layout(browser, served_book, page)
    if (ROOT / page.replace(".html", ".ipynb")).exists():
        assert found["checked"]["code"] > 0, f"{page}: no code measured"
    wrapped = found["wrapped"]
    assert len(wrapped) == 0, f"{page}: {len(wrapped)} code blocks wrap at 1366 px:\n" + "\n".join(wrapped)


@pytest.mark.browser
@pytest.mark.parametrize("page", BOOK_PAGES)
def test_no_sentence_in_an_output_runs_past_the_column_at_1366_px(browser, served_book, page):
    """Issue 30 review: text outputs keep their lines (a table keeps its columns) and a long one scrolls in its
    box, but a sentence does not belong there: ch13's TimeoutError explanation was 1810 px in a 757 px column,
    and every prediction's "recorded, not judged here" line ran past the edge. A line of 12 words or more
    that is not a table row (no '|' pair, no run of two spaces between columns) is wrapped by the code
    that prints it."""
    prose = _layout(browser, served_book, page)["prose"]
    assert prose == [], f"{page}: {len(prose)} sentences wider than their output box:\n" + "\n".join(prose)


PROSE_PAGE = """<html><body><main><article class="bd-article" style="width: 757px"><section><h2>Timeouts</h2>
<div class="cell_output"><pre style="white-space: pre; overflow-x: auto">{text}</pre></div></section></article></main></body></html>"""


@pytest.mark.browser
def test_the_layout_check_finds_a_sentence_that_runs_past_its_output_box(browser):
    sentence = "Post-LN upper / lower half: median 1.03 (range 0.885 to 1.09, 10 seeds); upper half larger on 6 of 10 seeds (sign test p = 0.75)"
    table = " | ".join(["a wide column of a text table with words"] * 5) + "\n" + "  ".join(["aligned column of words"] * 6)
    with tab(browser, "layout_prose") as t:
        t.page.set_content(PROSE_PAGE.format(text=table + "\nshort line"))
        assert layout(t)["prose"] == []
        t.page.set_content(PROSE_PAGE.format(text=sentence))
        prose = layout(t)["prose"]
        assert len(prose) == 1 and prose[0].startswith('"Timeouts"') and "Post-LN" in prose[0], prose


@pytest.mark.browser
def test_each_kind_of_box_has_one_colour(browser, served_book):
    if not _box_colours:  # run alone: collect from the chapters
        for path in CHAPTERS:
            found = _page_report(browser, f"{served_book}/chapters/{path.stem}.html", f"boxes_{path.stem}")
            for kind, colour in found["boxes"]:
                if kind in ("Pitfall", "Misconception"):
                    _box_colours.setdefault(kind, set()).add(colour)
    assert set(_box_colours) == {"Pitfall", "Misconception"}
    for kind, colours in _box_colours.items():
        assert len(colours) == 1, f"{kind} boxes have {len(colours)} colours: {colours}"
    assert _box_colours["Pitfall"] != _box_colours["Misconception"]


# From disk: the intro, every chapter with a diagram (the ES-module loader failed there) and the
# last chapter (widgets and maths): the same scripts serve every page, so these cover what differs.
FROM_DISK = ["intro.html"] + [f"chapters/{p.stem}.html" for p in CHAPTERS
                              if "```mermaid" in p.read_text() or p == CHAPTERS[-1]]


@pytest.mark.browser
@pytest.mark.parametrize("page", FROM_DISK)
def test_book_opened_from_disk_draws_maths_diagrams_and_widgets(browser, built_book, page):
    """Issue 19.5: `_build/html/index.html` opened as a file works like the served book."""
    found = _page_report(browser, (built_book / page).as_uri(), f"file_{page.replace('/', '_')}")
    source = ROOT / page.replace(".html", ".ipynb")
    if source.exists():
        assert found["maths"] > 0
        if "```mermaid" in source.read_text():
            assert found["diagrams"] >= 1
        assert found["widgets"] >= 1


@pytest.mark.browser
def test_chapter_03_shows_its_saved_widget_inactive(browser, served_book):
    with tab(browser, "book_chapter_03_widget") as t:
        t.page.goto(f"{served_book}/chapters/03_scaled_dot_product_attention.html", wait_until="load")
        wait_until_rendered(t.page)
        assert t.page.locator("mjx-container[display='true']").count() >= 5
        assert t.page.locator("pre.mermaid svg").first.inner_html().count("<g") > 5
        readout = t.page.locator(".widget-html-content", has_text="d_k = ").first
        assert "d_k = 64" in readout.inner_text()
        note = t.page.locator("p.course-static-widget-note").first
        assert "JupyterLab" in note.inner_text() and "inactive" in note.inner_text()
        # A reader's key presses on the slider change nothing.
        handle = t.page.locator(".widget-slider .noUi-handle").first
        handle.focus()
        handle.press("ArrowRight")
        t.page.wait_for_timeout(300)
        assert "d_k = 64" in readout.inner_text()
        assert t.page.locator(".widget-slider .widget-readout").first.inner_text().strip() == "64"


@pytest.mark.browser
def test_the_visible_sidebar_toggle_hides_and_shows_the_sidebar_at_1366_px(browser, served_book):
    """Issue 30.4: the header's "Toggle primary sidebar" button did nothing at 1366 px (the theme bound
    only the first, hidden, toggle)."""
    with tab(browser, "book_sidebar_toggle") as t:
        t.page.goto(f"{served_book}/chapters/03_scaled_dot_product_attention.html", wait_until="load")
        wait_until_rendered(t.page)
        sidebar = t.page.locator("#pst-primary-sidebar")
        button = t.page.locator("button.primary-toggle[aria-label='Toggle primary sidebar']")
        assert button.is_visible() and sidebar.is_visible()
        button.click()
        hidden = ("() => { const s = document.querySelector('#pst-primary-sidebar');"
                  " return getComputedStyle(s).visibility === 'hidden' && s.getBoundingClientRect().right <= 0; }")
        t.page.wait_for_function(hidden)
        button.click()
        t.page.wait_for_function(f"() => !({hidden})()")
        assert sidebar.is_visible()
        assert t.errors == []


FIGURE_PAGES = [f"{p.parent.name}/{p.stem}.html" for p in CHAPTERS + SOLUTIONS if "image/png" in p.read_text()]


@pytest.mark.browser
@pytest.mark.parametrize("page", FIGURE_PAGES)
def test_every_figure_s_smallest_text_is_at_least_11_px_as_displayed(browser, served_book, page):
    """Issue 30.1: figures were shown shrunk (ch08's three panels at 0.64x, text 5-6 px) or drawn with 7-9 px
    text. Each image on the page is matched to the notebook figure it shows (the book names a figure's file
    by the SHA-256 of its PNG; a saved widget shows its PNG inline) and its smallest text, as displayed
    (the figure's smallest text x displayed width / the width it was drawn for), must be >= MIN_TEXT_PX;
    every image on the page must be such a figure, saved at twice its displayed size."""
    import base64
    import hashlib

    import nbformat
    from test_figures import notebook_figures

    from utils.plotting import MIN_TEXT_PX

    drawn = {}
    for _, png, meta in notebook_figures(nbformat.read(ROOT / page.replace(".html", ".ipynb"), as_version=4)):
        drawn[hashlib.sha256(png).hexdigest()] = drawn[base64.b64encode(png).decode()] = meta
    with tab(browser, f"figures_{page.replace('/', '_')}") as t:
        t.page.goto(f"{served_book}/{page}", wait_until="load")
        wait_until_rendered(t.page)
        images = t.page.evaluate("""() => [...document.querySelectorAll('main img')].map(img => ({
            src: img.getAttribute('src') || '', shown: img.getBoundingClientRect().width,
            natural: img.naturalWidth, alt: (img.getAttribute('alt') || '').slice(0, 60)}))""")
    assert images, f"{page}: the notebook has figures but the page shows no image"
    problems = []
    for image in images:
        src = image["src"]
        key = src.split(",", 1)[1] if src.startswith("data:") else Path(src).stem
        meta = drawn.get(key)
        if meta is None or "smallest_text_px" not in meta:
            problems.append(f"{src[:60]} ({image['alt']}): not a figure of the notebook saved with the course style")
            continue
        if image["natural"] and abs(image["natural"] - 2 * meta["width"]) > 1:
            problems.append(f"{image['alt']}: {image['natural']} px PNG for {meta['width']} px: not twice the resolution")
        text = meta["smallest_text_px"] * image["shown"] / meta["width"]
        if text < MIN_TEXT_PX:
            problems.append(f"{image['alt']}: smallest text {text:.1f} px as displayed ({image['shown']:.0f} px wide, "
                            f"drawn for {meta['width']} px)")
    assert not problems, f"{page}: {len(problems)} of {len(images)} figures:\n" + "\n".join(problems)
