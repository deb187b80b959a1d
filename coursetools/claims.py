"""Record the claims suite's per-seed results for the chapters' spread figures.

Each chapter's claims module (``tests/claims/test_claims_NN.py``) may define ``RECORD``: a mapping from
a result name to a function ``seed -> {metric: value}`` (the same experiment functions the claims
tests run). This command runs each on the claim seeds (``utils.evidence.CLAIM_SEEDS``, 0-9, fixed in
advance) and writes ``utils/data/claims/<name>.json``, which a chapter reads to draw one dot per seed.

    python -m coursetools.claims            # every chapter that defines RECORD
    python -m coursetools.claims 06 07      # only these chapters
    python -m coursetools.claims --list     # what would be recorded
    python -m coursetools.claims 06 --only 06_frozen_units   # only these results
    python -m coursetools.claims --ledger   # write claims.md from the stored results (runs nothing)

Each claims module also defines ``LEDGER``: one :class:`Claim` per stochastic claim its tests assert (the
chapter's wording, quoted verbatim, the metric and criterion over one seed's stored results, the weaker
bound asserted on every seed, the test). ``--ledger`` counts on how many of the ten seeds each claim
holds, from the stored results, and writes the table to ``claims.md``; tests/test_claims_ledger.py checks
that it is up to date, that every quote is in the chapter and that every count the chapter states is
what the stored results show.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from utils.evidence import CLAIM_SEEDS, load_results, run_seeds, save_results

ROOT = Path(__file__).resolve().parents[1]
CLAIMS_DIR = ROOT / "tests" / "claims"
OUT_DIR = ROOT / "utils" / "data" / "claims"
LEDGER_PATH = ROOT / "claims.md"


@dataclass(frozen=True)
class Claim:
    """One stochastic claim of a chapter, as its claims module asserts it.

    ``holds`` is the claim's criterion on one seed's stored results (``{metric: value}`` of ``result``);
    the ledger counts the seeds on which it holds. ``stated`` is how many of the ten seeds the
    chapter's ``wording`` says (10 for "every seed"; with ``at_least``, a lower bound the wording gives as
    such). ``bound`` and ``bound_holds``: the weaker bound asserted on every seed, where the claim itself
    is asserted on fewer."""

    test: str
    result: str
    metric: str
    holds: Callable[[dict[str, float]], bool]
    wording: tuple[str, ...]
    stated: int
    at_least: bool = False
    bound: str = ""
    bound_holds: Callable[[dict[str, float]], bool] | None = None


def claims_modules(chapters: list[str] | None = None) -> dict[str, ModuleType]:
    """``{chapter: module}`` for every claims module (optionally only some chapters)."""
    modules = {}
    for path in sorted(CLAIMS_DIR.glob("test_claims_*.py")):
        chapter = path.stem.removeprefix("test_claims_")
        if not chapters or chapter in chapters:
            modules[chapter] = _load(path)
    return modules


def _load(path: Path) -> ModuleType:
    module = sys.modules.get(path.stem)
    if module is not None and Path(module.__file__).resolve() == path.resolve():
        return module
    # Imported under its own name with its folder on sys.path, as pytest imports it: an experiment that
    # runs on several processes (chapter 13) sends them functions of this module by name.
    if str(CLAIMS_DIR) not in sys.path:
        sys.path.insert(0, str(CLAIMS_DIR))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as missing:  # the claims modules are tests: they need the full set-up
        del sys.modules[path.stem]
        raise SystemExit(
            f"{path.name} needs {missing.name!r}, which the learner's environment does not have: install the "
            "full set-up (`.venv/bin/pip install -r requirements.txt`) to record the claims"
        ) from None
    return module


def recorders(chapters: list[str] | None = None) -> dict[str, Callable[[int], dict[str, float]]]:
    """``{name: experiment}`` from every claims module's ``RECORD`` (optionally only some chapters)."""
    found: dict[str, Callable[[int], dict[str, float]]] = {}
    for module in claims_modules(chapters).values():
        for name, experiment in getattr(module, "RECORD", {}).items():
            if name in found:
                raise ValueError(f"two claims modules record {name!r}")
            found[name] = experiment
    return found


def seeds_holding(claim: Claim, results_dir: Path = OUT_DIR, criterion: Callable | None = None) -> int | None:
    """On how many claim seeds ``claim`` (or ``criterion``) holds in the stored results; None if not recorded."""
    path = results_dir / f"{claim.result}.json"
    if not path.exists():
        return None
    records = load_results(path)
    if sorted(records) != list(CLAIM_SEEDS):
        raise ValueError(f"{path.name} holds seeds {sorted(records)}, not {list(CLAIM_SEEDS)}")
    return sum(bool((criterion or claim.holds)(records[seed])) for seed in CLAIM_SEEDS)


NOTEBOOKS = {"solutions": ROOT / "solutions", "chapters": ROOT / "chapters"}


