"""Run the benchmarks. Results go to benchmarks/out/ (git-ignored) unless --record is given.

    python -m benchmarks.run --quick          # a smoke run (small sizes, no notebooks, about 20 s of CPU)
    python -m benchmarks.run                  # attention, tiled, memory and notebooks (about 15 min on 2 cores)
    python -m benchmarks.run --only attention
    python -m benchmarks.run --with-suite     # also time the whole pytest run
    python -m benchmarks.run --record         # authors: write the recorded results instead, that is
                                              # benchmarks/results/*.json, benchmarks/figures/ and the
                                              # book's page performance.md (commit them on a quiet machine)

Without --record nothing tracked by git changes: the run writes benchmarks/out/results/*.json,
benchmarks/out/figures/ and benchmarks/out/performance.md. A quick run cannot be recorded (its sizes
are too small to be the course's measurement).

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

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "results"
OUT = HERE / "out"
STEPS = ("attention", "tiled", "memory", "notebooks")


def _machine() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine(),
            "threads": torch.get_num_threads(), "device": "cpu", "when": time.strftime("%Y-%m-%d")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help=f"comma-separated subset of {','.join(STEPS)}")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, few repetitions, no notebooks: a smoke run (about 20 s of CPU time); "
                             "the targets are not judged")
    parser.add_argument("--with-suite", action="store_true", help="also time the whole test suite")
    parser.add_argument("--record", action="store_true",
                        help="write the recorded results (benchmarks/results, figures, performance.md)")
    parser.add_argument("--out", type=Path, default=OUT, help="where an unrecorded run writes (default: %(default)s)")
    args = parser.parse_args(argv)
    only = set((args.only or ",".join(s for s in STEPS if not (args.quick and s == "notebooks"))).split(","))
    unknown = only - set(STEPS)
    if unknown:
        parser.error(f"--only: unknown step(s) {', '.join(sorted(unknown))}; choose from {', '.join(STEPS)}")
    if args.record and args.quick:
        parser.error("--record measures at full size: drop --quick")
    results = RECORDED if args.record else args.out / "results"
    results.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    start = time.perf_counter()
    if "attention" in only:
        from benchmarks import attention

        lengths, batches = ([128, 256], [1]) if args.quick else ([128, 256, 512, 1024, 2048, 4096], [1, 4])
        result = attention.measure(lengths, batches, repeats=3 if args.quick else 7)
        _write(results, "attention", {**_machine(), "quick": args.quick, **result})
    if "tiled" in only:
        from benchmarks import tiled

        sizes = [512, 1024] if args.quick else [1024, 2048, 4096]
        _write(results, "tiled", {**_machine(), "quick": args.quick, **tiled.measure(sizes, 3 if args.quick else 5)})
    if "memory" in only:
        from benchmarks import memory

        sizes = [1024] if args.quick else [1024, 2048, 4096, 8192]
        _write(results, "memory", {**_machine(), "quick": args.quick, **memory.measure(sizes)})
    if "notebooks" in only:
        from benchmarks import notebooks

        _write(results, "notebooks", {**_machine(), **notebooks.measure(args.with_suite)})
    from benchmarks import report

    if args.record:
        page = report.write()
        report.write_readme()
    else:
        page = report.write(results=results, figures=args.out / "figures", page=args.out / "performance.md")
    if args.quick:
        print("quick run: the targets are defined at full size and are not judged here")
    else:
        for target in report.missed_targets(results):
            print(f"target missed: {target}" + ("" if args.record else " (on this run; nothing was recorded)"),
                  file=sys.stderr)
    print(f"{time.perf_counter() - start:.0f} s; results in {results}, report in {page}"
          + ("" if args.record else " (not recorded: nothing tracked by git changed)"))
    return 0


def _write(folder: Path, name: str, data: dict) -> None:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
