"""The course's tolerance policy: how closely an implementation must match PyTorch's, per device and dtype.

Used by every notebook comparison with a PyTorch reference, by the tests and by benchmarks/gpu_check.py;
explained in the book's appendix (tolerances.md).

* Float32 on the CPU is tight because both sides run the same kind of kernels in the same order.
* Accelerators reorder sums, so they get more room.
* ``kernel="cudnn"``: cuDNN's RNNs may use TF32 tensor cores for float32 (``torch.backends.cudnn.allow_tf32``
  is True by default), a 10-bit mantissa, so a float32 comparison needs about 1e-2 relative.
* ``kernel="fused"``: PyTorch's fused layers (the ``nn.TransformerEncoderLayer`` fast path, SDPA's fused kernels:
  in float32 the memory-efficient one, since flash takes only float16 and bfloat16) reorder the softmax and
  the sums; on CUDA they get the same room as TF32.
* Half precision: float16 keeps 11 bits of mantissa (about 5e-4 per rounding), bfloat16 8 bits (about 4e-3),
  so a few roundings in a row need about 1e-2 and 2e-2.
"""

from __future__ import annotations

import torch

__all__ = ["POLICY", "KERNELS", "tolerance", "assert_close"]

POLICY: dict[tuple[str, torch.dtype], dict[str, float]] = {
    ("cpu", torch.float64): {"atol": 1e-10, "rtol": 1e-10},
    ("cpu", torch.float32): {"atol": 1e-5, "rtol": 1e-5},
    ("cpu", torch.float16): {"atol": 1e-2, "rtol": 1e-2},
    ("cpu", torch.bfloat16): {"atol": 2e-2, "rtol": 2e-2},
    ("cuda", torch.float64): {"atol": 1e-10, "rtol": 1e-10},
    ("cuda", torch.float32): {"atol": 1e-4, "rtol": 1e-4},
    ("cuda", torch.float16): {"atol": 1e-2, "rtol": 1e-2},
    ("cuda", torch.bfloat16): {"atol": 2e-2, "rtol": 2e-2},
    ("mps", torch.float32): {"atol": 1e-4, "rtol": 1e-4},
    ("mps", torch.float16): {"atol": 1e-2, "rtol": 1e-2},
    ("mps", torch.bfloat16): {"atol": 2e-2, "rtol": 2e-2},
}

# Extra room for a reference computed by a kernel family that may use lower internal precision (TF32).
KERNELS: dict[str, dict[tuple[str, torch.dtype], dict[str, float]]] = {
    "default": {},
    "cudnn": {("cuda", torch.float32): {"atol": 1e-2, "rtol": 1e-2}},
    "fused": {("cuda", torch.float32): {"atol": 1e-3, "rtol": 1e-3},
              ("cpu", torch.float32): {"atol": 2e-5, "rtol": 2e-5}},
}


def tolerance(device: torch.device | str, dtype: torch.dtype, kernel: str = "default") -> dict[str, float]:
    """``{"atol": ..., "rtol": ...}`` for comparing results computed on ``device`` in ``dtype``.

    ``kernel`` names the reference's kernel family: ``"default"``, ``"cudnn"`` or ``"fused"`` (see the module text).
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {kernel!r}")
    kind = torch.device(device).type
    special = KERNELS[kernel].get((kind, dtype))
    if special is not None:
        return special
    try:
        return POLICY[(kind, dtype)]
    except KeyError:
        raise KeyError(f"no tolerance policy for {kind} / {dtype}") from None


def assert_close(got: torch.Tensor, expected: torch.Tensor, *, what: str = "result", kernel: str = "default") -> float:
    """Assert ``got`` matches ``expected`` within the policy for ``got``'s device and dtype; return max |got − expected|.

    Raises ``AssertionError`` naming ``what``, the largest error, where it is and the tolerance used.
    """
    if not isinstance(got, torch.Tensor) or not isinstance(expected, torch.Tensor):
        raise TypeError(f"{what}: both arguments must be tensors, got {type(got).__name__} and {type(expected).__name__}")
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {tuple(got.shape)} does not match the reference's {tuple(expected.shape)}")
    tol = tolerance(got.device, got.dtype, kernel)
    g = got.detach().to(torch.float64)
    e = expected.detach().to(device=got.device, dtype=torch.float64)
    diff = (g - e).abs()
    finite = torch.isfinite(e)
    if not torch.equal(torch.isfinite(g), finite) or not torch.equal(torch.isnan(g), torch.isnan(e)):
        raise AssertionError(f"{what}: non-finite values (NaN/inf) are not where the reference has them")
    allowed = tol["atol"] + tol["rtol"] * e.abs()
    bad = (diff > allowed) & finite
    worst = float(diff[finite].max()) if finite.any() else 0.0
    if bad.any():
        index = tuple(int(i) for i in torch.nonzero(bad)[0])
        raise AssertionError(
            f"{what}: max |error| {worst:.3g} exceeds the policy for {got.device.type}/{got.dtype} "
            f"({kernel}: atol {tol['atol']:g}, rtol {tol['rtol']:g}); first bad entry at {index}"
        )
    return worst
