"""Chapter 08's stochastic claim on the claim seeds (0-9, fixed in
advance), held on 10 of 10: the tiled attention equals F.scaled_dot_product_attention,
outputs and q, k, v gradients, within the tolerance policy (fused-kernel rule), on random inputs of the
chapter's four shapes (ragged tiles, N_q != N_k, causal and not, one tile)."""

import pytest
import torch

from coursetools.claims import Claim
from utils.efficient_attention import TILED_CASES, tiled_vs_sdpa
from utils.evidence import CLAIM_SEEDS

pytestmark = [pytest.mark.claims, pytest.mark.usefixtures("one_thread")]


def tiled_record(seed: int) -> dict[str, float]:
    """Per case of TILED_CASES: the largest error over what the tolerance policy allows (at most 1 holds)."""
    torch.set_num_threads(1)
    return tiled_vs_sdpa(seed)


RECORD = {"08_tiled_vs_sdpa": tiled_record}


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_tiled_attention_equals_sdpa(seed):
    ratios = tiled_vs_sdpa(seed)
    assert len(ratios) == len(TILED_CASES)
    worst = max(ratios, key=ratios.get)
    assert ratios[worst] <= 1, f"seed {seed}: {worst} exceeds the tolerance policy by x{ratios[worst]:.2f}"


# The claims ledger (python -m coursetools.claims --ledger writes claims.md; tests/test_claims_ledger.py checks it).
LEDGER = [
    Claim("test_tiled_attention_equals_sdpa", "08_tiled_vs_sdpa",
          "every case of TILED_CASES: largest error of the output and the q, k, v gradients / the policy's allowance "
          "(fused-kernel rule) <= 1", lambda r: max(r.values()) <= 1,
          ("equals SDPA within the tolerance policy, outputs and gradients (10 of 10 seeds in the claims suite)",), 10),
]
