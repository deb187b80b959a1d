"""The course's figure style: colour-blind-safe colours, readable sizes, labelled axes."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import matplotlib.scale
import matplotlib.ticker
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


# Unicode's superscript and subscript characters are drawn about as small as mathtext's 0.7 (DejaVu Sans'
# "²" is 0.6 of the cap height): they count at that scale.
_SUPERSCRIPTS_AND_SUBSCRIPTS = set("¹²³") | {chr(c) for c in range(0x2070, 0x20A0)}
UNICODE_SCRIPT_SCALE = 0.7


def _smallest_glyph_pt(text: Text) -> float:
    """The smallest glyph of ``text`` in points: its font size, or less for the exponents and indices of
    mathtext (``$10^{3}$``: matplotlib draws a superscript at 0.7 of the size), measured by matplotlib's
    own mathtext layout."""
    source, is_math = text._preprocess_math(text.get_text())
    if not is_math or is_math == "TeX":
        # a Unicode superscript or subscript character (², ⁻¹, W₂) is a small glyph at the text's size
        small = any(ch in _SUPERSCRIPTS_AND_SUBSCRIPTS for ch in source)
        return text.get_fontsize() * (UNICODE_SCRIPT_SCALE if small else 1.0)
    from matplotlib.mathtext import MathTextParser

    glyphs = MathTextParser("path").parse(source, dpi=72, prop=text.get_fontproperties()).glyphs
    return min((glyph[1] for glyph in glyphs), default=text.get_fontsize())


def smallest_text_px(fig: Figure) -> float:
    """The smallest visible glyph of ``fig`` as last drawn, in logical pixels (points x dpi / 72), mathtext
    superscripts and subscripts counted at the size they are drawn."""
    sizes = [_smallest_glyph_pt(t) for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes, default=float("inf")) * fig.dpi / 72


def _boxes_overlap(a, b, margin: float = 1.0) -> bool:
    """Whether two display-space boxes share more than ``margin`` pixels each way."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > margin and min(a.y1, b.y1) - max(a.y0, b.y0) > margin


def _drawn_texts(fig: Figure) -> list[Text]:
    """The texts a draw of ``fig`` shows outside its legends: titles, axis labels, offset texts, the tick
    labels of ticks in view, annotations and the figure's own texts (not the stale tick labels matplotlib
    keeps for ticks outside the view)."""
    texts = list(fig.texts)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        texts += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        for axis in (ax.xaxis, ax.yaxis):
            if not axis.get_visible():  # a twin's hidden axis
                continue
            texts += [axis.label, axis.offsetText]
            for tick in axis._update_ticks():  # the ticks this draw shows (matplotlib's own choice)
                texts += [label for label in (tick.label1, tick.label2) if label.get_visible()]
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def _covered_by(frame, ax: plt.Axes, renderer) -> list[str]:
    """What of ``ax``'s data lies under the display box ``frame``: lines (grid lines excluded), bars and other
    patches (a light shading, alpha <= 0.3, shows through text), points, filled areas, error bars, images."""
    from matplotlib.collections import PathCollection, QuadMesh

    def any_point_inside(transform, points) -> bool:
        return any(frame.contains(x, y) for x, y in transform.transform(points))

    found = []
    grid = {id(line) for line in ax.get_xgridlines() + ax.get_ygridlines()}
    for line in ax.lines:
        if id(line) in grid or not line.get_visible() or not len(line.get_xydata()):
            continue
        if line.get_linestyle() in ("None", "none", " ", ""):  # markers only: is one inside the box?
            covered = any_point_inside(line.get_transform(), line.get_xydata())
        else:
            covered = line.get_transform().transform_path(line.get_path()).intersects_bbox(frame, filled=False)
        if covered:
            found.append(f"the line {line.get_label()!r}")
    for patch in ax.patches:
        if not patch.get_visible() or (patch.get_alpha() is not None and patch.get_alpha() <= 0.3):
            continue
        if patch.get_transform().transform_path(patch.get_path()).intersects_bbox(frame, filled=True):
            found.append(f"the patch {patch.get_label()!r}")
    for collection in ax.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, PathCollection):  # scatter: the points' positions
            covered = any_point_inside(collection.get_offset_transform(), collection.get_offsets())
        elif isinstance(collection, QuadMesh):
            covered = _boxes_overlap(frame, collection.get_window_extent(renderer))
        else:  # filled areas (fill_between), error bars, line collections: their paths
            transform = collection.get_transform()
            covered = any(transform.transform_path(path).intersects_bbox(frame, filled=True)
                          for path in collection.get_paths())
        if covered:
            found.append(f"the {type(collection).__name__} {collection.get_label()!r}")
    for image in ax.images:
        if image.get_visible() and _boxes_overlap(frame, image.get_window_extent(renderer)):
            found.append("an image")
    return found


