"""One memory measurement in a fresh process (run by benchmarks.memory; prints one JSON line).

    python -m benchmarks.memory_probe IMPL N MODE      IMPL: naive | tiled | sdpa   MODE: forward | training

Peak resident memory (ru_maxrss) after the attention call, minus the peak before it (Python, torch,
the inputs); one head, d_k = 64, float32.
"""

from __future__ import annotations

import json
import resource
import sys

import torch
import torch.nn.functional as F


def naive(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=-1)  # (B, h, N, N)
    return weights @ v


def main(impl: str, n: int, mode: str) -> None:
    torch.set_num_threads(1)
    from utils.efficient_attention import tiled_attention

    fn = {"naive": naive, "tiled": tiled_attention, "sdpa": F.scaled_dot_product_attention}[impl]
    training = mode == "training"
    q, k, v = (torch.randn(1, 1, n, 64, requires_grad=training) for _ in range(3))  # (B, h, N, d_k)
    # Warm up the code path on a tiny input so library initialisation is not counted.
    small = [t[..., :64, :].detach().clone().requires_grad_(training) for t in (q, k, v)]
    out = fn(*small)
    if training:
        out.sum().backward()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if training:
        fn(q, k, v).sum().backward()
    else:
        with torch.no_grad():
            fn(q, k, v)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"impl": impl, "n": n, "mode": mode, "peak_mib": (after - before) / 1024,
                      "one_nxn_mib": n * n * 4 / 2**20}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
