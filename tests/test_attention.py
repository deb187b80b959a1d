"""utils.attention (generated from chapter 03) against torch.nn.functional.scaled_dot_product_attention."""

import pytest
import torch
import torch.nn.functional as F

from utils.attention import causal_mask, padding_mask, scaled_dot_product_attention, stable_softmax
from utils.tolerances import tolerance

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# Chapter 3 claims 1e-6 in float32 on the CPU; other devices follow the course's tolerance policy.
CPU_TOL = {torch.float32: 1e-6, torch.float64: 1e-12}


def _tol(device: str, dtype: torch.dtype) -> float:
    return CPU_TOL[dtype] if device == "cpu" else tolerance(device, dtype)["atol"]


def _inputs(device, dtype, B=2, H=3, T_q=6, T_k=8, d_k=16, d_v=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T_q, d_k, generator=gen, dtype=dtype)  # (B, h, T_q, d_k)
    k = torch.randn(B, H, T_k, d_k, generator=gen, dtype=dtype)  # (B, h, T_k, d_k)
    v = torch.randn(B, H, T_k, d_v, generator=gen, dtype=dtype)  # (B, h, T_k, d_v)
    return q.to(device), k.to(device), v.to(device)


def _cases(device, T_q, T_k, B):
    pad = padding_mask(torch.tensor([T_k, T_k // 2], device=device)[:B], T_k)[:, None]  # (B, 1, 1, T_k)
    rand = torch.rand(T_q, T_k, generator=torch.Generator().manual_seed(3)).to(device) > 0.3
    return {
        "none": ({}, {}),
        "padding": ({"mask": pad}, {"attn_mask": pad}),
        "random bool": ({"mask": rand}, {"attn_mask": rand}),
        "causal": ({"is_causal": True}, {"is_causal": True}),
        "scale": ({"scale": 0.25}, {"scale": 0.25}),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 3, 6, 8), (1, 1, 5, 5), (2, 2, 9, 3)])
def test_matches_pytorch_sdpa(device, dtype, shape):
    B, H, T_q, T_k = shape
    q, k, v = _inputs(device, dtype, B, H, T_q, T_k)
    for name, (ours_kw, torch_kw) in _cases(device, T_q, T_k, B).items():
        ours, weights = scaled_dot_product_attention(q, k, v, **ours_kw)
        ref = F.scaled_dot_product_attention(q, k, v, **torch_kw)
        assert ours.device == q.device and ours.dtype == q.dtype, name
        assert (ours - ref).abs().max().item() < _tol(device, dtype), name
        assert weights.shape == (B, H, T_q, T_k)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_match_pytorch_sdpa(device):
    q, k, v = _inputs(device, torch.float64)
    grads = []
    for fn in (
        lambda a, b, c: scaled_dot_product_attention(a, b, c, is_causal=True)[0],
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
    ):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        fn(*leaves).pow(2).sum().backward()
        grads.append([t.grad for t in leaves])
    for ours, ref in zip(*grads):
        assert torch.allclose(ours, ref, atol=1e-10)


def test_fully_masked_row_gives_zeros_like_pytorch():
    q, k, v = _inputs("cpu", torch.float32, T_q=3, T_k=5)
    allowed = torch.ones(3, 5, dtype=torch.bool)
    allowed[1] = False
    ours, weights = scaled_dot_product_attention(q, k, v, mask=allowed)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    assert not ours.isnan().any() and (weights[..., 1, :] == 0).all()
    assert torch.allclose(ours, ref, atol=1e-6)


def test_stable_softmax_survives_huge_scores_and_matches_torch():
    scores = torch.tensor([[1000.0, 1001.0, 999.0], [-1e4, 0.0, 1e4]])
    assert torch.allclose(stable_softmax(scores), torch.softmax(scores, -1))
    assert torch.allclose(stable_softmax(scores).sum(-1), torch.ones(2))


def test_masks_have_documented_shapes_and_meaning():
    m = causal_mask(3, 4)
    assert m.dtype == torch.bool and m.shape == (3, 4)
    assert m.tolist() == [[True, False, False, False], [True, True, False, False], [True, True, True, False]]
    p = padding_mask(torch.tensor([2, 4]), 4)
    assert p.shape == (2, 1, 4)
    assert p[0, 0].tolist() == [True, True, False, False] and p[1, 0].all()
