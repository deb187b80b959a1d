"""Chapter 01's stochastic claims on the claim seeds 0-9 (CLAIM_SEEDS): the same functions and assertions as
the notebook (seed 0)."""

import functools

import pytest
import torch

from coursetools.claims import Claim
from utils.evidence import CLAIM_SEEDS
from utils.rnn import bptt_regimes, long_range_recall

pytestmark = pytest.mark.claims


@functools.cache
def recall_accuracies(seed: int) -> dict[str, float]:
    """The chapter's spread figure: every model's final test accuracy on the first-token task."""
    torch.set_num_threads(1)
    return long_range_recall(seed, eval_every=200)["final"]  # the same training; history only at the end


def bptt_record(seed: int) -> dict[str, float]:
    """Section 2's measurements of the gradient through time (the numbers test_bptt_regimes asserts)."""
    torch.set_num_threads(1)
    return bptt_regimes(seed)


RECORD = {"01_long_range_recall": recall_accuracies, "01_bptt_regimes": bptt_record}


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


# The claims ledger (python -m coursetools.claims --ledger writes claims.md; tests/test_claims_ledger.py checks it).
def _bptt_holds(r):
    return (r["worst_over_bound"] <= 1 + 1e-9 and 0.75 < r["rate_below"] <= 0.8 and r["ratio_at_one"] < 1e-2
            and 1e4 < r["ratio_above"] < 1e-20 * 2.0**99 and 1.3 <= r["rho_growth_100"] <= 1.6)


LEDGER = [
    Claim("test_bptt_regimes", "01_bptt_regimes",
          "every norm within rho^(T-t); decay per step at rho = 0.8 in (0.75, 0.8]; at rho = 1, h_1 / h_T < 1e-2; "
          "at rho = 2 growth > 1e4 and < 1e-20 * 2^99; growth by 100 first at rho in [1.3, 1.6]", _bptt_holds,
          ("The figure's claims, asserted (here for seed 0; the same assertions hold on 10 of 10 seeds, 0 to 9)",
           r"Measured over 100 steps on 10 seeds: at $\rho = 0.8$ the gradient decays almost as fast as the bound"),
          10),
    Claim("test_long_range_recall", "01_long_range_recall", "RNN and LSTM at N = 8: accuracy > 0.95",
          lambda r: r["RNN, N=8"] > 0.95 and r["LSTM, N=8"] > 0.95,
          ("(they hold on 10 of 10): the task is learnable by recurrent models when the distance is short (both "
           "above 95% at $N = 8$)", "though both learn it at length 8 (10 of 10 seeds)"), 10),
    Claim("test_long_range_recall", "01_long_range_recall", "RNN and default LSTM at N = 64: accuracy < 0.25",
          lambda r: r["RNN, N=64"] < 0.25 and r["LSTM, N=64"] < 0.25,
          ("the RNN and the default LSTM stayed near chance on every seed",), 10),
    Claim("test_long_range_recall", "01_long_range_recall", "LSTM with forget bias 5 at N = 64: accuracy > 0.5",
          lambda r: r["LSTM, forget bias 5, N=64"] > 0.5,
          ("The LSTM with open forget gates learned it on every seed too, but not equally well",), 10),
    Claim("test_attention_solves_the_long_range_task_on_most_seeds", "01_long_range_recall",
          "attention at N = 64: accuracy > 0.95", lambda r: r["attention, N=64"] > 0.95,
          ("Attention solved the task on every seed",
           "at $N = 64$, with the same budget, attention is above 95%"), 10,
          bound="attention > 0.8 (test_long_range_recall)", bound_holds=lambda r: r["attention, N=64"] > 0.8),
    Claim("test_attention_solves_the_long_range_task_on_most_seeds", "01_long_range_recall",
          "attention at N = 64: accuracy > 0.95; the suite asserts it on at least 8 seeds",
          lambda r: r["attention, N=64"] > 0.95,
          ("So the claims suite asserts attention above 95% on at least 8 of its 10 seeds, and far above the "
           "recurrent models (above 80%) on every one",), (8, 10),
          bound="attention > 0.8 (test_long_range_recall)", bound_holds=lambda r: r["attention, N=64"] > 0.8),
]
