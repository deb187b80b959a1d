"""utils.generation (chapter 12): the decoder-only model, sampling, the KV cache and its cost."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from utils.generation import (
    GPT,
    KVCache,
    WordVocab,
    course_text,
    distinct_bigrams,
    forward_flops,
    generate,
    language_model_claims,
    markdown_to_text,
    next_token,
    repetition_measure,
    train_gpt,
)
from utils.tolerances import assert_close

pytestmark = pytest.mark.usefixtures("one_thread")


def _gpt(**kw) -> GPT:
    torch.manual_seed(0)
    return GPT(50, d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=64, **kw).eval()


def test_corpus_and_vocabulary_round_trip():
    text = course_text()
    assert len(text) > 50_000 and text == text.lower()
    vocab = WordVocab(text)
    ids = vocab.encode("the attention weights, (a row) sum to 1.")
    assert vocab.decode(ids) == "the attention weights, (a row) sum to 1."
    with pytest.raises(ValueError, match="not in the vocabulary"):
        vocab.encode("the zyzzyva")
    with pytest.raises(ValueError, match="ids must be ints"):
        vocab.decode([len(vocab)])
    with pytest.raises(ValueError, match="non-empty string"):
        WordVocab("   ")


def test_markdown_to_text_drops_code_math_and_tables():
    md = "# Title here\n\nSome *prose* with $x^2$ and `code`, long enough to be kept as a paragraph.\n\n" \
         "```python\nprint(1)\n```\n\n| a | b |\n|---|---|\n\n$$\ny = 1\n$$"
    out = markdown_to_text(md)
    assert out == "title here\nsome prose with and , long enough to be kept as a paragraph." or "print" not in out
    assert "print" not in out and "x^2" not in out and "|" not in out and "y = 1" not in out
    with pytest.raises(TypeError, match="markdown must be a string"):
        markdown_to_text(None)


def test_kv_cache_validates_and_counts_its_bytes():
    cache = KVCache(num_layers=3, batch=2, num_heads=4, max_len=10, d_k=8)
    assert cache.nbytes() == 2 * 3 * 2 * 4 * 10 * 8 * 4  # 2 L B h T d_k * 4 bytes
    k, v = cache.update(0, torch.ones(2, 4, 6, 8), torch.ones(2, 4, 6, 8))
    assert k.shape == (2, 4, 6, 8) and cache.length == 0  # length advances after all layers (the model does it)
    cache.length = 6
    with pytest.raises(ValueError, match="more do not fit"):
        cache.update(0, torch.ones(2, 4, 5, 8), torch.ones(2, 4, 5, 8))
    with pytest.raises(ValueError, match=r"must be \(B, h, T_new, d_k\)"):
        cache.update(0, torch.ones(2, 3, 1, 8), torch.ones(2, 3, 1, 8))
    with pytest.raises(ValueError, match="max_len must be an int >= 1"):
        KVCache(1, 1, 1, 0, 4)
    one_layer = KVCache(num_layers=1, batch=2, num_heads=4, max_len=10, d_k=8)
    with pytest.raises(ValueError, match=r"layer must be an int in 0\.\.0, got 3"):
        one_layer.update(3, torch.ones(2, 4, 1, 8), torch.ones(2, 4, 1, 8))
    with pytest.raises(ValueError, match="k_new and v_new must be 4-D"):
        one_layer.update(0, torch.ones(4, 1, 8), torch.ones(4, 1, 8))


def test_cached_forward_equals_full_forward_in_any_chunking():
    model = _gpt()
    tokens = torch.randint(50, (2, 13), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)
        for cuts in ((13,), (1,) * 13, (5, 3, 5), (12, 1)):
            cache = model.new_cache(2, 13)
            pieces, start = [], 0
            for n in cuts:
                pieces.append(model(tokens[:, start : start + n], cache))
                start += n
            assert cache.length == 13
            assert_close(torch.cat(pieces, 1), full, what=f"chunks {cuts}")


def test_generation_with_and_without_cache_is_identical():
    model = _gpt()
    prompt = torch.tensor([[3, 4, 5]])
    for temperature, top_k, top_p in ((0.0, None, None), (1.0, None, None), (0.8, 5, None), (1.2, None, 0.9)):
        a, la = generate(model, prompt, 30, temperature, top_k, top_p, seed=2, use_cache=True)
        b, lb = generate(model, prompt, 30, temperature, top_k, top_p, seed=2, use_cache=False)
        assert torch.equal(a, b) and a.shape == (1, 33)
        assert_close(la, lb, what="logits")
    empty, logits = generate(model, prompt, 0)
    assert torch.equal(empty, prompt) and logits.shape == (1, 0, 50)


def test_next_token_rules():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    g = torch.Generator().manual_seed(0)
    assert next_token(logits, 0.0).item() == 1
    assert all(next_token(logits, 5.0, top_k=1, generator=g).item() == 1 for _ in range(20))
    draws = {next_token(logits, 1.0, top_k=2, generator=g).item() for _ in range(200)}
    assert draws == {1, 3}
    draws = {next_token(logits, 1.0, top_p=0.5, generator=g).item() for _ in range(200)}
    assert draws == {1}  # the top token alone has probability > 0.5
    for kwargs, match in (({"temperature": -1.0}, "temperature must be"), ({"top_k": 0}, "top_k must be"),
                          ({"top_k": 5}, "top_k must be"), ({"top_p": 0.0}, "top_p must be")):
        with pytest.raises(ValueError, match=match):
            next_token(logits, **({"temperature": 1.0} | kwargs))


def test_next_token_refuses_a_row_with_every_token_ruled_out():
    """Issue 26: a row of -inf gave torch.multinomial's "probability tensor contains inf, nan" (and the greedy
    argmax silently picked token 0); the row is named instead, for every temperature."""
    logits = torch.tensor([[0.0, 3.0, 1.0], [float("-inf")] * 3])
    for temperature in (0.0, 1.0):
        with pytest.raises(ValueError, match="logits row 1 is -inf for every token"):
            next_token(logits, temperature)
    partly = torch.tensor([[float("-inf"), 3.0, float("-inf")]])  # one token left: always drawn
    assert next_token(partly, 1.0, generator=torch.Generator().manual_seed(0)).item() == 1


def test_temperature_lowers_entropy():
    logits = torch.randn(8, 30, generator=torch.Generator().manual_seed(4))

    def entropy(t):
        p = (logits / t).softmax(-1)
        return -(p * p.log()).sum(-1)

    assert (entropy(0.5) < entropy(1.0)).all() and (entropy(1.0) < entropy(2.0)).all()


@pytest.mark.parametrize("t_new, t_k", [(1, 1), (1, 17), (5, 5), (3, 20)])
def test_forward_flops_matches_pytorchs_counter(t_new, t_k):
    model = _gpt()
    cache = model.new_cache(1, t_k)
    with torch.no_grad():
        if t_k > t_new:
            model(torch.zeros(1, t_k - t_new, dtype=torch.long), cache)
        with FlopCounterMode(display=False) as counter:
            model(torch.zeros(1, t_new, dtype=torch.long), cache, explicit=True)
    assert counter.get_total_flops() == forward_flops(model, t_new, t_k)
    with pytest.raises(ValueError, match="need 1 <= t_new <= t_k"):
        forward_flops(model, 4, 3)


def test_explicit_and_sdpa_attention_agree():
    model = _gpt()
    tokens = torch.randint(50, (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        fused = model(tokens)
        explicit = model(tokens, explicit=True)
    assert_close(explicit, fused, what="chapter 3 attention vs SDPA", kernel="fused")


@pytest.mark.parametrize("kwargs, match", [
    ({"d_model": 15, "num_heads": 2}, "divisible by num_heads"),
    ({"dropout": -0.1}, r"dropout must be a probability in \[0, 1\)"),
    ({"max_len": 0}, "max_len must be an int >= 1"),
])
def test_gpt_rejects_bad_configuration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GPT(50, **kwargs)


def test_gpt_rejects_bad_input():
    model = _gpt()
    with pytest.raises(ValueError, match="2-D int64"):
        model(torch.zeros(4))
    with pytest.raises(ValueError, match="exceed max_len"):
        model(torch.zeros(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match=r"tokens holds ids outside 0\.\.49: min 0, max 50"):
        model(torch.tensor([[0, 50]]))
    with pytest.raises(ValueError, match="tokens holds ids outside"):
        model(torch.tensor([[-1, 3]]))
    with pytest.raises(ValueError, match="logits contain NaN"):
        next_token(torch.tensor([[0.0, float("nan"), 1.0]]), temperature=1.0)
    with pytest.raises(ValueError, match="logits must be a 2-D floating-point tensor"):
        next_token(torch.tensor([[1, 2]]), temperature=0.0)
    with pytest.raises(ValueError, match="new_tokens must be an int >= 0"):
        generate(model, torch.tensor([[1]]), -1)
    with pytest.raises(ValueError, match="prompt must be"):
        generate(model, torch.tensor([1, 2]), 3)


def test_train_gpt_learns_and_validates():
    ids = torch.arange(40).repeat(20)  # a cyclic sequence: perfectly predictable
    model, losses = train_gpt(ids, 40, steps=150, batch=8, context=8, lr=1e-2, d_model=16, num_layers=1, d_ff=32,
                              dropout=0.0)
    assert losses[-1] < 0.3 * losses[0] and losses[0] == pytest.approx(math.log(40), rel=0.3)
    with pytest.raises(ValueError, match="ids must be a 1-D tensor"):
        train_gpt(torch.arange(5), 5, context=8)
    assert not model.training
    out, _ = generate(model, torch.tensor([[3]]), 5, temperature=0.0)
    assert out[0].tolist() == [3, 4, 5, 6, 7, 8]
    assert F.softmax(torch.zeros(2), 0).sum() == 1  # keeps F imported for readers adapting the tests


def test_distinct_bigrams_and_the_language_model_claims():
    assert distinct_bigrams([1, 2, 3, 4]) == 1.0
    assert distinct_bigrams([1, 2, 1, 2, 1]) == 0.5  # (1, 2) and (2, 1), each twice
    with pytest.raises(ValueError, match="at least 2 ids"):
        distinct_bigrams([7])
    loops = {"greedy": 0.1, "sampled": {0.7: [0.8, 0.9], 1.0: [0.95]}}
    assert all(language_model_claims([3.0] * 20, 1000, loops).values())
    claims = language_model_claims([6.0] * 20, 1000, loops | {"greedy": 0.7})
    assert claims == {"the loss ends 2 nats or more below a uniform guess": False,
                      "greedy text repeats far more than sampled text": False}


def test_repetition_measure_shapes_and_validation():
    torch.manual_seed(0)
    model = GPT(12, d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=32).eval()
    out = repetition_measure(model, torch.tensor([[1, 2]]), new_tokens=10, temperatures=(1.0,), samples=2)
    assert set(out) == {"greedy", "sampled"} and len(out["sampled"][1.0]) == 2
    assert all(0 < x <= 1 for x in [out["greedy"], *out["sampled"][1.0]])
    with pytest.raises(ValueError, match="samples must be an int >= 1"):
        repetition_measure(model, torch.tensor([[1, 2]]), new_tokens=10, samples=0)


def test_generation_widget_saves_a_note_and_says_when_it_cannot_continue():
    from utils.widgets import PLACEHOLDER
    from utils.widgets.whole_transformer import generation_widget

    vocab = WordVocab("the attention is all you need . " + " ".join(f"w{i}" for i in range(40)))  # top-k 20 < V
    torch.manual_seed(0)
    model = GPT(len(vocab), d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=64).eval()
    widget = generation_widget(model, vocab, "the attention")
    assert widget._repr_mimebundle_()["text/plain"] == PLACEHOLDER
    box, readout = widget.children[0], widget.children[2]
    assert readout.value.startswith("<pre") and box.style.description_width == "initial"
    box.value = "the gizmo"
    assert "cannot continue" in readout.value


def test_top_k_keeps_every_logit_tied_with_the_kth():
    """Library review O2: with logits [1, 1, 1, 0] and top_k = 2 the three tied tokens are all kept (as the
    docstring now says); the fourth is never drawn. PyTorch's own topk would pick two of the three."""
    logits = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    generator = torch.Generator().manual_seed(0)
    drawn = {int(next_token(logits, 1.0, top_k=2, generator=generator)) for _ in range(300)}
    assert drawn == {0, 1, 2}, drawn
    assert {int(next_token(torch.tensor([[3.0, 2.0, 1.0, 0.0]]), 1.0, top_k=2, generator=generator))
            for _ in range(300)} == {0, 1}


