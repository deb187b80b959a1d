"""One device helper and one seed helper, used by every chapter."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


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
