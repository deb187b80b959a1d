"""Chapter 8 widget and figures: the cost of each layer at (N, d), the tiling diagram, the GPU latency record."""

from __future__ import annotations

import json
from pathlib import Path

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, Rectangle

from utils.efficient_attention import attention_flops, crossover_length, layer_costs, lstm_flops
from utils.plotting import OKABE_ITO, label_axes
from utils.widgets import live_panel

N_CHOICES = [2**p for p in range(4, 17)]  # 16 .. 65536
D_CHOICES = [32, 64, 128, 256, 512, 1024, 2048]
# five hues apart in the Okabe-Ito set, each with its own marker and dash, so no two curves rely on colour alone
COLORS = [OKABE_ITO[c] for c in ("blue", "orange", "green", "vermillion", "purple")]
STYLES = ["o-", "s--", "d-.", "^:", "v-"]
RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
GPU_LATENCY = RESULTS / "gpu_latency_2026-11-30.json"


def complexity_summary(n: int, d: int, k: int = 3, r: int = 16) -> dict[str, object]:
    """Pure compute: the architecture matrix at (n, d), and where attention stops beating the LSTM.

    ``crossover_n`` is found by bisection on the FLOP formulas (``crossover_length``), not typed in; it
    lands on 2d, as chapter 8 derives.
    """
    costs = layer_costs(n, d, k=k, r=r)
    return {
        "costs": costs,
        "crossover_n": crossover_length(attention_flops, lstm_flops, d),
        "attention_over_lstm": round(costs["self-attention"]["flops"] / costs["LSTM"]["flops"], 3),
    }


