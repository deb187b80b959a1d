"""Chapter 5 widgets.

* ``positional_widget``: d_model and length -> the sinusoidal encoding and PE(pos)·PE(pos+k) against k.
* ``rope_alibi_widget``: d_k, base, trained length L and heads H -> RoPE's score against the offset (and
  which pairs never complete a turn within L), beside ALiBi's bias per head.
* ``extrapolation_widget``: schemes and an evaluation length T -> per-position accuracy from the
  chapter's stored runs (trained at L, evaluated up to 4L).

Each figure is a pure function of its parameters (and of the stored runs); the widgets only redraw it.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.ticker import MaxNLocator

from utils.plotting import OKABE_ITO, SEQUENTIAL_CMAP, label_axes
from utils.positional import alibi_slopes, sinusoidal_encoding, sinusoidal_frequencies
from utils.widgets import live_panel

# ---------------------------------------------------------------------------------------------------
# The sinusoidal encoding


def positional_summary(d_model: int, length: int, far: int = 10) -> dict[str, object]:
    """Pure compute: the encoding (length, d_model), offsets k, the dot product curve and key numbers.

    The curve is sum_i cos(k w_i), which equals PE(pos)·PE(pos+k) for every pos. ``off_peak_ratio`` is
    the mean of the curve over offsets with |k| >= ``far`` (returned too), divided by its peak d_model/2.
    """
    pe = sinusoidal_encoding(length, d_model)  # (T, d_model)
    omega = sinusoidal_frequencies(d_model)  # (d_model/2,)
    offsets = torch.arange(-(length - 1), length)  # (2T-1,)
    dots = torch.cos(offsets[:, None].double() * omega[None, :]).sum(-1)  # (2T-1,)
    away = dots[offsets.abs() >= 1]
    distant = dots[offsets.abs() >= far]
    peak = float(dots[length - 1])
    return {
        "pe": pe,
        "offsets": offsets,
        "dots": dots,
        "shortest_wavelength": float(2 * math.pi / omega[0]),
        "longest_wavelength": float(2 * math.pi / omega[-1]),
        "peak": peak,
        "largest_off_peak": float(away.max()) if away.numel() else float("nan"),
        "off_peak_ratio": float(distant.mean()) / peak if distant.numel() else float("nan"),
        "far": far,
    }


def positional_figure(d_model: int = 64, length: int = 128) -> plt.Figure:
    """Heat map of PE (dimensions × positions) and the dot product against the offset k."""
    summary = positional_summary(d_model, length)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    image = ax1.imshow(summary["pe"].T.numpy(), cmap=SEQUENTIAL_CMAP, aspect="auto", origin="lower", vmin=-1, vmax=1)
    ax1.grid(False)
    for axis in (ax1.xaxis, ax1.yaxis):  # positions and dimensions are whole numbers, even at d_model = 4
        axis.set_major_locator(MaxNLocator(integer=True))
    label_axes(ax1, "position pos", "dimension", f"PE, d_model = {d_model}, {length} positions")
    fig.colorbar(image, ax=ax1, label="value")
    ax2.plot(summary["offsets"].numpy(), summary["dots"].numpy(), color=OKABE_ITO["blue"])
    ax2.axhline(summary["off_peak_ratio"] * summary["peak"], color="grey", ls=":", lw=1, label=f"mean over |k| ≥ {summary['far']}")
    ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), borderaxespad=0)  # below: the curve fills the panel
    label_axes(ax2, "offset k (positions)", "PE(pos) · PE(pos + k)", "Dot product against offset")
    fig.tight_layout()
    return fig


def _readout(d_model: int, length: int) -> str:
    s = positional_summary(d_model, length)
    wavelengths = f"wavelengths from {s['shortest_wavelength']:.1f} to {s['longest_wavelength']:,.0f} positions"
    dots = f"dot product {s['peak']:.0f} at k = 0, at most {s['largest_off_peak']:.1f} elsewhere"
    share = f"mean over |k| &ge; {s['far']} is {s['off_peak_ratio']:.2f} of the peak"
    return f"<b>d_model = {d_model}</b>, {length} positions: {wavelengths}; {dots}; {share}"


def positional_widget(d_model: int = 64, length: int = 128) -> widgets.VBox:
    """Sliders for d_model and the number of positions, a text readout and the two plots."""
    d_slider = widgets.IntSlider(value=d_model, min=4, max=256, step=4, description="d_model")
    length_slider = widgets.IntSlider(value=length, min=16, max=512, step=8, description="positions")
    return live_panel([d_slider, length_slider], _readout, positional_figure)


# ---------------------------------------------------------------------------------------------------
# RoPE and ALiBi against the offset


def rope_alibi_summary(d_k: int = 64, base: float = 10000.0, train_length: int = 24, num_heads: int = 4,
                       span: int = 4) -> dict[str, object]:
    """Pure compute for offsets k = 0 .. span * train_length.

    ``rope_mean``: the mean over random q of q·R_k q / |q|^2, which is (2/d_k) sum_i cos(k theta_i);
    ``turns``: how many full turns pair i makes over train_length positions, L theta_i / (2 pi);
    ``unseen_pairs``: pairs that turn less than once within L (their angles past L were never seen
    in training); ``alibi``: the bias -s_h k of every head (H, K).
    """
    theta = sinusoidal_frequencies(d_k, base)  # (d_k/2,)
    offsets = torch.arange(0, span * train_length + 1)  # (K,)
    rope_mean = (2.0 / d_k) * torch.cos(offsets[:, None].double() * theta[None, :]).sum(-1)  # (K,)
    turns = train_length * theta / (2 * math.pi)  # (d_k/2,)
    slopes = alibi_slopes(num_heads).double()  # (H,)
    return {
        "offsets": offsets,
        "rope_mean": rope_mean,
        "turns": turns,
        "unseen_pairs": int((turns < 1).sum()),
        "slopes": slopes,
        "alibi": -slopes[:, None] * offsets[None, :].double(),
    }


def rope_alibi_figure(d_k: int = 64, base: float = 10000.0, train_length: int = 24, num_heads: int = 4) -> plt.Figure:
    """Left: RoPE's mean normalised score against the offset; right: ALiBi's bias per head."""
    s = rope_alibi_summary(d_k, base, train_length, num_heads)
    offsets = s["offsets"].numpy()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.4, 3.8))
    ax1.plot(offsets, s["rope_mean"].numpy(), color=OKABE_ITO["vermillion"])
    ax1.axvspan(train_length, offsets[-1], color="grey", alpha=0.15, label="offsets never seen (k > L)")
    ax1.set_ylim(-0.4, 1.05)
    ax1.legend(loc="lower left")  # the curve starts at 1 on the left and the band fills the right
    label_axes(ax1, "offset k (positions)", "mean of q · R_k q / (q · q)",
               f"RoPE, d_k = {d_k}, base = {base:,.0f}")
    colours = list(OKABE_ITO.values())
    for h in range(num_heads):
        ax2.plot(offsets, s["alibi"][h].numpy(), color=colours[h % len(colours)], lw=1.5,
                 ls=("-", "--", ":", "-.")[h // len(colours) % 4],
                 label=f"head {h + 1}: slope 1/{1 / s['slopes'][h]:.3g}")
    ax2.axvline(train_length, color="grey", ls=":", lw=1, label=f"trained length L = {train_length}")
    ax2.set_ylim(-max(8.0, 1.0), 0.5)
    if num_heads <= 8:  # beside the axes: inside, every corner is crossed by some head's line
        ax2.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    label_axes(ax2, "offset i − j (positions)", "bias added to the score", f"ALiBi, H = {num_heads} heads")
    fig.tight_layout()
    return fig


def _rope_readout(d_k: int, base_exponent: float, train_length: int, num_heads: int) -> str:
    base = 10.0**base_exponent
    s = rope_alibi_summary(d_k, base, train_length, num_heads)
    slopes = ", ".join(f"2^{math.log2(v):.1f}" for v in s["slopes"].tolist())
    return (
        f"<b>RoPE</b>: {s['unseen_pairs']} of {d_k // 2} pairs turn less than once within L = {train_length} "
        f"(their angles past L are new to the model). <b>ALiBi</b> slopes: {slopes}"
    )


def rope_alibi_widget(d_k: int = 64, train_length: int = 24, num_heads: int = 4) -> widgets.VBox:
    """Sliders for d_k, log10(base), the trained length L and the number of ALiBi heads."""
    d_slider = widgets.IntSlider(value=d_k, min=8, max=256, step=8, description="d_k")
    base_slider = widgets.FloatSlider(value=4.0, min=2.0, max=6.0, step=0.5, description="log10 base")
    length_slider = widgets.IntSlider(value=train_length, min=8, max=128, step=8, description="L")
    heads_slider = widgets.IntSlider(value=num_heads, min=1, max=16, description="ALiBi heads")
    return live_panel(
        [d_slider, base_slider, length_slider, heads_slider],
        _rope_readout,
        lambda d, b, L, H: rope_alibi_figure(d, 10.0**b, L, H),
    )


# ---------------------------------------------------------------------------------------------------
# Extrapolation: per-position accuracy from the stored runs

SCHEMES = ("sinusoidal", "learned", "rope", "alibi", "rope + interpolation")
STYLES = {
    "sinusoidal": (OKABE_ITO["blue"], "-"),
    "learned": (OKABE_ITO["black"], "-"),
    "rope": (OKABE_ITO["vermillion"], "-"),
    "alibi": (OKABE_ITO["green"], "--"),
    "rope + interpolation": (OKABE_ITO["purple"], ":"),
}


def _moving_average(values: list[float], window: int) -> list[float]:
    """Centred moving average (shorter windows at the ends), so features do not shift along t."""
    out = []
    for t in range(len(values)):
        chunk = values[max(0, t - window // 2) : t + window - window // 2]
        out.append(sum(chunk) / len(chunk))
    return out


def extrapolation_summary(result: dict, scheme: str, length: int) -> dict[str, object]:
    """Pure lookup: per-position accuracy of ``scheme`` on sequences of ``length`` (from the stored runs),
    and its mean over all positions, over t < L and over t >= L (None where the scheme cannot run)."""
    train_length = result["train_length"]
    if scheme == "rope + interpolation":
        values = result["interpolation"].get(length)
    else:
        values = result["per_position"][scheme]
        values = values[:length] if len(values) >= length else None
    if values is None:
        return {"values": None, "all": None, "early": None, "late": None}
    late = values[train_length:]
    return {
        "values": values,
        "all": sum(values) / len(values),
        "early": sum(values[:train_length]) / min(train_length, len(values)),
        "late": sum(late) / len(late) if late else None,
    }


def extrapolation_figure(result: dict, schemes: tuple[str, ...] = SCHEMES, length: int | None = None,
                         window: int = 6) -> plt.Figure:
    """Per-position accuracy (moving average over ``window`` positions) for the chosen schemes."""
    train_length = result["train_length"]
    length = length or max(result["interpolation"])
    fig, ax = plt.subplots(figsize=(9.4, 3.8))
    for scheme in schemes:
        s = extrapolation_summary(result, scheme, length)
        colour, style = STYLES[scheme]
        if s["values"] is None:  # the learned table: only up to L
            s = extrapolation_summary(result, scheme, train_length)
            label = f"{scheme} (no vectors past L)"
        else:
            label = scheme
        ax.plot(range(len(s["values"])), _moving_average(s["values"], window), style, color=colour,
                lw=4 if scheme == "learned" else 2, label=label, zorder=1 if scheme == "learned" else 2)
    ax.axvline(train_length, color="grey", ls=":", lw=1)
    ax.annotate("trained length L", (train_length + 0.5, 0.03), color="grey")
    ax.set_xlim(0, length - 1)
    ax.set_ylim(0.0, 1.02)
    label_axes(ax, "position t in the sequence", f"accuracy (centred mean over {window} positions)",
               f"Trained at L = {train_length}, evaluated on sequences of length T = {length}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)  # beside the curves, not over them
    fig.tight_layout()
    return fig


def _extrapolation_readout(result: dict, schemes: tuple[str, ...], length: int) -> str:
    rows = []
    for scheme in schemes:
        s = extrapolation_summary(result, scheme, length)
        if s["values"] is None:
            rows.append(f"{scheme}: cannot run at T = {length}")
        else:
            late = "" if s["late"] is None else f", t &ge; L {s['late']:.2f}"
            rows.append(f"{scheme}: all {s['all']:.2f}, t &lt; L {s['early']:.2f}{late}")
    return f"<b>T = {length}</b>: " + "; ".join(rows)


def extrapolation_widget(result: dict) -> widgets.VBox:
    """Pick schemes and an evaluation length; read per-position accuracy from the stored runs."""
    choose = widgets.SelectMultiple(options=list(SCHEMES), value=list(SCHEMES), description="schemes", rows=5)
    length = widgets.SelectionSlider(options=sorted(result["interpolation"]), value=max(result["interpolation"]),
                                     description="length T")
    return live_panel(
        [choose, length],
        lambda schemes, T: _extrapolation_readout(result, tuple(schemes), T),
        lambda schemes, T: extrapolation_figure(result, tuple(schemes), T),
    )
