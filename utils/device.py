"""One device helper, one seed helper and one thread helper, used by every chapter."""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch

Function = TypeVar("Function", bound=Callable)


def get_device(allow_accelerator: bool = True) -> torch.device:
    """The best device available: CUDA, then Apple's MPS, then the CPU.

    Set the environment variable ``COURSE_DEVICE=cpu`` (or pass ``allow_accelerator=False``)
    to force the CPU, for example to reproduce the stored outputs exactly.
    """
    forced = os.environ.get("COURSE_DEVICE")
    if forced:
        return torch.device(forced)
    if allow_accelerator and torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if allow_accelerator and mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy and PyTorch (all devices) in one call.

    Returns a CPU ``torch.Generator`` seeded the same way, for code that wants its own stream.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)


def one_thread(function: Function) -> Function:
    """Run ``function`` on one CPU thread, then restore the thread count (also when it raises).

    Every training helper of the course runs this way, so that a seed gives the same model on any load. A
    matrix product splits its sums differently over two threads than over one, and OpenMP changes the number
    of threads it uses when the machine is busy, so the rounding, and after a few hundred steps the trained
    model, depended on the load: chapter 06's exact match on seed 0 was 0.996 on two threads and 0.998 on one
    (measured 2026-12-02 on the course's 2-core test machine). The models are small; the test suite trains them
    on one thread too.
    """

    @functools.wraps(function)
    def on_one_thread(*args, **kwargs):
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return function(*args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return on_one_thread  # type: ignore[return-value]
