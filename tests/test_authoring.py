"""The text form of a notebook round-trips: sources, cell ids and the metadata the course uses."""

import pytest
from course_paths import SOLUTIONS

from coursetools import authoring, notebooks


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_text_form_round_trips_every_solution(path):
    original = notebooks.read(path)
    again = authoring.from_text(authoring.to_text(original), path.name)
    assert len(again.cells) == len(original.cells)
    for new, old in zip(again.cells, original.cells):
        assert (new.cell_type, new.id, new.source) == (old.cell_type, old.id, old.source)
        assert new.metadata == old.metadata  # nbgrader flags, tags, alt text: what release and grading use


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_unedited_round_trip_leaves_the_notebook_byte_for_byte(path):
    """Issue 19.6: outputs, execution counts, widget state and all metadata survive to-text/from-text."""
    original = notebooks.read(path)
    again = authoring.from_text(authoring.to_text(original), path.name, previous=original)
    assert notebooks.dumps(again) == path.read_text(encoding="utf-8")


def test_an_edited_cell_loses_only_its_own_outputs():
    path = SOLUTIONS[0]
    original = notebooks.read(path)
    index = next(i for i, c in enumerate(original.cells) if c.cell_type == "code" and c.outputs)
    text = authoring.to_text(original)
    old = original.cells[index].source
    edited = text.replace(old, old + "\n# an edit", 1)
    again = authoring.from_text(edited, path.name, previous=original)
    assert again.cells[index].source.endswith("# an edit") and again.cells[index].outputs == []
    for i, (new, old_cell) in enumerate(zip(again.cells, original.cells)):
        if i != index:
            assert new == old_cell
    assert again.metadata == original.metadata


def test_manual_graded_markdown_cells_round_trip(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_markdown_cell("### BEGIN SOLUTION\nBecause.\n### END SOLUTION")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "ex03_7", "locked": False, "points": 3,
                                 "schema_version": 3, "solution": True, "task": False}
    rubric = nbformat.v4.new_markdown_cell("1 point for ...")
    rubric.metadata["tags"] = ["rubric"]
    nb.cells = [cell, rubric]
    text = authoring.to_text(nb)
    assert 'kind="manual" grade_id="ex03_7" points=3' in text
    again = authoring.from_text(text, "03_x.ipynb")  # without the previous notebook: from the text alone
    assert again.cells[0].metadata == cell.metadata and again.cells[1].metadata == rubric.metadata


def test_cli_round_trip_and_a_missing_text_file(tmp_path, capsys):
    import shutil

    target = tmp_path / SOLUTIONS[0].name
    shutil.copy(SOLUTIONS[0], target)
    text = tmp_path / "nb.py"
    assert authoring.main(["to-text", str(target)]) == 0
    text.write_text(capsys.readouterr().out)
    assert authoring.main(["from-text", str(text), str(target)]) == 0
    assert "unchanged" in capsys.readouterr().out
    assert target.read_bytes() == SOLUTIONS[0].read_bytes()
    assert authoring.main(["from-text", str(tmp_path / "missing.py"), str(target)]) == 2
    assert "is not a file" in capsys.readouterr().err
