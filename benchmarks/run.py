"""Run the benchmarks and write benchmarks/results/*.json, then the appendix page performance.md.

    python -m benchmarks.run                  # attention, memory and notebooks (about 15 min on 2 cores)
    python -m benchmarks.run --only attention --quick
    python -m benchmarks.run --with-suite     # also time the whole pytest run

Timings are taken on one thread (torch.set_num_threads(1)) so that ratios are stable on a shared
machine; contenders are interleaved and summarised by median and min.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def _machine() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine(),
            "threads": torch.get_num_threads(), "device": "cpu", "when": time.strftime("%Y-%m-%d")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="attention,tiled,memory,notebooks")
    parser.add_argument("--quick", action="store_true", help="fewer lengths and repetitions")
    parser.add_argument("--with-suite", action="store_true", help="also time the whole test suite")
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    only = set(args.only.split(","))
    if "attention" in only:
        from benchmarks import attention

        lengths = [128, 512] if args.quick else [128, 256, 512, 1024, 2048, 4096]
        result = attention.measure(lengths, [1, 4], repeats=3 if args.quick else 7)
        _write("attention", {**_machine(), **result})
    if "tiled" in only:
        from benchmarks import tiled

        _write("tiled", {**_machine(), **tiled.measure([1024, 2048] if args.quick else [1024, 2048, 4096], 5)})
    if "memory" in only:
        from benchmarks import memory

        _write("memory", {**_machine(), **memory.measure([1024, 4096] if args.quick else [1024, 2048, 4096, 8192])})
    if "notebooks" in only:
        from benchmarks import notebooks

        _write("notebooks", {**_machine(), **notebooks.measure(args.with_suite)})
    from benchmarks import report

    report.write()
    return 0


def _write(name: str, data: dict) -> None:
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
