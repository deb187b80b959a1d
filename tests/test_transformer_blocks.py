"""utils.transformer_blocks (generated from chapter 06) against PyTorch's Transformer layers."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.transformer_blocks import (
    BOS,
    EOS,
    PAD,
    DecoderBlock,
    EncoderBlock,
    FeedForward,
    Seq2Seq,
    decode_tokens,
    encode_text,
    gelu_erf,
    gelu_tanh,
    greedy_decode,
    reversal_batch,
    source_tensor,
)

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=GPU)]


def test_gelu_variants_match_pytorch():
    x = torch.linspace(-8, 8, 2001, dtype=torch.float64)
    assert torch.allclose(gelu_erf(x), F.gelu(x), atol=1e-12)
    assert torch.allclose(gelu_tanh(x), F.gelu(x, approximate="tanh"), atol=1e-12)
    assert (gelu_tanh(x) - gelu_erf(x)).abs().max() < 1e-3


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_blocks_match_pytorch_layers(device, norm_first, activation):
    torch.manual_seed(0)
    B, T_enc, T_dec, d, h, d_ff = 2, 7, 5, 32, 4, 128
    src = torch.randn(B, T_enc, d, device=device)  # (B, T_enc, d)
    tgt = torch.randn(B, T_dec, d, device=device)  # (B, T_dec, d)
    is_pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3], device=device)
    allowed = (~is_pad)[:, None, None, :]  # (B, 1, 1, T_enc)
    causal = torch.ones(T_dec, T_dec, dtype=torch.bool, device=device).tril()
    kw = dict(dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first)
    torch_enc = nn.TransformerEncoderLayer(d, h, d_ff, **kw).to(device).eval()
    torch_dec = nn.TransformerDecoderLayer(d, h, d_ff, **kw).to(device).eval()
    enc = EncoderBlock(d, h, d_ff, activation, norm_first).to(device)
    dec = DecoderBlock(d, h, d_ff, activation, norm_first).to(device)
    enc.load_from_torch(torch_enc)
    dec.load_from_torch(torch_dec)
    with torch.no_grad():
        mem_ours, mem_torch = enc(src, allowed), torch_enc(src, src_key_padding_mask=is_pad)
        out_ours = dec(tgt, mem_ours, causal, allowed)
        out_torch = torch_dec(tgt, mem_torch, tgt_mask=~causal, memory_key_padding_mask=is_pad)
    assert (mem_ours[~is_pad] - mem_torch[~is_pad]).abs().max().item() < 1e-5
    assert (out_ours - out_torch).abs().max().item() < 1e-5
    assert dec.cross_attn.last_weights.shape == (B, h, T_dec, T_enc)


def test_ffn_is_position_wise():
    ffn = FeedForward(8, 32, "gelu_tanh")
    x = torch.randn(3, 6, 8)
    assert torch.allclose(ffn(x)[:, 2], ffn(x[:, 2]), atol=1e-6)


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


@pytest.mark.parametrize("device", DEVICES)
def test_seq2seq_forward_and_greedy_decode(device):
    torch.manual_seed(0)
    model = Seq2Seq().to(device)
    src, tgt_in, _ = reversal_batch(4, 2, 8, torch.Generator().manual_seed(1), device)
    logits = model(src, tgt_in)
    assert logits.shape == (4, 9, model.head.out_features) and logits.device == src.device
    out = greedy_decode(model, src, 9)
    assert out.shape == (4, 9) and out.device == src.device
