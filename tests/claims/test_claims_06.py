"""Chapter 06's claims, re-run on seeds 0-4: the same experiments and thresholds as the notebook (seed 0)."""

from functools import cache

import pytest
import torch

from utils.transformer_blocks import frozen_units_experiment, reversal_experiment

pytestmark = pytest.mark.claims
SEEDS = range(5)


@cache
def _reversal(seed: int) -> dict[str, float]:
    torch.set_num_threads(1)
    return reversal_experiment(seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_reversal_model_learns_and_attends_to_the_mirrored_position(seed):
    r = _reversal(seed)
    assert r["exact"] >= 0.98, r
    assert r["alignment"] >= 0.95, r


@pytest.mark.parametrize("seed", SEEDS)
def test_exposure_bias_separated_from_length(seed):
    r = _reversal(seed)
    assert r["clean_gap"] < 0.01, r  # a right prefix gives the teacher-forced prediction
    assert r["after_error_gap"] > 0.3, r  # after an own mistake: far below teacher-forced accuracy
    assert r["gap8_first3_max"] < 0.01 and r["gap8_last3_mean"] > 0.15, r  # within strings of 8 letters


@pytest.mark.parametrize("seed", SEEDS)
def test_scheduled_sampling_does_not_close_the_gap(seed):
    r = _reversal(seed)
    assert r["scheduled_after_error_gap"] > 0.3, r


def test_scheduled_sampling_gives_no_consistent_gain():
    change = [_reversal(s)["scheduled_exact"] - _reversal(s)["weak_exact"] for s in SEEDS]
    assert sum(change) / len(change) < 0.05, change


@pytest.mark.parametrize("seed", SEEDS)
def test_no_dead_relu_units_and_about_half_are_zero(seed):
    r = _reversal(seed)
    assert r["dead"] == 0.0 and 0.45 < r["zero_share"] < 0.65, r


@pytest.mark.parametrize("seed", SEEDS)
def test_gelu_units_pushed_far_below_zero_are_as_frozen_as_relu_units(seed):
    f = frozen_units_experiment(seed)
    assert f["relu@-8_max_change"] == 0.0 and f["gelu@-8_max_change"] < 0.02, f
    assert f["gelu@-3_moved"] == 1.0 and f["gelu@-3_max_change"] > 0.2, f
    assert f["relu@-3_moved"] < f["gelu@-3_moved"], f
