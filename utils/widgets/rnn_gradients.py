"""Chapter 1 widget: sequence length and spectral radius -> the BPTT gradient-norm curve."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from utils.plotting import OKABE_ITO, label_axes, legend_below
from utils.rnn import gradient_norms
from utils.widgets import live_panel


def gradient_curve(length: int, rho: float) -> dict[str, torch.Tensor | float]:
    """Pure compute: measured ‖∂L/∂h_t‖ (length,), the bound rho^(T-t), and the end-to-start ratio."""
    norms = gradient_norms(length, rho)
    steps = torch.arange(1, length + 1, dtype=torch.float64)
    return {
        "steps": steps,
        "norms": norms,
        "bound": rho ** (length - steps),
        "ratio": float(norms[0] / norms[-1]),
    }


def gradient_figure(length: int, rho: float) -> plt.Figure:
    """Log-scale plot of the measured gradient norm and its bound against the time step."""
    curve = gradient_curve(length, rho)
    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    ax.semilogy(curve["steps"], curve["norms"], color=OKABE_ITO["blue"], label=r"measured $\Vert\partial L/\partial h\Vert$")
    ax.semilogy(curve["steps"], curve["bound"], "--", color=OKABE_ITO["vermillion"], label=r"bound: $\rho$ to the power $T - t$")
    low = max(1e-30, float(min(curve["norms"].min(), curve["bound"].min())) / 10)
    high = float(max(curve["norms"].max(), curve["bound"].max())) * 10
    ax.set_ylim(low, high)
    # symbols typeset without subscripts or exponents: mathtext draws those at 0.7 of the text (8.6 px)
    label_axes(ax, r"time step $t$", r"$\Vert\partial L/\partial h\Vert$ at step $t$ (no unit)",
               rf"$T$ = {length}, spectral radius $\rho$ = {rho:.2f}")
    legend_below(ax)  # under the x label: at some (T, ρ) the curves cross every corner
    fig.tight_layout()
    return fig


def _readout(length: int, rho: float) -> str:
    ratio = gradient_curve(length, rho)["ratio"]
    regime = "vanishes" if ratio < 0.1 else ("explodes" if ratio > 10 else "roughly holds its size")
    return (
        f"<b>T = {length}, ρ = {rho:.2f}</b>: ‖∂L/∂h<sub>1</sub>‖ / ‖∂L/∂h<sub>T</sub>‖ = {ratio:.2e} "
        f"(bound ρ<sup>T−1</sup> = {rho ** (length - 1):.2e}); the gradient {regime} over the sequence"
    )


def gradient_widget(length: int = 100, rho: float = 1.0) -> widgets.VBox:
    """Sliders for the sequence length and the spectral radius, a text readout, and the curve."""
    length_slider = widgets.IntSlider(value=length, min=10, max=200, step=10, description="T")
    rho_slider = widgets.FloatSlider(value=rho, min=0.5, max=2.5, step=0.05, description="ρ")
    return live_panel([length_slider, rho_slider], _readout, gradient_figure)
