"""Helpers for the browser tests: Debian's Chromium driven by Playwright, a local static server, and
the reader's checks (issue 18) that every book page must pass.

`audit_page(page)` returns the problems a reader would meet on the page open in ``page``:

1. maths left as raw ``$`` in the rendered text;
2. Mermaid node text smaller than ``MIN_DIAGRAM_PX`` on screen;
3. widget controls in the static book that still accept input (they must look and be inactive);
4. console errors (collected by `browser_page`, including failed loads such as a missing favicon);
5. code blocks, outputs or tables wider than their column at a ``VIEWPORT`` 1366 px wide;
6. images without alt text (issue 30.5: the saved figure of every static widget had none).
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest
from machine_load import scaled

CHROMIUM = os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
VIEWPORT = {"width": 1366, "height": 900}  # the laptop width of issue 18
MIN_DIAGRAM_PX = 11.0


def require_chromium() -> None:
    """Skip with a reason on a machine without Chromium; in CI a missing browser is a failure."""
    if Path(CHROMIUM).exists():
        return
    message = f"{CHROMIUM} not found: install Debian's chromium (`apt-get install chromium`)"
    if os.environ.get("CI"):
        pytest.fail(message + " (browser tests never skip in CI)")
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def static_server(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1 in a background thread; yield the base URL."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class Tab:
    """One Chromium page with what it requested and every console error it raised."""

    def __init__(self, page) -> None:
        self.page = page
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.warnings: list[str] = []
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("console", lambda msg: self.warnings.append(msg.text) if msg.type == "warning" else None)
        page.on("console", lambda msg: self.errors.append(f"console: {msg.text}") if msg.type == "error" else None)
        page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        page.on("requestfailed", lambda request: self.errors.append(f"failed to load {request.url}"))
        page.on("response", lambda r: self.errors.append(f"HTTP {r.status} {r.url}") if r.status >= 400 else None)


@contextmanager
def chromium() -> Iterator[object]:
    """A headless Debian Chromium (one per test module: starting it costs about a second)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def tab(browser, name: str) -> Iterator[Tab]:
    """A fresh page at 1366 px; a full-page screenshot goes to test-artifacts/ if the test fails."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(scaled(30) * 1000)  # Playwright's 30 s, longer on a busy machine
    try:
        yield Tab(page)
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        try:
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        except Exception:  # noqa: BLE001 -- a failed screenshot must not hide the test's failure
            pass
        raise
    finally:
        context.close()


@contextmanager
def browser_page(name: str) -> Iterator[tuple[object, list[str]]]:
    """A fresh Chromium page and the list of every URL it requests; screenshot on failure."""
    with chromium() as browser, tab(browser, name) as t:
        yield t.page, t.requests


# What JupyterLab must never print to its console: a Lab extension built against another Lab version
# (webpack's shared-module check), which is how a mismatched pin shows up first.
LAB_WARNINGS = ("Unsatisfied version",)


@contextmanager
def lab_page(name: str) -> Iterator[Tab]:
    """A fresh Chromium page for JupyterLab; on leaving, fail on any uncaught page error and on any
    console warning that says a Lab extension does not fit this JupyterLab (LAB_WARNINGS)."""
    with chromium() as browser, tab(browser, name) as t:
        yield t
        uncaught = [e for e in t.errors if e.startswith("uncaught:")]
        assert uncaught == [], f"JupyterLab raised in the page: {uncaught}"
        # the news prompt ("Would you like to get notified about official Jupyter news?", JupyterLab 4.5) greets no learner
        assert "Jupyter news" not in t.page.inner_text("body"), "JupyterLab asked about Jupyter news"
        mismatched = [w for w in t.warnings + t.errors if any(k in w for k in LAB_WARNINGS)]  # warned or logged
        assert mismatched == [], f"JupyterLab's console warned {len(mismatched)} times: {mismatched[:3]}"


def external_requests(urls: list[str]) -> list[str]:
    """URLs that leave this machine (anything not on 127.0.0.1 / localhost, data:, blob: or file:)."""
    outside = []
    for url in urls:
        parsed = urlparse(url)
        if parsed.scheme in ("data", "blob", "about", "file"):
            continue
        if parsed.hostname not in ("127.0.0.1", "localhost"):
            outside.append(url)
    return outside


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# Resolves once the page is what a reader sees: MathJax has typeset, every Mermaid diagram is an
# SVG, and every saved widget view has been drawn by the widget manager.
READY_JS = """
async () => {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  if (document.readyState !== 'complete') await new Promise((r) => addEventListener('load', r));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  for (let i = 0; i < 300; i++) {
    const diagrams = [...document.querySelectorAll('pre.mermaid')];
    const drawn = diagrams.every((d) => d.querySelector('svg'));
    const views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
    const widgets = document.querySelectorAll('.widget-subarea > *').length;
    if (drawn && widgets >= views) break;
    await sleep(100);
  }
  if (window.MathJax && MathJax.typesetPromise) await MathJax.typesetPromise();
  await sleep(200);
  return true;
}
"""

AUDIT_JS = """
(minPx) => {
  const main = document.querySelector('main') || document.body;
  const where = (el) => {
    const section = el.closest('section');
    const heading = section && section.querySelector('h1, h2, h3');
    return heading ? heading.textContent.replace(/[#¶]/g, '').trim().slice(0, 60) : '(top)';
  };
  // 1. raw maths: a '$' in rendered prose (code, outputs and typeset maths excluded)
  const rawMath = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  const skip = 'pre, code, script, style, textarea, mjx-container, .cell_output, .output, .jupyter-widgets, .widget-subarea';
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.textContent.includes('$') && !node.parentElement.closest(skip)) {
      rawMath.push(`${where(node.parentElement)}: ${node.textContent.trim().slice(0, 80)}`);
    }
  }
  // 2. diagram text: the on-screen size of each Mermaid label (font size times the SVG's scale)
  const smallText = [];
  for (const svg of main.querySelectorAll('pre.mermaid svg')) {
    let smallest = Infinity;
    for (const label of svg.querySelectorAll('.nodeLabel, .edgeLabel, text')) {
      if (!label.textContent.trim()) continue;
      const holder = label.closest('foreignObject, text') || label;
      const ctm = holder.getScreenCTM ? holder.getScreenCTM() : null;
      const scale = ctm ? Math.hypot(ctm.a, ctm.b) : 1;
      smallest = Math.min(smallest, parseFloat(getComputedStyle(label).fontSize) * scale);
    }
    if (smallest < minPx) smallText.push(`${where(svg)}: ${smallest.toFixed(1)} px`);
  }
  // 3. static widgets: every control is disabled (and says so to assistive technology)
  const activeControls = [];
  for (const el of main.querySelectorAll('.jupyter-widgets input, .jupyter-widgets select, .jupyter-widgets textarea, .jupyter-widgets button')) {
    if (!el.disabled) activeControls.push(`${where(el)}: <${el.tagName.toLowerCase()}> ${(el.value || el.textContent || '').slice(0, 30)}`);
  }
  for (const el of main.querySelectorAll('.jupyter-widgets .noUi-target')) {
    if (!el.hasAttribute('disabled')) activeControls.push(`${where(el)}: a slider`);
  }
  // 5. width: code, outputs and tables fit their column (no horizontal scrolling)
  // (code and text outputs scroll inside their own box rather than wrap: allowed, and listed as
  // `scrolling`; a wrapped code line would restart at column 0, so wrapping is a failure)
  const overflow = [];
  const scrolling = [];
  const wrapped = [];
  for (const el of main.querySelectorAll('pre:not(.mermaid), table, .cell_output img, .output img')) {
    const style = getComputedStyle(el);
    const ownScroll = el.tagName === 'PRE' && ['auto', 'scroll'].includes(style.overflowX);
    if (el.tagName === 'PRE' && !el.closest('.jupyter-widgets') && style.whiteSpace !== 'pre') wrapped.push(`${where(el)}: white-space ${style.whiteSpace}`);
    if (ownScroll && el.scrollWidth > el.clientWidth + 1 && el.getBoundingClientRect().right <= main.getBoundingClientRect().right + 1) {
      scrolling.push(`${where(el)}: ${el.scrollWidth} > ${el.clientWidth} px`);
      continue;
    }
    if (el.scrollWidth > el.clientWidth + 1 || el.getBoundingClientRect().right > main.getBoundingClientRect().right + 1) {
      overflow.push(`${where(el)}: <${el.tagName.toLowerCase()}> ${el.scrollWidth} > ${el.clientWidth} px: ${el.textContent.trim().slice(0, 50)}`);
    }
  }
  // wide display maths (shrunk by the book's script to 80 %, then scrolling): reported, not a failure
  const wideMaths = [];
  for (const el of main.querySelectorAll('mjx-container[display="true"]')) {
    if (el.scrollWidth > el.clientWidth + 1) wideMaths.push(`${where(el)}: ${el.scrollWidth} > ${el.clientWidth} px`);
  }
  // diagrams left as source (the diagram library did not run)
  const undrawn = [...main.querySelectorAll('pre.mermaid')].filter((d) => !d.querySelector('svg')).map(where);
  // 6. every image has alt text (figures from the notebooks' metadata; static widgets' from the book's script)
  const noAlt = [...main.querySelectorAll('img')].filter((img) => !(img.getAttribute('alt') || '').trim())
    .map((img) => `${where(img)}: ${(img.getAttribute('src') || '').slice(0, 40)}`);
  // the colour of each kind of box
  const boxes = [...main.querySelectorAll('div.admonition')].map((box) => {
    const title = (box.querySelector('.admonition-title') || box).textContent.trim();
    return [title.split(':')[0], getComputedStyle(box).borderLeftColor];
  });
  return {rawMath, smallText, activeControls, overflow, scrolling, wrapped, wideMaths, undrawn, noAlt, boxes,
          widgetNotes: main.querySelectorAll('p.course-static-widget-note').length,
          diagrams: main.querySelectorAll('pre.mermaid svg').length,
          widgets: main.querySelectorAll('.widget-subarea').length,
          maths: main.querySelectorAll('mjx-container').length};
}
"""


def wait_until_rendered(page) -> None:
    page.evaluate(READY_JS)


def audit(t: Tab) -> dict:
    """Issue 18's reader checks for the page open in ``t``: each key lists what failed (empty = fine)."""
    found = t.page.evaluate(AUDIT_JS, MIN_DIAGRAM_PX)
    found["consoleErrors"] = list(t.errors)
    # issue 30 review: the widget manager's "strict mode: use allowUnionTypes" warning on every chapter page
    found["consoleWarnings"] = list(t.warnings)
    return found


