"""Chapter 7 widget: depth, learning rate and warm-up -> Post-LN and Pre-LN training-loss curves.

Training happens once, in the notebook; the widget only looks up the runs it was given.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt

from utils.plotting import OKABE_ITO, label_axes
from utils.widgets import live_panel

# (depth, learning rate, warm-up steps, norm_first) -> {"loss": [...], "test_accuracy": [acc]}
Runs = dict[tuple[int, float, int, bool], dict[str, list[float]]]


def loss_summary(runs: Runs, depth: int, lr: float, warmup: int) -> dict[str, float]:
    """Pure lookup: final loss (mean of the last 10 steps) and test accuracy for both placements."""
    summary: dict[str, float] = {}
    for norm_first, name in ((False, "post"), (True, "pre")):
        history = runs[(depth, lr, warmup, norm_first)]
        tail = history["loss"][-10:]
        summary[f"{name}_final_loss"] = sum(tail) / len(tail)
        summary[f"{name}_accuracy"] = history["test_accuracy"][0]
    return summary


def loss_curves_figure(runs: Runs, depth: int, lr: float, warmup: int, vocab: int = 16) -> plt.Figure:
    """Loss against step for Post-LN and Pre-LN at one (depth, lr, warm-up) setting."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    summary = loss_summary(runs, depth, lr, warmup)
    for norm_first, name, color, style in (
        (False, "post", OKABE_ITO["vermillion"], "-"),
        (True, "pre", OKABE_ITO["blue"], "--"),
    ):
        label = f"{'Pre' if norm_first else 'Post'}-LN (test accuracy {summary[f'{name}_accuracy']:.0%})"
        ax.plot(runs[(depth, lr, warmup, norm_first)]["loss"], style, color=color, label=label)
    ax.axhline(math.log(vocab), color="grey", lw=1, ls=":", label=f"chance, ln {vocab}")
    ax.set_ylim(0, 1.25 * math.log(vocab))
    label_axes(
        ax,
        "training step",
        "cross-entropy loss (nats)",
        f"depth {depth}, learning rate {lr:g}, warm-up {warmup} steps",
    )
    ax.legend()
    fig.tight_layout()
    return fig


def _readout(runs: Runs, depth: int, lr: float, warmup: int) -> str:
    s = loss_summary(runs, depth, lr, warmup)
    return (
        f"<b>depth {depth}, lr {lr:g}, warm-up {warmup}</b>: final loss Post-LN "
        f"{s['post_final_loss']:.2f} (accuracy {s['post_accuracy']:.0%}), Pre-LN "
        f"{s['pre_final_loss']:.2f} (accuracy {s['pre_accuracy']:.0%})"
    )


def loss_curves_widget(runs: Runs, depth: int = 6, lr: float = 2e-2, warmup: int = 0) -> widgets.VBox:
    """Controls for the settings present in ``runs``, a text readout and the loss curves."""
    depths = sorted({k[0] for k in runs})
    lrs = sorted({k[1] for k in runs})
    warmups = sorted({k[2] for k in runs})
    depth_w = widgets.ToggleButtons(options=depths, value=depth, description="depth")
    lr_w = widgets.ToggleButtons(options=[(f"{v:g}", v) for v in lrs], value=lr, description="lr")
    warm_w = widgets.ToggleButtons(options=warmups, value=warmup, description="warm-up")
    controls = [depth_w, lr_w, warm_w]
    return live_panel(
        controls, lambda *v: _readout(runs, *v), lambda *v: loss_curves_figure(runs, *v), rows=controls
    )
