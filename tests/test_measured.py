"""utils.measured: a claim about PyTorch's behaviour is asserted where it was measured, printed elsewhere
(issue 24, 03-M2: what SDPA returns for a fully-masked row)."""

from __future__ import annotations

import nbformat
import pytest
import torch
import torch.nn.functional as F
from course_paths import ROOT

from utils import measured
from utils.measured import claim_where_measured, row_kind


def test_row_kind():
    assert row_kind(torch.zeros(3)) == "zeros"
    assert row_kind(torch.tensor([0.0, float("nan")])) == "NaN"
    assert row_kind(torch.tensor([0.0, 1.0])) == "numbers"
    with pytest.raises(TypeError, match="row must be a tensor"):
        row_kind([0.0])


def test_a_claim_fails_on_a_measured_device_and_is_printed_on_another(capsys):
    assert claim_where_measured("SDPA", "zeros", "zeros", "cpu")
    with pytest.raises(AssertionError, match="SDPA: expected zeros on cpu"):
        claim_where_measured("SDPA", "NaN", "zeros", "cpu")
    assert not claim_where_measured("SDPA", "NaN", "zeros", torch.device("cuda", 0))  # only .type is read
    out = capsys.readouterr().out
    assert "SDPA: NaN on cuda" in out and "not asserted here" in out


def test_a_claim_measured_with_another_pytorch_is_printed_not_asserted(capsys):
    """Hostile review F12: the claim is keyed by device type and PyTorch version, since SDPA's fully-masked
    row changed between versions (NaN before 2.5): on the measured device under another PyTorch it is printed."""
    here = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    assert measured.measured_here("cpu") is (here == measured.SDPA_EMPTY_ROW_MEASURED_WITH)
    assert not measured.measured_here("cpu", measured_with="2.4")
    assert not claim_where_measured("SDPA", "NaN", "zeros", "cpu", measured_with="2.4")
    out = capsys.readouterr().out
    assert f"SDPA: NaN on cpu with PyTorch {here} (measured: zeros on cpu with PyTorch 2.4; not asserted here)" in out, out


def _cells(*ids: str) -> list[str]:
    nb = nbformat.read(ROOT / "solutions" / "03_scaled_dot_product_attention.ipynb", as_version=4)
    by_id = {c.get("id"): c for c in nb.cells}
    return [by_id[i].source for i in ids]


DEMO, KERNELS = "2c7d0271", "2c7d0273"  # section 6: the fully-masked row per function, then per kernel
ATTENTION, AGREEMENT, WEIGHTS, DIFFERENCE = "f6e84a49", "5b32c3fc", "b60422a5", "b60422b0"  # sections 7 and 8
CELLS = (DEMO, KERNELS, ATTENTION, AGREEMENT, WEIGHTS, DIFFERENCE)


def _run_chapter_cells(monkeypatch, sdpa_returns_nan: bool, measured_for_weights: tuple[str, ...] | None = None) -> dict:
    """Chapter 3's fully-masked-row cells, with the cells they need and the chapter's imports, on the CPU.

    ``measured_for_weights`` rebinds ``measured_here`` (the name the chapter imported) to those device types for
    section 8's weights cell alone.
    """
    if sdpa_returns_nan:  # what issue #163997 reports on another device: every fully-masked row NaN
        real = F.scaled_dot_product_attention

        def nan_rows(q, k, v, attn_mask=None, *args, **kwargs):
            out = real(q, k, v, attn_mask, *args, **kwargs)
            if attn_mask is None:
                return out
            dead = ~attn_mask.any(-1, keepdim=True) if attn_mask.dtype == torch.bool else torch.isneginf(attn_mask).all(-1, keepdim=True)
            return out.masked_fill(dead, float("nan"))

        monkeypatch.setattr(F, "scaled_dot_product_attention", nan_rows)
    names: dict = {}
    nb = nbformat.read(ROOT / "solutions" / "03_scaled_dot_product_attention.ipynb", as_version=4)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    setup = "\n".join(line for line in first_code.source.splitlines() if line.startswith(("import", "from", "device")))
    exec(compile(setup, "setup", "exec"), names)  # noqa: S102 -- the course's own notebook
    names["device"] = torch.device("cpu")
    names["seed_everything"] = lambda seed: torch.manual_seed(seed)
    for cell_id, source in zip(CELLS, _cells(*CELLS), strict=True):
        if cell_id == WEIGHTS and measured_for_weights is not None:
            names["measured_here"] = lambda device: measured.measured_here(device, measured_for_weights)
        exec(compile(source, f"cell {cell_id}", "exec"), names)  # noqa: S102
    return names


def test_the_chapter_cells_pass_where_measured(monkeypatch, capsys):
    names = _run_chapter_cells(monkeypatch, sdpa_returns_nan=False)
    out = capsys.readouterr().out
    assert names["kinds"]["F.scaled_dot_product_attention"] == "zeros"
    assert "not asserted" not in out
    # section 6's kernel cell: 4-D inputs, the four kernels named, the two that ran on the CPU
    assert tuple(names["q_4d"].shape) == (1, 2, 3, 8) and names["held"] is True
    assert "kernels tried: MATH, FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION" in out, out
    assert "ran on cpu, 4-D inputs: MATH, FLASH_ATTENTION; 3-D (B, T, d) inputs of the cell above: MATH" in out, out
    # section 8's weights cell compared the fully-masked row too, and the difference is printed with its meaning
    assert (names["empty_out"][0, 1] == 0).all() and (names["fused"][0, 1] == 0).all()
    assert "largest |ours - SDPA| over the rows with an allowed key:" in out, out


def test_nan_rows_fail_the_cells_on_a_measured_device(monkeypatch):
    """On the CPU, where zeros were measured, a PyTorch that returned NaN would fail the chapter: the claim can fail."""
    with pytest.raises(AssertionError, match="expected zeros on cpu"):
        _run_chapter_cells(monkeypatch, sdpa_returns_nan=True)


def test_the_weights_cell_compares_the_fully_masked_row_where_measured(monkeypatch):
    """Section 8's weights cell fails on its own where zeros were measured and SDPA returned NaN (section 6's
    cells, told the device is unmeasured, only print): its comparison of the fully-masked row is not dead code."""
    monkeypatch.setattr(measured, "SDPA_EMPTY_ROW_MEASURED_ON", ())
    with pytest.raises(AssertionError, match="fully-masked row, ours vs SDPA"):
        _run_chapter_cells(monkeypatch, sdpa_returns_nan=True, measured_for_weights=("cpu",))


def test_nan_rows_on_an_unmeasured_device_are_printed_and_guarded(monkeypatch, capsys):
    """Where SDPA's behaviour was not measured, the cells print what came back and show chapter 4's guard."""
    monkeypatch.setattr(measured, "SDPA_EMPTY_ROW_MEASURED_ON", ())
    names = _run_chapter_cells(monkeypatch, sdpa_returns_nan=True)
    out = capsys.readouterr().out
    assert "F.scaled_dot_product_attention: NaN on cpu" in out and "not asserted here" in out, out
    assert "every SDPA kernel that ran: not all zeros on cpu" in out, out
    assert "every kernel that ran on cpu returned zeros for the fully-masked row: False" in out, out
    assert "SDPA + chapter 4 guard" in out and row_kind(names["guarded"][0, 1]) == "zeros"
    # section 8's weights cell ran to its end: ours is zeros, SDPA's NaN row was not compared, the other rows were
    assert row_kind(names["empty_out"][0, 1]) == "zeros" and row_kind(names["fused"][0, 1]) == "NaN"
    assert "rows with an allowed key: ours == SDPA within the tolerance policy" in out, out
