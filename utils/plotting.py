"""The course's figure style: colour-blind-safe colours, readable sizes, labelled axes."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
from cycler import cycler

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


def use_course_style() -> None:
    """Apply the course style to every later matplotlib figure."""
    mpl.rcParams.update(
        {
            "axes.prop_cycle": cycler(color=list(OKABE_ITO.values())),
            "image.cmap": SEQUENTIAL_CMAP,
            "figure.figsize": (6.4, 3.6),
            "figure.dpi": 80,
            "savefig.dpi": 80,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "font.size": 10,
            "legend.frameon": False,
            "svg.hashsalt": "course",  # deterministic ids if a figure is ever saved as SVG
        }
    )


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
