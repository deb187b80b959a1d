"""Chapter 08's stochastic claim on the claim seeds (0-9, fixed in
advance), held on 10 of 10: the tiled attention equals F.scaled_dot_product_attention,
outputs and q, k, v gradients, within the tolerance policy (fused-kernel rule), on random inputs of the
chapter's four shapes (ragged tiles, N_q != N_k, causal and not, one tile)."""

import pytest

from utils.efficient_attention import TILED_CASES, tiled_vs_sdpa
from utils.evidence import CLAIM_SEEDS

pytestmark = [pytest.mark.claims, pytest.mark.usefixtures("one_thread")]


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_tiled_attention_equals_sdpa(seed):
    ratios = tiled_vs_sdpa(seed)
    assert len(ratios) == len(TILED_CASES)
    worst = max(ratios, key=ratios.get)
    assert ratios[worst] <= 1, f"seed {seed}: {worst} exceeds the tolerance policy by x{ratios[worst]:.2f}"
