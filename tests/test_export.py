"""utils/ modules generated from notebooks are current, and no exercise answer is importable."""

from __future__ import annotations

import ast

import nbformat
import pytest
from course_paths import ROOT, SOLUTIONS

from coursetools import export, notebooks


def test_generated_modules_are_current():
    assert export.stale_modules() == [], "run python -m coursetools.export"


def test_generated_modules_name_their_notebook_and_say_do_not_edit():
    modules = export.exported_modules()
    assert "attention" in modules
    for module in modules:
        text = (ROOT / "utils" / f"{module}.py").read_text()
        assert "generated from solutions/" in text and "DO NOT EDIT" in text
        ast.parse(text)


def test_export_is_deterministic_and_detects_staleness(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("#| export demo\ndef f():\n    return 1"),
        nbformat.v4.new_code_cell("not_exported = 2"),
    ]
    sol = tmp_path / "solutions"
    sol.mkdir()
    nbformat.write(nb, sol / "01_demo.ipynb")
    out = tmp_path / "utils"
    out.mkdir()
    assert export.export_all(sol, out) == ["demo"]
    assert export.export_all(sol, out) == []
    assert "not_exported" not in (out / "demo.py").read_text()
    (out / "demo.py").write_text("edited by hand")
    assert export.stale_modules(sol, out) == ["demo"]


def test_export_refuses_a_solution_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("#| export demo\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION")]
    (tmp_path / "s").mkdir()
    nbformat.write(nb, tmp_path / "s" / "01_x.ipynb")
    with pytest.raises(export.ExportError):
        export.exported_modules(tmp_path / "s")


def _solution_function_names(path) -> set[str]:
    names = set()
    for cell in notebooks.read(path).cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            tree = ast.parse(cell.source)
            names |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    return names


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_no_exercise_answer_is_importable_from_utils(path):
    answers = _solution_function_names(path)
    assert answers, "every chapter has exercises"
    for module in sorted((ROOT / "utils").rglob("*.py")):
        tree = ast.parse(module.read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        assert not answers & defined, f"{module.name} defines an exercise answer: {answers & defined}"
