"""Chapter 3 widget: key dimension and the 1/sqrt(d_k) scale -> attention weights and gradient."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from utils.plotting import OKABE_ITO, label_axes
from utils.saturation import attention_gradients
from utils.widgets import live_panel

D_K_CHOICES = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def _gradients(d_k: int, scaled: bool) -> dict:
    return attention_gradients(d_k, scaled, n_keys=16, trials=256, seed=0)


def saturation_summary(d_k: int, scaled: bool) -> dict[str, float]:
    """Pure compute: the largest weight of the example query and the median gradient norms reaching the
    scores (‖∂L/∂z‖) and the query (‖∂L/∂q‖, what trains W_Q)."""
    result = _gradients(d_k, scaled)
    return {
        "largest_weight": float(result["weights"][0].max()),
        "median_grad_norm": float(result["scores"].median()),
        "median_query_grad_norm": float(result["query"].median()),
    }


def saturation_figure(d_k: int, panels: tuple[bool, ...] = (False, True)) -> plt.Figure:
    """Bar charts of one query's 16 attention weights, unscaled and/or scaled, at width ``d_k``."""
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.0), squeeze=False)
    for ax, scaled in zip(axes[0], panels):
        result = _gradients(d_k, scaled)
        weights = result["weights"]
        color = OKABE_ITO["blue"] if scaled else OKABE_ITO["vermillion"]
        ax.bar(range(weights.shape[1]), weights[0].numpy(), color=color)
        ax.set_ylim(0, 1)
        ax.set_xticks(range(0, weights.shape[1], 3))
        kind = "scaled by 1/√d_k" if scaled else "unscaled"
        label_axes(ax, "key index j", "attention weight p_j")
        # two short lines, set clear of the top tick label: a long one ran into the next panel and onto "1.0"
        ax.set_title(f"d_k = {d_k}, {kind}\nmedian ‖∂L/∂z‖ {result['scores'].median():.3g}, "
                     f"‖∂L/∂q‖ {result['query'].median():.3g}", pad=12)
    fig.tight_layout()
    return fig


def _readout(d_k: int, scaled: bool) -> str:
    summary = saturation_summary(d_k, scaled)
    return (
        f"<b>d_k = {d_k}</b>, {'scaled' if scaled else 'unscaled'}: largest weight "
        f"{summary['largest_weight']:.3f}; median gradient norm reaching the scores "
        f"{summary['median_grad_norm']:.2e}, reaching the query {summary['median_query_grad_norm']:.2e}"
    )


def saturation_widget(d_k: int = 64, scaled: bool = False) -> widgets.VBox:
    """A slider for d_k and a scale toggle, a text readout, and the weights' bar chart."""
    slider = widgets.SelectionSlider(options=D_K_CHOICES, value=d_k, description="d_k")
    toggle = widgets.Checkbox(value=scaled, description="scale by 1/√d_k")
    return live_panel([slider, toggle], _readout, lambda d, s: saturation_figure(d, panels=(s,)))