PROBLEM_KEYS = ("rawMath", "smallText", "activeControls", "consoleErrors", "consoleWarnings", "overflow", "wrapped",
                "undrawn", "noAlt")


# Issue 30.2 and 30.3: what a reader at 1366 px can only reach by scrolling sideways, and code that
# wraps. `cut` lists every display equation, Mermaid diagram, image and table wider than its column (or
# than its own box, which then scrolls), and any sideways overflow of the main column itself, each named by
# its content (an equation by its TeX source); `wrapped` lists every code block (input cells) and text
# output whose lines wrap: its white-space is not `pre`, or it is taller than its lines at one line each.
LAYOUT_JS = """
() => {
  const main = document.querySelector('main') || document.body;
  const column = document.querySelector('article.bd-article') || main;
  const right = column.getBoundingClientRect().right;
  const where = (el) => {
    const section = el.closest('section');
    const heading = section && section.querySelector('h1, h2, h3');
    return heading ? heading.textContent.replace(/[#¶]/g, '').trim().slice(0, 50) : '(top)';
  };
  const short = (text) => (text || '').replace(/\\s+/g, ' ').trim().slice(0, 100);
  const tex = (el) => {
    try {
      const items = MathJax.startup.document.getMathItemsWithin(el);
      if (items.length) return items[0].math;
    } catch (error) { /* not typeset by MathJax 3: fall back to the rendered text */ }
    return el.textContent;
  };
  const room = (el) => {  // the width an element's content may take: its box without padding
    const style = getComputedStyle(el);
    return el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  };
  const cut = [];
  for (const eq of main.querySelectorAll('mjx-container[display="true"]')) {
    const box = eq.getBoundingClientRect();
    if (eq.scrollWidth > eq.clientWidth + 1 || box.right > right + 1) {
      cut.push(`equation in "${where(eq)}", ${eq.scrollWidth} px in ${eq.clientWidth} px: ${short(tex(eq))}`);
    }
  }
  for (const pre of main.querySelectorAll('pre.mermaid')) {
    const svg = pre.querySelector('svg');
    if (!svg) continue;
    const width = svg.getBoundingClientRect().width;
    if (width > room(pre) + 1 || pre.scrollWidth > pre.clientWidth + 1 || svg.getBoundingClientRect().right > right + 1) {
      const labels = [...svg.querySelectorAll('.nodeLabel, text')].map((l) => l.textContent).join(' | ');
      cut.push(`diagram in "${where(pre)}", ${width.toFixed(0)} px in ${room(pre).toFixed(0)} px: ${short(labels)}`);
    }
  }
  for (const img of main.querySelectorAll('img')) {
    const box = img.getBoundingClientRect();
    let holder = img.parentElement;  // its box: the nearest ancestor that is not inline (a figure's link is)
    while (holder !== main && getComputedStyle(holder).display.startsWith('inline')) holder = holder.parentElement;
    if (box.width > holder.clientWidth + 1 || holder.scrollWidth > holder.clientWidth + 1 || box.right > right + 1) {
      cut.push(`image in "${where(img)}", ${box.width.toFixed(0)} px in ${holder.clientWidth} px: ${short(img.alt || img.src)}`);
    }
  }
  // tables (markdown tables, which the theme puts in a box that scrolls, and HTML outputs): a column
  // beyond the text column's edge is reachable only by scrolling the table sideways
  for (const table of main.querySelectorAll('table')) {
    const box = table.getBoundingClientRect();
    const holder = table.parentElement;
    if (box.right > right + 1 || holder.scrollWidth > holder.clientWidth + 1) {
      const head = [...table.querySelectorAll('th')].map((th) => th.textContent.trim()).join(' | ');
      cut.push(`table in "${where(table)}", ${box.width.toFixed(0)} px in ${Math.min(holder.clientWidth, right - box.left).toFixed(0)} px: ${short(head || table.textContent)}`);
    }
  }
  // the column itself: anything that sticks out of it (outside a box that scrolls by itself)
  for (const box of new Set([main, column])) {
    if (box.scrollWidth <= box.clientWidth + 1) continue;
    const limit = box.getBoundingClientRect().right + 1;
    const clipped = (el) => {
      for (let up = el.parentElement; up && up !== box; up = up.parentElement) {
        if (getComputedStyle(up).overflowX !== 'visible') return true;
      }
      return false;
    };
    const out = [...box.querySelectorAll('*')].filter((el) => el.getBoundingClientRect().right > limit && !clipped(el));
    const outermost = out.filter((el) => !out.some((other) => other !== el && other.contains(el)));
    cut.push(`the ${box.tagName.toLowerCase()} column scrolls sideways, ${box.scrollWidth} px in ${box.clientWidth} px: `
             + outermost.slice(0, 3).map((el) => `<${el.tagName.toLowerCase()}> ${short(el.textContent).slice(0, 60)}`).join('; '));
  }
  // code lines: input cells and text outputs keep one line per line (static widgets' prose excluded)
  const wrapped = [];
  for (const pre of main.querySelectorAll('div.highlight pre, div.cell_output pre, div.output pre')) {
    if (pre.closest('.jupyter-widgets, .widget-subarea')) continue;
    const style = getComputedStyle(pre);
    const lines = pre.textContent.replace(/\\n$/, '').split('\\n').length;
    const lineHeight = parseFloat(style.lineHeight) || 1.2 * parseFloat(style.fontSize);
    const height = pre.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
    const longest = pre.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '');
    if (style.whiteSpace !== 'pre') {
      wrapped.push(`"${where(pre)}": white-space ${style.whiteSpace}: ${short(longest)}`);
    } else if (height > (lines + 0.5) * lineHeight) {
      wrapped.push(`"${where(pre)}": ${lines} lines drawn ${(height / lineHeight).toFixed(1)} lines high: ${short(longest)}`);
    }
  }
  // prose in a text output that runs past its box: a line of 12 words (of 3+ letters) or more that is not a
  // table row (no '|' pair, no run of 2+ spaces between columns): a reader scrolls sideways to read a
  // sentence (ch13's TimeoutError explanation was 1810 px wide)
  const prose = [];
  const ruler = document.createElement('canvas').getContext('2d');
  for (const pre of main.querySelectorAll('div.cell_output pre, div.output pre')) {
    if (pre.closest('.jupyter-widgets, .widget-subarea') || pre.scrollWidth <= pre.clientWidth + 1) continue;
    const style = getComputedStyle(pre);
    ruler.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const room = pre.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    for (const line of pre.textContent.split('\\n')) {
      const words = (line.match(/[A-Za-z]{3,}/g) || []).length;
      const table = (line.match(/\\|/g) || []).length >= 2 || /\\S {2,}\\S/.test(line);
      if (words >= 12 && !table && ruler.measureText(line).width > room + 1) {
        prose.push(`"${where(pre)}": ${ruler.measureText(line).width.toFixed(0)} px in ${room.toFixed(0)} px: ${short(line)}`);
      }
    }
  }
  return {cut, wrapped, prose, checked: {
    equations: main.querySelectorAll('mjx-container[display="true"]').length,
    diagrams: main.querySelectorAll('pre.mermaid svg').length,
    images: main.querySelectorAll('img').length,
    tables: main.querySelectorAll('table').length,
    code: main.querySelectorAll('div.highlight pre, div.cell_output pre, div.output pre').length}};
}
"""


