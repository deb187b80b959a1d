"""Chapter 12's claims on 5 seeds (the notebook asserts the same on seed 0, section 4).

Each seed trains three arms of the recipe ablation for 300 steps: the full recipe, no warm-up, no
label smoothing. ``ablation_claims`` holds the chapter's statements: the recipe learns the task
(exact match >= 0.6, token accuracy >= 0.9); without warm-up exact match is lower; without label
smoothing the confidence is higher (by > 0.03) and the held-out NLL lower, and the calibration error
lower, while with it the model is under-confident. The dropout and untied arms (5 of 5 seeds while
writing the chapter) are not re-run here, to keep the suite within its time budget.
"""

from __future__ import annotations

import pytest
import torch

from utils.transformer import ablation_claims, recipe_ablation

pytestmark = pytest.mark.claims

ARMS = ("recipe", "no warm-up", "no label smoothing")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # small models: two OpenMP threads stall badly on a loaded machine
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("seed", range(5))
def test_recipe_ablation_claims(seed):
    results = recipe_ablation(seed, arms=ARMS, steps=300, test_size=1000)
    claims = ablation_claims(results)
    failed = [claim for claim, holds in claims.items() if not holds]
    summary = {arm: {k: round(v, 3) for k, v in r.items()} for arm, r in results.items()}
    assert not failed, f"seed {seed}: {failed} do not hold; {summary}"
