"""The course's evidence helper: run a seeded experiment on many seeds and say what the seeds show.

A training run is one draw from a distribution. One seed proves little; ten seeds show the spread.
This module runs an experiment function (``seed -> dict of metrics``) over a list of seeds and
summarises each metric (per-seed values, median, range), and for a paired comparison (A and B on the
same seed) counts the seeds on which A wins and gives the two-sided sign-test p-value and a bootstrap
interval of the mean difference. It is how the claims suite (``pytest -m claims``) and the chapters
state a claim at the strength the seeds support: "A beat B on 9 of 10 seeds (sign test p = 0.021)".

The seeds the claims suite uses are fixed in advance (``CLAIM_SEEDS``, 0-9) and never chosen after
seeing results; independent checks re-run the claims on further seeds.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from utils.device import one_thread

__all__ = [
    "CLAIM_SEEDS",
    "Spread",
    "Paired",
    "run_seeds",
    "spread",
    "sign_test_p",
    "bootstrap_mean_interval",
    "paired",
    "save_results",
    "load_results",
]

CLAIM_SEEDS: tuple[int, ...] = tuple(range(10))
"""The seeds every stochastic claim is checked on, fixed before any result was seen."""


@dataclass(frozen=True)
class Spread:
    """One metric over seeds: every value, its median and its range."""

    values: tuple[float, ...]
    median: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"median {self.median:.3g} (range {self.low:.3g} to {self.high:.3g}, {len(self.values)} seeds)"


@dataclass(frozen=True)
class Paired:
    """A paired comparison of A and B over the same seeds (difference = A - B)."""

    differences: tuple[float, ...]
    wins: int  # seeds on which A - B > 0
    losses: int  # seeds on which A - B < 0
    ties: int  # seeds on which A == B (left out of the sign test, as usual)
    sign_test_p: float  # two-sided exact sign test on wins vs losses
    mean_difference: float
    interval: tuple[float, float]  # bootstrap interval of the mean difference

    @property
    def n(self) -> int:
        return len(self.differences)

    def __str__(self) -> str:
        low, high = self.interval
        return (
            f"A beat B on {self.wins} of {self.n} seeds (sign test p = {self.sign_test_p:.3g}); "
            f"mean difference {self.mean_difference:+.3g}, 95% bootstrap interval [{low:+.3g}, {high:+.3g}]"
        )


@one_thread  # each seed gives the same numbers on any load
def run_seeds(experiment: Callable[[int], Mapping[str, float]], seeds: Iterable[int] = CLAIM_SEEDS) -> dict[int, dict[str, float]]:
    """Run ``experiment(seed)`` for each seed; return ``{seed: {metric: value}}`` (values as floats)."""
    results: dict[int, dict[str, float]] = {}
    for seed in seeds:
        metrics = experiment(int(seed))
        if not isinstance(metrics, Mapping):
            raise TypeError(f"experiment({seed}) must return a mapping of metric name to number, got {type(metrics).__name__}")
        results[int(seed)] = {str(name): float(value) for name, value in metrics.items()}
    return results


def _as_values(values: Sequence[float] | Mapping[int, float], what: str) -> list[float]:
    if isinstance(values, Mapping):
        values = [values[k] for k in sorted(values)]
    values = [float(v) for v in values]
    if not values:
        raise ValueError(f"{what} is empty: need at least one seed's value")
    if any(math.isnan(v) for v in values):
        raise ValueError(f"{what} contains NaN: {values}")
    return values


def spread(values: Sequence[float] | Mapping[int, float]) -> Spread:
    """Median and range of one metric over seeds."""
    vals = _as_values(values, "values")
    return Spread(values=tuple(vals), median=float(statistics.median(vals)), low=min(vals), high=max(vals))


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact sign test: the probability, if A and B were equally likely to win each seed, of a
    split at least as lopsided as ``wins`` : ``losses`` (ties are left out before calling)."""
    if wins < 0 or losses < 0:
        raise ValueError(f"wins and losses must be counts >= 0, got {wins} and {losses}")
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2.0 * tail)


def bootstrap_mean_interval(
    differences: Sequence[float], level: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``differences`` (resampling seeds with replacement).
    With ten seeds it is rough: read it as "how far the mean moves if other seeds had been drawn"."""
    diffs = _as_values(differences, "differences")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(rng.choice(diffs) for _ in range(n)) / n for _ in range(resamples))
    lo_index = int(math.floor((1 - level) / 2 * resamples))
    hi_index = min(resamples - 1, int(math.ceil((1 + level) / 2 * resamples)) - 1)
    return means[lo_index], means[hi_index]


def paired(a: Sequence[float] | Mapping[int, float], b: Sequence[float] | Mapping[int, float]) -> Paired:
    """Compare A with B seed by seed (the same seed for both): wins, sign test, bootstrap interval."""
    if isinstance(a, Mapping) and isinstance(b, Mapping) and sorted(a) != sorted(b):
        raise ValueError(f"a and b must cover the same seeds, got {sorted(a)} and {sorted(b)}")
    av, bv = _as_values(a, "a"), _as_values(b, "b")
    if len(av) != len(bv):
        raise ValueError(f"a and b must have one value per seed each, got {len(av)} and {len(bv)}")
    diffs = [x - y for x, y in zip(av, bv)]
    wins = sum(d > 0 for d in diffs)
    losses = sum(d < 0 for d in diffs)
    return Paired(
        differences=tuple(diffs),
        wins=wins,
        losses=losses,
        ties=len(diffs) - wins - losses,
        sign_test_p=sign_test_p(wins, losses),
        mean_difference=sum(diffs) / len(diffs),
        interval=bootstrap_mean_interval(diffs),
    )


def save_results(path: str | Path, name: str, results: Mapping[int, Mapping[str, float]], **context: object) -> Path:
    """Store ``{seed: {metric: value}}`` as JSON (for a chapter's one-dot-per-seed figure)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "experiment": name,
        "seeds": sorted(int(s) for s in results),
        "results": {str(s): dict(results[s]) for s in sorted(results)},
        "context": context,
    }
    path.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    return path


def load_results(path: str | Path) -> dict[int, dict[str, float]]:
    """Read what ``save_results`` wrote: ``{seed: {metric: value}}``."""
    payload = json.loads(Path(path).read_text())
    return {int(s): {k: float(v) for k, v in m.items()} for s, m in payload["results"].items()}


def as_dict(summary: Spread | Paired) -> dict:
    """A summary as plain data (for JSON)."""
    return asdict(summary)
