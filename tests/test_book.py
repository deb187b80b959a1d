"""The book builds with warnings as errors, and its pages render offline in a real browser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser import browser_page, external_requests, require_chromium, static_server
from course_paths import ROOT, SOLUTIONS

pytestmark = pytest.mark.book


@pytest.fixture(scope="module")
def built_book(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("book")
    jb = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run(
        [str(jb), "build", str(ROOT), "--path-output", str(out), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"},
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, "book build failed:\n" + log[-4000:]
    assert "WARNING" not in log, "the book build warned:\n" + log[-4000:]
    return out / "_build" / "html"


def test_every_chapter_and_solution_has_a_page(built_book):
    for path in SOLUTIONS:
        for folder in ("chapters", "solutions"):
            assert (built_book / folder / path.with_suffix(".html").name).exists(), f"{folder}/{path.stem}"
    for page in ("intro.html", "notation.html", "faq.html"):
        assert (built_book / page).exists()


def test_book_references_no_other_host_in_scripts_and_styles(built_book):
    html = (built_book / "chapters" / "03_scaled_dot_product_attention.html").read_text()
    for needle in ("cdn.jsdelivr.net", "cdnjs.cloudflare.com", "unpkg.com/@jupyter-widgets", "fonts.googleapis"):
        assert needle not in html, needle


@pytest.mark.browser
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_every_chapter_page_renders_math_and_its_static_widget_offline(built_book, path):
    require_chromium()
    with static_server(built_book) as base, browser_page(f"book_{path.stem}") as (page, requests):
        page.goto(f"{base}/chapters/{path.stem}.html", wait_until="load")
        page.wait_for_selector("mjx-container", state="attached", timeout=30_000)
        # The saved widget state renders: at least one control and one text readout.
        page.wait_for_selector(".widget-html-content, .widget-label", state="attached", timeout=30_000)
        assert page.locator(".jupyter-widgets").count() >= 2
        assert page.locator("img").count() >= 1, "the static figure at the widget's defaults"
        if "```mermaid" in path.read_text():  # the diagram is drawn, offline
            page.wait_for_selector(".mermaid svg", state="attached", timeout=30_000)
        page.wait_for_timeout(300)
        assert external_requests(requests) == [], f"requests left 127.0.0.1: {external_requests(requests)}"


@pytest.mark.browser
def test_chapter_03_renders_math_mermaid_and_widget_offline(built_book):
    require_chromium()
    with static_server(built_book) as base, browser_page("book_chapter_03") as (page, requests):
        page.goto(f"{base}/chapters/03_scaled_dot_product_attention.html", wait_until="load")
        # MathJax typesets $...$ and $$...$$ into <mjx-container> elements.
        page.wait_for_selector("mjx-container", state="attached", timeout=30_000)
        assert page.locator("mjx-container[display='true']").count() >= 5
        # Mermaid replaces the diagram's source with an SVG.
        page.wait_for_selector(".mermaid svg", state="attached", timeout=30_000)
        assert page.locator(".mermaid svg").first.inner_html().count("<g") > 5
        # The saved widget state is rendered by the ipywidgets HTML manager: slider and readout.
        page.wait_for_selector(".widget-slider", state="attached", timeout=30_000)
        assert "d_k = 64" in page.locator(".widget-html-content").first.inner_text()
        page.wait_for_timeout(500)
        assert external_requests(requests) == [], f"requests left 127.0.0.1: {external_requests(requests)}"
