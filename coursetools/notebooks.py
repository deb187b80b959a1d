"""Reading, writing and executing the course's notebooks, the same way every time."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO_ROOT / "solutions"
CHAPTERS = REPO_ROOT / "chapters"
WIDGET_STATE_KEY = "widgets"


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def dumps(nb: nbformat.NotebookNode) -> str:
    """Stable text: sorted keys, one-space indent, trailing newline (what nbformat writes)."""
    return nbformat.writes(nb) + "\n"


def write(nb: nbformat.NotebookNode, path: Path) -> bool:
    """Write ``nb`` unless the file already holds exactly this text; return whether it changed."""
    text = dumps(nb)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def source_fingerprint(nb: nbformat.NotebookNode) -> str:
    """Everything an author controls (cell types, sources, metadata), not outputs or widget state."""
    cells = [
        {"type": c.cell_type, "source": c.source, "metadata": c.get("metadata", {})}
        for c in nb.cells
    ]
    meta = {k: v for k, v in nb.metadata.items() if k not in (WIDGET_STATE_KEY, "language_info")}
    return json.dumps({"cells": cells, "metadata": meta}, sort_keys=True)


def execute(nb: nbformat.NotebookNode, workdir: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """Run every cell on a fresh kernel in ``workdir``, storing outputs and widget state.

    Widget state is stored so that the book shows each widget without a kernel.
    """
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
        store_widget_state=True,
        record_timing=False,
        allow_errors=False,
        # Without it every run starts with ipykernel's "running over TCP without encryption" warning (the
        # kernel listens on 127.0.0.1 only, for this one run); the kernel's errors are still shown.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    client.execute()
    return nb