def collisions(fig: Figure) -> list[str]:
    """What covers what in ``fig`` as last drawn: two visible texts whose boxes overlap (a title on an axis's
    offset text, two annotations), two legends over each other, and a legend drawn over data (lines, bars,
    points, filled areas, images: of any axes, its own, a twin's or another panel's) or over another
    panel. Each entry names both parts; an empty list is a figure a reader can read. Texts are compared by
    their upright boxes, so two rotated tick labels may be reported although their letters do not touch."""
    from matplotlib.legend import Legend

    renderer = fig.canvas.get_renderer()
    legends = [lg for lg in fig.findobj(Legend) if lg.get_visible()]
    boxes = [(t, t.get_window_extent(renderer)) for t in _drawn_texts(fig)]
    found = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            if _boxes_overlap(box_a, box_b):
                found.append(f"text {a.get_text()!r} overlaps text {b.get_text()!r}")
    frames = [legend.get_window_extent(renderer) for legend in legends]
    for i, frame in enumerate(frames):
        if any(_boxes_overlap(frame, other) for other in frames[i + 1:]):
            found.append("two legends overlap")
    for legend, frame in zip(legends, frames):
        for text in legend.get_texts():
            for other, box in boxes:
                if text.get_text().strip() and _boxes_overlap(text.get_window_extent(renderer), box):
                    found.append(f"legend entry {text.get_text()!r} overlaps text {other.get_text()!r}")
        own = legend.axes
        for ax in fig.axes:
            if not ax.get_visible():
                continue
            twin = own is not None and ax is not own and ax.bbox.bounds == own.bbox.bounds
            if own is not None and ax is not own and not twin and _boxes_overlap(frame, ax.bbox):
                found.append(f"legend over another panel ({ax.get_title() or type(ax).__name__})")
            found += [f"legend over {what}" for what in _covered_by(frame, ax, renderer)]
    return found


def figure_png(fig: Figure) -> tuple[str, dict[str, float]] | None:
    """The PNG a notebook shows for ``fig``: drawn at twice its resolution, with the size to display it at
    (``width``/``height``, logical pixels, which JupyterLab and the book honour), its smallest text
    (``smallest_text_px``, which the browser tests read) and what covers what (``collisions``, which
    tests/test_figures.py requires empty). Log axes are labelled with plain numbers (use_plain_log_ticks)."""
    from IPython.core.pylabtools import retina_figure

    use_plain_log_ticks(fig)
    drawn = retina_figure(fig, base64=True)  # draws the figure, so its tick labels exist below
    if drawn is None:  # an empty figure shows nothing
        return None
    png, metadata = drawn
    fig.canvas.draw()  # at the figure's own dpi: printing at twice it left positions in the printed pixels
    return png, metadata | {"smallest_text_px": round(smallest_text_px(fig), 2), "collisions": collisions(fig)}


