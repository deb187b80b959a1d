"""utils.visualizer (generated from chapter 10) and its widget: tokeniser, hand-built heads, attention,
the reuse of chapters 4 and 5, and the input checks."""

import math

import pytest
import torch
import torch.nn.functional as F

from utils.positional import shift_matrix, sinusoidal_encoding
from utils.tolerances import assert_close
from utils.visualizer import (
    _POS,
    D_MODEL,
    HEAD_NAMES,
    MAX_TOKENS,
    N_BUCKETS,
    POSITION_DIM,
    VOCABULARY,
    attention_for_tokens,
    attention_map,
    category,
    collision_rate,
    designed_patterns,
    embed,
    made_up_words,
    projections,
    score_matrices,
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
    # Stored constants (CRC-32 is the same in every session, unlike Python's salted hash()):
    assert token_id("zorblax") == len(VOCABULARY) + 15 and token_id("quux") - len(VOCABULARY) < N_BUCKETS


def test_collisions_follow_the_birthday_estimate():
    birthday = 1 - math.prod(1 - m / N_BUCKETS for m in range(5))
    assert abs(collision_rate(0) - birthday) < 0.04
    words = made_up_words(50, seed=1)
    assert len(set(words)) == 50 and not set(words) & set(VOCABULARY)


def test_embedding_uses_chapter_5_encoding():
    tokens = tokenize(SENTENCE)
    x = embed(tokens)
    assert x.shape == (11, D_MODEL) and x.dtype == torch.float64
    assert torch.allclose(x[:, :10].sum(-1), torch.ones(11, dtype=torch.float64))  # one category each
    assert torch.equal(x[:, _POS], sinusoidal_encoding(11, POSITION_DIM, dtype=torch.float64))
    assert embed([]).shape == (0, D_MODEL)


def test_previous_token_head_is_chapter_5_shift_matrix():
    g = score_matrices(gamma=2.0)
    assert torch.equal(g[0][_POS, _POS], 2.0 * shift_matrix(-1, POSITION_DIM).T)
    p = embed(tokenize("one two three four five"))[:, _POS]
    assert torch.allclose(p[1:] @ shift_matrix(-1, POSITION_DIM).T, p[:-1], atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("temperature", [0.5, 1.0, 3.0])
def test_matches_pytorch_sdpa(device, causal, temperature):
    tokens = tokenize("a dog and a cat ran to the big red house, and the dog slept.")
    out, weights = attention_for_tokens(tokens, temperature, causal, device=device)
    w = projections(device)
    x = embed(tokens, device)
    q, k, v = x @ w["W_Q"], x @ w["W_K"], x @ w["W_V"]  # (h, T, D): one projection per head
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1 / (temperature * math.sqrt(D_MODEL)))
    assert out.device.type == device and weights.shape == (len(HEAD_NAMES), len(tokens), len(tokens))
    assert_close(out, ref, what=f"visualizer vs SDPA on {device}")


def test_heads_show_their_designed_patterns():
    tokens, prev = attention_map(SENTENCE, head=0)
    assert (prev[1:].argmax(-1) == torch.arange(len(tokens) - 1)).all()
    _, pronoun = attention_map(SENTENCE, head=2)
    assert tokens[int(pronoun[tokens.index("it")].argmax())] == "cat"
    _, same = attention_map(SENTENCE, head=3)
    assert int(same[4].argmax()) == 0 and int(same[0].argmax()) == 4
    assert same[1, 1] > 0.99  # a word with no copy keeps its weight on itself
    _, causal = attention_map(SENTENCE, head=1, causal=True)
    assert (causal.triu(1) == 0).all() and causal[0, 0] == 1
    tokens, girl = attention_map("the girl said she was tired", head=2)
    assert tokens[int(girl[tokens.index("she")].argmax())] == "girl"


@pytest.mark.parametrize("seed", [0, 1])
def test_designed_patterns_on_random_sentences(seed):
    assert designed_patterns(seed) == {"previous token": 1.0, "same word": 1.0}


def test_temperature_flattens_rows():
    sharp = [attention_map(SENTENCE, 0, t)[1].max(-1).values.mean().item() for t in (0.25, 1, 4, 64)]
    assert all(a > b for a, b in zip(sharp, sharp[1:]))


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda: attention_map(SENTENCE, 0, 0.0), ValueError, "temperature"),
        (lambda: attention_map(SENTENCE, 0, float("inf")), ValueError, "temperature"),
        (lambda: attention_map(SENTENCE, 4), ValueError, "head must be an int in 0..3, got 4"),
        (lambda: attention_map(SENTENCE, -1), ValueError, "head must be an int in 0..3, got -1"),
        (lambda: attention_map(SENTENCE, 1.0), TypeError, "head must be an int, got float 1.0"),
        (lambda: attention_for_tokens([]), ValueError, "empty"),
        (lambda: attention_for_tokens(["cat"], causal="yes"), TypeError, "causal"),
        (lambda: tokenize(None), TypeError, "sentence"),
        (lambda: tokenize("a b", max_tokens=0), ValueError, "max_tokens must be an int >= 1, got 0"),
        (lambda: tokenize("a b", max_tokens=True), TypeError, "max_tokens must be an int, got bool True"),
        (lambda: token_id(""), ValueError, "non-empty string"),
        (lambda: category(3), ValueError, "non-empty string"),
        (lambda: embed("cat"), TypeError, "list of strings"),
        (lambda: score_matrices(gamma=float("nan")), ValueError, "gamma"),
        (lambda: collision_rate(1.5), TypeError, "seed must be an int, got float 1.5"),
        (lambda: made_up_words(-1, 0), ValueError, "count must be an int >= 0, got -1"),
        (lambda: made_up_words(2.0, 0), TypeError, "count must be an int, got float 2.0"),
    ],
)
def test_bad_input_gets_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


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
    text.value = "the girl said she was tired"
    assert readout.value == before  # nothing happens until the button is pressed
    button.click()
    assert readout.value != before and "girl" in readout.value and len(plot.outputs) == 1