def chapter_notebook(chapter: str, folder: str = "solutions") -> Path:
    (path,) = sorted(NOTEBOOKS[folder].glob(f"{chapter}_*.ipynb"))
    return path


def markdown_text(path: Path) -> str:
    """The markdown cells of a notebook, joined, with every run of whitespace made one space."""
    cells = json.loads(path.read_text())["cells"]
    text = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return normalise(text)


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def ledger(results_dir: Path = OUT_DIR) -> list[tuple[str, Claim, int | None, int | None]]:
    """``(chapter, claim, k, k of the bound)`` for every claim of every claims module's ``LEDGER``."""
    rows = []
    for chapter, module in claims_modules().items():
        for claim in getattr(module, "LEDGER", ()):
            bound_k = seeds_holding(claim, results_dir, claim.bound_holds) if claim.bound_holds else None
            rows.append((chapter, claim, seeds_holding(claim, results_dir), bound_k))
    return rows


HEADER = """# Claims ledger

Generated by `python -m coursetools.claims --ledger` from the claims modules' `LEDGER` lists
(`tests/claims/test_claims_NN.py`) and the stored per-seed results (`utils/data/claims/*.json`, written by
`python -m coursetools.claims NN`); do not edit by hand. `tests/test_claims_ledger.py` checks that this page is
what the command writes, that every quote is in the chapter (solutions and released notebook, whitespace
aside), that every count a quote states is what the stored results show, and that every count "N of 10"
in a chapter's prose is quoted here.

**In scope:** every stochastic claim the claims suite asserts (`pytest -m claims tests/claims`), that is
every claim about an experiment that depends on a seed, run on the claim seeds {seeds} (fixed before any
result was seen). One row per claim: the chapter's wording, verbatim (several quotes where the chapter
states it more than once); what is measured and the criterion; on how many of the ten seeds the criterion
holds in the stored results (k/10); the weaker bound the test asserts on every seed where the claim itself
is asserted on fewer; the test. **Not in scope:** deterministic claims (no seed: exact counts, identities,
the tolerance policy's own figures), asserted by the notebooks and the ordinary tests, and claims about
timings or a GPU, which depend on the machine (see performance.md).
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def ledger_markdown(results_dir: Path = OUT_DIR) -> str:
    rows = ledger(results_dir)
    seeds = f"{CLAIM_SEEDS[0]}-{CLAIM_SEEDS[-1]}"
    lines = [HEADER.format(seeds=seeds), "| Ch. | Claim, as the chapter states it | Metric and criterion | k/10 | "
             "Bound asserted on every seed | Test |", "|---|---|---|---|---|---|"]
    n = len(CLAIM_SEEDS)
    for chapter, claim, k, bound_k in rows:
        quotes = " / ".join(f"\u201c{_cell(w)}\u201d" for w in claim.wording)
        measured = "not recorded" if k is None else f"{k}/{n}"
        bound = "" if not claim.bound else f"{_cell(claim.bound)} ({'not recorded' if bound_k is None else f'{bound_k}/{n}'})"
        test = f"`tests/claims/test_claims_{chapter}.py::{claim.test}`"
        lines.append(f"| {chapter} | {quotes} | {_cell(claim.metric)} (`{claim.result}.json`) | {measured} | {bound} | {test} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.claims", description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="two-digit chapter numbers (default: all)")
    parser.add_argument("--ledger", action="store_true", help="write claims.md from the stored results, run nothing")
    parser.add_argument("--list", action="store_true", help="list the results that would be recorded, run nothing")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="record only these results (names as --list prints)")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="folder for the JSON files (default: utils/data/claims)")
    args = parser.parse_args(argv)
    if args.ledger:
        LEDGER_PATH.write_text(ledger_markdown())
        print(f"wrote {LEDGER_PATH.relative_to(ROOT)}")
        return 0
    found = recorders(args.chapters or None)
    if not found:
        print("no claims module defines RECORD" + (f" for chapters {args.chapters}" if args.chapters else ""))
        return 1
    if args.only:
        unknown = sorted(set(args.only) - set(found))
        if unknown:
            print(f"no claims module records {unknown}; known: {sorted(found)}")
            return 1
        found = {name: found[name] for name in args.only}
    if args.list:
        print("\n".join(sorted(found)))
        return 0
    torch.set_num_threads(1)  # as the claims suite runs them
    for name, experiment in sorted(found.items()):
        print(f"{name}: seeds {CLAIM_SEEDS[0]}-{CLAIM_SEEDS[-1]} ...", flush=True)
        results = run_seeds(experiment, CLAIM_SEEDS)
        # Where they were measured: the same seed trains to another model on another instruction set or
        # torch version (chapter 12's stored-equals-live check runs only where these match).
        path = save_results(args.out / f"{name}.json", name, results, threads=torch.get_num_threads(),
                            cpu_capability=torch.backends.cpu.get_cpu_capability(), torch=torch.__version__)
        print(f"  wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
