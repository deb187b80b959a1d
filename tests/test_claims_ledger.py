"""The claims ledger (claims.md, written by ``python -m coursetools.claims --ledger``) against the claims
modules, the stored per-seed results and the chapters' prose. Fast: it runs no experiment, it reads the
stored results (utils/data/claims/*.json)."""

from __future__ import annotations

import functools
import inspect
import json
import re
import shlex
import subprocess
import sys

import pytest
import torch

from coursetools import claims as ledger_tool
from utils.evidence import CLAIM_SEEDS

N = len(CLAIM_SEEDS)
# A count of seeds stated in prose: "9 of 10", "10 of 10 claim seeds", "8 of its 10", "3 of ten".
COUNT = re.compile(r"\b(\d+|ten) of (?:its |the )?(?:10|ten)\b")
UNIVERSAL = re.compile(r"every seed|every one of the (?:ten|10)|each of (?:the )?(?:ten|10)|all ten|on every one")


@functools.cache
def modules():
    return ledger_tool.claims_modules()


@functools.cache
def rows():
    return ledger_tool.ledger()


@functools.cache
def markdown(chapter: str, folder: str) -> str:
    return ledger_tool.markdown_text(ledger_tool.chapter_notebook(chapter, folder))


def _number(word: str) -> int:
    return 10 if word == "ten" else int(word)


def _consistent(k: int, stated: int | tuple[int, int]) -> bool:
    low, high = (stated, stated) if isinstance(stated, int) else stated
    return low <= k <= high


def test_every_claims_test_is_in_the_ledger_and_every_ledger_test_exists():
    assert modules(), "no claims module found"
    for chapter, module in modules().items():
        tests = {name for name, fn in vars(module).items() if name.startswith("test_") and inspect.isfunction(fn)}
        listed = {claim.test for claim in getattr(module, "LEDGER", ())}
        assert tests <= listed, f"test_claims_{chapter}.py: tests without a LEDGER entry: {sorted(tests - listed)}"
        assert listed <= tests, f"test_claims_{chapter}.py: LEDGER names tests that do not exist: {sorted(listed - tests)}"
        recorded = set(getattr(module, "RECORD", {}))
        unknown = {claim.result for claim in module.LEDGER} - recorded
        assert not unknown, f"test_claims_{chapter}.py: LEDGER reads results its RECORD does not write: {unknown}"


@pytest.mark.parametrize("folder", ["solutions", "chapters"])
def test_every_quote_is_in_the_chapters_prose(folder):
    missing = [(chapter, quote) for chapter, claim, _, _ in rows() for quote in claim.wording
               if ledger_tool.normalise(quote) not in markdown(chapter, folder)]
    assert not missing, f"quotes not found verbatim (whitespace aside) in {folder}/NN's markdown: {missing}"


def test_every_claim_is_recorded_and_holds_on_as_many_seeds_as_its_wording_says():
    wrong = []
    for chapter, claim, k, bound_k in rows():
        if k is None:
            wrong.append((chapter, claim.test, f"{claim.result}.json not recorded"))
        elif not _consistent(k, claim.stated):
            wrong.append((chapter, claim.test, claim.wording[0], f"stated {claim.stated}, stored results: {k}/{N}"))
        if claim.bound_holds is not None and bound_k != N:
            wrong.append((chapter, claim.test, f"the bound asserted on every seed holds on {bound_k}/{N}"))
    assert not wrong, wrong


def test_every_count_a_quote_states_is_the_claims_stated_strength():
    wrong = []
    for chapter, claim, _, _ in rows():
        for quote in claim.wording:
            counts = [_number(m.group(1)) for m in COUNT.finditer(quote)]
            low = claim.stated if isinstance(claim.stated, int) else claim.stated[0]
            if any(n != low for n in counts):
                wrong.append((chapter, quote, counts, claim.stated))
            if not counts and UNIVERSAL.search(quote) and claim.stated != N:
                wrong.append((chapter, quote, "says every seed", claim.stated))
    assert not wrong, wrong


def test_every_count_of_seeds_in_the_prose_is_quoted_in_the_ledger():
    by_chapter: dict[str, list[str]] = {}
    for chapter, claim, _, _ in rows():
        by_chapter.setdefault(chapter, []).extend(ledger_tool.normalise(q) for q in claim.wording)
    unquoted = []
    for path in sorted(ledger_tool.NOTEBOOKS["solutions"].glob("[0-9][0-9]_*.ipynb")):
        chapter = path.name[:2]
        text = markdown(chapter, "solutions")
        covered = [(m.start(), m.end()) for quote in by_chapter.get(chapter, [])
                   for m in re.finditer(re.escape(quote), text)]
        for count in COUNT.finditer(text):
            if not any(start <= count.start() and count.end() <= end for start, end in covered):
                unquoted.append((chapter, text[max(0, count.start() - 80):count.end() + 20]))
    assert not unquoted, f"counts of seeds in the prose that no LEDGER quote covers (so no test checks them): {unquoted}"