def complexity_figure(n: int, d: int, k: int = 3, r: int = 16) -> plt.Figure:
    """FLOPs per layer against N at width d: the chosen N as a dashed line, the crossover as a point."""
    summary = complexity_summary(n, d, k=k, r=r)
    fig, ax = plt.subplots(figsize=(9.2, 3.8))
    names = list(summary["costs"])
    for name, color, style in zip(names, COLORS, STYLES):
        flops = [layer_costs(m, d, k=k, r=r)[name]["flops"] for m in N_CHOICES]
        ax.loglog(N_CHOICES, flops, style, color=color, label=name, markersize=4)
    cross = summary["crossover_n"]
    ax.plot([cross], [attention_flops(cross, d)], "o", markersize=11, markerfacecolor="none",
            markeredgecolor=OKABE_ITO["black"], markeredgewidth=2, label=f"attention = LSTM at N = {cross}", zorder=5)
    ax.axvline(n, color=OKABE_ITO["black"], ls="--", lw=1, label=f"chosen N = {n}")
    label_axes(ax, "sequence length N (tokens)", "FLOPs per layer", f"Work per layer at d = {d}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)  # beside the curves, not over them
    fig.tight_layout()
    return fig


_CELL = 'style="padding: 2px 10px; text-align: right"'
_HEAD = 'style="padding: 2px 10px; text-align: right; border-bottom: 1px solid #888"'


def _readout(n: int, d: int) -> str:
    summary = complexity_summary(n, d)
    rows = "".join(
        f'<tr><td style="padding: 2px 10px">{name}</td><td {_CELL}>{c["flops"]:.3g}</td>'
        f"<td {_CELL}>{c['sequential']}</td><td {_CELL}>{c['path']}</td>"
        f"<td {_CELL}>{c['largest'] * 4 / 2**20:.3g}</td></tr>"
        for name, c in summary["costs"].items()
    )
    ratio = summary["attention_over_lstm"]
    verdict = "cheaper than" if ratio < 1 else ("as cheap as" if ratio == 1 else "more expensive than")
    return (
        f"<b>N = {n}, d = {d}</b>: self-attention is {verdict} the LSTM in FLOPs "
        f"(ratio {ratio}; crossover at N = {summary['crossover_n']} = 2d)."
        '<table style="border-collapse: collapse; margin-top: 6px">'
        f'<tr><th style="padding: 2px 10px; text-align: left; border-bottom: 1px solid #888">layer</th>'
        f"<th {_HEAD}>FLOPs</th><th {_HEAD}>sequential steps</th><th {_HEAD}>path length</th>"
        f"<th {_HEAD}>largest tensor (MiB, float32, one head)</th></tr>" + rows + "</table>"
    )


def complexity_widget(n: int = 4096, d: int = 512) -> widgets.VBox:
    """Sliders for N and d, a table of the layer costs, and the FLOPs chart."""
    n_slider = widgets.SelectionSlider(options=N_CHOICES, value=n, description="N")
    d_slider = widgets.SelectionSlider(options=D_CHOICES, value=d, description="d")
    return live_panel([n_slider, d_slider], _readout, complexity_figure)


def tiling_figure(n_blocks: int = 6, current: tuple[int, int] = (3, 2), causal: bool = True) -> plt.Figure:
    """The tiled attention's loop: query blocks × key blocks, and where m, ℓ and the accumulator live.

    ``current`` is (query block, key block) of the tile being computed.
    """
    if not isinstance(n_blocks, int) or n_blocks < 2:
        raise ValueError(f"n_blocks must be an int >= 2, got {n_blocks!r}")
    qi, kj = current
    if not (0 <= qi < n_blocks and 0 <= kj < n_blocks) or (causal and kj > qi):
        raise ValueError(f"current must be a tile the loop visits, got {current!r}")
    # one panel above the other: side by side, the book's column would shrink their labels below 11 px
    fig, (grid, state) = plt.subplots(2, 1, figsize=(8.2, 9.8), gridspec_kw={"height_ratios": [1.15, 1]})
    for i in range(n_blocks):
        for j in range(n_blocks):
            skipped = causal and j > i
            if skipped:
                face, hatch = "white", "///"
            elif i < qi:
                face, hatch = "#dddddd", None
            elif i == qi and j <= kj:
                face, hatch = OKABE_ITO["sky"], None
            else:
                face, hatch = "white", None
            grid.add_patch(Rectangle((j, n_blocks - 1 - i), 1, 1, facecolor=face, edgecolor="grey", hatch=hatch, lw=0.8))
    grid.add_patch(Rectangle((kj, n_blocks - 1 - qi), 1, 1, fill=False, edgecolor=OKABE_ITO["vermillion"], lw=3))
    y = n_blocks - 1 - qi + 0.5
    end = qi + 1 if causal else n_blocks
    grid.add_patch(FancyArrowPatch((0.1, y - 0.3), (end - 0.1, y - 0.3), arrowstyle="->", mutation_scale=12,
                                   color=OKABE_ITO["black"], lw=1))
    grid.set_xlim(0, n_blocks)
    grid.set_ylim(0, n_blocks)
    grid.set_aspect("equal")
    grid.set_xticks([j + 0.5 for j in range(n_blocks)], [f"K{j},V{j}" for j in range(n_blocks)])
    grid.set_yticks([n_blocks - 1 - i + 0.5 for i in range(n_blocks)], [f"Q{i}" for i in range(n_blocks)])
    grid.grid(False)
    label_axes(grid, "key and value blocks (block_k rows each)", "query blocks (block_q rows each)",
               "Tiles of S = QKᵀ: grey done, blue this query block,\nred the current tile"
               + (", hatched skipped (future keys)" if causal else ""))
    state.set_xlim(0, 12)
    state.set_ylim(0, 8)
    state.set_axis_off()
    boxes = [
        ((0.3, 1.0), 0.7, 5.5, OKABE_ITO["orange"], "m"),
        ((1.3, 1.0), 0.7, 5.5, OKABE_ITO["yellow"], "ℓ"),
        ((2.3, 1.0), 2.4, 5.5, OKABE_ITO["green"], "a"),
        ((6.0, 1.0), 3.8, 5.5, OKABE_ITO["sky"], f"tile S({qi},{kj})"),
    ]
    for (x, y0), w, h, color, name in boxes:
        state.add_patch(Rectangle((x, y0), w, h, facecolor=color, edgecolor="black", alpha=0.8))
        state.text(x + w / 2, y0 + h / 2, name, ha="center", va="center", fontsize=13)
    state.add_patch(Rectangle((10.2, 4.0), 1.5, 2.5, facecolor="#dddddd", edgecolor="black"))
    state.text(10.95, 5.25, f"K{kj}\nV{kj}", ha="center", va="center", fontsize=10)
    state.text(2.5, 7.3, f"kept during Q{qi}'s whole key loop:\nm, ℓ: one number per query row\n"
                         "a: one vector (d_v) per query row", ha="center", va="center", fontsize=10.5)
    state.text(7.9, 7.3, f"one tile (block_q × block_k):\nQ{qi}K{kj}ᵀ, exp, times V{kj},\nthen discarded",
               ha="center", va="center", fontsize=10.5)
    state.text(10.95, 3.3, "read from\nmemory", ha="center", va="top", fontsize=10.5)
    state.text(6.0, 0.35, "On a GPU (chapter 11) all of this lives in one kernel's registers and on-chip SRAM;\n"
                          "here it is ordinary tensors, and the tile stays in the CPU's cache.",
               ha="center", va="center", fontsize=10.5, style="italic")
    state.set_title("Where the running statistics live")
    fig.tight_layout()
    return fig


def load_gpu_latency(path: Path = GPU_LATENCY) -> dict:
    """The recorded GPU training-latency measurements (an H200, 2026-11-30) that chapter 8 charts."""
    data = json.loads(Path(path).read_text())
    for key in ("rows", "source", "device"):
        if key not in data:
            raise ValueError(f"{path}: the record has no {key!r} field")
    return data
