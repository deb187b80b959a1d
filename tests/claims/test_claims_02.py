"""Chapter 02's stochastic claim on seeds 0-4: the same function and assertions as the notebook (seed 0)."""

import pytest
import torch

from utils.qkv import rnn_attention_recall

pytestmark = pytest.mark.claims


@pytest.mark.parametrize("seed", range(5))
def test_attention_over_rnn_states_recalls_the_first_token(seed):
    torch.set_num_threads(1)
    bridge = rnn_attention_recall(seed, eval_every=200)  # the same training; history only at the end
    assert bridge["final"]["RNN"] < 0.25, "the RNN alone stays near chance"
    assert bridge["final"]["RNN + attention"] > 0.95, "attention over the states solves it"
    assert bridge["weight_on_first"] > 0.5, "the trained attention looks at position 1"
