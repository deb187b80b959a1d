"""Chapter 8 widget: sequence length N and width d -> FLOPs, sequential steps, path length, memory."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from utils.efficient_attention import layer_costs
from utils.plotting import OKABE_ITO, label_axes
from utils.widgets import live_panel

N_CHOICES = [2**p for p in range(4, 17)]  # 16 .. 65536
D_CHOICES = [32, 64, 128, 256, 512, 1024, 2048]
COLORS = [OKABE_ITO[c] for c in ("sky", "blue", "green", "vermillion", "orange")]
STYLES = ["o-", "s-", "d-", "^-", "v--"]


def complexity_summary(n: int, d: int, k: int = 3, r: int = 16) -> dict[str, object]:
    """Pure compute: the architecture matrix at (n, d), and where attention stops beating the LSTM."""
    costs = layer_costs(n, d, k=k, r=r)
    return {
        "costs": costs,
        "crossover_n": 2 * d,  # 8nd² + 4n²d = 16nd²  <=>  n = 2d
        "attention_over_lstm": round(costs["self-attention"]["flops"] / costs["LSTM"]["flops"], 3),
    }


def complexity_figure(n: int, d: int, k: int = 3, r: int = 16) -> plt.Figure:
    """FLOPs per layer against N at width d, with the chosen N and the crossover N = 2d marked."""
    fig, ax = plt.subplots(figsize=(6.8, 3.8))
    names = list(layer_costs(n, d, k=k, r=r))
    for name, color, style in zip(names, COLORS, STYLES):
        flops = [layer_costs(m, d, k=k, r=r)[name]["flops"] for m in N_CHOICES]
        ax.loglog(N_CHOICES, flops, style, color=color, label=name, markersize=4)
    ax.axvline(2 * d, color="grey", ls=":", lw=1, label=f"N = 2d = {2 * d}")
    ax.axvline(n, color=OKABE_ITO["black"], lw=1, label=f"chosen N = {n}")
    label_axes(ax, "sequence length N (tokens)", "FLOPs per layer", f"Work per layer at d = {d}")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def _readout(n: int, d: int) -> str:
    summary = complexity_summary(n, d)
    cell = '<td style="padding: 2px 10px; text-align: right">'
    rows = "".join(
        f'<tr><td style="padding: 2px 10px">{name}</td>{cell}{c["flops"]:.3g}</td>{cell}{c["sequential"]}</td>'
        f"{cell}{c['path']}</td>{cell}{c['largest'] * 4 / 2**20:.3g}</td></tr>"
        for name, c in summary["costs"].items()
    )
    head = "".join(f'<th style="padding: 2px 10px">{h}</th>' for h in (
        "layer", "FLOPs", "sequential steps", "path length", "largest intermediate (MiB, float32, one head)"))
    verdict = "cheaper than" if n < 2 * d else ("as cheap as" if n == 2 * d else "more expensive than")
    return (
        f"<b>N = {n}, d = {d}</b>: self-attention is {verdict} the LSTM in FLOPs "
        f"(ratio {summary['attention_over_lstm']}; crossover at N = 2d = {2 * d})."
        f'<table style="border-collapse: collapse; margin-top: 4px"><tr>{head}</tr>{rows}</table>'
    )


def complexity_widget(n: int = 1024, d: int = 512) -> widgets.VBox:
    """Sliders for N and d, a table of the layer costs, and the FLOPs chart."""
    n_slider = widgets.SelectionSlider(options=N_CHOICES, value=n, description="N")
    d_slider = widgets.SelectionSlider(options=D_CHOICES, value=d, description="d")
    return live_panel([n_slider, d_slider], _readout, complexity_figure)
