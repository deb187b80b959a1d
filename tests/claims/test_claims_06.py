"""Chapter 06's claims on the claim seeds (0-9): the same experiments as the notebook (seed 0).

The thresholds were set on seeds 100-113 (never on 0-9); the notebook states each claim at the strength
the ten claim seeds show, from the stored results (``python -m coursetools.claims 06`` writes
``utils/data/claims/06_reversal.json``).
"""

from functools import cache

import pytest
import torch

from utils.evidence import CLAIM_SEEDS, paired
from utils.transformer_blocks import frozen_units_experiment, reversal_experiment

pytestmark = pytest.mark.claims


@cache
def _reversal(seed: int) -> dict[str, float]:
    torch.set_num_threads(1)
    return reversal_experiment(seed)


RECORD = {"06_reversal": _reversal}


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
    f = frozen_units_experiment(seed)
    assert f["relu@-8_max_change"] == 0.0 and f["gelu@-8_max_change"] < 0.02, f
    assert f["gelu@-3_moved"] == 1.0 and f["gelu@-3_max_change"] > 0.2, f
    assert f["relu@-3_moved"] < f["gelu@-3_moved"], f