def test_the_language_model_is_chapter_6s_pre_ln_block_with_chapter_4s_attention():
    """Issue 26: no third Transformer layer. GPTBlock is chapter 6's EncoderBlock (Pre-LN, GELU) and its attention
    chapter 4's MultiHeadAttention with the cache in a hook; without a cache a block computes exactly what chapter
    6's block computes with is_causal=True, given the same weights."""
    from utils.generation import CachedSelfAttention, GPTBlock
    from utils.multihead import MultiHeadAttention
    from utils.transformer_blocks import EncoderBlock

    model = _gpt()
    block = model.blocks[0]
    assert isinstance(block, GPTBlock) and isinstance(block, EncoderBlock)
    assert isinstance(block.self_attn, CachedSelfAttention) and isinstance(block.self_attn, MultiHeadAttention)
    assert block.norm_first and block.activation == "gelu" and block.self_attn.fused_qkv
    plain = EncoderBlock(16, 2, 32, "gelu", norm_first=True).eval()
    plain.self_attn = MultiHeadAttention(16, 2, fused_qkv=True)
    plain.load_state_dict(block.state_dict())
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for explicit in (False, True):
            ours = block(x, explicit=explicit)
            assert_close(ours, plain(x, is_causal=True, need_weights=explicit), what="GPTBlock vs chapter 6's block",
                         kernel="fused")


