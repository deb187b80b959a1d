"""Interactive widgets: each a pure compute function of its parameters, drawn by a small UI."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt

# What a widget's cell shows as text where the widget itself cannot be drawn: in JupyterLab before the
# cell has run, and in any viewer without the widget manager. (The default is a dump of the widget's
# children, `VBox(children=(HBox(...`.)
PLACEHOLDER = "Interactive widget: run this cell to draw it and use its controls."


class Panel(widgets.VBox):
    """A course widget: a VBox whose text form is a short note instead of its children's repr."""

    def __repr__(self) -> str:
        return PLACEHOLDER


def show_figure(output: widgets.Output, fig: plt.Figure) -> None:
    """Replace what ``output`` shows with ``fig``, then free the figure.

    The Output widget's outputs are set directly rather than captured with ``with output:``, so this
    works the same in a live kernel, under nbval, and in the saved widget state the book shows.
    """
    output.outputs = ()
    output.append_display_data(fig)
    plt.close(fig)


def live_panel(
    inputs: Sequence[widgets.ValueWidget],
    describe: Callable[..., str],
    draw: Callable[..., plt.Figure],
    rows: Sequence[widgets.Widget] | None = None,
    watched: Sequence[widgets.ValueWidget] | None = None,
    buttons: Sequence[widgets.Button] = (),
) -> Panel:
    """The course's widget shape: controls, an HTML readout and a figure, redrawn on every change.

    ``describe(*values)`` and ``draw(*values)`` are pure functions of the ``inputs``' values. The
    panel redraws when a ``watched`` control changes (default: all inputs) or a button is clicked,
    and lays out ``rows`` (default: the inputs side by side) above the readout and the figure.
    """
    readout, plot = widgets.HTML(), widgets.Output()
    for control in inputs:  # show the whole label ("temperature", not "temperat…")
        if hasattr(control, "style") and hasattr(control.style, "description_width"):
            control.style.description_width = "initial"

    def redraw(_change: object = None) -> None:
        values = [control.value for control in inputs]
        readout.value = describe(*values)
        show_figure(plot, draw(*values))

    for control in inputs if watched is None else watched:
        control.observe(redraw, names="value")
    for button in buttons:
        button.on_click(redraw)
    redraw()
    return Panel([*(rows if rows is not None else [widgets.HBox(list(inputs))]), readout, plot])
