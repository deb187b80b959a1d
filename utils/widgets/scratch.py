"""Chapter 9 widget: step through pure-Python attention one scalar at a time.

The steps are computed by a pure function of the inputs (:func:`scratch_steps`); the widget only
picks one and draws it.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from utils.plotting import SEQUENTIAL_CMAP
from utils.scratch_attention import matmul, softmax_rows, transpose
from utils.widgets import live_panel

Matrix = list[list[float]]


def _fmt(x: float) -> str:
    """A short number: 2, 0.5, 1.234."""
    return f"{x:.4g}"


def scratch_steps(q: Matrix, k: Matrix, v: Matrix) -> list[dict]:
    """Pure compute: every scalar step of attention_lists, in order, with the arithmetic shown.

    Each step is a dict with ``stage`` ("scores", "weights" or "output"), ``row``, ``col`` (None for a
    softmax row), ``formula`` (the arithmetic as text) and ``done``: how many entries of S, P and O
    (row-major; P counted in whole rows) are filled in after this step.
    """
    d_k = len(q[0])
    scale = 1.0 / math.sqrt(d_k)
    scores = [[x * scale for x in row] for row in matmul(q, transpose(k))]  # (T_q, T_k)
    weights = softmax_rows(scores)  # (T_q, T_k)
    t_q, t_k, d_v = len(q), len(k), len(v[0])
    steps: list[dict] = []
    for i in range(t_q):
        for j in range(t_k):
            terms = " + ".join(f"{_fmt(q[i][c])}×{_fmt(k[j][c])}" for c in range(d_k))
            formula = f"S[{i}][{j}] = (q{i} · k{j}) / √{d_k} = ({terms}) / {math.sqrt(d_k):.3f} = {scores[i][j]:.3f}"
            steps.append({"stage": "scores", "row": i, "col": j, "formula": formula,
                          "done": (i * t_k + j + 1, 0, 0)})
    for i in range(t_q):
        biggest = max(scores[i])
        exps = [math.exp(x - biggest) for x in scores[i]]
        formula = (
            f"P[{i}] = softmax(S[{i}]): max = {biggest:.3f}; exp(S[{i}][j] − max) = "
            f"[{', '.join(f'{e:.3f}' for e in exps)}]; sum = {sum(exps):.3f}; "
            f"P[{i}] = [{', '.join(f'{p:.3f}' for p in weights[i])}]"
        )
        steps.append({"stage": "weights", "row": i, "col": None, "formula": formula,
                      "done": (t_q * t_k, (i + 1) * t_k, 0)})
    for i in range(t_q):
        for c in range(d_v):
            terms = " + ".join(f"{weights[i][j]:.3f}×{_fmt(v[j][c])}" for j in range(t_k))
            value = sum(weights[i][j] * v[j][c] for j in range(t_k))
            formula = f"O[{i}][{c}] = Σ_j P[{i}][j] V[j][{c}] = {terms} = {value:.3f}"
            steps.append({"stage": "output", "row": i, "col": c, "formula": formula,
                          "done": (t_q * t_k, t_q * t_k, i * d_v + c + 1)})
    return steps


def _partial(matrix: Matrix, filled: int) -> np.ndarray:
    """The matrix with only its first ``filled`` entries (row-major) kept; the rest NaN."""
    array = np.array(matrix, dtype=float)
    flat = array.reshape(-1).copy()  # (rows * cols,)
    flat[filled:] = np.nan
    return flat.reshape(array.shape)  # (rows, cols)


def scratch_figure(q: Matrix, k: Matrix, v: Matrix, step: int = 0) -> plt.Figure:
    """Scores, weights and output of the example, filled in up to ``step``; the current entry outlined."""
    steps = scratch_steps(q, k, v)
    current = steps[step]
    scale = 1.0 / math.sqrt(len(q[0]))
    scores = [[x * scale for x in row] for row in matmul(q, transpose(k))]
    weights = softmax_rows(scores)
    output = matmul(weights, v)
    panels = [("scores", "S = QKᵀ/√d_k", scores), ("weights", "P = softmax(S)", weights),
              ("output", "O = PV", output)]
    cmap = plt.get_cmap(SEQUENTIAL_CMAP).copy()
    cmap.set_bad("white")
    fig, axes = plt.subplots(1, 3, figsize=(9.4, 3.4), gridspec_kw={"width_ratios": [3, 3, 2.4]})
    for ax, (stage, title, matrix), filled in zip(axes, panels, current["done"]):
        shown = _partial(matrix, filled)
        ax.imshow(shown, cmap=cmap, vmin=min(0.0, float(np.nanmin(matrix))), vmax=float(np.max(matrix)))
        rows, cols = shown.shape
        for i in range(rows):
            for j in range(cols):
                if not np.isnan(shown[i, j]):
                    ax.text(j, i, f"{shown[i, j]:.2f}", ha="center", va="center", color="white",
                            fontsize=10, bbox={"facecolor": "black", "alpha": 0.35, "pad": 1, "lw": 0})
        if stage == current["stage"]:
            width = cols if current["col"] is None else 1
            left = -0.5 if current["col"] is None else current["col"] - 0.5
            ax.add_patch(Rectangle((left, current["row"] - 0.5), width, 1, fill=False, lw=3,
                                   edgecolor="#D55E00"))
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.grid(False)
        ax.set_xlabel("value coordinate c" if stage == "output" else "key j")
        ax.set_ylabel("query i")
        ax.set_title(title)
    fig.suptitle(f"step {step + 1} of {len(steps)}: {current['stage']}")
    fig.tight_layout()
    return fig


def _readout(step: int, steps: list[dict]) -> str:
    return f"<b>step {step + 1} of {len(steps)}</b> ({steps[step]['stage']}): <code>{steps[step]['formula']}</code>"


def scratch_widget(q: Matrix, k: Matrix, v: Matrix, step: int = 0) -> widgets.VBox:
    """A step slider, a readout of the arithmetic at that step, and the partially filled matrices."""
    steps = scratch_steps(q, k, v)
    slider = widgets.IntSlider(value=step + 1, min=1, max=len(steps), description="step",
                               continuous_update=False)
    return live_panel(
        [slider], lambda s: _readout(s - 1, steps), lambda s: scratch_figure(q, k, v, s - 1), rows=[slider]
    )
