"""Peak memory of naive, tiled (chapter 08) and SDPA attention, each configuration in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys


def measure(lengths: list[int]) -> dict:
    rows = []
    for n in lengths:
        for mode in ("forward", "training"):
            for impl in ("naive", "tiled", "sdpa"):
                out = subprocess.run([sys.executable, "-m", "benchmarks.memory_probe", impl, str(n), mode],
                                     capture_output=True, text=True, timeout=900, check=True)
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"N={n:5d} {mode:8s} {impl:5s} {rows[-1]['peak_mib']:9.1f} MiB", flush=True)
    return {"method": "growth of peak resident memory (VmHWM reset just before) during one call, a fresh "
                      "process per row, B=1, h=1, d_k=64, float32",
            "rows": rows}
