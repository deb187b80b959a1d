"""Chapter 03's stochastic claims on the claim seeds 0-9 (CLAIM_SEEDS): the same functions and assertions as
the notebook (seed 0). The crossing bounds were read off seeds 100-119, never off these seeds."""

import functools

import pytest

from utils.evidence import CLAIM_SEEDS
from utils.saturation import (
    CROSSING_BOUNDS,
    GRADIENT_DIMS,
    GRID_DIMS,
    GRID_KEYS,
    dot_product_variance,
    gradient_ratio_grid,
    gradient_ratios,
)

pytestmark = pytest.mark.claims


@functools.cache
def _grid(seed: int):
    return gradient_ratio_grid(seed)


@functools.cache
def _ratios(seed: int):
    return gradient_ratios(seed)


def first_width_below_one(seed: int) -> dict[str, float]:
    """The chapter's spread figure: for each number of keys, the first d_k of the grid at which the
    unscaled gradient reaching q is smaller than the scaled one."""
    grid = _grid(seed)
    return {f"{n} keys": float(next(d for d in GRID_DIMS if grid["query"][(n, d)] < 1)) for n in GRID_KEYS}


RECORD = {"03_gradient_crossing": first_width_below_one}


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_dot_product_variance_is_d_k(seed):
    for d in [4, 16, 64, 256, 1024]:
        assert abs(dot_product_variance(d, seed=seed) / d - 1) < 0.05


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_where_the_unscaled_gradient_collapses_with_16_keys(seed):
    ratios = _ratios(seed)
    for name in ("query", "keys"):
        assert all(ratios[name][d] > 1.3 for d in GRADIENT_DIMS if d <= 64), (
            f"{name}: unscaled larger up to 64"
        )
        # Every seed: smaller from 192 on; from 128 on, most seeds (test below). An independent run found a
        # further seed (11) whose 16-key crossing lies between 128 and 192.
        assert all(ratios[name][d] < 1 for d in GRADIENT_DIMS if d >= 192), f"{name}: smaller from 192 on"
        assert ratios[name][512] < 0.1, f"{name}: collapsed at 512"
    assert all(r < 1 for r in ratios["scores"].values()), "the scores' gradient is smaller without scaling"


def test_with_16_keys_the_unscaled_gradient_is_smaller_from_128_on_most_seeds():
    crossed = [seed for seed in CLAIM_SEEDS
               if all(_ratios(seed)[name][d] < 1 for name in ("query", "keys") for d in GRADIENT_DIMS
                      if d >= 128)]
    assert len(crossed) >= 8, f"smaller from d_k = 128 on {len(crossed)} of {len(CLAIM_SEEDS)} seeds: {crossed}"


def test_at_96_the_sign_depends_on_the_seed():
    at_96 = [gradient_ratios(seed, dims=[96])["query"][96] for seed in CLAIM_SEEDS]
    assert any(r > 1 for r in at_96) and any(r < 1 for r in at_96), f"16 keys, d_k = 96: {at_96}"


# On every seed: the chapter's bounds, except the upper one for 16 keys, one grid step wider (see above);
# the chapter's bound itself is asserted on most seeds below.
EVERY_SEED_BOUNDS = {**CROSSING_BOUNDS, 16: (CROSSING_BOUNDS[16][0], 2 * CROSSING_BOUNDS[16][1])}


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_the_crossing_moves_with_the_number_of_keys(seed):
    grid = _grid(seed)
    for name in ("query", "keys"):
        for n, (low, high) in EVERY_SEED_BOUNDS.items():
            assert all(grid[name][(n, d)] > 1 for d in GRID_DIMS if d <= low), (
                f"{name}, {n} keys: larger up to {low}"
            )
            assert all(grid[name][(n, d)] < 1 for d in GRID_DIMS if d >= high), (
                f"{name}, {n} keys: smaller from {high}"
            )


def test_with_16_keys_the_grid_crossing_is_within_the_chapters_bound_on_most_seeds():
    high = CROSSING_BOUNDS[16][1]
    inside = [seed for seed in CLAIM_SEEDS if all(_grid(seed)[name][(16, d)] < 1 for name in ("query", "keys")
                                                  for d in GRID_DIMS if d >= high)]
    assert len(inside) >= 8, f"16 keys, smaller from {high} on {len(inside)} of {len(CLAIM_SEEDS)} seeds: {inside}"
