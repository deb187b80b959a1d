"""Chapter 09's stochastic claim on 5 seeds: the lists, NumPy and tensor versions of attention agree with
each other and with F.scaled_dot_product_attention within the float64 tolerance policy on random inputs."""

import pytest
import torch

from utils.scratch_attention import scratch_agreement
from utils.tolerances import tolerance

pytestmark = pytest.mark.claims


@pytest.mark.parametrize("seed", range(5))
def test_all_versions_agree(seed):
    allowed = tolerance("cpu", torch.float64)["atol"]
    differences = scratch_agreement(seed)
    assert all(d <= allowed for d in differences.values()), f"seed {seed}: {differences}"
