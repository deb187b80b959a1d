"""Chapter 10's claims on 5 seeds: CRC-32 buckets collide as often as the birthday estimate predicts,
and the hand-built heads show their designed patterns on random sentences of lexicon words."""

import math

import pytest

from utils.visualizer import N_BUCKETS, collision_rate, designed_patterns

pytestmark = pytest.mark.claims


@pytest.mark.parametrize("seed", range(5))
def test_five_unknown_words_collide_about_half_the_time(seed):
    birthday = 1 - math.prod(1 - m / N_BUCKETS for m in range(5))
    assert abs(collision_rate(seed) - birthday) < 0.04


@pytest.mark.parametrize("seed", range(5))
def test_heads_show_their_patterns_on_random_sentences(seed):
    assert designed_patterns(seed) == {"previous token": 1.0, "same word": 1.0}
