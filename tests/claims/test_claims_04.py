"""Chapter 04's claims on five seeds: several heads make the split of two relations easy, not possible.

The experiment is `utils.multihead.head_split_experiment` (exported from solutions/04), the function the
notebook runs for seed 0; each test asserts the chapter's claims for one seed.
"""

from __future__ import annotations

import pytest

from utils.device import get_device
from utils.multihead import head_split_experiment

pytestmark = [pytest.mark.claims, pytest.mark.usefixtures("one_thread")]


def reads_previous(on_prev: float, on_other: float) -> bool:
    """The previous token is read by a share of the weight (>= 2x another key) or by exclusion (<= 1/2)."""
    return on_prev >= 2 * on_other or on_prev <= 0.5 * on_other


@pytest.mark.parametrize("seed", range(5))
def test_two_heads_split_the_relations_and_one_head_is_slower(seed: int) -> None:
    result = head_split_experiment(seed, device=get_device())
    steps_two, steps_one = result["steps"][2], result["steps"][1]
    two, one = result["report"][2], result["report"][1]
    prev_at_budget, _ = result["one_head_at_two_head_steps"]
    print(f"seed {seed}: steps two heads {steps_two}, one head {steps_one}; one head's previous-token accuracy "
          f"after {steps_two} steps {prev_at_budget:.3f}; two heads on_match {two['on_match']}, one head {one['on_match']}")
    # Equal budget: two heads solve both relations quickly; one head, after as many steps, has not.
    assert steps_two is not None and steps_two <= 1000
    assert prev_at_budget < 0.3
    # Possible: one head solves both too, later, with one blended distribution.
    assert steps_one is not None and steps_one > steps_two
    assert 0.3 < one["on_match"][0] < 0.8
    assert reads_previous(one["on_prev"][0], one["on_other"][0])
    # The split: one matching head, and another head that reads the previous token.
    match_head = max(range(2), key=lambda i: two["on_match"][i])
    other_head = 1 - match_head
    assert two["on_match"][match_head] > 0.8 and two["on_match"][other_head] < 0.2
    assert reads_previous(two["on_prev"][other_head], two["on_other"][other_head])
