"""Chapter 12's claims on the claim seeds 0-9 (CLAIM_SEEDS; the notebook asserts the same on seed 0).

* ``RECORD`` (``python -m coursetools.claims 12``) trains every arm of section 4 (and the main run, plain
  and checkpoint-averaged) on seeds 0-9 and stores the scores in ``utils/data/claims/12_recipe_ablation.json``,
  and section 7's language model in ``12_language_model.json``; the chapter's spread figure and its
  paired comparisons read them.
* ``test_recipe_claims`` re-runs, live on each seed, the main run (its copy after 250 steps is the recipe
  arm) and the arms without label smoothing and without warm-up, asserts every per-seed claim that
  concerns them (``ablation_claims``), and checks that the recorded results agree with the live run.
* ``test_claims_on_the_recorded_results`` asserts every claim of section 4 on the recorded ten seeds:
  the per-seed claims, the dropout and untied arms included, and the paired comparisons at the
  strength the chapter states them. The dropout and untied arms are re-run live only with
  ``CLAIMS_12_ALL_ARMS=1`` (``test_dropout_and_tying_claims``): two more arms on ten seeds would take
  the suite past its time budget.
* ``test_language_model_claims``: section 7's language model on each seed.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path

import pytest
import torch

from coursetools.claims import Claim
from utils.evidence import CLAIM_SEEDS, load_results
from utils.generation import WordVocab, course_text, language_model_claims, repetition_measure, train_gpt
from utils.transformer import ABLATIONS, ablation_claims, ablation_comparisons, arms_of, recipe_ablation

pytestmark = [pytest.mark.claims, pytest.mark.usefixtures("one_thread")]

MAIN_STEPS, ABLATION_STEPS, GPT_STEPS = 400, 250, 150  # the notebook's values (FULL_RUN = False)
RECORDED = Path(__file__).resolve().parents[2] / "utils" / "data" / "claims"
LIVE_ARMS = ("recipe", "no label smoothing", "no warm-up")


def recipe_record(seed: int) -> dict[str, float]:
    """Every arm of section 4 (and the main run, plain and checkpoint-averaged) on one seed, as
    ``{"arm: metric": value}``."""
    torch.set_num_threads(1)
    results = recipe_ablation(seed, arms=tuple(ABLATIONS), steps=ABLATION_STEPS, main_steps=MAIN_STEPS, test_size=500)
    return {f"{arm}: {metric}": value for arm, scores in results.items() for metric, value in scores.items()}


def language_model_record(seed: int) -> dict[str, float]:
    """Section 7's language model on one seed: its final loss (mean of the last 20 steps), the uniform
    guess ln V, and the distinct-bigram shares of greedy text and of the least varied sample."""
    torch.set_num_threads(1)
    text = course_text()
    vocab = WordVocab(text)
    gpt, losses = train_gpt(torch.tensor(vocab.encode(text)), len(vocab), seed=seed, steps=GPT_STEPS)
    repetition = repetition_measure(gpt, torch.tensor([vocab.encode("the attention")]), new_tokens=100)
    return {"final loss": sum(losses[-20:]) / 20, "uniform loss": math.log(len(vocab)),
            "greedy distinct bigrams": repetition["greedy"],
            "lowest sampled distinct bigrams": min(min(s) for s in repetition["sampled"].values())}


RECORD = {"12_recipe_ablation": recipe_record, "12_language_model": language_model_record}


# The strength at which the chapter states each per-seed claim of ablation_claims, in seeds out of 10 (10 for
# every claim not named here): a claim stated on 10 of 10 is asserted on each seed, the others are counted on
# the recorded seeds (test_claims_on_the_recorded_results).
STATED_PER_SEED = {"after 400 steps it translates most held-out dates": 9,
                   "label smoothing raises the held-out NLL": 9, "at this budget dropout costs accuracy": 8}


def _check(seed: int, results: dict[str, dict[str, float]]) -> None:
    claims = ablation_claims(results)
    failed = [claim for claim, holds in claims.items() if not holds and STATED_PER_SEED.get(claim, 10) == 10]
    summary = {arm: {k: round(v, 3) for k, v in r.items()} for arm, r in results.items()}
    print(f"seed {seed}: {summary}")  # shown with pytest -s: the figures the chapter quotes
    assert not failed, f"seed {seed}: {failed} do not hold; {summary}"


@functools.cache
def _recorded(name: str) -> dict[int, dict[str, float]]:
    records = load_results(RECORDED / f"{name}.json")
    assert sorted(records) == list(CLAIM_SEEDS), f"{name}.json must hold seeds 0-9: run python -m coursetools.claims 12"
    return records


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_recipe_claims(seed):
    results = recipe_ablation(seed, arms=LIVE_ARMS, steps=ABLATION_STEPS, main_steps=MAIN_STEPS, test_size=500)
    assert set(results) == {"main", "main, averaged", *LIVE_ARMS}
    _check(seed, results)
    # The stored figures are this run's (one thread, same code) only on the kind of CPU that recorded them: on
    # another instruction set the same seed trains to a different model (measured: exact match 0.012-0.070
    # apart on seeds 0-9 between the recording machine and an AVX-512 one). So the stored-equals-live check runs
    # where the recording names this machine's capability; the claim itself is asserted live above everywhere.
    context = json.loads((RECORDED / "12_recipe_ablation.json").read_text()).get("context", {})
    if context.get("cpu_capability") != torch.backends.cpu.get_cpu_capability():
        return
    recorded = arms_of(_recorded("12_recipe_ablation")[seed])
    for arm, scores in results.items():
        for metric in ("exact", "confidence", "nll"):
            assert abs(recorded[arm][metric] - scores[metric]) <= 0.01, (
                f"seed {seed}, {arm}: recorded {metric} {recorded[arm][metric]:.3f}, live {scores[metric]:.3f}: "
                "re-run python -m coursetools.claims 12")


def test_claims_on_the_recorded_results():
    records = _recorded("12_recipe_ablation")
    for seed, record in records.items():
        _check(seed, arms_of(record))  # every per-seed claim stated on 10 of 10, the dropout and untied arms included
    held = {claim: sum(ablation_claims(arms_of(record))[claim] for record in records.values())
            for claim in ablation_claims(arms_of(records[0]))}
    assert held == {claim: STATED_PER_SEED.get(claim, 10) for claim in held}, held
    comparisons = ablation_comparisons(records)
    for name, result in comparisons.items():
        print(f"{name}: {result}")
    # The strength at which section 4 states each comparison (wins of A over B out of 10 seeds):
    assert comparisons["warm-up (recipe - no warm-up)"].wins == 10
    assert comparisons["tying (recipe - untied embeddings)"].losses == 10
    # "cost accuracy on 8 of 10 seeds": not significant by the sign test, an interval of the mean below zero
    dropout = comparisons["dropout (recipe - no dropout)"]
    assert (dropout.wins, dropout.losses) == (2, 8) and round(dropout.sign_test_p, 3) == 0.109 and dropout.interval[1] < 0
    # "raised exact match on 9 of 10 seeds (sign test p = 0.021)", lower on seed 5 and seed 7 respectively:
    for name, lower_on in (("label smoothing (recipe - no label smoothing)", 5),
                           ("checkpoint averaging (average of the last 5 - last)", 7)):
        result = comparisons[name]
        assert (result.wins, result.losses) == (9, 1) and round(result.sign_test_p, 3) == 0.021
        assert result.differences[lower_on] < 0 and result.interval[0] > 0


@pytest.mark.skipif(os.environ.get("CLAIMS_12_ALL_ARMS") != "1",
                    reason="the dropout and untied arms re-run live only with CLAIMS_12_ALL_ARMS=1 (their recorded "
                           "results are checked by test_claims_on_the_recorded_results)")
@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_dropout_and_tying_claims(seed):
    results = recipe_ablation(seed, arms=("recipe", "no dropout", "untied embeddings"), steps=ABLATION_STEPS,
                              test_size=500)
    _check(seed, results)


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_language_model_claims(seed):
    text = course_text()
    vocab = WordVocab(text)
    gpt, losses = train_gpt(torch.tensor(vocab.encode(text)), len(vocab), seed=seed, steps=GPT_STEPS)
    repetition = repetition_measure(gpt, torch.tensor([vocab.encode("the attention")]), new_tokens=100)
    claims = language_model_claims(losses, len(vocab), repetition)
    print(f"seed {seed}: final loss {sum(losses[-20:]) / 20:.2f}, distinct bigrams {repetition}")
    failed = [claim for claim, holds in claims.items() if not holds]
    assert not failed, f"seed {seed}: {failed} do not hold; final loss {sum(losses[-20:]) / 20:.2f}, {repetition}"
    recorded = _recorded("12_language_model")[seed]
    assert abs(recorded["final loss"] - sum(losses[-20:]) / 20) < 0.01, "re-run python -m coursetools.claims 12"


# The claims ledger (python -m coursetools.claims --ledger writes claims.md; tests/test_claims_ledger.py checks it).
def _per_seed(*names: str):
    return lambda record: all(ablation_claims(arms_of(record))[name] for name in names)


def _higher(a: str, b: str):
    return lambda record: record[f"{a}: exact"] > record[f"{b}: exact"]


_UNDER_CONFIDENT = ("with label smoothing the model is under-confident", "without it, calibration error is lower")
LEDGER = [
    Claim("test_recipe_claims", "12_recipe_ablation", "exact match: no warm-up < recipe (250 steps)",
          _per_seed("without warm-up, exact match is lower"),
          ("**Removing warm-up lowered exact match on 10 of 10 seeds.**",
           "without warm-up exact match was lower (10 of 10;"), 10),
    Claim("test_recipe_claims", "12_recipe_ablation", "without label smoothing: confidence higher than the recipe's",
          _per_seed("label smoothing lowers confidence"),
          ("**Label smoothing lowered confidence, on 10 of 10 seeds,",), 10),
    Claim("test_recipe_claims", "12_recipe_ablation", "without label smoothing: held-out NLL lower",
          _per_seed("label smoothing raises the held-out NLL"),
          ("and raised the held-out negative log-likelihood on 9 of 10.**", "raised the held-out NLL (9 of 10)"), 9),
    Claim("test_recipe_claims", "12_recipe_ablation",
          "with label smoothing: confidence < accuracy on the same tokens; calibration error lower without it",
          _per_seed(*_UNDER_CONFIDENT),
          ("(confidence below accuracy) and its expected calibration error was *higher* than without it, both on 10 "
           "of 10 seeds",
           "ours was *under*-confident with smoothing, and its calibration error was higher than without it, on "
           "10 of 10 seeds (section 4)"), 10),
    Claim("test_recipe_claims", "12_recipe_ablation",
          "without label smoothing: confidence higher; with it: confidence < accuracy",
          _per_seed("label smoothing lowers confidence", "with label smoothing the model is under-confident"),
          ("label smoothing lowered confidence, leaving the model under-confident (10 of 10)",), 10),
    Claim("test_recipe_claims", "12_recipe_ablation",
          "main run after 400 steps: mean confidence > the smoothed loss's optimum and above it on > half the "
          "tokens; confidence < accuracy",
          _per_seed("after 400 steps the mean confidence is above the smoothed loss's optimum, on most tokens",
                    "after 400 steps the model is still under-confident"),
          ("Both held on every one of the ten seeds of section 4.",), 10),
    Claim("test_recipe_claims", "12_recipe_ablation",
          "main run after 400 steps: exact match >= 0.8 and token accuracy >= 0.95",
          _per_seed("after 400 steps it translates most held-out dates"),
          ("at least 80% exact match and 95% of the tokens: 9 of 10", "at least 80% on 9 of the ten claim seeds"), 9),
    Claim("test_dropout_and_tying_claims", "12_recipe_ablation", "exact match: no dropout > recipe (250 steps)",
          _per_seed("at this budget dropout costs accuracy"),
          ("**Dropout cost accuracy at this budget on 8 of 10 seeds**", "dropout on 8 of 10)",
           "dropout slowed learning on 8 of 10,", "dropout on 8 of 10 seeds."), 8),
    Claim("test_dropout_and_tying_claims", "12_recipe_ablation", "exact match: untied embeddings > recipe (250 steps)",
          _per_seed("at this budget untied embeddings learn faster"),
          ("**Untied embeddings learned faster at this budget, on 10 of 10 seeds.**", "(tying on 10 of 10 seeds,",
           "tying cost accuracy at this budget (10 of 10)"), 10),
    Claim("test_claims_on_the_recorded_results", "12_recipe_ablation",
          "exact match: untied embeddings > recipe and no warm-up < recipe (250 steps)",
          _per_seed("at this budget untied embeddings learn faster", "without warm-up, exact match is lower"),
          ("tying slowed learning and removing warm-up lowered exact match, each on 10 of 10 seeds",), 10),
    Claim("test_claims_on_the_recorded_results", "12_recipe_ablation",
          "exact match: recipe > no label smoothing (paired by seed; the test: 9 wins, 1 loss, p = 0.021)",
          _higher("recipe", "no label smoothing"),
          ("**Label smoothing raised exact match on 9 of 10 seeds** (sign test p = 0.021)",
           "(more weakly, on 9 of 10 seeds) label smoothing",
           "and raised exact match on 9 of 10 seeds (sign test p = 0.021), not on every one",
           "and label smoothing raised exact match on 9 of 10, not all (section 4)"), 9),
    Claim("test_claims_on_the_recorded_results", "12_recipe_ablation",
          "exact match: average of the last 5 checkpoints > the last (paired by seed; the test: 9 wins, 1 loss)",
          _higher("main, averaged", "main"),
          ("scored higher than the last checkpoint alone on 9 of 10 seeds (sign test p = 0.021)",
           "Averaging the last five checkpoints raised exact match on 9 of 10 seeds (p = 0.021)"), 9),
    Claim("test_language_model_claims", "12_language_model",
          "final loss (mean of the last 20 steps) < ln V - 2; least varied sample's distinct-bigram share > greedy's "
          "+ 0.2", lambda r: (r["final loss"] < r["uniform loss"] - 2
                              and r["lowest sampled distinct bigrams"] > r["greedy distinct bigrams"] + 0.2),
          ("on 10 of 10 the loss ended at least 2 nats below a uniform guess and the gap held",), 10),
]