def test_the_prose_names_no_other_number_of_seeds_for_the_claims():
    """The claims are checked on the ten claim seeds: "on 5 seeds" (an earlier suite's number) is stale prose."""
    other = re.compile(r"\bon (\d+) (?:claim )?seeds\b")
    stale = [(path.name, m.group(0)) for path in sorted(ledger_tool.NOTEBOOKS["solutions"].glob("[0-9][0-9]_*.ipynb"))
             for m in other.finditer(markdown(path.name[:2], "solutions")) if int(m.group(1)) != N]
    assert not stale, stale


def test_claims_md_is_what_the_command_writes():
    assert ledger_tool.LEDGER_PATH.read_text() == ledger_tool.ledger_markdown(), (
        "claims.md is stale: run python -m coursetools.claims --ledger")


def test_the_counts_in_claims_md_are_recomputed_from_the_stored_results():
    table = [line for line in ledger_tool.LEDGER_PATH.read_text().splitlines() if re.match(r"\| \d\d \|", line)]
    assert len(table) == len(rows())
    for line, (chapter, claim, _, _) in zip(table, rows(), strict=True):
        assert line.startswith(f"| {chapter} |") and f"::{claim.test}`" in line, line
        shown = re.findall(r"\| (\d+)/10 \|", line)
        assert shown == [f"{ledger_tool.seeds_holding(claim)}"], (line, ledger_tool.seeds_holding(claim))


def test_the_readmes_ledger_command_writes_claims_md():
    """README's command, run as written (argv in a subprocess): it rewrites claims.md, which stays as it was."""
    readme = (ledger_tool.ROOT / "README.md").read_text(encoding="utf-8")
    (command,) = set(re.findall(r"`([^`\n]*coursetools\.claims --ledger[^`\n]*)`", readme))
    argv = shlex.split(command)
    assert argv[0] == ".venv/bin/python", argv
    before = ledger_tool.LEDGER_PATH.read_text()
    assert before == ledger_tool.ledger_markdown(), "claims.md is stale: run python -m coursetools.claims --ledger"
    done = subprocess.run([sys.executable, *argv[1:]], cwd=ledger_tool.ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert ledger_tool.LEDGER_PATH.read_text() == before == ledger_tool.ledger_markdown()


def test_only_records_the_named_results_and_they_reproduce_the_stored_ones(tmp_path, capsys):
    """``--only`` (how the results missing from the ledger were recorded): chapter 9's agreement, re-run on
    seeds 0-9 (a fraction of a second), equals the stored file; an unknown name fails and says so."""
    threads = torch.get_num_threads()
    try:
        assert ledger_tool.main(["09", "--only", "09_scratch_agreement", "--out", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(threads)  # the command runs on one thread, as the claims suite does
    assert [p.name for p in tmp_path.iterdir()] == ["09_scratch_agreement.json"]
    stored = ledger_tool.OUT_DIR / "09_scratch_agreement.json"
    # The same file up to the last bits: the values are float64 rounding differences (about 1e-16), and another
    # CPU's BLAS rounds differently (the stored file was made on an Intel CPU; on an AMD one 2.2e-16 became
    # 1.1e-16). The same keys, seeds and bound, and each value within 1e-14 of the stored one.
    made, kept = json.loads((tmp_path / "09_scratch_agreement.json").read_text()), json.loads(stored.read_text())
    assert made["seeds"] == kept["seeds"] and made["experiment"] == kept["experiment"]
    assert made["results"].keys() == kept["results"].keys()
    for seed, values in kept["results"].items():
        assert made["results"][seed].keys() == values.keys(), seed
        for name, value in values.items():
            assert abs(made["results"][seed][name] - value) <= 1e-14, (seed, name, made["results"][seed][name], value)
    # A recording says where it was made: one thread, this CPU's instruction set, this torch.
    context = json.loads(stored.read_text())["context"]
    assert context.keys() == {"threads", "cpu_capability", "torch"} and context["threads"] == 1, context
    assert context["torch"] == torch.__version__ and context["cpu_capability"] in ("DEFAULT", "AVX2", "AVX512"), context
    assert json.loads((tmp_path / "09_scratch_agreement.json").read_text())["context"]["cpu_capability"] == \
        torch.backends.cpu.get_cpu_capability()
    assert ledger_tool.main(["09", "--only", "09_no_such_result", "--out", str(tmp_path)]) == 1
    assert "no claims module records ['09_no_such_result']" in capsys.readouterr().out