def test_a_block_keeps_no_cache_between_calls_and_the_cache_fills_per_layer():
    model = _gpt()
    cache = model.new_cache(1, 10)
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]), cache)
    assert cache.length == 3 and all(block.self_attn.cache is None for block in model.blocks)
    assert cache.k[:, :, :, :3].abs().sum((1, 2, 3, 4)).gt(0).all(), "every layer wrote its keys"
    assert cache.k[:, :, :, 3:].abs().sum() == 0
    model.max_len = 10  # the cache holds 3 of 10 positions
    with pytest.raises(ValueError, match=r"positions up to 11 exceed max_len=10 \(3 cached \+ 8 new tokens\)"), \
            torch.no_grad():
        model(torch.zeros(1, 8, dtype=torch.long), cache)


def test_a_cache_that_does_not_fit_the_model_or_the_call_is_refused_by_name():
    """A review of issue 26: a cache of another dtype, device or batch failed inside SDPA or KVCache.update with
    messages about internal tensors; a cached forward with gradients on failed later in backward; a block looped
    over by hand wrote every layer into layer 0; masks given with a cache were measured against the new tokens."""
    from utils.generation import CachedSelfAttention, GPTBlock

    model = _gpt()
    tokens = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"cache must have the model's dtype and device"):
            model(tokens, KVCache(2, 1, 2, 10, 8, dtype=torch.float64))
        with pytest.raises(ValueError, match=r"cache must hold \(layers, batch, heads, d_k\) = \(2, 1, 2, 8\)"):
            model(tokens, KVCache(2, 3, 2, 10, 8))
        with pytest.raises(ValueError, match=r"cache must hold"):
            model(tokens, KVCache(1, 1, 2, 10, 8))
        with pytest.raises(TypeError, match="cache must be a KVCache"):
            model(tokens, {"k": None})
        with pytest.raises(TypeError, match="explicit must be True or False, got 'no'"):
            model(tokens, explicit="no")
        with pytest.raises(ValueError, match="layer must be given with a cache"):
            model.blocks[0](torch.zeros(1, 3, 16), model.new_cache(1, 10))
    with pytest.raises(RuntimeError, match=r"a KV cache is for generation: call the model under torch.no_grad\(\)"):
        model(tokens, model.new_cache(1, 10))
    with torch.no_grad():  # frozen weights: the check is about gradients, so this may run
        frozen = _gpt().requires_grad_(False)
    frozen(tokens, frozen.new_cache(1, 10))
    with pytest.raises(TypeError, match="GPTBlock has no PyTorch layer to copy"):
        GPTBlock.from_torch(torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=True))
    attention = CachedSelfAttention(16, 2).eval()
    x = torch.randn(2, 3, 16)
    attention.cache = KVCache(1, 2, 2, 8, 8)
    for bad in ({"key_padding_mask": torch.zeros(2, 3, dtype=torch.bool)}, {"mask": torch.ones(3, 3, dtype=torch.bool)},
                {"is_causal": True}):
        with pytest.raises(ValueError, match="the cache's bottom-right causal mask is the only mask"):
            attention(x, **bad)
    with pytest.raises(ValueError, match="self-attention only"):
        attention(x, torch.randn(2, 4, 16))
    assert attention.cache.length == 0 and attention.cache.k.abs().sum() == 0, "nothing was written"


