"""Chapter 10 widget: type a sentence, press "Calculate Attention", see a head's attention weights.

The attention is :func:`utils.visualizer.attention_map` (hand-built projections, no training), which
is cheap enough to recompute on every click.
"""

from __future__ import annotations

import html
import math
import warnings

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from utils.plotting import SEQUENTIAL_CMAP, label_axes
from utils.visualizer import HEAD_NAMES, MAX_TOKENS, attention_map, tokenize
from utils.widgets import live_panel

DEFAULT_SENTENCE = "The cat sat on the mat because it was tired."


def top_links(sentence: str, head: int = 0, temperature: float = 1.0, causal: bool = False) -> list[dict]:
    """Pure compute: for every query token, its most-attended key token and that weight."""
    tokens, weights = attention_map(sentence, head, temperature, causal)
    links = []
    for i, token in enumerate(tokens):
        j = int(weights[i].argmax())
        links.append({"query": token, "position": i, "key": tokens[j], "key_position": j,
                      "weight": float(weights[i, j])})
    return links


def _draw(ax: plt.Axes, tokens: list[str], weights: torch.Tensor, title: str, annotate: bool) -> object:
    image = ax.imshow(weights.numpy(), cmap=SEQUENTIAL_CMAP, vmin=0, vmax=1)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90)
    ax.set_yticks(range(len(tokens)), tokens)
    ax.grid(False)
    if annotate:
        for i in range(len(tokens)):
            for j in range(len(tokens)):
                value = float(weights[i, j])
                if value >= 0.1:
                    ax.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=10,
                            color="black" if value > 0.6 else "white")
    label_axes(ax, "key token (attended to)", "query token (attending)", title)
    return image


def attention_figure(
    sentence: str, head: int = 0, temperature: float = 1.0, causal: bool = False
) -> plt.Figure:
    """Heat map of one head's weights for ``sentence``, with the tokens as labels."""
    tokens, weights = attention_map(sentence, head, temperature, causal)
    fig, ax = plt.subplots(figsize=(8.0, 7.0))  # room for 14 tokens' weights at 10 pt
    if not tokens:
        ax.set_axis_off()
        ax.set_title("type a sentence and press Calculate Attention")
        return fig
    image = _draw(ax, tokens, weights, f"head {head}: {HEAD_NAMES[head]}\ntemperature {temperature:.2f}"
                  f"{', causal mask' if causal else ''}", annotate=len(tokens) <= 14)
    fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
    fig.tight_layout()
    return fig


def all_heads_figure(sentence: str = DEFAULT_SENTENCE, temperature: float = 1.0, causal: bool = False) -> plt.Figure:
    """The heads' heat maps, two per row (the static figure the book shows).

    Two columns, not one row of four: at a book's column width (about 750 px) four panels side by
    side would shrink the token labels to a few pixels.
    """
    columns = 2
    rows = math.ceil(len(HEAD_NAMES) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.4 * columns, 4.4 * rows), layout="constrained",
                             squeeze=False)
    image = None
    for head, ax in enumerate(axes.flat):
        if head >= len(HEAD_NAMES):
            ax.set_axis_off()
            continue
        tokens, weights = attention_map(sentence, head, temperature, causal)
        image = _draw(ax, tokens, weights, f"head {head}: {HEAD_NAMES[head]}", annotate=False)
        if head % columns:  # the rows are the same tokens in every panel: label them once per row
            ax.set_ylabel("")
            ax.set_yticklabels([])
        if head < len(HEAD_NAMES) - columns:  # and the columns once, at the bottom
            ax.set_xlabel("")
            ax.set_xticklabels([])
    fig.colorbar(image, ax=list(axes.flat), shrink=0.6, label="attention weight")
    return fig


def _subscript(position: int) -> str:
    """The position as subscript digits, so that repeated words can be told apart: the₄."""
    return str(position).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def readout_html(sentence: str, head: int = 0, temperature: float = 1.0, causal: bool = False) -> str:
    """The text readout: the tokens, and each query's most-attended key (HTML-escaped)."""
    tokens = tokenize(sentence)
    if not tokens:
        return "<b>No tokens.</b> Type a sentence and press <i>Calculate Attention</i>."
    note = f" (only the first {MAX_TOKENS} are used)" if len(tokenize(sentence, 10**6)) > MAX_TOKENS else ""
    listed = " · ".join(html.escape(t) for t in tokens)
    _, weights = attention_map(sentence, head, temperature, causal)
    parts = []
    for link, row in zip(top_links(sentence, head, temperature, causal), weights):
        # A row whose allowed weights are all equal has no favourite: say so instead of naming one.
        allowed = row[row > 0]
        tied = bool(allowed.max() - allowed.min() < 1e-9) and len(allowed) > 1
        query = html.escape(link["query"]) + _subscript(link["position"])
        key = "all equally" if tied else html.escape(link["key"]) + _subscript(link["key_position"])
        parts.append(f"{query}→{key} ({link['weight']:.2f})")
    links = ", ".join(parts)
    return (
        f"<b>{len(tokens)} tokens</b>{note}: {listed}<br>"
        f"<b>head {head} ({HEAD_NAMES[head]})</b>, temperature {temperature:.2f}, "
        f"causal mask {'on' if causal else 'off'}. Strongest link of each query (position as subscript): {links}"
    )


def visualizer_widget(sentence: str = DEFAULT_SENTENCE, head: int = 0, temperature: float = 1.0,
                      causal: bool = False) -> widgets.VBox:
    """Text box, "Calculate Attention" button, head / temperature / causal controls, readout, heat map."""
    text = widgets.Text(value=sentence, description="sentence", placeholder="type a sentence",
                        layout=widgets.Layout(width="32em"))
    button = widgets.Button(description="Calculate Attention", button_style="primary",
                            layout=widgets.Layout(width="14em"))
    head_choice = widgets.Dropdown(options=[(f"{h}: {name}", h) for h, name in enumerate(HEAD_NAMES)],
                                   value=head, description="head")
    temp = widgets.FloatLogSlider(value=temperature, base=2, min=-5, max=6, step=0.25,
                                  description="temperature", continuous_update=False)
    mask = widgets.Checkbox(value=causal, description="causal mask")
    # Enter in the text box does what the button does. (ipywidgets 8 marks on_submit as deprecated in
    # favour of observing the value; that would also recompute on every loss of focus.)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        text.on_submit(lambda _box: button.click())
    return live_panel(
        [text, head_choice, temp, mask],
        readout_html,
        attention_figure,
        rows=[widgets.HBox([text, button]), widgets.HBox([head_choice, temp, mask])],
        watched=[head_choice, temp, mask],
        buttons=[button],
    )
