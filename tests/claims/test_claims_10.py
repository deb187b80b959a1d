"""Chapter 10's claims on the claim seeds 0-9: CRC-32 buckets collide as often as the birthday estimate predicts,
and the hand-built heads show their designed patterns on random sentences of lexicon words."""

import math

import pytest

from utils.evidence import CLAIM_SEEDS
from utils.visualizer import N_BUCKETS, collision_rate, designed_patterns

pytestmark = pytest.mark.claims


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_five_unknown_words_collide_about_half_the_time(seed):
    birthday = 1 - math.prod(1 - m / N_BUCKETS for m in range(5))
    assert birthday == 1 - (16 * 15 * 14 * 13 * 12) / 16**5  # 0.50012, the figure the chapter quotes
    assert abs(collision_rate(seed) - birthday) < 0.04


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_heads_show_their_patterns_on_random_sentences(seed):
    assert designed_patterns(seed) == {"previous token": 1.0, "same word": 1.0}
