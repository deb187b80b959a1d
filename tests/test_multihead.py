"""utils.multihead (generated from solutions/04) against nn.MultiheadAttention, on CPU and CUDA."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from utils.multihead import MultiHeadAttention, masks_from_torch, merge_heads, split_heads

TOL = 1e-5


def _run_cases(device: torch.device) -> None:
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    B, T_q, T_k, d_model, h = 3, 6, 8, 32, 4
    x = torch.randn(B, T_q, d_model, generator=gen).to(device)
    memory = torch.randn(B, T_k, d_model, generator=gen).to(device)
    padding = torch.zeros(B, T_q, dtype=torch.bool, device=device)
    padding[1, 4:] = True
    causal_ignore = torch.ones(T_q, T_q, dtype=torch.bool, device=device).triu(1)
    float_mask = torch.randn(T_q, T_k, generator=gen).to(device)
    for batch_first in (True, False):
        ref = nn.MultiheadAttention(d_model, h, batch_first=batch_first).to(device).eval()
        for fused in (False, True):
            ours = MultiHeadAttention.from_torch(ref, fused_qkv=fused).eval()

            # (T, B, d) when not batch_first
            xs, mem = (x, memory) if batch_first else (x.transpose(0, 1), memory.transpose(0, 1))
            cases = [
                ((xs, xs, xs), {}, (xs,), {}),
                ((xs, xs, xs), dict(average_attn_weights=False), (xs,), dict(average_weights=False)),
                ((xs, xs, xs), dict(need_weights=False), (xs,), dict(need_weights=False)),
                ((xs, xs, xs), dict(key_padding_mask=padding), (xs,), dict(mask=masks_from_torch(padding))),
                (
                    (xs, xs, xs),
                    dict(key_padding_mask=padding, attn_mask=causal_ignore, average_attn_weights=False),
                    (xs,),
                    dict(mask=masks_from_torch(padding, causal_ignore), average_weights=False),
                ),
                (
                    (xs, mem, mem),
                    dict(attn_mask=float_mask),
                    (xs, mem, mem),
                    dict(mask=masks_from_torch(attn_mask=float_mask)),
                ),
            ]
            for ref_args, ref_kwargs, our_args, our_kwargs in cases:
                with torch.no_grad():
                    out_ref, w_ref = ref(*ref_args, **ref_kwargs)
                    out_ours, w_ours = ours(*our_args, **our_kwargs)
                assert out_ours.device == x.device
                assert (out_ref - out_ours).abs().max().item() < TOL, (batch_first, fused, ref_kwargs)
                if w_ref is not None:
                    assert (w_ref - w_ours).abs().max().item() < TOL, (batch_first, fused, ref_kwargs)
                else:
                    assert w_ours is None


def test_matches_torch_cpu() -> None:
    _run_cases(torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_matches_torch_cuda() -> None:
    _run_cases(torch.device("cuda"))


def test_split_merge_round_trip_and_shapes() -> None:
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    assert torch.equal(heads[:, 1], x[..., 4:8])
    assert torch.equal(merge_heads(heads), x)
    with pytest.raises(ValueError):
        split_heads(x, 5)


@pytest.mark.parametrize("h", [1, 2, 4, 8, 16])
def test_parameter_count_independent_of_heads(h: int) -> None:
    d = 64
    count = sum(p.numel() for p in MultiHeadAttention(d, h).parameters())
    assert count == 4 * d * d + 4 * d == sum(p.numel() for p in nn.MultiheadAttention(d, h).parameters())


def test_masks_from_torch_conventions() -> None:
    padding = torch.tensor([[False, False, True]])
    allowed = masks_from_torch(key_padding_mask=padding)
    assert allowed.shape == (1, 1, 1, 3) and allowed.tolist() == [[[[True, True, False]]]]
    assert masks_from_torch() is None
    additive = masks_from_torch(padding, torch.zeros(2, 3))
    assert torch.isinf(additive[..., 2]).all() and (additive[..., :2] == 0).all()
