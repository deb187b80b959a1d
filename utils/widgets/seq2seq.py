"""Chapter 6 widget: type a string -> the trained reversal model's output and cross-attention map.

The model is trained once, in the notebook; the widget only runs greedy decoding on it (cheap).
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from utils.plotting import SEQUENTIAL_CMAP, label_axes
from utils.transformer_blocks import BOS, Seq2Seq, decode_tokens, greedy_decode, source_tensor
from utils.widgets import live_panel


@torch.no_grad()
def cross_attention_map(model: Seq2Seq, text: str, max_len: int = 8) -> tuple[str, torch.Tensor, str]:
    """Pure compute: greedy output for ``text`` and the last decoder block's cross-attention.

    Returns (the source letters kept, weights (T_out, T_enc) averaged over heads, the output).
    Row t of the weights is the step that wrote output letter t.
    """
    was_training = model.training
    model.eval()
    src = source_tensor(text, max_len, device=next(model.parameters()).device)  # (1, T_enc)
    out = greedy_decode(model, src, max_len + 1)  # (1, max_len + 1)
    output = decode_tokens(out[0].tolist())
    prefix = out[:, : max(len(output) - 1, 0)]  # (1, n - 1): the model's own letters
    tgt_in = torch.cat([torch.full((1, 1), BOS, device=src.device), prefix], dim=1)  # (1, max(n, 1))
    memory, allowed = model.encode(src)
    model.decode(tgt_in, memory, allowed, need_weights=True)  # a teacher-forced pass over its own output
    weights = model.decoder[-1].last_cross_weights[0].mean(0).cpu()  # (T_out, T_enc), mean over heads
    model.train(was_training)
    return decode_tokens(src[0].tolist()), weights, output


def cross_attention_figure(model: Seq2Seq, text: str) -> plt.Figure:
    """Heat map of the cross-attention: output letters (rows) against source positions (columns)."""
    kept, weights, output = cross_attention_map(model, text)
    n_src = weights.shape[1]
    src_labels = ["·"] * (n_src - len(kept)) + list(kept)  # PAD positions shown as a dot
    fig, ax = plt.subplots(figsize=(4.8, 4.0))
    image = ax.imshow(weights.numpy(), cmap=SEQUENTIAL_CMAP, vmin=0, vmax=1)
    ax.set_xticks(range(n_src), src_labels)
    ax.set_yticks(range(weights.shape[0]), list(output) if output else ["(EOS)"])
    ax.grid(False)
    label_axes(
        ax, "source position (letter; · = padding)", "output letter (decoder step)", f"{kept!r} → {output!r}"
    )
    fig.colorbar(image, ax=ax, label="attention weight")
    fig.tight_layout()
    return fig


def _readout(model: Seq2Seq, text: str) -> str:
    kept, _, output = cross_attention_map(model, text)
    verdict = "correct" if output == kept[::-1] else f"wrong (expected {kept[::-1]!r})"
    return f"input <b>{kept or '(no letters)'}</b> → output <b>{output or '(empty)'}</b>: {verdict}"


def seq2seq_widget(model: Seq2Seq, text: str = "encoder") -> widgets.VBox:
    """A text box (letters a–z, up to 8 used), a readout, and the cross-attention heat map."""
    box = widgets.Text(value=text, description="input", continuous_update=False)
    return live_panel(
        [box], lambda t: _readout(model, t), lambda t: cross_attention_figure(model, t), rows=[box]
    )
