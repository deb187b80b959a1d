"""Chapter 03's stochastic claims on the claim seeds 0-9 (CLAIM_SEEDS): the same functions and assertions as
the notebook (seed 0). The crossing bounds were read off seeds 100-119, never off these seeds."""

import functools

import pytest

from coursetools.claims import Claim
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


VARIANCE_DIMS = [4, 16, 64, 256, 1024]


def variance_record(seed: int) -> dict[str, float]:
    """Section 2: the variance of q . k divided by d_k, per d_k."""
    return {f"d_k = {d}": dot_product_variance(d, seed=seed) / d for d in VARIANCE_DIMS}


def ratios_record(seed: int) -> dict[str, float]:
    """Section 3, 16 keys: unscaled / scaled median gradient, per part and d_k (d_k = 96 included)."""
    return {f"{name}, d_k = {d}": r for name, by_dim in _ratios(seed).items() for d, r in by_dim.items()}


def grid_record(seed: int) -> dict[str, float]:
    """Section 3's grid: unscaled / scaled median gradient reaching q and K, per number of keys and d_k."""
    grid = _grid(seed)
    return {f"{name}, {n} keys, d_k = {d}": grid[name][(n, d)] for name in ("query", "keys")
            for n in GRID_KEYS for d in GRID_DIMS}


RECORD = {"03_gradient_crossing": first_width_below_one, "03_dot_product_variance": variance_record,
          "03_gradient_ratios": ratios_record, "03_gradient_grid": grid_record}


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


# The claims ledger (python -m coursetools.claims --ledger writes claims.md; tests/test_claims_ledger.py checks it).
def _collapses(r):
    return all(r[f"{name}, d_k = {d}"] > 1.3 if d <= 64 else r[f"{name}, d_k = {d}"] < 1
               for name in ("query", "keys") for d in GRADIENT_DIMS if d <= 64 or d >= 192) and all(
        r[f"{name}, d_k = 512"] < 0.1 for name in ("query", "keys")) and all(
        r[f"scores, d_k = {d}"] < 1 for d in GRADIENT_DIMS)


def _within(bounds):
    def holds(r):
        return all(r[f"{name}, {n} keys, d_k = {d}"] > 1 if d <= low else r[f"{name}, {n} keys, d_k = {d}"] < 1
                   for name in ("query", "keys") for n, (low, high) in bounds.items() for d in GRID_DIMS
                   if d <= low or d >= high)
    return holds


LEDGER = [
    Claim("test_dot_product_variance_is_d_k", "03_dot_product_variance",
          "Var(q . k) / d_k within 5% of 1 at d_k = 4, 16, 64, 256, 1024",
          lambda r: all(abs(v - 1) < 0.05 for v in r.values()),
          ("the claim (within 5% of $d_k$) is checked here for seed 0 and on the ten seeds 0 to 9",
           r"$\operatorname{Var}(q\cdot k) = d_k$ (measured to 5% on 10 of 10 seeds)"), 10),
    Claim("test_where_the_unscaled_gradient_collapses_with_16_keys", "03_gradient_ratios",
          "16 keys, unscaled / scaled gradient reaching q and K: > 1.3 up to d_k = 64, < 1 from 192 on, < 0.1 at "
          "512; reaching the scores: < 1 at every d_k", _collapses,
          ("**up to $d_k = 64$ the unscaled gradient reaching $q$ and $K$ is larger** than the scaled one (by a "
           "factor above 1.3; about 2.5 at $d_k = 8$)",
           "at $d_k = 512$ it has collapsed to less than a tenth of the scaled gradient",
           "the gradient reaching the *scores* is smaller without scaling at every width"), 10),
    Claim("test_with_16_keys_the_unscaled_gradient_is_smaller_from_128_on_most_seeds", "03_gradient_ratios",
          "16 keys, unscaled / scaled gradient reaching q and K: < 1 at every d_k >= 128",
          lambda r: all(r[f"{name}, d_k = {d}"] < 1 for name in ("query", "keys") for d in GRADIENT_DIMS if d >= 128),
          ("**from $d_k = 128$ on it is smaller** (on most seeds: the suite asserts it on at least 8 of the ten",),
          (8, 10),
          bound="< 1 from d_k = 192 on (test_where_the_unscaled_gradient_collapses_with_16_keys)",
          bound_holds=lambda r: all(r[f"{name}, d_k = {d}"] < 1 for name in ("query", "keys")
                                    for d in GRADIENT_DIMS if d >= 192)),
    Claim("test_at_96_the_sign_depends_on_the_seed", "03_gradient_ratios",
          "16 keys, d_k = 96: unscaled / scaled gradient reaching q > 1 (the claim: on some seeds, not all)",
          lambda r: r["query, d_k = 96"] > 1,
          ("at 96 the unscaled one is the larger on some seeds and the smaller on others",), (1, 9)),
    Claim("test_the_crossing_moves_with_the_number_of_keys", "03_gradient_grid",
          "for 4, 16, 64, 256 keys: unscaled / scaled gradient reaching q and K > 1 at every d_k <= low and < 1 at "
          "every d_k >= high, (low, high) = (16, 32), (64, 128), (128, 512), (256, 1024)", _within(CROSSING_BOUNDS),
          (r"with $T_k$ keys, the unscaled gradient reaching $q$ and $K$ is larger than the scaled one at every width "
           r"up to $d_k^{\text{low}}(T_k)$ and smaller at every width from $d_k^{\text{high}}(T_k)$ on",
           "(between 16 and 32 for 4 keys, 64 and 128 for 16 keys, 256 and 1024 for 256 keys; 10 of 10 seeds)"), 10,
          bound="the same with high = 256 for 16 keys", bound_holds=_within(EVERY_SEED_BOUNDS)),
    Claim("test_with_16_keys_the_grid_crossing_is_within_the_chapters_bound_on_most_seeds", "03_gradient_grid",
          "16 keys: unscaled / scaled gradient reaching q and K > 1 at every d_k <= 64 and < 1 at every d_k >= 128",
          _within({16: CROSSING_BOUNDS[16]}),
          ("between 64 and 128 for 16 keys on each of the ten claim seeds",), 10,
          bound="< 1 from d_k = 256 on (test_the_crossing_moves_with_the_number_of_keys)",
          bound_holds=_within({16: EVERY_SEED_BOUNDS[16]})),
    Claim("test_with_16_keys_the_grid_crossing_is_within_the_chapters_bound_on_most_seeds", "03_gradient_grid",
          "16 keys: as above; the suite asserts it on at least 8 seeds", _within({16: CROSSING_BOUNDS[16]}),
          ("so the claims suite holds the 16-key bound on at least 8 of 10 seeds and one grid step wider (256) on "
           "all", 'for 16 keys, "smaller from $d_k = 128$" on at least 8 of the ten seeds'), (8, 10),
          bound="< 1 from d_k = 256 on (test_the_crossing_moves_with_the_number_of_keys)",
          bound_holds=_within({16: EVERY_SEED_BOUNDS[16]})),
]
