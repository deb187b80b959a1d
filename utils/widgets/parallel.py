"""Chapter 13 widget: who computes which (query chunk, key chunk) pair of ring attention, and the work per rank."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap

from utils.plotting import OKABE_ITO, label_axes, legend_below
from utils.ring_attention import ORDERS, chunk_layout, ring_work_per_rank
from utils.widgets import live_panel

RANK_CHOICES = [1, 2, 4, 8]
LENGTH = 1024  # the sequence length the work is counted for (it splits into 2p chunks for every choice)
RANK_COLOURS = [OKABE_ITO[c] for c in ("blue", "orange", "green", "purple", "sky", "vermillion", "yellow", "black")]


def owner_grid(world_size: int, order: str, is_causal: bool = True) -> torch.Tensor:
    """(chunks, chunks) grid: the rank that computes each (query chunk, key chunk) pair; -1 where the mask
    skips the pair. Pure compute, from the ring's own chunk layout."""
    layout = chunk_layout(world_size, order)
    n = sum(len(c) for c in layout)
    grid = torch.full((n, n), -1.0)
    for rank, chunks in enumerate(layout):
        for qc in chunks:
            grid[qc, : qc + 1 if is_causal else n] = rank
    return grid


def draw_owner_grid(ax: plt.Axes, world_size: int, order: str, is_causal: bool = True) -> None:
    grid = owner_grid(world_size, order, is_causal)
    colours = ListedColormap(["#ffffff"] + RANK_COLOURS[:world_size])
    ax.imshow(grid, cmap=colours, vmin=-1, vmax=world_size - 1)
    if grid.size(0) <= 8:
        for i in range(grid.size(0)):
            for j in range(grid.size(1)):
                rank = int(grid[i, j])
                if rank >= 0:
                    ax.text(j, i, rank, ha="center", va="center", fontsize=10,
                            color="black" if RANK_COLOURS[rank] in (OKABE_ITO["orange"], OKABE_ITO["yellow"], OKABE_ITO["sky"]) else "white")
    ax.set_xticks(range(grid.size(1)))
    ax.set_yticks(range(grid.size(0)))
    ax.grid(False)
    label_axes(ax, "key chunk", "query chunk", f"{order}, p = {world_size}: rank computing each pair")


def ring_figure(world_size: int = 4, order: str = "zigzag", is_causal: bool = True) -> plt.Figure:
    """The chunk pairs each rank computes, and the score entries per rank at N = 1024."""
    work = ring_work_per_rank(world_size, LENGTH, order, is_causal)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.4, 3.8))
    draw_owner_grid(left, world_size, order, is_causal)
    right.bar(range(world_size), work, color=RANK_COLOURS[:world_size])
    right.axhline(sum(work) / world_size, color="black", ls="--", lw=1, label="average")
    right.set_xticks(range(world_size))
    label_axes(right, "rank", "score entries computed", f"work per rank, N = {LENGTH}")
    legend_below(right)  # under the x label: a legend inside covered the bars
    fig.tight_layout()
    return fig


def _readout(world_size: int, order: str, is_causal: bool) -> str:
    work = ring_work_per_rank(world_size, LENGTH, order, is_causal)
    balance = max(work) / (sum(work) / world_size)
    chunk = LENGTH // len(chunk_layout(world_size, order)[0]) // world_size
    return (f"<b>p = {world_size}, {order} order, {'causal' if is_causal else 'no mask'}</b>: score entries per rank "
            f"{work}; the slowest rank does {balance:.2f} x the average; largest score block {chunk} x {chunk}.")


def ring_widget(world_size: int = 4, order: str = "zigzag", is_causal: bool = True) -> widgets.VBox:
    """Ranks, chunk order and mask: the pairs each rank computes and how evenly the work is spread."""
    ranks = widgets.SelectionSlider(options=RANK_CHOICES, value=world_size, description="ranks p")
    orders = widgets.ToggleButtons(options=list(ORDERS), value=order, description="order")
    causal = widgets.Checkbox(value=is_causal, description="causal mask")
    return live_panel([ranks, orders, causal], _readout, ring_figure)