def plain_number(x: float) -> str:
    """A log axis's tick as a reader reads it without a superscript: 16, 1,024, 16,384, 100k, 1M, 1G, 1T;
    0.5, 0.01, 0.001; below 0.001 in e-notation (1e−6), which keeps every glyph at the label's size
    (matplotlib's default, 10 with a superscript exponent, draws the exponent at 0.7 of it: 8.6 px).
    Whole numbers below 100,000 are exact (a base-2 axis's 16,384); larger ones keep 3 significant digits."""
    if x == 0:
        return "0"
    sign, x = ("\u2212" if x < 0 else ""), abs(x)
    if x >= 1e5:
        x = float(f"{x:.3g}")  # round first, then choose the unit: 999,999 is 1M, not 1000k
        suffix, unit = next((s, u) for s, u in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)) if x >= u)
        return f"{sign}{x / unit:g}{suffix}"
    if x >= 1:
        return f"{sign}{x:,.0f}" if x >= 1000 or x == round(x) else f"{sign}{x:.3g}"
    if x >= 1e-3:
        return f"{sign}{x:.3g}"
    mantissa, exponent = f"{x:.2e}".split("e")  # below 0.001: the exponent is negative
    return f"{sign}{mantissa.rstrip('0').rstrip('.')}e\u2212{-int(exponent)}"


class PlainLogFormatter(mpl.ticker.LogFormatter):
    """matplotlib's log-axis labelling (which ticks get a label) with plain_number for the text."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return plain_number(x)


class CourseLogScale(mpl.scale.LogScale):
    """matplotlib's log scale with PlainLogFormatter: use_course_style registers it as "log", so every later
    loglog, semilogx/y and set_xscale("log") is labelled in plain numbers before its layout is computed."""

    def __init__(self, *, base: float = 10, subs=None, nonpositive: str = "clip") -> None:  # no `axis` (unused)
        super().__init__(base=base, subs=subs, nonpositive=nonpositive)

    def set_default_locators_and_formatters(self, axis) -> None:
        super().set_default_locators_and_formatters(axis)
        axis.set_major_formatter(PlainLogFormatter(self.base))
        axis.set_minor_formatter(PlainLogFormatter(self.base, labelOnlyBase=(self.subs is not None)))


def use_plain_log_ticks(fig: Figure) -> None:
    """Label every log axis of ``fig`` with plain_number instead of matplotlib's 10 with a superscript
    exponent: what CourseLogScale does not reach (a LogNorm colour bar sets its own formatter). figure_png
    does it to every figure a notebook shows."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() != "log":  # symlog's formatter signs its labels; LogFormatter's would not
                continue
            for formatter, setter in ((axis.get_major_formatter(), axis.set_major_formatter),
                                      (axis.get_minor_formatter(), axis.set_minor_formatter)):
                if isinstance(formatter, mpl.ticker.LogFormatterMathtext):  # SciNotation is one
                    setter(PlainLogFormatter(formatter._base, labelOnlyBase=formatter.labelOnlyBase,
                                             minor_thresholds=formatter.minor_thresholds))


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
    mpl.scale.register_scale(CourseLogScale)  # log axes labelled with plain numbers
    _show_figures_at_twice_the_resolution()


def label_axes(ax: plt.Axes, xlabel: str, ylabel: str, title: str | None = None) -> plt.Axes:
    """Label both axes (with units, by convention in brackets) and optionally title them."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def legend_below(ax: plt.Axes, ncols: int | None = None, **kwargs) -> mpl.legend.Legend:
    """The axes' legend under its x-axis label, where it covers no line: for a figure whose every corner
    holds data (tests/test_figures.py fails a legend drawn over a line, bar or point). ``ncols`` (default
    2) keeps it about as wide as the axes; panels that share their lines need it under one panel only."""
    from matplotlib.transforms import offset_copy

    labels = ax.get_legend_handles_labels()[1]
    below = offset_copy(ax.transAxes, fig=ax.figure, y=-40, units="points")  # tick labels and x label above it
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=below, borderaxespad=0,
                     ncols=ncols or min(len(labels), 2), **kwargs)


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
