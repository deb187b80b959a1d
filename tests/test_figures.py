"""Every figure a notebook saves is readable in the book's column (issue 30, item 1).

The course style (utils.plotting) saves each figure at twice its resolution with the size to show it at and its
smallest text in logical pixels. Here, on the saved notebooks: each figure has that metadata, its PNG really is
twice the size it is shown at, and its smallest text is at least MIN_TEXT_PX once the figure is scaled into
the book's column (BOOK_COLUMN_PX, measured at 1366 px). tests/test_book.py measures the displayed scale in
the browser, which checks the column width assumed here.
"""

from __future__ import annotations

import base64
import struct

import nbformat
import pytest
from course_paths import CHAPTERS, SOLUTIONS

from utils.plotting import BOOK_COLUMN_PX, MIN_TEXT_PX, figure_png, smallest_text_px


def notebook_figures(nb: nbformat.NotebookNode) -> list[tuple[str, bytes, dict]]:
    """(where, PNG bytes, metadata) of every PNG the notebook shows: cell outputs and saved widget outputs."""
    found = []

    def look(where: str, outputs: list) -> None:
        for output in outputs:
            if "image/png" in output.get("data", {}):
                png = base64.b64decode(output["data"]["image/png"])
                found.append((where, png, output.get("metadata", {}).get("image/png", {})))

    for cell in nb.cells:
        look(f"cell {cell.get('id')}", cell.get("outputs", []))
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    for model_id, model in state.items():
        look(f"widget {model_id[:8]}", model.get("state", {}).get("outputs", []) or [])
    return found


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", png[16:24])


@pytest.mark.parametrize("path", SOLUTIONS + CHAPTERS, ids=lambda p: f"{p.parent.name}/{p.name[:2]}")
def test_every_figure_is_saved_at_twice_its_size_with_readable_text(path):
    nb = nbformat.read(path, as_version=4)
    figures = notebook_figures(nb)
    problems = []
    for where, png, meta in figures:
        if not {"width", "height", "smallest_text_px"} <= set(meta):
            problems.append(f"{where}: saved without the course style's metadata ({meta}): call use_course_style()")
            continue
        width, height = png_size(png)
        if abs(width - 2 * meta["width"]) > 1 or abs(height - 2 * meta["height"]) > 1:
            problems.append(f"{where}: {width}x{height} PNG shown at {meta['width']}x{meta['height']}: not 2x")
        shown = meta["smallest_text_px"] * min(1.0, BOOK_COLUMN_PX / meta["width"])
        if shown < MIN_TEXT_PX:
            problems.append(f"{where}: smallest text {meta['smallest_text_px']} px, {shown:.1f} px in the book's "
                            f"{BOOK_COLUMN_PX} px column (figure {meta['width']} px wide); need {MIN_TEXT_PX}")
    assert not problems, f"{path.parent.name}/{path.name}:\n" + "\n".join(problems)


def test_the_metadata_measures_the_smallest_text_and_the_size_as_drawn():
    """figure_png itself: a figure with one 6-point label reports 6 * 80 / 72 px, and its PNG is twice the size
    its metadata says to show it at (so a too-small label cannot pass unseen)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from utils.plotting import use_course_style

    use_course_style()
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.plot([0, 1], [0, 1])
    ax.text(0.5, 0.5, "small", fontsize=6)
    png64, meta = figure_png(fig)
    assert meta["smallest_text_px"] == round(6 * fig.dpi / 72, 2) == round(smallest_text_px(fig), 2)
    width, height = png_size(base64.b64decode(png64))
    assert (abs(width - 2 * meta["width"]) <= 1) and (abs(height - 2 * meta["height"]) <= 1)
    plt.close(fig)
