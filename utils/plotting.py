"""The course's figure style: colour-blind-safe colours, readable sizes, labelled axes."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
from cycler import cycler
from matplotlib.figure import Figure
from matplotlib.text import Text

# Okabe & Ito (2008): distinguishable under the common colour-vision deficiencies.
OKABE_ITO: dict[str, str] = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "sky": "#56B4E9",
    "purple": "#CC79A7",
    "yellow": "#F0E442",
    "black": "#000000",
}
# A perceptually uniform map that stays readable in grey and for colour-blind readers.
SEQUENTIAL_CMAP = "viridis"
DIVERGING_CMAP = "cividis"


# A figure is drawn at FIGURE_DPI logical (CSS) pixels per inch and saved at twice that (sharp on dense screens
# and when zoomed). A figure up to BOOK_COLUMN_PX wide (9.4 inches) is shown at its own size in the book, where a
# font of F points is F * 80 / 72 px: the course's 11 pt is 12.2 px; a wider one is scaled down to the column. The
# tests require every figure's smallest text, as displayed, to be at least MIN_TEXT_PX.
FIGURE_DPI = 80
BOOK_COLUMN_PX = 757  # the book's text column at a 1366 px window (measured by tests/test_book.py)
MIN_TEXT_PX = 11.0


def smallest_text_px(fig: Figure) -> float:
    """The smallest visible text of ``fig`` as last drawn, in logical pixels (font size in points x dpi / 72)."""
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes, default=float("inf")) * fig.dpi / 72


def figure_png(fig: Figure) -> tuple[str, dict[str, float]] | None:
    """The PNG a notebook shows for ``fig``: drawn at twice its resolution, with the size to display it at
    (``width``/``height``, logical pixels, which JupyterLab and the book honour) and its smallest text
    (``smallest_text_px``, which the browser tests read)."""
    from IPython.core.pylabtools import retina_figure

    drawn = retina_figure(fig, base64=True)  # draws the figure, so its tick labels exist below
    if drawn is None:  # an empty figure shows nothing
        return None
    png, metadata = drawn
    return png, metadata | {"smallest_text_px": round(smallest_text_px(fig), 2)}


def _show_figures_at_twice_the_resolution() -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:  # a plain Python process: nothing is displayed
        return
    plt.switch_backend(mpl.get_backend())  # load the inline backend now: loaded later, it would put its own formatter over ours
    shell.display_formatter.formatters["image/png"].for_type(Figure, figure_png)


def use_course_style() -> None:
    """Apply the course style to every later matplotlib figure."""
    mpl.rcParams.update(
        {
            "axes.prop_cycle": cycler(color=list(OKABE_ITO.values())),
            "image.cmap": SEQUENTIAL_CMAP,
            "figure.figsize": (6.4, 3.6),
            "figure.dpi": FIGURE_DPI,
            "savefig.dpi": FIGURE_DPI,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "font.size": 11,
            "legend.frameon": False,
            "svg.hashsalt": "course",  # deterministic ids if a figure is ever saved as SVG
        }
    )
    _show_figures_at_twice_the_resolution()


def label_axes(ax: plt.Axes, xlabel: str, ylabel: str, title: str | None = None) -> plt.Axes:
    """Label both axes (with units, by convention in brackets) and optionally title them."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def seed_dots(
    ax: plt.Axes,
    groups: dict[str, list[float]],
    ylabel: str,
    title: str | None = None,
    reference: float | None = None,
    reference_label: str | None = None,
) -> plt.Axes:
    """One dot per seed for each group (e.g. each arm of an experiment), with each group's median as a
    bar: the figure that shows a reader how much runs vary. ``reference`` draws a dashed line (chance,
    a threshold) labelled ``reference_label``."""
    import numpy as np

    colours = list(OKABE_ITO.values())
    for i, values in enumerate(groups.values()):
        values = [float(v) for v in values]
        # a small deterministic horizontal jitter so that equal values stay visible
        offsets = np.linspace(-0.12, 0.12, len(values)) if len(values) > 1 else np.zeros(1)
        ax.scatter(i + offsets, values, s=28, color=colours[i % len(colours)], edgecolor="black", linewidth=0.5, zorder=3)
        median = float(np.median(values))
        ax.hlines(median, i - 0.25, i + 0.25, color="black", linewidth=2, zorder=4)
    if reference is not None:
        ax.axhline(reference, color=OKABE_ITO["black"], linestyle="--", linewidth=1.2, label=reference_label)
        if reference_label:
            ax.legend(loc="best")
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax
