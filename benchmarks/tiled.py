"""Forward time of chapter 8's tiled attention against SDPA and naive attention (B=1, h=8, d_k=64)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.memory_probe import naive
from benchmarks.timing import interleaved
from utils.efficient_attention import tiled_attention


def measure(lengths: list[int], repeats: int) -> dict:
    torch.manual_seed(0)
    rows = []
    with torch.no_grad():
        for n in lengths:
            q, k, v = (torch.randn(1, 8, n, 64) for _ in range(3))  # (B, h, N, d_k)
            times = interleaved({
                "tiled": lambda q=q, k=k, v=v: tiled_attention(q, k, v),
                "sdpa": lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v),
                "naive": lambda q=q, k=k, v=v: naive(q, k, v),
            }, repeats)
            rows.append({"n": n, **times, "ratio_tiled_to_sdpa": times["tiled"]["median_s"] / times["sdpa"]["median_s"],
                         "ratio_tiled_to_naive": times["tiled"]["median_s"] / times["naive"]["median_s"]})
            print(f"N={n:5d} tiled/SDPA {rows[-1]['ratio_tiled_to_sdpa']:.2f}  tiled/naive "
                  f"{rows[-1]['ratio_tiled_to_naive']:.2f}", flush=True)
    return {"rows": rows}
