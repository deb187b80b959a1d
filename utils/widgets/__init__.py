"""Interactive widgets: each a pure compute function of its parameters, drawn by a small UI."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt


def show_figure(output: widgets.Output, fig: plt.Figure) -> None:
    """Replace what ``output`` shows with ``fig``, then free the figure.

    The Output widget's outputs are set directly rather than captured with ``with output:``, so this
    works the same in a live kernel, under nbval, and in the saved widget state the book shows.
    """
    output.outputs = ()
    output.append_display_data(fig)
    plt.close(fig)
