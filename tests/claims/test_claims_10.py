"""Chapter 10's claims on the claim seeds 0-9: CRC-32 buckets collide as often as the birthday estimate predicts,
and the hand-built heads show their designed patterns on random sentences of lexicon words."""

import math

import pytest

from coursetools.claims import Claim
from utils.evidence import CLAIM_SEEDS
from utils.visualizer import N_BUCKETS, collision_rate, designed_patterns

pytestmark = pytest.mark.claims


def visualizer_record(seed: int) -> dict[str, float]:
    """The collision rate of five unknown words, and each designed head's share of tokens that follow its pattern."""
    return {"collision rate": collision_rate(seed), **{f"{head} head": v for head, v in designed_patterns(seed).items()}}


RECORD = {"10_visualizer": visualizer_record}


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_five_unknown_words_collide_about_half_the_time(seed):
    birthday = 1 - math.prod(1 - m / N_BUCKETS for m in range(5))
    assert birthday == 1 - (16 * 15 * 14 * 13 * 12) / 16**5  # 0.50012, the figure the chapter quotes
    assert abs(collision_rate(seed) - birthday) < 0.04


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_heads_show_their_patterns_on_random_sentences(seed):
    assert designed_patterns(seed) == {"previous token": 1.0, "same word": 1.0}


# The claims ledger (python -m coursetools.claims --ledger writes claims.md; tests/test_claims_ledger.py checks it).
BIRTHDAY = 1 - math.prod(1 - m / N_BUCKETS for m in range(5))
LEDGER = [
    Claim("test_five_unknown_words_collide_about_half_the_time", "10_visualizer",
          "share of 4,000 sets of 5 made-up words with a shared bucket: within 0.04 of the birthday estimate 0.50012",
          lambda r: abs(r["collision rate"] - BIRTHDAY) < 0.04,
          ("the claims suite repeats it on seeds 0 to 9, where the measured rate stayed within 0.04 of the estimate",),
          10),
    Claim("test_heads_show_their_patterns_on_random_sentences", "10_visualizer",
          "random 16-token sentence: share of tokens whose previous-token head's top key is the token before, and "
          "of repeated words whose same-word head's top key is a copy, both 1",
          lambda r: r["previous token head"] == 1.0 and r["same word head"] == 1.0,
          ("both fractions were 1 on every one of the 10 seeds",
           "(checked for every token of the default sentence and of random sentences on 10 of 10 seeds)"), 10),
]
