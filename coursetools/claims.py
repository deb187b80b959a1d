"""Record the claims suite's per-seed results for the chapters' spread figures.

Each chapter's claims module (``tests/claims/test_claims_NN.py``) may define ``RECORD``: a mapping from
a result name to a function ``seed -> {metric: value}`` (the same experiment functions the claims
tests run). This command runs each on the claim seeds (``utils.evidence.CLAIM_SEEDS``, 0-9, fixed in
advance) and writes ``utils/data/claims/<name>.json``, which a chapter reads to draw one dot per seed.

    python -m coursetools.claims            # every chapter that defines RECORD
    python -m coursetools.claims 06 07      # only these chapters
    python -m coursetools.claims --list     # what would be recorded
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from utils.evidence import CLAIM_SEEDS, run_seeds, save_results

ROOT = Path(__file__).resolve().parents[1]
CLAIMS_DIR = ROOT / "tests" / "claims"
OUT_DIR = ROOT / "utils" / "data" / "claims"


def recorders(chapters: list[str] | None = None) -> dict[str, Callable[[int], dict[str, float]]]:
    """``{name: experiment}`` from every claims module's ``RECORD`` (optionally only some chapters)."""
    found: dict[str, Callable[[int], dict[str, float]]] = {}
    for path in sorted(CLAIMS_DIR.glob("test_claims_*.py")):
        chapter = path.stem.removeprefix("test_claims_")
        if chapters and chapter not in chapters:
            continue
        spec = importlib.util.spec_from_file_location(f"_claims_{chapter}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except ModuleNotFoundError as missing:  # the claims modules are tests: they need the full set-up
            raise SystemExit(
                f"{path.name} needs {missing.name!r}, which the learner's environment does not have: install the "
                "full set-up (`.venv/bin/pip install -r requirements.txt`) to record the claims"
            ) from None
        for name, experiment in getattr(module, "RECORD", {}).items():
            if name in found:
                raise ValueError(f"two claims modules record {name!r}")
            found[name] = experiment
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.claims", description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="two-digit chapter numbers (default: all)")
    parser.add_argument("--list", action="store_true", help="list the results that would be recorded, run nothing")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="folder for the JSON files (default: utils/data/claims)")
    args = parser.parse_args(argv)
    found = recorders(args.chapters or None)
    if not found:
        print("no claims module defines RECORD" + (f" for chapters {args.chapters}" if args.chapters else ""))
        return 1
    if args.list:
        print("\n".join(sorted(found)))
        return 0
    torch.set_num_threads(1)  # as the claims suite runs them
    for name, experiment in sorted(found.items()):
        print(f"{name}: seeds {CLAIM_SEEDS[0]}-{CLAIM_SEEDS[-1]} ...", flush=True)
        results = run_seeds(experiment, CLAIM_SEEDS)
        path = save_results(args.out / f"{name}.json", name, results)
        print(f"  wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
