"""Chapter 07's claims, re-run on seeds 0-4: the same experiments and thresholds as the notebook (seed 0)."""

import math
from functools import cache

import pytest
import torch

from utils.layernorm import gradient_experiment, warmup_experiment

pytestmark = pytest.mark.claims
SEEDS = range(5)
CHANCE = math.log(16)


@cache
def _warmup(seed: int) -> dict:
    torch.set_num_threads(1)
    return warmup_experiment(seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_gradients_at_initialisation(seed):
    torch.set_num_threads(1)
    g = gradient_experiment(seed)
    post, pre = torch.tensor(g["post"]), torch.tensor(g["pre"])
    assert (post > 1.5 * pre).all(), g  # the level, at every layer of a 12-block stack
    for norms in (post, pre):  # no strong trend across layers
        assert 0.85 < (norms[6:].mean() / norms[:6].mean()).item() < 1.15, g
    gap = [a / b for a, b in zip(g["last_post"], g["last_pre"])]
    assert all(a < b for a, b in zip(gap, gap[1:])) and gap[0] < 1.8 and gap[-1] > 2.0, gap
    assert g["last_post"][-1] > 1.4 * g["last_post"][0], g
    assert max(g["last_pre"]) < 1.6 * min(g["last_pre"]) and g["last_pre"][-1] > 0.7 * g["last_pre"][0], g


@pytest.mark.parametrize("seed", SEEDS)
def test_post_ln_stalls_without_warm_up_and_warm_up_rescues_it(seed):
    runs = _warmup(seed)
    final = {name: sum(h["loss"][-10:]) / 10 for name, h in runs.items()}
    acc = {name: h["test_accuracy"][0] for name, h in runs.items()}
    assert final["Post-LN"] > 0.9 * CHANCE and acc["Post-LN"] < 0.2, (final, acc)
    assert acc["Pre-LN"] >= 0.99, acc
    assert final["Post-LN + linear warm-up"] < 0.5 * CHANCE and acc["Post-LN + linear warm-up"] > 0.7, (final, acc)
    assert acc["Post-LN + the paper's schedule"] >= 0.98, acc
    assert all(math.isfinite(v) for h in runs.values() for v in h["loss"])


@pytest.mark.parametrize("seed", SEEDS)
def test_post_ln_collapses_in_the_first_steps(seed):
    post, pre = _warmup(seed)["Post-LN"], _warmup(seed)["Pre-LN"]
    assert post["spread"][10] < 0.001 and pre["spread"][10] > 10 * post["spread"][10], (post["spread"], pre["spread"])
    assert post["grad_first"][19] < 1e-3 * post["grad_first"][0], post["grad_first"][:20]
    assert pre["grad_first"][19] > 1e-2 * pre["grad_first"][0], pre["grad_first"][:20]
