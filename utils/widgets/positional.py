"""Chapter 5 widget: d_model and length -> the sinusoidal encoding and PE(pos)·PE(pos+k) against k."""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.ticker import MaxNLocator

from utils.plotting import OKABE_ITO, SEQUENTIAL_CMAP, label_axes
from utils.positional import sinusoidal_encoding, sinusoidal_frequencies
from utils.widgets import live_panel


def positional_summary(d_model: int, length: int) -> dict[str, object]:
    """Pure compute: the encoding (length, d_model), offsets k, the dot product curve and key numbers.

    The curve is sum_i cos(k w_i), which equals PE(pos)·PE(pos+k) for every pos.
    """
    pe = sinusoidal_encoding(length, d_model)  # (T, d_model)
    omega = sinusoidal_frequencies(d_model)  # (d_model/2,)
    offsets = torch.arange(-(length - 1), length)  # (2T-1,)
    dots = torch.cos(offsets[:, None].double() * omega[None, :]).sum(-1)  # (2T-1,)
    away = dots[offsets.abs() >= 1]
    return {
        "pe": pe,
        "offsets": offsets,
        "dots": dots,
        "shortest_wavelength": float(2 * math.pi / omega[0]),
        "longest_wavelength": float(2 * math.pi / omega[-1]),
        "peak": float(dots[length - 1]),
        "largest_off_peak": float(away.max()) if away.numel() else float("nan"),
    }


def positional_figure(d_model: int = 64, length: int = 128) -> plt.Figure:
    """Heat map of PE (positions × dimensions) and the dot product against the offset k."""
    summary = positional_summary(d_model, length)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    image = ax1.imshow(summary["pe"].T.numpy(), cmap=SEQUENTIAL_CMAP, aspect="auto", origin="lower", vmin=-1, vmax=1)
    ax1.grid(False)
    for axis in (ax1.xaxis, ax1.yaxis):  # positions and dimensions are whole numbers, even at d_model = 4
        axis.set_major_locator(MaxNLocator(integer=True))
    label_axes(ax1, "position pos", "dimension", f"PE, d_model = {d_model}, {length} positions")
    fig.colorbar(image, ax=ax1, label="value")
    ax2.plot(summary["offsets"].numpy(), summary["dots"].numpy(), color=OKABE_ITO["blue"])
    label_axes(ax2, r"offset $k$ (positions)", r"$\mathrm{PE}(pos) \cdot \mathrm{PE}(pos + k)$", "Dot product against offset")
    fig.tight_layout()
    return fig


def _readout(d_model: int, length: int) -> str:
    s = positional_summary(d_model, length)
    return (
        f"<b>d_model = {d_model}</b>, {length} positions: wavelengths from "
        f"{s['shortest_wavelength']:.1f} to {s['longest_wavelength']:,.0f} positions; dot product "
        f"{s['peak']:.0f} at k = 0, at most {s['largest_off_peak']:.1f} elsewhere"
    )


def positional_widget(d_model: int = 64, length: int = 128) -> widgets.VBox:
    """Sliders for d_model and the number of positions, a text readout and the two plots."""
    d_slider = widgets.IntSlider(value=d_model, min=4, max=256, step=4, description="d_model")
    length_slider = widgets.IntSlider(value=length, min=8, max=512, step=8, description="positions")
    return live_panel([d_slider, length_slider], _readout, positional_figure)