def layout(t: Tab) -> dict:
    """Issue 30.2/30.3 for the page open in ``t``: ``cut`` (content reachable only by sideways scrolling)
    and ``wrapped`` (code or text-output lines that wrap), each entry naming the element."""
    return t.page.evaluate(LAYOUT_JS)


# Issue 30.2, 30.3 and 30.5 in JupyterLab, on the notebook open in the page (as JupyterLab draws it, at
# the 1366 px window with the file browser open):
# `cut`: every display equation (KaTeX from jupyterlab-myst, or MathJax), Mermaid diagram and image whose
# drawn extent (its box, or its content where wider: scrollWidth) passes the visible box of any ancestor
# that clips or scrolls (a cell's input area, the myst block, the equation's scroll box, an output, the
# notebook itself), so that part of it is hidden or reachable only by scrolling sideways; and anything
# that makes the notebook itself scroll sideways. `smallDiagramText`: a Mermaid diagram whose smallest
# label, as displayed, is under MIN_DIAGRAM_PX (jupyterlab-myst shrinks a diagram wider than the cell).
# `wrapped`: a code cell's editor that wraps a line (CodeMirror's lineWrapping, or a line drawn taller than
# one line) and a cell's text output whose white-space is not `pre` or that is drawn taller than its
# lines at one line each. Text a widget prints (its Output area) is not counted, as in the book.
# `scrolling`: editors and text outputs with a line wider than their box, which scrolls inside the box
# (allowed: reported). `noAlt`: every image in the notebook without alt text; `undescribed`: a figure
# outside a widget whose alt text is the course extension's fallback (its cell has no description).
LAB_LAYOUT_JS = """
([undescribedAlt, minDiagramPx]) => {
  const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find((p) => !p.classList.contains('lm-mod-hidden'));
  const notebook = panel && panel.querySelector('.jp-Notebook');
  if (!notebook) return {error: 'no notebook open'};
  const cells = [...notebook.querySelectorAll('.jp-Cell')];
  const short = (text) => (text || '').replace(/\\s+/g, ' ').trim().slice(0, 90);
  const where = (el) => {
    const cell = el.closest('.jp-Cell');
    return cell ? `cell ${cells.indexOf(cell) + 1}` : 'outside the cells';
  };
  // the first ancestor (or the element itself, for its own content) whose visible box does not hold the
  // extent [left, right] of the element: null when all of it is in view without scrolling sideways
  const clipper = (el, left, right) => {
    for (let up = el; up && up !== document.documentElement; up = up.parentElement) {
      if (getComputedStyle(up).overflowX === 'visible') continue;
      if (up === el) {
        if (el.scrollWidth > el.clientWidth + 1) return el;
        continue;
      }
      const box = up.getBoundingClientRect();
      const inner = box.left + up.clientLeft;
      if (left < inner - 1 || right > inner + up.clientWidth + 1) return up;
    }
    return null;
  };
  const name = (el) => `<${el.tagName.toLowerCase()} class="${String(el.className.baseVal ?? el.className).slice(0, 40)}">`;
  const cut = [];
  const check = (what, el, label) => {
    const box = el.getBoundingClientRect();
    const right = box.left + Math.max(box.width, el.scrollWidth || 0);
    const by = clipper(el, box.left, right);
    if (by) cut.push(`${what} in ${where(el)}, ${(right - box.left).toFixed(0)} px, cut by ${name(by)} `
                     + `${by === el ? el.clientWidth : by.clientWidth} px wide: ${short(label)}`);
  };
  const equations = [...notebook.querySelectorAll('.katex-display, mjx-container[display="true"]')];
  for (const eq of equations) {
    const tex = eq.querySelector('annotation[encoding="application/x-tex"]');
    check('equation', eq, tex ? tex.textContent : eq.textContent);
  }
  const diagrams = [...notebook.querySelectorAll('svg[aria-roledescription]')];
  // jupyterlab-myst draws a diagram at most as wide as its cell (width 100%): one too wide for the column
  // is shrunk rather than cut, so its smallest label, as displayed, is measured too (the book's limit)
  const smallDiagramText = [];
  for (const svg of diagrams) {
    const labels = [...svg.querySelectorAll('.nodeLabel, .edgeLabel, text')].filter((l) => l.textContent.trim());
    check('diagram', svg, labels.map((l) => l.textContent).join(' | '));
    let smallest = Infinity;
    for (const label of labels) {
      const holder = label.closest('foreignObject, text') || label;
      const ctm = holder.getScreenCTM ? holder.getScreenCTM() : null;
      smallest = Math.min(smallest, parseFloat(getComputedStyle(label).fontSize) * (ctm ? Math.hypot(ctm.a, ctm.b) : 1));
    }
    if (smallest < minDiagramPx) smallDiagramText.push(`diagram in ${where(svg)}: labels ${smallest.toFixed(1)} px: ${short(labels.map((l) => l.textContent).join(' | '))}`);
  }
  const images = [...notebook.querySelectorAll('img')];
  for (const img of images) check('image', img, img.getAttribute('alt') || img.src);
  const scroller = notebook.closest('.jp-WindowedPanel-outer') || notebook;
  if (scroller.scrollWidth > scroller.clientWidth + 1) {
    const limit = scroller.getBoundingClientRect().right + 1;
    const inOwnBox = (el) => {  // inside a box below the notebook that clips or scrolls by itself
      for (let up = el.parentElement; up && up !== scroller; up = up.parentElement) {
        if (getComputedStyle(up).overflowX !== 'visible') return true;
      }
      return false;
    };
    const out = [...scroller.querySelectorAll('*')].filter((el) => el.getBoundingClientRect().right > limit && !inOwnBox(el));
    cut.push(`the notebook scrolls sideways, ${scroller.scrollWidth} px in ${scroller.clientWidth} px: `
             + out.slice(0, 3).map((el) => `${where(el)} ${name(el)} ${short(el.textContent).slice(0, 50)}`).join('; '));
  }
  const wrapped = [];
  const scrolling = [];
  const editors = [...notebook.querySelectorAll('.jp-CodeCell .jp-Cell-inputArea .cm-content')];
  for (const editor of editors) {
    const style = getComputedStyle(editor);
    const lines = [...editor.querySelectorAll('.cm-line')];
    const lineHeight = parseFloat(getComputedStyle(lines[0] || editor).lineHeight) || 1.2 * parseFloat(style.fontSize);
    if (editor.classList.contains('cm-lineWrapping') || style.whiteSpace !== 'pre') {
      wrapped.push(`code in ${where(editor)}: white-space ${style.whiteSpace}: ${short(lines[0] && lines[0].textContent)}`);
      continue;
    }
    const tall = lines.find((line) => line.getBoundingClientRect().height > 1.5 * lineHeight);
    if (tall) wrapped.push(`code in ${where(editor)}: a line drawn ${(tall.getBoundingClientRect().height / lineHeight).toFixed(1)} lines high: ${short(tall.textContent)}`);
    const box = editor.closest('.cm-scroller') || editor;
    if (box.scrollWidth > box.clientWidth + 1) scrolling.push(`code in ${where(editor)}: ${box.scrollWidth} > ${box.clientWidth} px`);
  }
  const outputs = [...notebook.querySelectorAll('.jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output > pre')];
  for (const pre of outputs) {
    const style = getComputedStyle(pre);
    const text = pre.textContent.replace(/\\n$/, '');
    const lines = text.split('\\n');
    const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
    const lineHeight = parseFloat(style.lineHeight) || 1.2 * parseFloat(style.fontSize);
    const height = pre.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
    if (style.whiteSpace !== 'pre') {
      wrapped.push(`output of ${where(pre)}: white-space ${style.whiteSpace}: ${short(longest)}`);
    } else if (height > (lines.length + 0.5) * lineHeight) {
      wrapped.push(`output of ${where(pre)}: ${lines.length} lines drawn ${(height / lineHeight).toFixed(1)} lines high: ${short(longest)}`);
    } else if (pre.scrollWidth > pre.clientWidth + 1) {
      scrolling.push(`output of ${where(pre)}: ${pre.scrollWidth} > ${pre.clientWidth} px: ${short(longest)}`);
    }
  }
  const noAlt = images.filter((img) => !(img.getAttribute('alt') || '').trim()).map((img) => `image in ${where(img)}`);
  const undescribed = images.filter((img) => (img.getAttribute('alt') || '') === undescribedAlt
    && !img.closest('.jupyter-widgets, .widget-output')).map((img) => `image in ${where(img)}`);
  return {cut, wrapped, scrolling, noAlt, undescribed, smallDiagramText, checked: {
    equations: equations.length, diagrams: diagrams.length, images: images.length,
    editors: editors.length, outputs: outputs.length}};
}
"""
# The alt text the course extension gives a figure whose cell has no description (static/remoteEntry.js).
LAB_UNDESCRIBED = "A figure drawn by this cell (the cell's metadata has no description of it)."


def lab_layout(page) -> dict:
    """Issue 30.2/30.3/30.5 on the notebook open in JupyterLab: ``cut``, ``smallDiagramText``, ``wrapped``,
    ``noAlt`` and ``undescribed`` list what fails (each entry names the cell); ``scrolling`` and ``checked``
    inform."""
    return page.evaluate(LAB_LAYOUT_JS, [LAB_UNDESCRIBED, MIN_DIAGRAM_PX])
