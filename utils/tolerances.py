"""The course's tolerance policy: how closely an implementation must match PyTorch's, per device and dtype.

Used by the tests and by benchmarks/gpu_check.py; explained in the book's appendix (tolerances.md).
Float32 on the CPU is tight because both sides run the same kind of kernels; accelerators reorder
sums (and MPS has no float64), so they get more room; bfloat16 keeps 8 bits of mantissa, a relative
precision of about 4e-3 per rounding, so a few roundings in a row need about 2e-2.
"""

from __future__ import annotations

import torch

POLICY: dict[tuple[str, torch.dtype], dict[str, float]] = {
    ("cpu", torch.float64): {"atol": 1e-10, "rtol": 1e-10},
    ("cpu", torch.float32): {"atol": 1e-5, "rtol": 1e-5},
    ("cpu", torch.bfloat16): {"atol": 2e-2, "rtol": 2e-2},
    ("cuda", torch.float64): {"atol": 1e-10, "rtol": 1e-10},
    ("cuda", torch.float32): {"atol": 1e-4, "rtol": 1e-4},
    ("cuda", torch.bfloat16): {"atol": 2e-2, "rtol": 2e-2},
    ("mps", torch.float32): {"atol": 1e-4, "rtol": 1e-4},
    ("mps", torch.bfloat16): {"atol": 2e-2, "rtol": 2e-2},
}


def tolerance(device: torch.device | str, dtype: torch.dtype) -> dict[str, float]:
    """``{"atol": ..., "rtol": ...}`` for comparing results computed on ``device`` in ``dtype``."""
    kind = torch.device(device).type
    try:
        return POLICY[(kind, dtype)]
    except KeyError:
        raise KeyError(f"no tolerance policy for {kind} / {dtype}") from None
