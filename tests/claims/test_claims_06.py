"""Chapter 06's claims on the claim seeds (0-9): the same experiments as the notebook (seed 0).

The thresholds were set on seeds 100-113 (never on 0-9); the notebook states each claim at the strength
the ten claim seeds show, from the stored results (``python -m coursetools.claims 06`` writes
``utils/data/claims/06_reversal.json``).
"""

from functools import cache

import pytest
import torch

from coursetools.claims import Claim
from utils.evidence import CLAIM_SEEDS, paired
from utils.transformer_blocks import frozen_units_experiment, reversal_experiment

pytestmark = pytest.mark.claims


@cache
def _reversal(seed: int) -> dict[str, float]:
    torch.set_num_threads(1)
    return reversal_experiment(seed)


@cache
def _frozen(seed: int) -> dict[str, float]:
    torch.set_num_threads(1)
    return frozen_units_experiment(seed)


RECORD = {"06_reversal": _reversal, "06_frozen_units": _frozen}


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_reversal_model_learns_and_attends_to_the_mirrored_position(seed):
    r = _reversal(seed)
    assert r["exact"] >= 0.98, r
    assert r["alignment"] >= 0.95, r


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_exposure_bias_separated_from_length(seed):
    r = _reversal(seed)
    assert r["clean_gap"] < 0.01, r  # a right prefix gives the teacher-forced prediction
    # After an own mistake, where the model still writes (not after its own EOS): below teacher-forced accuracy.
    assert r["after_error_gap"] > 0.05, r
    # Positions after the model's own premature EOS are a large share of the "after a mistake" positions.
    assert r["after_stop_share"] > 0.1, r
    # Within strings of 8 letters (an output that has already ended counts as missing, so wrong). The first
    # bound was 0.01 on seeds 100-113 (all 0); seed 7 of the claim seeds gave 0.015, so the claim now says
    # "at most 0.015" and the assertion allows 0.05.
    # The second bound was 0.15; an independent run found a further seed (14) at 0.13, so every seed is held
    # to 0.1 and 0.15 to most seeds (below).
    assert r["gap8_first3_max"] < 0.05 and r["gap8_last3_mean"] > 0.1, r


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_scheduled_sampling_does_not_close_the_gap(seed):
    r = _reversal(seed)
    assert r["scheduled_after_error_gap"] > 0.05, r


def test_scheduled_sampling_gives_no_gain_we_can_detect():
    comparison = paired([_reversal(s)["scheduled_exact"] for s in CLAIM_SEEDS],
                        [_reversal(s)["weak_exact"] for s in CLAIM_SEEDS])
    low, high = comparison.interval
    assert comparison.sign_test_p > 0.05 and low < 0 < high, str(comparison)


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_no_dead_relu_units_and_about_half_are_zero(seed):
    r = _reversal(seed)
    # At most one unit in 256 on every seed (an independent run found one dead unit on a further seed, 12);
    # none at all on most seeds (below).
    assert r["dead"] <= 1 / 256 and 0.45 < r["zero_share"] < 0.65, r


def test_no_dead_unit_and_a_late_gap_above_0_15_on_most_seeds():
    no_dead = [s for s in CLAIM_SEEDS if _reversal(s)["dead"] == 0.0]
    late_gap = [s for s in CLAIM_SEEDS if _reversal(s)["gap8_last3_mean"] > 0.15]
    assert len(no_dead) >= 8, f"no dead ReLU unit on {len(no_dead)} of {len(CLAIM_SEEDS)} seeds: {no_dead}"
    assert len(late_gap) >= 8, f"gap above 0.15 at the last three positions on {len(late_gap)} seeds: {late_gap}"


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_gelu_units_pushed_far_below_zero_are_as_frozen_as_relu_units(seed):
    f = _frozen(seed)
    assert f["relu@-8_max_change"] == 0.0 and f["gelu@-8_max_change"] < 0.02, f
    assert f["gelu@-3_moved"] == 1.0 and f["gelu@-3_max_change"] > 0.2, f
    assert f["relu@-3_moved"] < f["gelu@-3_moved"], f


# The claims ledger (python -m coursetools.claims --ledger writes claims.md; tests/test_claims_ledger.py checks it).
def _exposure(r: dict) -> bool:
    return (r["clean_gap"] < 0.01 and r["after_error_gap"] > 0.05 and r["after_stop_share"] > 0.1
            and r["gap8_first3_max"] < 0.05 and r["gap8_last3_mean"] > 0.1)


