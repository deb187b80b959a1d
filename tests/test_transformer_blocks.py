"""utils.transformer_blocks (generated from chapter 06) against PyTorch's Transformer layers, and its input checks."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.multihead import MultiHeadAttention
from utils.tolerances import assert_close
from utils.transformer_blocks import (
    BOS,
    EOS,
    PAD,
    DecoderBlock,
    EncoderBlock,
    FeedForward,
    GatedFeedForward,
    Seq2Seq,
    cross_attention_alignment,
    decode_tokens,
    encode_text,
    exposure_bias_breakdown,
    ffn_dead_units,
    gelu_erf,
    gelu_tanh,
    greedy_decode,
    make_feed_forward,
    reversal_batch,
    reversal_scores,
    source_tensor,
)

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=GPU)]
B, T_ENC, T_DEC, D, H, D_FF = 2, 7, 5, 32, 4, 128


def _inputs(device):
    torch.manual_seed(0)
    src = torch.randn(B, T_ENC, D, device=device)  # (B, T_enc, d)
    tgt = torch.randn(B, T_DEC, D, device=device)  # (B, T_dec, d)
    is_pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3], device=device)
    causal = torch.ones(T_DEC, T_DEC, dtype=torch.bool, device=device).tril()
    return src, tgt, is_pad, causal


def _perturb(*layers):
    """Random LayerNorm gains and biases too, so that copying them is tested."""
    with torch.no_grad():
        for layer in layers:
            for p in layer.parameters():
                p.add_(0.1 * torch.randn_like(p))


def _compare(enc, dec, torch_enc, torch_dec, device):
    src, tgt, is_pad, causal = _inputs(device)
    allowed = (~is_pad)[:, None, None, :]  # (B, 1, 1, T_enc)
    with torch.no_grad():
        mem_ours, mem_torch = enc(src, allowed), torch_enc(src, src_key_padding_mask=is_pad)
        out_ours = dec(tgt, mem_ours, causal, allowed)
        out_torch = torch_dec(tgt, mem_torch, tgt_mask=~causal, memory_key_padding_mask=is_pad)
    assert_close(mem_ours[~is_pad], mem_torch[~is_pad], kernel="fused", what="encoder")
    assert_close(out_ours, out_torch, kernel="fused", what="decoder")


def test_gelu_variants_match_pytorch():
    x = torch.linspace(-8, 8, 2001, dtype=torch.float64)
    assert_close(gelu_erf(x), F.gelu(x))
    assert_close(gelu_tanh(x), F.gelu(x, approximate="tanh"))
    assert (gelu_tanh(x) - gelu_erf(x)).abs().max() < 1e-3


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_blocks_match_pytorch_layers(device, norm_first, activation):
    kw = dict(dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first)
    torch_enc = nn.TransformerEncoderLayer(D, H, D_FF, **kw).to(device).eval()
    torch_dec = nn.TransformerDecoderLayer(D, H, D_FF, **kw).to(device).eval()
    _perturb(torch_enc, torch_dec)
    enc = EncoderBlock(D, H, D_FF, activation, norm_first).to(device)
    dec = DecoderBlock(D, H, D_FF, activation, norm_first).to(device)
    enc.load_from_torch(torch_enc)
    dec.load_from_torch(torch_dec)
    _compare(enc, dec, torch_enc, torch_dec, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
def test_from_torch_honours_eps_bias_and_dropout_in_eval_mode(device, bias):
    kw = dict(dropout=0.1, activation="gelu", batch_first=True, norm_first=True, bias=bias, layer_norm_eps=1e-2)
    torch_enc = nn.TransformerEncoderLayer(D, H, D_FF, **kw).to(device).eval()
    torch_dec = nn.TransformerDecoderLayer(D, H, D_FF, **kw).to(device).eval()
    _perturb(torch_enc, torch_dec)
    enc, dec = EncoderBlock.from_torch(torch_enc).eval(), DecoderBlock.from_torch(torch_dec).eval()
    assert enc.norm1.eps == dec.norm3.eps == 1e-2 and enc.ffn.dropout.p == dec.dropout3.p == 0.1
    assert (enc.ffn.linear1.bias is None) == (not bias) and (dec.norm2.bias is None) == (not bias)
    assert next(enc.parameters()).device.type == torch.device(device).type
    _compare(enc, dec, torch_enc, torch_dec, device)


def test_load_from_torch_refuses_another_configuration():
    layer = nn.TransformerEncoderLayer(D, H, D_FF, batch_first=True, bias=False, norm_first=True)
    with pytest.raises(ValueError, match="bias") as info:
        EncoderBlock(D, H, D_FF).load_from_torch(layer)
    assert "norm_first" in str(info.value)
    with pytest.raises(ValueError, match="d_ff"):
        DecoderBlock(D, H, 64).load_from_torch(nn.TransformerDecoderLayer(D, H, D_FF, batch_first=True))
    with pytest.raises(ValueError, match="activation"):
        DecoderBlock(D, H, D_FF, "gelu").load_from_torch(nn.TransformerDecoderLayer(D, H, D_FF, batch_first=True))
    with pytest.raises(TypeError, match="TransformerDecoderLayer"):
        DecoderBlock(D, H, D_FF).load_from_torch(nn.TransformerEncoderLayer(D, H, D_FF))
    with pytest.raises(ValueError, match="only relu and gelu"):
        EncoderBlock.from_torch(nn.TransformerEncoderLayer(D, H, D_FF, activation=torch.tanh, batch_first=True))


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_from_torch_refuses_a_batch_first_false_layer(kind):
    """A (T, B, d) layer would be copied without error and then attend along the batch axis: refused."""
    layer = (nn.TransformerEncoderLayer if kind == "encoder" else nn.TransformerDecoderLayer)(D, H, D_FF)  # batch_first=False
    block_class = EncoderBlock if kind == "encoder" else DecoderBlock
    with pytest.raises(ValueError, match=r"layer\.batch_first must be True, got False"):
        block_class.from_torch(layer)
    with pytest.raises(ValueError, match=r"layer\.batch_first must be True, got False"):
        block_class(D, H, D_FF).load_from_torch(layer)


def test_dropout_is_active_in_training_only():
    dec = DecoderBlock(D, H, D_FF, dropout=0.5)
    src, tgt, _, causal = _inputs("cpu")
    dec.train()
    assert not torch.equal(dec(tgt, src, causal), dec(tgt, src, causal))
    dec.eval()
    assert torch.equal(dec(tgt, src, causal), dec(tgt, src, causal))
    for p in (-0.1, 1.0, True, "0.1"):
        with pytest.raises(ValueError, match="dropout"):
            EncoderBlock(D, H, D_FF, dropout=p)


def test_blocks_use_chapter_4_attention_and_keep_weights_on_request():
    dec = DecoderBlock(D, H, D_FF)
    assert isinstance(dec.self_attn, MultiHeadAttention) and isinstance(dec.cross_attn, MultiHeadAttention)
    src, tgt, is_pad, causal = _inputs("cpu")
    with torch.no_grad():
        plain = dec(tgt, src, causal, (~is_pad)[:, None, None, :])
        assert dec.last_cross_weights is None
        recorded = dec(tgt, src, causal, (~is_pad)[:, None, None, :], need_weights=True)
    assert_close(recorded, plain)
    assert dec.last_cross_weights.shape == (B, H, T_DEC, T_ENC)
    assert dec.last_self_weights[..., ~causal].abs().max() == 0  # causal: no weight on the future
    assert dec.last_cross_weights[1, :, :, 4:].abs().max() == 0  # padded source positions get no weight
    with torch.no_grad():
        assert_close(dec(tgt, src, is_causal=True), dec(tgt, src, causal))


@pytest.mark.parametrize("activation", ["swiglu", "geglu"])
def test_gated_ffn_in_blocks(activation):
    block = EncoderBlock(48, 4, 128, activation, bias=False)
    assert isinstance(block.ffn, GatedFeedForward)
    x = torch.randn(2, 5, 48)
    assert block(x).shape == x.shape
    plain = FeedForward(48, 192, "gelu", bias=False)
    assert sum(p.numel() for p in plain.parameters()) == sum(p.numel() for p in block.ffn.parameters())
    with pytest.raises(ValueError, match="relu"):
        block.load_from_torch(nn.TransformerEncoderLayer(48, 4, 128, batch_first=True))


def test_ffn_is_position_wise():
    ffn = FeedForward(8, 32, "gelu_tanh")
    x = torch.randn(3, 6, 8)
    assert_close(ffn(x)[:, 2], ffn(x[:, 2]))


@pytest.mark.parametrize(
    "make, error, fragment",
    [
        (lambda: FeedForward(8, 32, "tanh"), ValueError, "activation"),
        (lambda: GatedFeedForward(8, 32, "relu"), ValueError, "activation"),
        (lambda: make_feed_forward(8, 32, "swish"), ValueError, "activation"),
        (lambda: FeedForward(0, 32), ValueError, "d_model"),
        (lambda: FeedForward(8, 2.5), TypeError, "d_ff must be an int, got float 2.5"),  # a non-int is a type error
        (lambda: EncoderBlock(30, 4, 64), ValueError, "divisible"),
        (lambda: EncoderBlock(32, 4, 64, norm_first="yes"), TypeError, "norm_first"),
        (lambda: DecoderBlock(32, 4, 64, layer_norm_eps=0), ValueError, "layer_norm_eps"),
        (lambda: EncoderBlock(32, 4, 64, attention_dropout=1.0), ValueError, "attention_dropout must be a probability"),
        (lambda: DecoderBlock(32, 4, 64, activation_dropout=-0.1), ValueError, "activation_dropout must be a probability"),
        (lambda: Seq2Seq(n_layers=0), ValueError, "n_layers"),
    ],
)
def test_constructors_validate(make, error, fragment):
    with pytest.raises(error, match=fragment):
        make()


def test_forward_validates_inputs():
    enc, dec = EncoderBlock(D, H, D_FF), DecoderBlock(D, H, D_FF)
    src, tgt, is_pad, causal = _inputs("cpu")
    with pytest.raises(ValueError, match=r"x must end in d_model=32, got shape \(2, 7, 16\)"):
        enc(src[..., :16])
    with pytest.raises(ValueError, match="3 dimensions"):
        enc(src[0])
    with pytest.raises(TypeError, match="floating-point"):
        enc(src.long())
    with pytest.raises(TypeError, match="allowed must be boolean"):
        enc(src, is_pad.long()[:, None, None, :])
    with pytest.raises(ValueError, match="batch size"):
        dec(tgt, src[:1])
    with pytest.raises(ValueError, match="memory must end in d_model"):
        dec(tgt, src[..., :8])
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        gelu_erf([1.0, 2.0])
    with pytest.raises(ValueError, match="x must end in d_model=8"):
        FeedForward(8, 16)(torch.randn(3, 9))


def test_task_encoding():
    src, tgt_in, tgt_out = reversal_batch(16, 2, 8, torch.Generator().manual_seed(0))
    assert src.shape == (16, 8) and tgt_in.shape == tgt_out.shape == (16, 9)
    for row in range(16):
        text = decode_tokens(src[row].tolist())
        assert 2 <= len(text) <= 8
        assert decode_tokens(tgt_out[row].tolist()) == text[::-1]
        assert tgt_in[row, 0] == BOS and (tgt_out[row] == EOS).sum() == 1
        assert torch.equal(source_tensor(text)[0], src[row])  # right-aligned, PAD on the left
    assert encode_text("ab c!") == [3, 4, 5] and PAD == 0
    with pytest.raises(ValueError, match="max_len"):
        reversal_batch(4, 5, 3, torch.Generator())
    with pytest.raises(TypeError, match="text"):
        encode_text(42)


@pytest.mark.parametrize("device", DEVICES)
def test_seq2seq_forward_greedy_decode_and_scores(device):
    torch.manual_seed(0)
    model = Seq2Seq().to(device).eval()
    src, tgt_in, tgt_out = reversal_batch(40, 2, 8, torch.Generator().manual_seed(1), device)
    logits = model(src, tgt_in)
    assert logits.shape == (40, 9, model.head.out_features) and logits.device == src.device
    out = greedy_decode(model, src, 9)
    assert out.shape == (40, 9) and out.device == src.device
    after_eos = (torch.cumsum((out == EOS).long(), 1) - (out == EOS).long()) > 0
    assert (out[after_eos] == PAD).all()  # PAD after each row's EOS
    scores = reversal_scores(model, src, tgt_in, tgt_out)
    breakdown = exposure_bias_breakdown(scores)
    assert breakdown["clean_gap"] < 1e-6  # a right prefix is the gold prefix: same predictions
    assert 0.0 <= cross_attention_alignment(model, src, tgt_in, tgt_out) <= 1.0
    dead = ffn_dead_units(model, src, tgt_in)
    assert dead["units"] == 256 and 0.0 <= dead["dead"] <= dead["zero_share"] <= 1.0
    with pytest.raises(ValueError, match="tgt_in must be a"):
        model(src, tgt_in.float())
    with pytest.raises(ValueError, match="outside"):
        model(src + 100, tgt_in)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, 0)


def test_greedy_decode_is_the_argmax_of_teacher_forcing_on_its_own_output():
    torch.manual_seed(3)
    model = Seq2Seq().eval()
    src, _, _ = reversal_batch(8, 2, 8, torch.Generator().manual_seed(2))
    out = greedy_decode(model, src, 6)
    tgt_in = torch.cat([torch.full((8, 1), BOS), out[:, :-1]], 1)
    with torch.no_grad():
        forced = model(src, tgt_in).argmax(-1)
    before_eos = (torch.cumsum((out == EOS).long(), 1) - (out == EOS).long()) == 0
    assert torch.equal(forced[before_eos], out[before_eos])


def test_greedy_decode_turns_dropout_off_and_restores_the_mode():
    """Review 06-MS1: a model with dropout, left in training mode, decodes deterministically (eval mode
    inside greedy_decode), and comes back in the mode it was in."""
    torch.manual_seed(4)
    model = Seq2Seq(dropout=0.5).train()
    src, _, _ = reversal_batch(16, 2, 8, torch.Generator().manual_seed(5))
    first, second = greedy_decode(model, src, 9), greedy_decode(model, src, 9)
    assert model.training, "greedy_decode must leave a training model in training mode"
    assert torch.equal(first, second) and torch.equal(first, greedy_decode(model.eval(), src, 9))
    assert not model.training, "... and an eval model in eval mode"
    model.train()
    with torch.no_grad():  # the dropout really acts in training mode: two forward passes differ
        tgt_in = torch.cat([torch.full((16, 1), BOS), first[:, :-1]], 1)
        assert not torch.equal(model(src, tgt_in), model(src, tgt_in))


_DROPOUT_PLACES = {
    "encoder": ("dropout1", "dropout2", "ffn.dropout", "self_attn"),
    "decoder": ("dropout1", "dropout2", "dropout3", "ffn.dropout", "self_attn", "cross_attn"),
}


def _train_mode_spread(kind: str, switched_off: str | None = None, n: int = 4000):
    """Our block and PyTorch's layer (the same weights, dropout 0.5, train mode) on n copies of one
    sequence: each copy draws its own dropout masks. Returns the largest z-score, over the (T, d)
    outputs, of the difference of the per-element means and of the per-element standard deviations."""
    torch.manual_seed(0)
    kw = dict(dropout=0.5, batch_first=True, dtype=torch.float64)
    layers = (nn.TransformerEncoderLayer, EncoderBlock) if kind == "encoder" else (nn.TransformerDecoderLayer, DecoderBlock)
    theirs = layers[0](16, 4, 32, **kw)
    ours = layers[1].from_torch(theirs)
    if switched_off is not None:  # a block that lacks one of the dropouts: the comparison must see it
        module = ours.get_submodule(switched_off)
        if isinstance(module, MultiHeadAttention):
            module.dropout = 0.0  # the attention weights' dropout rate
        else:
            module.p = 0.0
    x = torch.randn(1, 5, 16, dtype=torch.float64).expand(n, 5, 16)  # (n, T, d)
    memory = torch.randn(1, 6, 16, dtype=torch.float64).expand(n, 6, 16)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    theirs.train(), ours.train()
    with torch.no_grad():
        if kind == "encoder":
            a, b = ours(x), theirs(x)
        else:
            a, b = ours(x, memory, causal), theirs(x, memory, tgt_mask=~causal)
    std = b.std(0)
    z_mean = ((a.mean(0) - b.mean(0)).abs() / (std * (2 / n) ** 0.5)).max().item()  # two means, each std / sqrt(n)
    z_std = ((a.std(0) - std).abs() / (std / n**0.5)).max().item()  # generous: a Gaussian's is std / sqrt(2n)
    return z_mean, z_std


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_dropout_in_train_mode_matches_pytorch_in_distribution(kind):
    """With dropout > 0 in train mode the outputs are random; ours and PyTorch's must have the same
    distribution (same mean and spread per output element, within 6 standard errors over 4000 draws)."""
    z_mean, z_std = _train_mode_spread(kind)
    assert z_mean < 6 and z_std < 6, (z_mean, z_std)


@pytest.mark.parametrize("kind, place", [(k, p) for k, places in _DROPOUT_PLACES.items() for p in places])
def test_dropout_is_applied_where_pytorch_applies_it(kind, place):
    """Switching off any one of the block's dropouts (residual, FFN hidden, attention weights) changes the
    output's spread beyond what the comparison above allows: each place is one PyTorch drops at."""
    _, z_std = _train_mode_spread(kind, switched_off=place)
    assert z_std > 6, f"{kind}: without {place}'s dropout the spread still matches PyTorch's (z = {z_std:.1f})"


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_residual_dropout_alone_drops_only_before_the_residual_sum(kind):
    """attention_dropout=0 and activation_dropout=0 (chapter 12's recipe, the paper's section 5.4): in train
    mode the block equals, on every draw, the same block with its residual dropouts done by hand and no
    others; with the rates left at None the attention and FFN dropouts follow ``dropout``, as in PyTorch."""
    make = EncoderBlock if kind == "encoder" else DecoderBlock
    torch.manual_seed(0)
    block = make(16, 4, 32, dropout=0.5, attention_dropout=0.0, activation_dropout=0.0).train()
    rates = [m.p for m in block.modules() if isinstance(m, nn.Dropout)] + [
        m.dropout for m in block.modules() if isinstance(m, MultiHeadAttention)]
    assert sorted(rates) == [0.0] * (len(rates) - block.n_norms) + [0.5] * block.n_norms, rates
    x, memory = torch.randn(3, 5, 16), torch.randn(3, 6, 16)
    torch.manual_seed(1)
    got = block(x) if kind == "encoder" else block(x, memory, is_causal=True)
    # the same computation written out: dropout (p = 0.5) on each sub-layer's output only, in the same RNG order
    torch.manual_seed(1)
    drop = nn.Dropout(0.5)
    with torch.no_grad():
        block.eval()  # eval turns off nothing else here: the other rates are 0
        if kind == "encoder":
            h = block.norm1(x + drop(block.self_attn(x, x, x, need_weights=False)[0]))
            want = block.norm2(h + drop(block.ffn(h)))
        else:
            h = block.norm1(x + drop(block.self_attn(x, x, x, is_causal=True, need_weights=False)[0]))
            h = block.norm2(h + drop(block.cross_attn(h, memory, memory, need_weights=False)[0]))
            want = block.norm3(h + drop(block.ffn(h)))
    assert torch.equal(got.detach(), want), (got - want).abs().max()
    following = make(16, 4, 32, dropout=0.3)
    assert following.ffn.dropout.p == 0.3 and following.self_attn.dropout == 0.3


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_loading_a_pytorch_layer_copies_every_dropout_rate(kind):
    """A review found load_from_torch left the attention weights' rate as it was (it is a float, not in the
    state dict): a block built with attention_dropout=0 and loaded from a layer with 0.2 trained with 0 where
    PyTorch used 0.2. Every rate, residual, FFN and attention, must be the layer's, even where they differ."""
    torch_kind, make = (nn.TransformerEncoderLayer, EncoderBlock) if kind == "encoder" else (nn.TransformerDecoderLayer, DecoderBlock)
    layer = torch_kind(16, 4, 32, dropout=0.2, batch_first=True)
    layer.self_attn.dropout = 0.3  # rates that differ, to see each one travel
    layer.dropout.p = 0.1

    def rates(block):
        attention = [block.self_attn.dropout] + ([block.cross_attn.dropout] if kind == "decoder" else [])
        residual = [getattr(block, f"dropout{i}").p for i in range(1, block.n_norms + 1)]
        return residual, block.ffn.dropout.p, attention

    expected = ([0.2] * (2 if kind == "encoder" else 3), 0.1, [0.3] + ([0.2] if kind == "decoder" else []))
    loaded = make(16, 4, 32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    loaded.load_from_torch(layer)
    assert rates(loaded) == expected
    assert rates(make.from_torch(layer)) == expected


def test_greedy_decode_runs_without_dropout_and_leaves_the_mode_as_it_was():
    """Review 06-MS1: decoding a model left in training mode drew dropout masks, so two decodes of the same
    strings differed. greedy_decode runs in eval mode and restores the caller's mode, also after an error."""
    from utils.transformer_blocks import Seq2Seq, greedy_decode, source_tensor

    torch.manual_seed(0)
    model = Seq2Seq(dropout=0.5).train()
    src = torch.cat([source_tensor("abcdefg"), source_tensor("hgfed")])
    first, second = greedy_decode(model, src, 9), greedy_decode(model, src, 9)
    assert model.training, "greedy_decode left the model in eval mode"
    assert torch.equal(first, second), "two decodes differ: dropout was on"
    with torch.no_grad():  # the same model with dropout on: a training-mode forward is not deterministic
        memory_a, memory_b = model.encode(src)[0], model.encode(src)[0]
    assert not torch.equal(memory_a, memory_b), "dropout 0.5 did nothing, so this test proves nothing"
    model.eval()
    assert torch.equal(greedy_decode(model, src, 9), first) and not model.training
    model.train()
    with pytest.raises(ValueError):
        greedy_decode(model, src, 0)
    assert model.training


def test_decoder_block_docstrings_do_not_answer_exercise_6_6():
    """Red team: DecoderBlock.forward's docstring, exported above exercise 6.6, gave the cross-attention
    weights' shape, (B, h, T_dec, T_enc), which is the exercise's answer."""
    import inspect

    text = " ".join(inspect.getdoc(f) or "" for f in (DecoderBlock, DecoderBlock.forward, DecoderBlock._ca))
    for answer in ("T_dec, T_enc", "T_q, T_k", "T_enc, T_dec", "T_k, T_q"):
        assert answer not in text, answer


@pytest.mark.parametrize("activation, act", [("swiglu", F.silu), ("geglu", F.gelu)])
@pytest.mark.parametrize("bias", [False, True])
def test_gated_ffn_equals_the_formula_written_out(activation, act, bias):
    """A review of issue 26: GatedFeedForward (now a FeedForward) was tested only for shapes, counts and refusals.
    (act(X W + b) * (X V + c)) W2 + b2, written out with the module's own matrices, in float64."""
    torch.manual_seed(0)
    ffn = GatedFeedForward(8, 12, activation, bias=bias).double()
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    w, v, w2 = ffn.linear1.weight.T, ffn.up.weight.T, ffn.linear2.weight.T  # (8, 12), (8, 12), (12, 8)
    b, c, b2 = (layer.bias if bias else 0.0 for layer in (ffn.linear1, ffn.up, ffn.linear2))
    expected = (act(x @ w + b) * (x @ v + c)) @ w2 + b2
    assert_close(ffn(x), expected, what=f"{activation} FFN vs its formula")
    assert sum(p.numel() for p in ffn.parameters()) == 3 * 8 * 12 + (2 * 12 + 8 if bias else 0)


def test_what_needs_a_plain_ffn_refuses_a_gated_one():
    """A review of issue 26: once GatedFeedForward became a FeedForward, ffn_dead_units measured a SwiGLU model
    (pre-activations <= 0 are not dead units there) and tensor parallelism failed later with KeyError 'swiglu'."""
    from utils.tensor_parallel import CommLog, TensorParallelFeedForward

    model = Seq2Seq(activation="swiglu")
    with pytest.raises(ValueError, match="needs plain"):
        ffn_dead_units(model, torch.randint(3, 29, (2, 5)), torch.randint(3, 29, (2, 6)))
    with pytest.raises(TypeError, match="shards chapter 6's plain FeedForward .* got GatedFeedForward"):
        TensorParallelFeedForward(GatedFeedForward(8, 16), 0, 1, CommLog())
