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
        if not {"width", "height", "smallest_text_px", "collisions"} <= set(meta):
            problems.append(f"{where}: saved without the course style's metadata ({meta}): call use_course_style()")
            continue
        width, height = png_size(png)
        if abs(width - 2 * meta["width"]) > 1 or abs(height - 2 * meta["height"]) > 1:
            problems.append(f"{where}: {width}x{height} PNG shown at {meta['width']}x{meta['height']}: not 2x")
        shown = meta["smallest_text_px"] * min(1.0, BOOK_COLUMN_PX / meta["width"])
        if shown < MIN_TEXT_PX:
            problems.append(f"{where}: smallest text {meta['smallest_text_px']} px, {shown:.1f} px in the book's "
                            f"{BOOK_COLUMN_PX} px column (figure {meta['width']} px wide); need {MIN_TEXT_PX}")
        if meta["collisions"]:  # issue 30.1: a legend over the lines, a title over an axis's offset text
            problems.append(f"{where}: parts drawn over each other: {'; '.join(meta['collisions'])}")
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


def _course_figure(**kwargs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from utils.plotting import use_course_style

    use_course_style()
    return plt.subplots(**kwargs)


def test_a_superscript_counts_at_the_size_it_is_drawn():
    """Issue 30 review: a log axis's "10" with its exponent passed at 12.2 px while the exponent, drawn at 0.7
    of the label by mathtext, was 8.6 px. smallest_text_px measures each glyph as matplotlib lays it out."""
    import matplotlib.pyplot as plt

    fig, ax = _course_figure(figsize=(4, 2))
    ax.text(0.5, 0.5, r"$10^{3}$")
    fig.canvas.draw()
    assert smallest_text_px(fig) == pytest.approx(0.7 * 11 * fig.dpi / 72)
    plt.close(fig)


def test_log_axes_are_labelled_with_plain_numbers_at_full_size():
    """Every log axis a notebook shows (here both axes, a base-2 axis and a LogNorm colour bar) is labelled
    without superscripts, so its smallest text is the course's 11 pt: 12.2 px."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import LogNorm

    from utils.plotting import plain_number

    fig, (left, right) = _course_figure(ncols=2, figsize=(8, 3))
    left.loglog([1, 1e6], [1e-9, 1e2])
    left.set_xscale("log", base=2)
    image = right.imshow(np.linspace(1e-3, 1, 16).reshape(4, 4), norm=LogNorm())
    fig.colorbar(image)
    _, meta = figure_png(fig)
    assert meta["smallest_text_px"] == round(11 * fig.dpi / 72, 2), meta
    labels = [t.get_text() for t in left.get_yticklabels()]
    assert "1e\u22128" in labels and "0.01" in labels and not any("$" in t for t in labels), labels
    assert [plain_number(v) for v in (16384, 1e6, 0.5, 2.5e-10, -3)] == ["16,384", "1M", "0.5", "2.5e\u221210", "\u22123"]
    plt.close(fig)


def test_collisions_finds_a_legend_over_a_line_and_texts_over_each_other():
    """Issue 30 review: ch08's latency legend sat on the RNN line, two annotations ("1" and "256") overlapped
    and ch03's panel titles sat on the axis's offset text. collisions() names each, and a clean figure passes."""
    import matplotlib.pyplot as plt
    import numpy as np

    from utils.plotting import collisions

    x = np.linspace(0, 1, 50)
    fig, ax = _course_figure(figsize=(5, 3))
    ax.plot(x, x, label="rising")
    ax.plot(x, 1 - x, label="falling")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncols=2)  # below the axes: nothing covered
    fig.canvas.draw()
    assert collisions(fig) == []
    ax.legend(loc="center")  # on the crossing of the two lines
    ax.text(0.1, 0.9, "one")
    ax.text(0.12, 0.9, "two")
    fig.canvas.draw()
    found = collisions(fig)
    assert "legend over the line 'rising'" in found and "legend over the line 'falling'" in found, found
    assert "text 'one' overlaps text 'two'" in found, found
    plt.close(fig)
    fig, axes = _course_figure(ncols=2, figsize=(4, 2.4))
    for ax in axes:
        ax.plot([0, 1], [0, 3e-8])  # an offset text "1e-8" above each panel
        ax.set_title("a title as long as the panel")
    fig.canvas.draw()
    assert any("overlaps text '1e" in entry or "overlaps text 'a title" in entry for entry in collisions(fig)), collisions(fig)
    plt.close(fig)


def test_collisions_sees_other_panels_twins_and_filled_data():
    """Review of the check itself: a legend under the upper of two stacked panels is hidden by the lower one; a
    twin axes' line and a filled area under a legend were not looked at; a twin's hidden x axis reported its
    own tick labels over the main axis's. Each is now found (or, for the hidden axis, not reported)."""
    import matplotlib.pyplot as plt
    import numpy as np

    from utils.plotting import collisions, legend_below

    x = np.linspace(0, 1, 50)
    fig, (top, bottom) = _course_figure(nrows=2, figsize=(5, 4))
    top.plot(x, x, label="rising")
    bottom.plot(x, 1 - x)
    legend_below(top)
    fig.subplots_adjust(hspace=0.1)  # no room for the legend between the panels
    fig.canvas.draw()
    assert any(entry.startswith("legend over another panel") for entry in collisions(fig)), collisions(fig)
    plt.close(fig)
    fig, ax = _course_figure(figsize=(5, 3))
    ax.plot(x, x, label="main")
    twin = ax.twinx()
    twin.plot(x, np.full_like(x, 0.5), color="black", label="on the twin")
    ax.fill_between(x, 0.45, 0.55, color="grey", label="band")
    ax.legend(loc="center left")
    fig.canvas.draw()
    found = collisions(fig)
    assert "legend over the line 'on the twin'" in found and any("PolyCollection 'band'" in e for e in found), found
    assert not any(e.startswith("text '0.0'") for e in found), found  # the twin's hidden x axis draws nothing
    plt.close(fig)


def test_plain_numbers_round_before_choosing_the_unit_and_symlog_keeps_its_sign():
    import matplotlib.pyplot as plt

    from utils.plotting import plain_number

    assert [plain_number(v) for v in (999999, 1e12, 99999.5, 12345.6, 0.00099)] == ["1M", "1T", "100,000", "12,346", "9.9e\u22124"]
    fig, ax = _course_figure(figsize=(4, 3))
    ax.plot([-1000, 1000], [-1000, 1000])
    ax.set_yscale("symlog")
    figure_png(fig)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert any("-" in t or "\u2212" in t for t in labels), labels  # a negative tick stays negative
    plt.close(fig)


def test_a_unicode_superscript_counts_as_small():
    import matplotlib.pyplot as plt

    from utils.plotting import UNICODE_SCRIPT_SCALE

    fig, ax = _course_figure(figsize=(4, 2))
    ax.set_title("O(N²)")
    ax.set_xlabel("W₂")
    fig.canvas.draw()
    assert smallest_text_px(fig) == pytest.approx(UNICODE_SCRIPT_SCALE * 11 * fig.dpi / 72)
    plt.close(fig)
