"""Chapter 11 widget: the fused kernels' tile size -> global-memory traffic, arithmetic intensity and the
roofline floors of one training step (counted from the kernels' schedule, not timed)."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from utils.flash_attention import fused_attention_traffic, sdpa_flops
from utils.plotting import OKABE_ITO, label_axes
from utils.widgets import live_panel

N_CHOICES = [1024, 2048, 4096, 8192, 16384, 32768]
TILE_CHOICES = [16, 32, 64, 128, 256]
DTYPE_BYTES = {"bfloat16": 2, "float32": 4}
PEAK_FLOPS = {"bfloat16": 989e12, "float32": 67e12}  # H200 vendor figures: dense tensor cores / plain float32
HBM_BYTES_PER_S = 4.8e12
BATCH, HEADS, D = 4, 8, 64


def traffic_summary(n: int, tile: int, dtype: str = "bfloat16", causal: bool = True) -> dict[str, float]:
    """One training step at batch 4, 8 heads, d = 64: bytes requested, FLOPs, intensity and time floors.

    ``tile`` is the block of rows each program owns (queries in the forward and dQ kernels, keys in the
    dK/dV kernel); the block it streams is 64 rows.
    """
    if n not in N_CHOICES or tile not in TILE_CHOICES or dtype not in DTYPE_BYTES:
        raise ValueError(f"n must be in {N_CHOICES}, tile in {TILE_CHOICES}, dtype in {list(DTYPE_BYTES)}; "
                         f"got {n}, {tile}, {dtype!r}")
    blocks = {"forward": (tile, 64), "dkdv": (64, tile), "dq": (tile, 64)}
    moved = sum(fused_attention_traffic(n, n, D, D, BATCH * HEADS, DTYPE_BYTES[dtype], causal, blocks).values())
    flops = sdpa_flops(BATCH * HEADS, n, n, D, causal, backward=True)
    compute_ms, memory_ms = flops / PEAK_FLOPS[dtype] * 1e3, moved / HBM_BYTES_PER_S * 1e3
    return {"gigabytes": moved / 1e9, "gflops": flops / 1e9, "intensity": flops / moved,
            "balance": PEAK_FLOPS[dtype] / HBM_BYTES_PER_S, "compute_ms": compute_ms, "memory_ms": memory_ms}


def traffic_figure(n: int, tile: int, dtype: str = "bfloat16", causal: bool = True) -> plt.Figure:
    """Arithmetic intensity (FLOPs per byte requested) against the tile size, with the chip's balance."""
    fig, ax = plt.subplots(figsize=(9.2, 3.8))
    values = [traffic_summary(n, t, dtype, causal)["intensity"] for t in TILE_CHOICES]
    ax.semilogx(TILE_CHOICES, values, "o-", color=OKABE_ITO["blue"], base=2, label="fused kernels (counted)")
    chosen = traffic_summary(n, tile, dtype, causal)
    ax.axhline(chosen["balance"], color=OKABE_ITO["vermillion"], ls="--", lw=1,
               label=f"H200 balance: {chosen['balance']:.0f} FLOPs per byte ({dtype})")
    ax.plot([tile], [chosen["intensity"]], "s", color=OKABE_ITO["black"], markersize=8, label=f"chosen tile = {tile}")
    label_axes(ax, "tile size (rows per program)", "FLOPs per byte of global traffic",
               f"One training step, N = {n}, {'causal' if causal else 'no mask'}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)  # beside the curve, not over it
    fig.tight_layout()
    return fig


def _readout(n: int, tile: int, dtype: str, causal: bool) -> str:
    s = traffic_summary(n, tile, dtype, causal)
    bound = "arithmetic" if s["compute_ms"] >= s["memory_ms"] else "memory traffic"
    return (f"<b>N = {n}, tile = {tile}, {dtype}</b>: {s['gigabytes']:.2f} GB requested for {s['gflops']:.0f} GFLOPs "
            f"({s['intensity']:.0f} FLOPs per byte). Floors on an H200: arithmetic {s['compute_ms']:.2f} ms, "
            f"traffic {s['memory_ms']:.2f} ms: the larger is {bound} (the L2 cache lowers the traffic floor).")


def traffic_widget(n: int = 8192, tile: int = 128) -> widgets.VBox:
    """Controls for N, the tile size, the dtype and the mask; the readout and the intensity chart."""
    n_control = widgets.SelectionSlider(options=N_CHOICES, value=n, description="N")
    tile_control = widgets.SelectionSlider(options=TILE_CHOICES, value=tile, description="tile")
    dtype_control = widgets.ToggleButtons(options=list(DTYPE_BYTES), value="bfloat16", description="dtype")
    causal_control = widgets.Checkbox(value=True, description="causal")
    controls = [n_control, tile_control, dtype_control, causal_control]
    return live_panel(controls, _readout, traffic_figure,
                      rows=[widgets.HBox([n_control, tile_control]), widgets.HBox([dtype_control, causal_control])])
