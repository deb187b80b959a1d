"""Chapter 12 widgets: a date -> the trained translator's output and cross-attention map; a prompt and a
temperature -> text from the course's language model.

The models are trained once, in the notebook; the widgets only run them. The compute functions
(``translate_with_attention``, ``generation_text``) are pure functions of their arguments: the same
inputs (and the fixed sampling seed) give the same output.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from utils.generation import GPT, WordVocab, generate
from utils.plotting import SEQUENTIAL_CMAP, label_axes
from utils.transformer import (
    BOS,
    EOS,
    PAD,
    TGT_LEN,
    VOCAB,
    Transformer,
    encode_pairs,
    tokenize_source,
)
from utils.transformer_blocks import greedy_decode
from utils.widgets import Panel, live_panel

EOS_TOKEN = VOCAB[EOS]


@torch.no_grad()
def translate_with_attention(model: Transformer, text: str) -> tuple[list[str], list[str], torch.Tensor]:
    """Greedy translation of ``text`` and the last decoder layer's cross-attention, averaged over heads.

    Returns (source tokens, output tokens with "<eos>" last when the model emitted it, weights
    (T_out, T_src)). Row t of the weights is the decoder step that wrote output token t. Raises
    ValueError for text the vocabulary cannot express.
    """
    source = tokenize_source(text)
    device = next(model.parameters()).device
    src, _, _ = encode_pairs([(source, [])], device)  # (1, SRC_LEN)
    was_training = model.training
    model.eval()
    out = greedy_decode(model, src, TGT_LEN)[0]  # (TGT_LEN,)
    n_out = int((out != PAD).sum())  # tokens up to and including EOS
    decoded = out[:n_out]
    tgt_in = torch.cat([torch.tensor([BOS], device=device), decoded[:-1]])[None]  # (1, n_out)
    memory, allowed = model.encode(src)
    _, weights = model.decode(tgt_in, memory, allowed, need_weights=True)
    model.train(was_training)
    tokens = [VOCAB[i] for i in decoded.tolist()]
    return source, tokens, weights[-1][0, :, : len(source)].cpu()  # (n_out, T_src): real source tokens only


def translation_figure(model: Transformer, text: str) -> plt.Figure:
    """Heat map of the cross-attention: output tokens (rows) against source tokens (columns)."""
    source, tokens, weights = translate_with_attention(model, text)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(source) + 2.2), max(3.2, 0.32 * len(tokens) + 1.6)))
    image = ax.imshow(weights.numpy(), cmap=SEQUENTIAL_CMAP, vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(source)), source, rotation=45, ha="right")
    ax.set_yticks(range(len(tokens)), tokens)
    ax.grid(False)
    output = "".join(t for t in tokens if t != "<eos>")
    label_axes(ax, "source token", "output token (decoder step)", f"{' '.join(source)} → {output}")
    fig.colorbar(image, ax=ax, label="cross-attention weight")
    fig.tight_layout()
    return fig


def _translation_readout(model: Transformer, text: str) -> str:
    try:
        source, tokens, _ = translate_with_attention(model, text)
    except ValueError as error:
        return f"<b>cannot translate:</b> {html.escape(str(error))}"
    output = "".join(t for t in tokens if t != EOS_TOKEN)
    return f"source <b>{html.escape(' '.join(source))}</b> → <b>{html.escape(output or '(empty)')}</b>"


def _translation_figure_or_note(model: Transformer, text: str) -> plt.Figure:
    """The cross-attention map, or, for text the vocabulary cannot express, an empty panel saying so."""
    try:
        return translation_figure(model, text)
    except ValueError:
        fig, ax = plt.subplots(figsize=(4.0, 1.2))
        ax.axis("off")
        ax.text(0.5, 0.5, "no map: the date cannot be translated (see above)", ha="center", va="center")
        return fig


def translation_widget(model: Transformer, text: str = "march 21, 1999") -> Panel:
    """A text box (a date in one of the nine formats), the translation, and the cross-attention map."""
    box = widgets.Text(value=text, description="date", continuous_update=False,
                       layout=widgets.Layout(width="420px"))
    return live_panel([box], lambda value: _translation_readout(model, value),
                      lambda value: _translation_figure_or_note(model, value))


def generation_text(model: GPT, vocab: WordVocab, prompt: str, temperature: float = 0.8, top_k: int | None = 20,
                    new_tokens: int = 40, seed: int = 0) -> str:
    """Pure compute: the continuation of ``prompt`` (fixed sampling seed), as text."""
    ids = vocab.encode(prompt)
    if not ids:
        raise ValueError("the prompt must contain at least one word of the course's vocabulary")
    device = next(model.parameters()).device
    out, _ = generate(model, torch.tensor([ids], device=device), new_tokens, temperature=temperature,
                      top_k=top_k, seed=seed)
    return vocab.decode(out[0].tolist())


def _generation_readout(model: GPT, vocab: WordVocab, prompt: str, temperature: float, top_k: int) -> str:
    try:
        text = generation_text(model, vocab, prompt, temperature, top_k or None)
    except ValueError as error:
        return f"<b>cannot continue:</b> {html.escape(str(error))}"
    return f"<pre style='white-space: pre-wrap'>{html.escape(text)}</pre>"


def generation_widget(model: GPT, vocab: WordVocab, prompt: str = "the attention") -> Panel:
    """A prompt, a temperature slider (0 = greedy) and a top-k slider (0 = off) -> generated text."""
    box = widgets.Text(value=prompt, description="prompt", continuous_update=False)
    temperature = widgets.FloatSlider(value=0.8, min=0.0, max=2.0, step=0.1, description="temperature",
                                      continuous_update=False)
    top_k = widgets.IntSlider(value=20, min=0, max=200, step=5, description="top-k (0 = all)",
                              continuous_update=False)
    readout = widgets.HTML()
    controls = (box, temperature, top_k)

    def redraw(_change: object = None) -> None:
        readout.value = _generation_readout(model, vocab, *(control.value for control in controls))

    for control in controls:
        control.style.description_width = "initial"  # the whole label, as live_panel does
        control.observe(redraw, names="value")
    redraw()
    return Panel([box, widgets.HBox([temperature, top_k]), readout])