def _frozen_holds(f: dict) -> bool:
    return (f["relu@-8_max_change"] == 0.0 and f["gelu@-8_max_change"] < 0.02 and f["gelu@-3_moved"] == 1.0
            and f["gelu@-3_max_change"] > 0.2 and f["relu@-3_moved"] < f["gelu@-3_moved"])


LEDGER = [
    Claim("test_reversal_model_learns_and_attends_to_the_mirrored_position", "06_reversal",
          "exact match >= 0.98 and cross-attention alignment with the mirrored position >= 0.95",
          lambda r: r["exact"] >= 0.98 and r["alignment"] >= 0.95,
          ("A one-block encoder-decoder learns to reverse strings in 300 steps (exact match at least 99.6% on each "
           "of 10 seeds); its cross-attention is the anti-diagonal",), 10),
    Claim("test_exposure_bias_separated_from_length", "06_reversal",
          "gap on a right prefix < 0.01; gap after an own mistake > 0.05; share after own EOS > 0.1; strings of 8: "
          "gap < 0.05 at the first three positions, > 0.1 at the last three", _exposure,
          ("Over the ten claim seeds (printed and drawn below) these hold on every seed: the gap on a right prefix is "
           "0; after an own mistake, where the model still writes, accuracy is lower with its own prefix than with the "
           "gold one", "teacher-forced accuracy on the same tokens (by 0.20 to 0.36 on 10 of 10 seeds)"), 10),
    Claim("test_scheduled_sampling_does_not_close_the_gap", "06_reversal",
          "scheduled sampling: gap after an own mistake > 0.05", lambda r: r["scheduled_after_error_gap"] > 0.05,
          ("that gap stayed above 0.05 on every seed with scheduled sampling too",), 10),
    Claim("test_scheduled_sampling_gives_no_gain_we_can_detect", "06_reversal",
          "scheduled sampling's exact match > teacher forcing's (same initial weights and budget); the test: "
          "sign test p > 0.05 and the bootstrap interval contains 0",
          lambda r: r["scheduled_exact"] > r["weak_exact"],
          ("On exact match, scheduled sampling beat teacher forcing on 6 of 10 seeds (sign test p = 0.75)",
           "(6 of 10 better, sign test p = 0.75)"), 6),
    Claim("test_no_dead_relu_units_and_about_half_are_zero", "06_reversal",
          "dead ReLU units <= 1 in 256, and 0.45 to 0.65 of the units output 0 on a token",
          lambda r: r["dead"] <= 1 / 256 and 0.45 < r["zero_share"] < 0.65,
          ("on any given token about half of the ReLU units output exactly 0 and pass no gradient back for that "
           "token",), 10),
    Claim("test_no_dead_unit_and_a_late_gap_above_0_15_on_most_seeds", "06_reversal", "no dead ReLU unit",
          lambda r: r["dead"] == 0.0,
          ("(none on any of the ten claim seeds either",
           "None of the trained model's ReLU units was dead (10 of 10 claim seeds; one in 256 on a further seed)"),
          10, bound="at most 1 in 256 (test_no_dead_relu_units_and_about_half_are_zero)",
          bound_holds=lambda r: r["dead"] <= 1 / 256),
    Claim("test_no_dead_unit_and_a_late_gap_above_0_15_on_most_seeds", "06_reversal",
          "strings of 8: mean gap at the last three positions > 0.15", lambda r: r["gap8_last3_mean"] > 0.15,
          ("0.16 to 0.37 at the last three (on the ten claim seeds",), 10,
          bound="> 0.1 (test_exposure_bias_separated_from_length)", bound_holds=lambda r: r["gap8_last3_mean"] > 0.1),
    Claim("test_no_dead_unit_and_a_late_gap_above_0_15_on_most_seeds", "06_reversal",
          "as above; the suite asserts it on at least 8 seeds", lambda r: r["gap8_last3_mean"] > 0.15,
          ("so the suite asserts above 0.15 on at least 8 of 10 seeds and above 0.1 on every one",), (8, 10),
          bound="> 0.1 (test_exposure_bias_separated_from_length)", bound_holds=lambda r: r["gap8_last3_mean"] > 0.1),
    Claim("test_gelu_units_pushed_far_below_zero_are_as_frozen_as_relu_units", "06_frozen_units",
          "bias -8: ReLU units change by 0, GELU units by < 0.02; bias -3: every GELU unit moves (> 0.2 at most), "
          "a smaller share of ReLU units", _frozen_holds,
          ("the claims suite asserts these four rows on each of the ten claim seeds, 0 to 9",
           "at $-3$ every GELU unit still learned, and only a few ReLU units did (asserted on each of the ten claim "
           "seeds)"), 10),
]
