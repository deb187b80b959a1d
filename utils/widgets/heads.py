"""Chapter 4 widget: pick an input sequence, a layer and a head -> that head's attention map.

The maps are computed once in the notebook (a tensor of shape (layers, N, h, T, T)); the widget
only looks them up, so it is instant.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from utils.plotting import SEQUENTIAL_CMAP, label_axes
from utils.widgets import live_panel


def head_summary(maps: torch.Tensor, sequence: int, layer: int, head: int) -> dict[str, float]:
    """Pure compute: the chosen map's weight on the previous position, on itself, and its sharpness.

    ``maps`` has shape (layers, N, h, T, T). Returns the mean weight on key i-1 (over queries i >= 1),
    the mean largest weight of a row, and the mean entropy of a row in bits (0 = one key only).
    """
    weights = maps[layer, sequence, head].double()  # (T, T)
    length = weights.shape[-1]
    rows = torch.arange(1, length)
    entropy = -(weights * torch.log2(weights.clamp_min(1e-12))).sum(-1)  # (T,)
    return {
        "on_previous": float(weights[rows, rows - 1].mean()),
        "largest_weight": float(weights.max(dim=-1).values.mean()),
        "entropy_bits": float(entropy.mean()),
    }


def heads_figure(
    maps: torch.Tensor, labels: list[list[str]], sequence: int = 0, layer: int = 0, head: int = 0
) -> plt.Figure:
    """Heat map of one head's attention weights, axes labelled with the sequence's tokens."""
    weights = maps[layer, sequence, head]  # (T, T)
    length = weights.shape[-1]
    fig, ax = plt.subplots(figsize=(5.2, 4.4))
    image = ax.imshow(weights.numpy(), cmap=SEQUENTIAL_CMAP, vmin=0, vmax=1)
    ax.set_xticks(range(length), labels[sequence])
    ax.set_yticks(range(length), labels[sequence])
    ax.grid(False)
    label_axes(
        ax,
        "key position (its token)",
        "query position (its token)",
        f"sequence {sequence}, layer {layer + 1}, head {head}",
    )
    fig.colorbar(image, ax=ax, label="attention weight")
    fig.tight_layout()
    return fig


def _readout(maps: torch.Tensor, sequence: int, layer: int, head: int) -> str:
    s = head_summary(maps, sequence, layer, head)
    return (
        f"<b>layer {layer + 1}, head {head}</b>, sequence {sequence}: weight on the previous position "
        f"{s['on_previous']:.2f}, mean largest weight {s['largest_weight']:.2f}, mean entropy "
        f"{s['entropy_bits']:.2f} bits"
    )


def heads_widget(maps: torch.Tensor, labels: list[list[str]]) -> widgets.VBox:
    """Dropdown for the sequence, sliders for layer and head, a text readout and the heat map."""
    num_layers, num_sequences, num_heads = maps.shape[:3]
    sequence = widgets.Dropdown(options=list(range(num_sequences)), value=0, description="sequence")
    layer = widgets.IntSlider(value=1, min=1, max=num_layers, description="layer")
    head = widgets.IntSlider(value=0, min=0, max=num_heads - 1, description="head")
    return live_panel(
        [sequence, layer, head],
        lambda s, layer_number, h: _readout(maps, s, layer_number - 1, h),
        lambda s, layer_number, h: heads_figure(maps, labels, s, layer_number - 1, h),
    )
