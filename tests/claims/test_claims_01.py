"""Chapter 01's stochastic claims on the claim seeds 0-9 (CLAIM_SEEDS): the same functions and assertions as
the notebook (seed 0)."""

import functools

import pytest
import torch

from utils.evidence import CLAIM_SEEDS
from utils.rnn import bptt_regimes, long_range_recall

pytestmark = pytest.mark.claims


@functools.cache
def recall_accuracies(seed: int) -> dict[str, float]:
    """The chapter's spread figure: every model's final test accuracy on the first-token task."""
    torch.set_num_threads(1)
    return long_range_recall(seed, eval_every=200)["final"]  # the same training; history only at the end


RECORD = {"01_long_range_recall": recall_accuracies}


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_bptt_regimes(seed):
    regimes = bptt_regimes(seed)
    assert regimes["worst_over_bound"] <= 1 + 1e-9, "the bound is violated"
    assert 0.75 < regimes["rate_below"] <= 0.8, "below 1 the gradient vanishes about as fast as the bound"
    assert regimes["ratio_at_one"] < 1e-2, "saturation makes rho = 1 decay"
    assert 1e4 < regimes["ratio_above"] < 1e-20 * 2.0**99, "growth above 1, far below the bound"
    assert 1.3 <= regimes["rho_growth_100"] <= 1.6, "growth by 100x needs rho well above 1"


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_long_range_recall(seed):
    final = recall_accuracies(seed)
    assert final["RNN, N=8"] > 0.95 and final["LSTM, N=8"] > 0.95, "short range: recurrent models learn it"
    # On every seed attention is far above the recurrent models; "solved" (> 0.95) is asserted on most seeds
    # below: an independent run found a further seed (11) at 0.895 after the 200 steps, still learning.
    assert final["attention, N=64"] > 0.8, "attention learns the long-range task"
    assert final["RNN, N=64"] < 0.25 and final["LSTM, N=64"] < 0.25, "the recurrent models stay near chance"
    assert final["LSTM, forget bias 5, N=64"] > 0.5, "open forget gates let the LSTM learn it (far above chance)"


def test_attention_solves_the_long_range_task_on_most_seeds():
    solved = [seed for seed in CLAIM_SEEDS if recall_accuracies(seed)["attention, N=64"] > 0.95]
    assert len(solved) >= 8, f"attention above 0.95 on {len(solved)} of {len(CLAIM_SEEDS)} seeds: {solved}"
