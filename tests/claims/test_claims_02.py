"""Chapter 02's stochastic claim on the claim seeds 0-9 (CLAIM_SEEDS): the same function and assertions as
the notebook (seed 0)."""

import pytest
import torch

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
