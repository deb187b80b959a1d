"""Chapter 04's claims on the claim seeds (0-9): several heads make the split of two relations easy, not possible.

The experiment is `utils.multihead.head_split_experiment` (exported from solutions/04), the function the
notebook runs for seed 0. The thresholds were set on seeds 100-109 (never on 0-9). The notebook states
the claims at the strength the ten claim seeds show, from the stored results
(``python -m coursetools.claims 04`` writes ``utils/data/claims/04_head_split.json``).
"""

from __future__ import annotations

from functools import cache

import pytest
import torch

from coursetools.claims import Claim
from utils.device import get_device
from utils.evidence import CLAIM_SEEDS
from utils.multihead import head_split_experiment

pytestmark = [pytest.mark.claims, pytest.mark.usefixtures("one_thread")]
MAX_STEPS = 3000  # head_split_experiment's default budget


def reads_previous(on_prev: float, on_other: float) -> bool:
    """The previous token is read by a share of the weight (>= 2x another key) or by exclusion (<= 1/2)."""
    return on_prev >= 2 * on_other or on_prev <= 0.5 * on_other


@cache
def _head_split(seed: int) -> dict[str, float]:
    """The numbers the chapter's claims are about, as plain floats (for the stored results too)."""
    torch.set_num_threads(1)
    result = head_split_experiment(seed, max_steps=MAX_STEPS, device=get_device())
    steps_two, steps_one = result["steps"][2], result["steps"][1]
    two, one = result["report"][2], result["report"][1]
    match_head = max(range(2), key=lambda i: two["on_match"][i])
    other_head = 1 - match_head
    return {
        "steps_two": float(steps_two if steps_two is not None else MAX_STEPS),
        "two_heads_solved": float(steps_two is not None),
        # a head count that did not solve the task within the budget counts as MAX_STEPS: a lower bound
        "steps_one": float(steps_one if steps_one is not None else MAX_STEPS),
        "one_head_solved": float(steps_one is not None),
        "ratio": (steps_one if steps_one is not None else MAX_STEPS) / (steps_two or MAX_STEPS),
        "one_head_prev_at_two_head_steps": float(result["one_head_at_two_head_steps"][0]),
        "one_on_match": float(one["on_match"][0]),
        "one_reads_previous": float(reads_previous(one["on_prev"][0], one["on_other"][0])),
        "two_match_head_on_match": float(two["on_match"][match_head]),
        "two_other_head_on_match": float(two["on_match"][other_head]),
        "two_other_reads_previous": float(reads_previous(two["on_prev"][other_head], two["on_other"][other_head])),
    }


RECORD = {"04_head_split": _head_split}


def _two_heads_quick_and_one_slower(r: dict) -> bool:
    """Equal budget: two heads solve both relations quickly; one head, after as many steps, has not, and needs
    clearly longer (not solved within the budget counts as the budget: a lower bound)."""
    return (r["two_heads_solved"] == 1.0 and r["steps_two"] <= 1500 and r["one_head_prev_at_two_head_steps"] < 0.3
            and r["ratio"] >= 1.25)


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_two_heads_split_the_relations(seed: int) -> None:
    r = _head_split(seed)
    print(f"seed {seed}: {r}")
    if r["one_head_solved"]:  # possible: with one blended distribution
        assert 0.3 < r["one_on_match"] < 0.8 and r["one_reads_previous"] == 1.0, r
    # The split: one matching head, and another head that reads the previous token (on every seed, also
    # where two heads have not yet reached the "solved" accuracy).
    assert r["two_match_head_on_match"] > 0.8 and r["two_other_head_on_match"] < 0.2, r
    assert r["two_other_reads_previous"] == 1.0, r


def test_two_heads_are_quick_and_one_head_is_slower_on_most_seeds() -> None:
    # Most seeds, not every seed: an independent run found a further seed (13) on which the two-head model
    # split the relations but stalled at 0.90 previous-token accuracy, and one head solved the task first.
    quick = [seed for seed in CLAIM_SEEDS if _two_heads_quick_and_one_slower(_head_split(seed))]
    assert len(quick) >= 8, f"two heads quick, one head slower on {len(quick)} of {len(CLAIM_SEEDS)} seeds: {quick}"


def test_one_head_solves_the_task_on_most_seeds() -> None:
    solved = sum(_head_split(seed)["one_head_solved"] for seed in CLAIM_SEEDS)
    assert solved >= 6, f"one head solved the task within {MAX_STEPS} steps on {solved} of {len(CLAIM_SEEDS)} seeds"


# The claims ledger (python -m coursetools.claims --ledger writes claims.md; tests/test_claims_ledger.py checks it).
def _split(r: dict) -> bool:
    blended = not r["one_head_solved"] or (0.3 < r["one_on_match"] < 0.8 and r["one_reads_previous"] == 1.0)
    return (blended and r["two_match_head_on_match"] > 0.8 and r["two_other_head_on_match"] < 0.2
            and r["two_other_reads_previous"] == 1.0)


LEDGER = [
    Claim("test_two_heads_split_the_relations", "04_head_split",
          "two heads: one head > 0.8 of its weight on the match, the other < 0.2 and reads the previous token; "
          "one head, where it solved the task: a blended distribution (0.3 to 0.8 on the match)", _split,
          ("and the split itself on every seed",
           "One head solved it too on all ten seeds, in 800 to 1700 steps, with a blended distribution each time"),
          10),
    Claim("test_one_head_solves_the_task_on_most_seeds", "04_head_split",
          f"one head solves both relations within {MAX_STEPS} steps", lambda r: r["one_head_solved"] == 1.0,
          ("One head solved it too on all ten seeds",
           "(median 2.55; 10 of 10 seeds, each within 3000 steps)"), 10),
    Claim("test_two_heads_are_quick_and_one_head_is_slower_on_most_seeds", "04_head_split",
          "two heads solve it within 1500 steps; one head, after as many steps, < 0.3 previous-token accuracy, "
          "and needs >= 1.25 times the steps", _two_heads_quick_and_one_slower,
          ("after as many steps the one-head model's previous-token accuracy was still near chance (0.13 to 0.15) "
           "on every seed", "it needed more steps on every seed, between 1.6 and 5.7 times as many as two heads",
           "but it takes longer (on each of ten seeds; how much longer varies from seed to seed)",
           "needs 1.6 to 5.7 times as many steps (median 2.55; 10 of 10 seeds"), 10),
    Claim("test_two_heads_are_quick_and_one_head_is_slower_on_most_seeds", "04_head_split",
          "as above; the suite asserts it on at least 8 seeds", _two_heads_quick_and_one_slower,
          ('the claims suite therefore asserts "two heads quick, one head slower" on at least 8 of 10 seeds',),
          (8, 10)),
]
