"""Chapter 03's stochastic claims on seeds 0-4: the same functions and assertions as the notebook (seed 0)."""

import pytest

from utils.saturation import GRADIENT_DIMS, dot_product_variance, gradient_ratios

pytestmark = pytest.mark.claims


@pytest.mark.parametrize("seed", range(5))
def test_dot_product_variance_is_d_k(seed):
    for d in [4, 16, 64, 256, 1024]:
        assert abs(dot_product_variance(d, seed=seed) / d - 1) < 0.05


@pytest.mark.parametrize("seed", range(5))
def test_where_the_unscaled_gradient_collapses(seed):
    ratios = gradient_ratios(seed)
    for name in ("query", "keys"):
        assert all(ratios[name][d] > 1.3 for d in GRADIENT_DIMS if d <= 64), f"{name}: unscaled larger up to 64"
        assert next(d for d in GRADIENT_DIMS if ratios[name][d] < 1) == 128, f"{name}: crossing between 96 and 128"
        assert all(ratios[name][d] < 1 for d in GRADIENT_DIMS if d >= 128), f"{name}: smaller from 128 on"
        assert ratios[name][512] < 0.1, f"{name}: collapsed at 512"
    assert all(r < 1 for r in ratios["scores"].values()), "the scores' gradient is smaller without scaling"
