"""Chapter 2 widget: a query and a temperature -> soft-lookup weights over the video table."""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from utils.plotting import OKABE_ITO, label_axes
from utils.qkv import CONTENTS, QUERIES, encode_tags, soft_lookup, video_table
from utils.widgets import live_panel


def lookup(query_name: str, temperature: float) -> dict[str, object]:
    """Pure compute: titles, weights (n,), retrieved value (d_v,) and the plain average (d_v,)."""
    titles, keys, values = video_table()
    retrieved, weights = soft_lookup(encode_tags(QUERIES[query_name]), keys, values, temperature)
    return {
        "titles": titles,
        "weights": weights,
        "retrieved": retrieved,
        "average": values.mean(dim=0),
    }


def lookup_figure(query_name: str, temperature: float) -> plt.Figure:
    """Bar chart of the weights over the table, and the retrieved value next to the plain average."""
    result = lookup(query_name, temperature)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4), gridspec_kw={"width_ratios": [3, 2]})
    weights: torch.Tensor = result["weights"]  # type: ignore[assignment]
    ax1.barh(result["titles"], weights.numpy(), color=OKABE_ITO["blue"])
    ax1.invert_yaxis()
    ax1.set_xlim(0, 1)
    label_axes(ax1, "weight of each video (no unit)", "video", rf'Query "{query_name}", $\tau$ = {temperature:#.3g}')
    positions = torch.arange(len(CONTENTS)).float()
    ax2.bar(positions - 0.2, result["retrieved"].numpy(), width=0.4, color=OKABE_ITO["orange"], label="retrieved")
    ax2.bar(positions + 0.2, result["average"].numpy(), width=0.4, color="grey", label="plain average")
    ax2.set_xticks(positions.tolist(), [c.replace(" on screen", "") for c in CONTENTS])
    ax2.set_ylim(0, 1)
    label_axes(ax2, "content on screen", "share of screen time", "Retrieved value")
    ax2.legend()
    fig.tight_layout()
    return fig


def _readout(query_name: str, temperature: float) -> str:
    result = lookup(query_name, temperature)
    weights: torch.Tensor = result["weights"]  # type: ignore[assignment]
    best = int(weights.argmax())
    blend = ", ".join(f"{c} {v:.2f}" for c, v in zip(CONTENTS, result["retrieved"].tolist()))
    return (
        f'<b>"{query_name}"</b> at τ = {temperature:#.3g}: best match <i>{result["titles"][best]}</i> '
        f"with weight {weights[best]:.3f}; retrieved value: {blend}"
    )


def lookup_widget(query_name: str = "cute cats", temperature: float = 0.3) -> widgets.VBox:
    """A query menu and a temperature slider, a text readout, and the weights' bar chart."""
    menu = widgets.Dropdown(options=list(QUERIES), value=query_name, description="query")
    # The slider moves in steps of 10**0.05 counted from its minimum: the grid is anchored at the starting
    # temperature, so the slider shows the value the readout uses (0.3, not the nearest 10**(k/20) = 0.316).
    step, below, above = 0.05, 30, 30  # about 0.0095 to 9.5 around the default 0.3
    start = math.log10(temperature)
    slider = widgets.FloatLogSlider(
        value=temperature, base=10, min=start - below * step, max=start + above * step, step=step,
        description="τ", readout_format=".3g",  # d3's .3g is Python's #.3g: "0.300"
    )
    return live_panel([menu, slider], _readout, lookup_figure)
