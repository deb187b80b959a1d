"""Helpers for the browser tests: Debian's Chromium driven by Playwright, a local static server."""

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


@contextmanager
def browser_page(name: str) -> Iterator[tuple[object, list[str]]]:
    """A fresh Chromium page and the list of every URL it requests; screenshot on failure."""
    from playwright.sync_api import sync_playwright

    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("request", lambda request: requests.append(request.url))
        try:
            yield page, requests
        except BaseException:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
            raise
        finally:
            browser.close()


def external_requests(urls: list[str]) -> list[str]:
    """URLs that leave this machine (anything not on 127.0.0.1 / localhost, data: or blob:)."""
    outside = []
    for url in urls:
        parsed = urlparse(url)
        if parsed.scheme in ("data", "blob", "about"):
            continue
        if parsed.hostname not in ("127.0.0.1", "localhost"):
            outside.append(url)
    return outside


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
