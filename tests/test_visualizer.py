"""utils.visualizer (generated from chapter 10) and its widget: tokeniser, hand-built heads, attention."""

import math

import pytest
import torch
import torch.nn.functional as F

from utils.visualizer import (
    D_MODEL,
    HEAD_NAMES,
    MAX_TOKENS,
    N_BUCKETS,
    VOCABULARY,
    attention_for_tokens,
    attention_map,
    category,
    embed,
    projections,
    token_id,
    tokenize,
)
from utils.widgets.visualizer import readout_html, top_links, visualizer_widget

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
SENTENCE = "The cat sat on the mat because it was tired."


def test_tokenizer_splits_words_and_punctuation_and_hashes_unknown_words():
    assert tokenize("Hello, World! It's") == ["hello", ",", "world", "!", "it's"]
    assert tokenize("") == []
    assert len(tokenize("a " * 100)) == MAX_TOKENS
    assert category("cat") == "animate" and category("!") == "punctuation" and category("zorblax") == "unknown"
    assert token_id("the") == VOCABULARY.index("the")
    bucket = token_id("zorblax")
    assert len(VOCABULARY) <= bucket < len(VOCABULARY) + N_BUCKETS and token_id("zorblax") == bucket


def test_embedding_shape_and_blocks():
    x = embed(tokenize(SENTENCE))
    assert x.shape == (11, D_MODEL) and x.dtype == torch.float64
    assert torch.allclose(x[:, :10].sum(-1), torch.ones(11, dtype=torch.float64))  # one category each


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("temperature", [0.5, 1.0, 3.0])
def test_matches_pytorch_sdpa(device, causal, temperature):
    tokens = tokenize("a dog and a cat ran to the big red house, and the dog slept.")
    out, weights = attention_for_tokens(tokens, temperature, causal, device=device)
    w = projections(device)
    x = embed(tokens, device)
    q, k, v = x @ w["W_Q"], x @ w["W_K"], x @ w["W_V"]  # (h, T, D)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1 / (temperature * math.sqrt(D_MODEL)))
    assert out.device.type == device and weights.shape == (len(HEAD_NAMES), len(tokens), len(tokens))
    assert (out - ref).abs().max().item() < 1e-12


def test_heads_show_their_designed_patterns():
    tokens, prev = attention_map(SENTENCE, head=0)
    assert (prev[1:].argmax(-1) == torch.arange(len(tokens) - 1)).all()
    _, pronoun = attention_map(SENTENCE, head=2)
    assert tokens[int(pronoun[tokens.index("it")].argmax())] == "cat"
    _, same = attention_map(SENTENCE, head=3)
    assert int(same[4].argmax()) == 0
    _, causal = attention_map(SENTENCE, head=1, causal=True)
    assert (causal.triu(1) == 0).all() and causal[0, 0] == 1


def test_temperature_flattens_rows():
    sharp = [attention_map(SENTENCE, 0, t)[1].max(-1).values.mean().item() for t in (0.25, 1, 4, 64)]
    assert all(a > b for a, b in zip(sharp, sharp[1:]))
    with pytest.raises(ValueError):
        attention_map(SENTENCE, 0, 0.0)


def test_readout_changes_with_the_sentence_and_escapes_html():
    first = readout_html(SENTENCE)
    second = readout_html("the dog saw the dog")
    assert first != second and "5 tokens" in second
    assert "<script>" not in readout_html("<script>alert(1)</script>")
    assert "No tokens" in readout_html("   ")
    links = top_links("the dog saw the dog", head=3)
    assert links[3]["key_position"] == 0 and links[4]["key_position"] == 1


def test_widget_button_recomputes_from_the_text_box():
    box = visualizer_widget()
    text, button = box.children[0].children
    readout, plot = box.children[2], box.children[3]
    assert button.description == "Calculate Attention"
    before = readout.value
    text.value = "she said he was tired"
    assert readout.value == before  # nothing happens until the button is pressed
    button.click()
    assert readout.value != before and "she" in readout.value and len(plot.outputs) == 1
