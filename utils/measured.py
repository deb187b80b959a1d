"""Claims about PyTorch's own behaviour, asserted only where they were measured.

Hand-written (not generated from a chapter). Some behaviours differ by device, backend and version (what
``F.scaled_dot_product_attention`` returns for a query that may attend to no key is one: zeros on the CPU
here, NaN in reports from other devices and versions). The course's rule for such a claim: state it per
device, and assert it only on the devices on which it was measured; on any other device, print what came
back and claim nothing. :func:`claim_where_measured` does that: on a measured device a different outcome
fails the cell; on any other device it prints what came back and does not pretend to know.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

# The device types on which chapter 3 measured SDPA's fully-masked rows (PyTorch 2.13, this machine's CPU).
SDPA_EMPTY_ROW_MEASURED_ON: tuple[str, ...] = ("cpu",)


def row_kind(row: torch.Tensor) -> str:
    """"NaN" if any entry is NaN, "zeros" if every entry is 0, else "numbers"."""
    if not isinstance(row, torch.Tensor):
        raise TypeError(f"row must be a tensor, got {type(row).__name__}")
    if row.isnan().any():
        return "NaN"
    return "zeros" if bool((row == 0).all()) else "numbers"


def claim_where_measured(
    what: str, got: str, expected: str, device: torch.device | str, measured_on: Iterable[str] | None = None
) -> bool:
    """Assert ``got == expected`` on a device type in ``measured_on``; elsewhere print and do not assert.

    Returns whether ``got`` is ``expected``. ``measured_on`` defaults to :data:`SDPA_EMPTY_ROW_MEASURED_ON`
    (read when called, so a test can change it).
    """
    kind = torch.device(device).type
    measured = tuple(SDPA_EMPTY_ROW_MEASURED_ON if measured_on is None else measured_on)
    if kind in measured:
        assert got == expected, f"{what}: expected {expected} on {kind} (measured there), got {got}"
        return True
    where = ", ".join(measured) or "no device"
    print(f"{what}: {got} on {kind} (measured: {expected} on {where}; not asserted on {kind})")
    return got == expected
