"""A learner's session: JupyterLab opens chapter 03, runs every cell, renders MyST, and the widget responds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
from browser import browser_page, free_port, require_chromium
from conftest import ROOT

pytestmark = pytest.mark.browser

NOTEBOOK = "03_scaled_dot_product_attention.ipynb"


@pytest.fixture()
def jupyterlab(tmp_path):
    """JupyterLab on 127.0.0.1 over a scratch copy of chapters/ (so nothing in the repo is saved over)."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "chapters", work)
    settings = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # Render every cell, not only those in view, so the whole notebook is in the page.
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port = free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
         "--allow-root", f"--ServerApp.root_dir={work}", "--LabApp.news_url=",
         "--ServerApp.open_browser=False"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{base}/api/status", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start within 90 s")
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_chapter_03_runs_in_jupyterlab_and_widget_responds(jupyterlab):
    require_chromium()
    with browser_page("jupyterlab_chapter_03") as (page, _requests):
        page.set_default_timeout(120_000)
        page.goto(f"{jupyterlab}/lab/tree/{NOTEBOOK}")
        page.wait_for_selector(".jp-Notebook .jp-Cell")
        # Wait for the kernel to be ready: the toolbar's kernel indicator reads "Idle".
        page.wait_for_selector(".jp-MarkdownCell .myst")  # jupyterlab-myst's renderer
        page.wait_for_function(
            "() => document.body.innerText.includes('Idle')", timeout=120_000
        )
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        # The last check cell prints this once everything above it has run without error.
        page.wait_for_function(
            "() => document.body.innerText.includes('Exercise 3.3: not attempted yet')", timeout=180_000
        )
        assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").filter(
            has_text="Traceback").count() == 0
        # jupyterlab-myst renders the MyST admonitions (a plain Markdown renderer would show the fences).
        assert page.locator(".myst-admonition").count() >= 2
        assert "```{admonition}" not in page.locator(".jp-Notebook").inner_text()
        # The widget: move the d_k slider one step right; the readout must change from 64 to 128.
        readout = page.locator(".widget-html-content", has_text="d_k = ").first
        readout.wait_for()
        assert "d_k = 64" in readout.inner_text()
        handle = page.locator(".widget-slider .noUi-handle").first
        handle.focus()
        handle.press("ArrowRight")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.widget-html-content')]"
            ".some(e => e.innerText.includes('d_k = 128'))",
            timeout=60_000,
        )