@pytest.mark.parametrize("call, error, match", [
    (lambda m: next_token(torch.zeros(1, 4), temperature=True), ValueError, "temperature must be a finite number"),
    (lambda m: next_token(torch.zeros(1, 4), temperature=float("nan")), ValueError, "temperature must be a finite"),
    (lambda m: next_token(torch.zeros(1, 4), temperature=float("inf")), ValueError, "temperature must be a finite"),
    (lambda m: next_token(torch.zeros(1, 4), top_p="0.5"), ValueError, r"top_p must be a number in \(0, 1\]"),
    (lambda m: next_token(torch.zeros(1, 4), top_k=2.0), TypeError, "top_k must be an int, got float"),
    (lambda m: generate(m, torch.tensor([[1]]), 2, use_cache="no"), TypeError, "use_cache must be True or False"),
    (lambda m: generate(m, torch.tensor([[1]]), 2, seed=1.5), TypeError, "seed must be an int, got float"),
    (lambda m: generate(m, torch.tensor([[1]]), 2.0), TypeError, "new_tokens must be an int, got float"),
    (lambda m: KVCache(2.0, 1, 2, 8, 8), TypeError, "num_layers must be an int, got float"),
    (lambda m: train_gpt(torch.arange(50), 50, context=0), ValueError, "context must be an int >= 1, got 0"),
    (lambda m: train_gpt(torch.arange(50), 50, warmup=0), ValueError, "warmup must be an int >= 1, got 0"),
    (lambda m: train_gpt(torch.arange(50.0), 50, context=8), ValueError, "ids must be a 1-D tensor of int64"),
    (lambda m: train_gpt(torch.arange(50), 40, context=8), ValueError, r"ids holds ids outside 0\.\.39: min 0, max 49"),
])
def test_chapter_12_names_the_argument_that_is_wrong(call, error, match):
    """A review of issue 26: these gave torch's messages (multinomial's 'probability tensor contains inf, nan',
    '<' not supported, ZeroDivisionError, manual_seed expected a long), a NaN loss, or ran with a truthy string."""
    with pytest.raises(error, match=match):
        call(_gpt())
