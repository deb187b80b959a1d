"""The benchmarks' view of the course's one timer (utils.timing): the same measurements, as JSON-ready dicts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

from utils import timing
from utils.timing import matmul_gflops

__all__ = ["interleaved", "matmul_gflops"]


def interleaved(contenders: dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, dict]:
    """:func:`utils.timing.interleaved`, each result as ``{"median_s", "min_s", "repeats"}``."""
    return {name: asdict(t) for name, t in timing.interleaved(contenders, repeats, warmup).items()}
