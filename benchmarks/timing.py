"""Honest timing on a shared machine: contenders interleaved, repeated, summarised by median and min."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def interleaved(contenders: dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, dict]:
    """Run each contender once per round, ``repeats`` rounds; return median and min seconds of each.

    Interleaving means a burst of load on the machine hits every contender alike, so their ratio is
    stable even when absolute times are not.
    """
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            samples[name].append(time.perf_counter() - start)
    return {name: {"median_s": statistics.median(s), "min_s": min(s), "repeats": len(s)} for name, s in samples.items()}


def matmul_gflops(n: int = 1024, repeats: int = 7) -> float:
    """The machine's float32 matrix-product rate (GFLOP/s), measured now, on the current thread setting."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    result = interleaved({"matmul": lambda: a @ b}, repeats)["matmul"]
    return 2 * n**3 / result["min_s"] / 1e9
