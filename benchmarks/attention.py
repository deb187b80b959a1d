"""The course's attention and multi-head attention against PyTorch's, same weights, float32, CPU."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from benchmarks.timing import interleaved, matmul_gflops
from utils.attention import scaled_dot_product_attention
from utils.multihead import MultiHeadAttention

HEADS, D_K = 8, 64
D_MODEL = HEADS * D_K


def attention_flops(batch: int, n: int, backward: bool) -> float:
    """QKᵀ and PV: 2 multiply-adds each per (query, key, feature); backward costs about twice forward."""
    forward = 2 * 2 * batch * HEADS * n * n * D_K
    return forward * (3 if backward else 1)


def mha_flops(batch: int, n: int, backward: bool) -> float:
    projections = 2 * 4 * batch * n * D_MODEL * D_MODEL  # Q, K, V and output projections
    return (projections + attention_flops(batch, n, False)) * (3 if backward else 1)


def _step(fn, inputs, backward: bool):
    def run():
        if backward:
            for t in inputs:
                t.grad = None
            fn(*inputs).sum().backward()
        else:
            with torch.no_grad():
                fn(*inputs)
    return run


def measure(lengths: list[int], batches: list[int], repeats: int) -> dict:
    torch.manual_seed(0)
    rows = []
    peak = matmul_gflops()
    for batch in batches:
        for n in lengths:
            reps = max(3, repeats if n <= 1024 else repeats // 2)
            q, k, v = (torch.randn(batch, HEADS, n, D_K, requires_grad=True) for _ in range(3))  # (B, h, N, d_k)
            x = torch.randn(batch, n, D_MODEL, requires_grad=True)  # (B, N, d_model)
            reference = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
            fused = MultiHeadAttention.from_torch(reference, fused_qkv=True)
            teaching = MultiHeadAttention.from_torch(reference, fused_qkv=False)
            for backward in (False, True):
                attn = interleaved({
                    "course_sdpa": _step(lambda a, b, c: scaled_dot_product_attention(a, b, c)[0], (q, k, v), backward),
                    "torch_sdpa": _step(F.scaled_dot_product_attention, (q, k, v), backward),
                }, reps)
                mha = interleaved({
                    "course_mha_fused": _step(lambda t, m=fused: m(t, t, t, need_weights=False)[0], (x,), backward),
                    "course_mha_teaching": _step(lambda t, m=teaching: m(t, t, t, need_weights=False)[0], (x,), backward),
                    "torch_mha": _step(lambda t, m=reference: m(t, t, t, need_weights=False)[0], (x,), backward),
                }, reps)
                a_flops, m_flops = attention_flops(batch, n, backward), mha_flops(batch, n, backward)
                rows.append({
                    "batch": batch, "n": n, "pass": "forward+backward" if backward else "forward",
                    "attention": attn, "mha": mha,
                    "ratio_course_sdpa_to_torch": attn["course_sdpa"]["median_s"] / attn["torch_sdpa"]["median_s"],
                    "ratio_course_mha_fused_to_torch": mha["course_mha_fused"]["median_s"] / mha["torch_mha"]["median_s"],
                    "ratio_course_mha_teaching_to_torch": mha["course_mha_teaching"]["median_s"] / mha["torch_mha"]["median_s"],
                    "gflops": {
                        "course_sdpa": a_flops / attn["course_sdpa"]["min_s"] / 1e9,
                        "torch_sdpa": a_flops / attn["torch_sdpa"]["min_s"] / 1e9,
                        "course_mha_fused": m_flops / mha["course_mha_fused"]["min_s"] / 1e9,
                        "torch_mha": m_flops / mha["torch_mha"]["min_s"] / 1e9,
                    },
                })
                print(f"B={batch} N={n:5d} {rows[-1]['pass']:17s} course/torch SDPA "
                      f"{rows[-1]['ratio_course_sdpa_to_torch']:.2f}  MHA fused/torch "
                      f"{rows[-1]['ratio_course_mha_fused_to_torch']:.3f}", flush=True)
    # The teaching path must give the same numbers as the fused one.
    x = torch.randn(2, 16, D_MODEL)
    reference = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
    same = torch.allclose(MultiHeadAttention.from_torch(reference, fused_qkv=True)(x, x, x)[0],
                          MultiHeadAttention.from_torch(reference, fused_qkv=False)(x, x, x)[0], atol=1e-5)
    return {"matmul_gflops": peak, "heads": HEADS, "d_k": D_K, "rows": rows, "teaching_equals_fused": same}
