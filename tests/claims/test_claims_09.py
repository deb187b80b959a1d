"""Chapter 09's stochastic claim on the claim seeds (0-9, fixed in
advance), held on 10 of 10: the lists, NumPy and tensor versions of attention agree with
each other and with F.scaled_dot_product_attention within the float64 tolerance policy on random inputs."""

import pytest
import torch

from utils.evidence import CLAIM_SEEDS
from utils.scratch_attention import scratch_agreement
from utils.tolerances import tolerance

pytestmark = pytest.mark.claims


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_all_versions_agree(seed):
    allowed = tolerance("cpu", torch.float64)["atol"]
    differences = scratch_agreement(seed)
    assert all(d <= allowed for d in differences.values()), f"seed {seed}: {differences}"
