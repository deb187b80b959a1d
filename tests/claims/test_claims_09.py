"""Chapter 09's stochastic claim on the claim seeds (0-9, fixed in
advance), held on 10 of 10: the lists, NumPy and tensor versions of attention agree with
each other and with F.scaled_dot_product_attention within the float64 tolerance policy on random inputs."""

import pytest
import torch

from coursetools.claims import Claim
from utils.evidence import CLAIM_SEEDS
from utils.scratch_attention import scratch_agreement
from utils.tolerances import tolerance

pytestmark = pytest.mark.claims


def agreement_record(seed: int) -> dict[str, float]:
    """The largest absolute difference between each pair of versions, and the float64 policy's atol."""
    return {**scratch_agreement(seed), "allowed": tolerance("cpu", torch.float64)["atol"]}


RECORD = {"09_scratch_agreement": agreement_record}


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_all_versions_agree(seed):
    allowed = tolerance("cpu", torch.float64)["atol"]
    differences = scratch_agreement(seed)
    assert all(d <= allowed for d in differences.values()), f"seed {seed}: {differences}"


# The claims ledger (python -m coursetools.claims --ledger writes claims.md; tests/test_claims_ledger.py checks it).
LEDGER = [
    Claim("test_all_versions_agree", "09_scratch_agreement",
          "largest |difference| between lists, NumPy, attention_torch and SDPA (float64) <= the float64 atol",
          lambda r: all(v <= r["allowed"] for k, v in r.items() if k != "allowed"),
          ("within the float64 policy (in fact to the last bits, on 10 of 10 seeds in the claims suite)",), 10),
]
