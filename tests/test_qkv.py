"""utils.qkv (generated from chapter 02) against PyTorch's attention and nn.MultiheadAttention."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.qkv import (
    AttentiveRNNClassifier,
    QKVProjection,
    encode_tags,
    hard_lookup,
    self_attention,
    soft_lookup,
    video_table,
)
from utils.tolerances import assert_close

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _check_soft_lookup(device: str, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, 16, generator=gen, dtype=dtype).to(device)  # (B, h, T_q, d_k)
    k = torch.randn(2, 3, 9, 16, generator=gen, dtype=dtype).to(device)  # (B, h, T_k, d_k)
    v = torch.randn(2, 3, 9, 8, generator=gen, dtype=dtype).to(device)  # (B, h, T_k, d_v)
    for tau in (math.sqrt(16), 0.5, 3.0):
        ours, weights = soft_lookup(q, k, v, temperature=tau)
        ref = F.scaled_dot_product_attention(q, k, v, scale=1 / tau)
        assert ours.device == q.device and ours.dtype == dtype
        assert_close(ours, ref, what=f"soft_lookup vs SDPA at tau={tau}", kernel="fused")
        assert torch.allclose(weights.sum(-1), torch.ones((), dtype=dtype, device=device))


def _check_mha(device: str) -> None:
    torch.manual_seed(0)
    d = 24
    projection = QKVProjection(d, d, bias=True).to(device)
    mha = nn.MultiheadAttention(d, num_heads=1, batch_first=True).to(device)
    with torch.no_grad():
        mha.in_proj_weight.copy_(
            torch.cat([projection.w_q.weight, projection.w_k.weight, projection.w_v.weight])
        )
        mha.in_proj_bias.copy_(torch.cat([projection.w_q.bias, projection.w_k.bias, projection.w_v.bias]))
        mha.out_proj.weight.copy_(torch.eye(d, device=device))
        mha.out_proj.bias.zero_()
        x = torch.randn(3, 7, d, device=device)  # (B, T, d_model)
        ours, ours_w = self_attention(x, projection)
        ref, ref_w = mha(x, x, x)
    assert_close(ours, ref, what="self_attention vs nn.MultiheadAttention")
    assert_close(ours_w, ref_w, what="weights vs nn.MultiheadAttention")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_soft_lookup_matches_sdpa_cpu(dtype):
    _check_soft_lookup("cpu", dtype)


def test_self_attention_matches_multihead_attention_cpu():
    _check_mha("cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_soft_lookup_matches_sdpa_gpu(dtype):
    _check_soft_lookup("cuda", dtype)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_self_attention_matches_multihead_attention_gpu():
    _check_mha("cuda")


def test_temperature_limits_recover_hard_lookup_and_mean():
    titles, keys, values = video_table()
    for tags, title in [({"cat": 1, "cute": 1}, "kitten naps"), ({"cooking": 1}, "pasta in 10 min")]:
        query = encode_tags(tags)
        hard, weights = hard_lookup(query, keys, values)
        assert titles[int(weights.argmax())] == title
        cold, _ = soft_lookup(query, keys, values, temperature=0.01)
        hot, _ = soft_lookup(query, keys, values, temperature=1e4)
        assert torch.allclose(cold, hard, atol=1e-6)
        assert torch.allclose(hot, values.mean(0), atol=1e-3)


def test_hard_lookup_batched_shapes():
    keys = torch.eye(4, dtype=torch.float64)[None].expand(2, 4, 4)  # (B, n, d_k)
    values = torch.arange(8.0, dtype=torch.float64).reshape(1, 4, 2).expand(2, 4, 2)  # (B, n, d_v)
    queries = torch.eye(4, dtype=torch.float64)[None, [2, 0]].expand(2, 2, 4)  # (B, T_q, d_k)
    out, weights = hard_lookup(queries, keys, values)
    assert out.shape == (2, 2, 2) and weights.shape == (2, 2, 4)
    assert out[0, 0].tolist() == [4.0, 5.0] and out[0, 1].tolist() == [0.0, 1.0]


def test_shared_projection_gives_symmetric_scores():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, 10, generator=gen)
    w = torch.randn(10, 4, generator=gen)
    s = (x @ w) @ (x @ w).T  # (T, T)
    assert torch.allclose(s, s.T, atol=1e-5)
    separate = QKVProjection(10, 4)
    with torch.no_grad():
        q, k, _ = separate(x)
    assert not torch.allclose(q @ k.T, (q @ k.T).T, atol=1e-3)


def test_hard_lookup_splits_exact_ties_like_the_cold_limit():
    titles, keys, values = video_table()
    cute = encode_tags({"cute": 1})
    hard, weights = hard_lookup(cute, keys, values)
    assert weights.tolist() == [0.5, 0.0, 0.5, 0.0, 0.0, 0.0]
    cold, _ = soft_lookup(cute, keys, values, temperature=0.01)
    assert torch.allclose(cold, hard, atol=1e-6)
    # batched: a tie in one row, none in the other
    keys2 = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    _, w = hard_lookup(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), keys2, torch.eye(3))
    assert w.tolist() == [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: soft_lookup(torch.randn(4), torch.randn(3, 5), torch.randn(3, 2)), ValueError, "share the last size d_k"),
        (lambda: soft_lookup(torch.randn(4), torch.randn(3, 4), torch.randn(2, 2)), ValueError, "same number of rows"),
        (lambda: soft_lookup(torch.randn(4), torch.randn(0, 4), torch.randn(0, 2)), ValueError, "n = 0"),
        (lambda: soft_lookup(torch.randn(4), torch.randn(3, 4), torch.randn(3, 2), temperature=0.0), ValueError,
         "temperature must be a finite number > 0, got 0.0"),
        (lambda: soft_lookup(torch.randn(4), torch.randn(3, 4), torch.randn(3, 2), temperature=float("inf")),
         ValueError, "temperature"),
        (lambda: hard_lookup(torch.ones(4, dtype=torch.long), torch.randn(3, 4), torch.randn(3, 2)), TypeError,
         "query must be a floating-point tensor"),
        (lambda: hard_lookup(torch.randn(4), torch.randn(4), torch.randn(3, 2)), ValueError, "need 2 dims"),
        (lambda: encode_tags({"cat": 1, "bird": 1}), ValueError, r"unknown \['bird'\]"),
        (lambda: encode_tags({"cat": 0}), ValueError, "nonzero weight"),
        (lambda: QKVProjection(0, 4), ValueError, "d_model must be an int >= 1, got 0"),
        (lambda: QKVProjection(8, 4, d_v=-1), ValueError, "d_v must be an int >= 1, got -1"),
        (lambda: QKVProjection(8, 4.0), TypeError, "d_k must be an int, got float 4.0"),
        (lambda: QKVProjection(8, 4)(torch.randn(2, 3, 5)), ValueError, r"d_model=8\), got \(2, 3, 5\)"),
    ],
)
def test_invalid_input_gives_a_clear_error(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_attentive_rnn_weights_are_a_distribution_over_positions():
    torch.manual_seed(0)
    model = AttentiveRNNClassifier(8, 16, 8)
    logits = model(torch.randint(0, 8, (3, 10)))
    assert logits.shape == (3, 8)
    assert model.last_weights.shape == (3, 10)
    assert torch.allclose(model.last_weights.sum(-1), torch.ones(3))
