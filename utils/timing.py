"""The course's one timer: warm-up, device synchronisation, interleaved repetitions, median and minimum.

Every chapter and every benchmark times code through this module, never with ``time.perf_counter``
directly, because on an accelerator a kernel launch returns before the work is done: without a
synchronisation one would time the launch, not the work. Interleaving the contenders (A, B, A, B, ...)
means a burst of load on a shared machine hits all of them alike, so their *ratio* stays stable even
when absolute times do not. Quote ratios measured side by side in one run.

``clock="cpu"`` measures the CPU time of the calling thread instead of the wall clock (``time.thread_time``:
user and system time, page faults included). Time spent waiting while other processes hold the cores is
not in it (they can still slow the work itself somewhat, through shared caches and memory bandwidth), so a
ratio asserted on it survives a load that makes wall-clock times meaningless. It counts only the work done
on the calling thread: use it on the CPU with ``torch.set_num_threads(1)`` (a GPU's work is not CPU time).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["Timing", "synchronize", "time_call", "interleaved", "matmul_gflops"]


@dataclass(frozen=True)
class Timing:
    """Seconds per call: the median and the minimum over ``repeats`` timed calls."""

    median_s: float
    min_s: float
    repeats: int

    @property
    def median_ms(self) -> float:
        return self.median_s * 1e3

    @property
    def min_ms(self) -> float:
        return self.min_s * 1e3


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until every queued kernel on ``device`` (default: every available accelerator) has finished."""
    kind = torch.device(device).type if device is not None else None
    if kind in (None, "cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()
    mps = getattr(torch, "mps", None)
    if kind in (None, "mps") and mps is not None and torch.backends.mps.is_available():
        mps.synchronize()


def _check_counts(repeats: int, warmup: int) -> None:
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")


def interleaved(
    contenders: dict[str, Callable[[], object]],
    repeats: int = 5,
    warmup: int = 1,
    device: torch.device | str | None = None,
    clock: str = "wall",
) -> dict[str, Timing]:
    """Time each contender once per round for ``repeats`` rounds, after ``warmup`` untimed calls each.

    Each timed call is bracketed by device synchronisations, so the time is the work, not the launch.
    ``clock``: ``"wall"`` (elapsed time) or ``"cpu"`` (CPU time of the calling thread; only for work on the
    CPU, see the module text). Returns ``{name: Timing}``.
    """
    if not contenders:
        raise ValueError("contenders must name at least one callable, got an empty dict")
    for name, fn in contenders.items():
        if not callable(fn):
            raise TypeError(f"contender {name!r} must be callable, got {type(fn).__name__}")
    _check_counts(repeats, warmup)
    if clock not in ("wall", "cpu"):
        raise ValueError(f"clock must be 'wall' or 'cpu', got {clock!r}")
    if clock == "cpu" and device is not None and torch.device(device).type != "cpu":
        raise ValueError(f"clock='cpu' measures CPU time, which does not include work on {device}: use clock='wall'")
    now = time.thread_time if clock == "cpu" else time.perf_counter
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    synchronize(device)
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            synchronize(device)
            start = now()
            fn()
            synchronize(device)
            samples[name].append(now() - start)
    return {name: Timing(statistics.median(s), min(s), len(s)) for name, s in samples.items()}


def time_call(
    fn: Callable[[], object], repeats: int = 5, warmup: int = 1, device: torch.device | str | None = None,
    clock: str = "wall",
) -> Timing:
    """Time one callable (see :func:`interleaved`)."""
    return interleaved({"fn": fn}, repeats=repeats, warmup=warmup, device=device, clock=clock)["fn"]


def matmul_gflops(n: int = 1024, repeats: int = 7, device: torch.device | str = "cpu") -> float:
    """The machine's float32 matrix-product rate (GFLOP/s) on ``device``, measured now."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    return 2 * n**3 / time_call(lambda: a @ b, repeats=repeats, device=device).min_s / 1e9
