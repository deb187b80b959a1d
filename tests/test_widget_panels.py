"""The widgets as a reader meets them (issue 18, items 6-7): labels, text, keys and saved text form."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from utils.widgets import PLACEHOLDER
from utils.widgets.complexity import _readout as complexity_readout
from utils.widgets.complexity import complexity_widget
from utils.widgets.positional import positional_figure, positional_widget
from utils.widgets.rnn_gradients import gradient_figure, gradient_widget
from utils.widgets.scaling import saturation_widget
from utils.widgets.soft_lookup import lookup_widget
from utils.widgets.visualizer import all_heads_figure, visualizer_widget

BUILDERS = [lookup_widget, saturation_widget, positional_widget, gradient_widget, complexity_widget,
            visualizer_widget]


def _controls(widget):
    stack, found = [widget], []
    while stack:
        node = stack.pop()
        stack.extend(getattr(node, "children", ()))
        if hasattr(node, "description") and hasattr(node, "value") and node.description:
            found.append(node)
    return found


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_a_widget_saves_a_short_note_as_its_text_and_shows_whole_labels(build):
    widget = build()
    bundle = widget._repr_mimebundle_()
    assert bundle["text/plain"] == PLACEHOLDER and "VBox(" not in bundle["text/plain"]
    assert "application/vnd.jupyter.widget-view+json" in bundle
    for control in _controls(widget):
        if hasattr(control.style, "description_width"):
            assert control.style.description_width == "initial", control.description


def test_enter_in_the_visualizer_text_box_recomputes():
    widget = visualizer_widget()
    text, _button = widget.children[0].children
    readout = widget.children[2]
    before = readout.value
    text.value = "she said he was tired"
    assert readout.value == before
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation warning reaches the learner
        text._handle_string_msg(None, {"event": "submit"}, None)  # what the browser sends on Enter
    assert readout.value != before and "she" in readout.value


def test_the_temperature_slider_shows_the_value_the_readout_uses():
    slider = lookup_widget(temperature=0.3).children[0].children[1]
    steps = (math.log10(slider.value) - slider.min) / slider.step
    assert abs(steps - round(steps)) < 1e-9, "0.3 is not on the slider's grid: it would display another value"
    assert "τ = 0.300:" in lookup_widget(temperature=0.3).children[1].value, "the readout formats τ as the slider does"
    assert slider.min <= -2 and slider.max >= 0.9


def test_the_lookup_widget_does_not_answer_exercise_2_6():
    """Red team: at its lowest temperature the widget showed exercise 2.6's query ("funny animals": cat, dog,
    funny) splitting its weight between two tied videos, the answer, before the exercise was asked. No query in
    its menu ties those two videos at any temperature of the slider."""
    from utils.qkv import encode_tags, soft_lookup, video_table
    from utils.widgets.soft_lookup import lookup

    menu, slider = lookup_widget().children[0].children
    titles, keys, values = video_table()
    exercise_weights = soft_lookup(encode_tags({"cat": 1, "dog": 1, "funny": 1}), keys, values, 10**slider.min)[1]
    tied = [titles[i] for i in exercise_weights.topk(2).indices]
    assert sorted(tied) == ["cat fails", "dog vs. cucumber"]  # the exercise's two videos, the answer being 2
    for name in menu.options:
        for log_tau in (slider.min, math.log10(0.3), slider.max):
            weights = lookup(name, 10**log_tau)["weights"]
            pair = weights[[titles.index(t) for t in tied]]
            assert not torch.allclose(pair, pair.flip(0)) or pair.max() < 0.25, (name, log_tau, pair)


def test_the_complexity_readout_reads_as_english():
    assert "as cheap as the LSTM" in complexity_readout(1024, 512)
    assert "cheaper than the LSTM" in complexity_readout(512, 512)
    assert "more expensive than the LSTM" in complexity_readout(4096, 512)
    assert "padding" in complexity_readout(1024, 512)


def test_figures_use_typeset_symbols_and_whole_number_ticks():
    fig = gradient_figure(50, 1.0)
    labels = [fig.axes[0].get_ylabel(), *(t.get_text() for t in fig.axes[0].get_legend().get_texts())]
    assert all("$" in label for label in labels) and not any("‖" in label or "^(" in label for label in labels)
    fig = positional_figure(4, 16)
    heat = fig.axes[0]
    for ticks in (heat.get_xticks(), heat.get_yticks()):
        assert all(float(t).is_integer() for t in ticks)
    fig = all_heads_figure()
    widths = {round(ax.get_position().width, 3) for ax in fig.axes[:4]}
    assert len(widths) == 1 and fig.get_size_inches()[0] <= 9.0, "two panels per row, not four"
