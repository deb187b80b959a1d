"""Chapter 02's stochastic claim on the claim seeds 0-9 (CLAIM_SEEDS): the same function and assertions as
the notebook (seed 0)."""

import pytest
import torch

from coursetools.claims import Claim
from utils.evidence import CLAIM_SEEDS
from utils.qkv import rnn_attention_recall

pytestmark = pytest.mark.claims


def bridge_results(seed: int) -> dict[str, float]:
    """The chapter's spread figure: the RNN alone and with attention over its states, and the trained
    attention's weight on position 1."""
    torch.set_num_threads(1)
    bridge = rnn_attention_recall(seed, eval_every=200)  # the same training; history only at the end
    return {**bridge["final"], "weight on position 1": bridge["weight_on_first"]}


RECORD = {"02_rnn_attention_recall": bridge_results}


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_attention_over_rnn_states_recalls_the_first_token(seed):
    bridge = bridge_results(seed)
    assert bridge["RNN"] < 0.25, "the RNN alone stays near chance"
    assert bridge["RNN + attention"] > 0.95, "attention over the states solves it"
    assert bridge["weight on position 1"] > 0.5, "the trained attention looks at position 1"


# The claims ledger (python -m coursetools.claims --ledger writes claims.md; tests/test_claims_ledger.py checks it).
LEDGER = [
    Claim("test_attention_over_rnn_states_recalls_the_first_token", "02_rnn_attention_recall",
          "RNN alone < 0.25, RNN + attention > 0.95, attention weight on position 1 > 0.5",
          lambda r: r["RNN"] < 0.25 and r["RNN + attention"] > 0.95 and r["weight on position 1"] > 0.5,
          ("The claims, asserted (they hold on 10 of 10 seeds, 0 to 9): the RNN alone stays below 25%, the same RNN "
           "with attention over its states is above 95%, and the trained attention puts most of its weight (more "
           "than half, on average) on position 1",
           "the RNN alone stays near chance, the same RNN with attention over its states learns it (10 of 10 seeds)"),
          10),
]
