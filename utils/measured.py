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

# The device types on which chapter 3 measured SDPA's fully-masked rows, and with which PyTorch (major.minor):
# a claim is asserted only where both match, since the behaviour changed between versions (NaN before 2.5).
SDPA_EMPTY_ROW_MEASURED_ON: tuple[str, ...] = ("cpu",)
SDPA_EMPTY_ROW_MEASURED_WITH: str = "2.13"


def _torch_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def row_kind(row: torch.Tensor) -> str:
    """"NaN" if any entry is NaN, "zeros" if every entry is 0, else "numbers"."""
    if not isinstance(row, torch.Tensor):
        raise TypeError(f"row must be a tensor, got {type(row).__name__}")
    if row.isnan().any():
        return "NaN"
    return "zeros" if bool((row == 0).all()) else "numbers"


def _where(measured_on: Iterable[str] | None, measured_with: str | None) -> tuple[tuple[str, ...], str]:
    """The device types and PyTorch of a measurement; the module's defaults are read when called."""
    return (tuple(SDPA_EMPTY_ROW_MEASURED_ON if measured_on is None else measured_on),
            SDPA_EMPTY_ROW_MEASURED_WITH if measured_with is None else measured_with)


def measured_here(device: torch.device | str, measured_on: Iterable[str] | None = None,
                  measured_with: str | None = None) -> bool:
    """Whether ``device``'s type and this PyTorch (major.minor) are where the claim was measured."""
    measured, version = _where(measured_on, measured_with)
    return torch.device(device).type in measured and _torch_minor(torch.__version__) == version


def claim_where_measured(
    what: str, got: str, expected: str, device: torch.device | str, measured_on: Iterable[str] | None = None,
    measured_with: str | None = None,
) -> bool:
    """Assert ``got == expected`` on a device type in ``measured_on`` under the PyTorch ``measured_with``
    (major.minor); anywhere else print what came back and do not assert.

    Returns whether ``got`` is ``expected``. The defaults, :data:`SDPA_EMPTY_ROW_MEASURED_ON` and
    :data:`SDPA_EMPTY_ROW_MEASURED_WITH`, are read when called, so a test can change them.
    """
    kind = torch.device(device).type
    measured, version = _where(measured_on, measured_with)
    here = _torch_minor(torch.__version__)
    if measured_here(device, measured, version):
        assert got == expected, f"{what}: expected {expected} on {kind} with PyTorch {here} (measured there), got {got}"
        return True
    where = ", ".join(measured) or "no device"
    print(f"{what}: {got} on {kind} with PyTorch {here} (measured: {expected} on {where} with PyTorch {version}; "
          "not asserted here)")
    return got == expected
