"""One memory measurement in a fresh process (run by benchmarks.memory; prints one JSON line).

    python -m benchmarks.memory_probe IMPL N MODE      IMPL: naive | tiled | sdpa   MODE: forward | training

Peak resident memory during the attention call minus the resident memory just before it (Python,
torch and the inputs are not counted): Linux's VmHWM, reset through /proc/self/clear_refs just before
the call. (ru_maxrss would not do: its high-water mark survives fork and exec, so a child of a big
process inherits its parent's peak.) One head, d_k = 64, float32.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F


def naive(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=-1)  # (B, h, N, N)
    return weights @ v


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


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
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    before = _kib("VmRSS")
    if training:
        fn(q, k, v).sum().backward()
    else:
        with torch.no_grad():
            fn(q, k, v)
    after = _kib("VmHWM")
    print(json.dumps({"impl": impl, "n": n, "mode": mode, "peak_mib": (after - before) / 1024,
                      "one_nxn_mib": n * n * 4 / 2**20}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
