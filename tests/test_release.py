"""solutions/ is the source; chapters/ must be exactly what the release tool makes of it."""

from __future__ import annotations

import re
import shutil

import nbformat
import pytest
from course_paths import CHAPTERS, ROOT, SOLUTIONS

from coursetools import notebooks, release
from coursetools.release import BEGIN_HIDDEN, BEGIN_SOLUTION, END_HIDDEN, END_SOLUTION

SOLUTION_NAMES = [p.name for p in SOLUTIONS]


def _graded_cells(nb, flag):
    """Answer cells (flag "solution") or check cells (flag "grade"): code cells only. A manually graded
    markdown answer (an explain exercise) carries both flags and is checked by test_manual_answers_*."""
    return [c for c in nb.cells if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get(flag)]


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_manual_answers_are_nbgrader_manual_cells_with_a_rubric(name):
    cells = notebooks.read(ROOT / "solutions" / name).cells
    for i, cell in enumerate(cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "markdown" and meta.get("grade"):
            assert meta["solution"] and not meta["locked"] and meta["points"] > 0 and meta["schema_version"] == 3
            assert re.fullmatch(rf"ex{int(name[:2]):02d}_\d+", meta["grade_id"])
            assert BEGIN_SOLUTION in cell.source and END_SOLUTION in cell.source, meta["grade_id"]
            following = cells[i + 1] if i + 1 < len(cells) else None
            assert following is not None and "rubric" in following.get("metadata", {}).get("tags", []), \
                f"{meta['grade_id']}: a manually graded answer is followed by its rubric cell (tag 'rubric')"


def _block_lines(source: str, begin: str, end: str) -> list[str]:
    inside, lines = False, []
    for line in source.split("\n"):
        if line.strip() == begin:
            inside = True
        elif line.strip() == end:
            inside = False
        elif inside and len(line.strip()) >= 10 and not line.strip().startswith("#"):
            lines.append(line.strip())
    return lines


def _outside_blocks(source: str) -> list[str]:
    """Lines of a solution cell outside every solution and hidden-test block (independent of release)."""
    inside, lines = False, []
    for line in source.split("\n"):
        if line.strip() in (BEGIN_SOLUTION, BEGIN_HIDDEN):
            inside = True
        elif line.strip() in (END_SOLUTION, END_HIDDEN):
            inside = False
        elif not inside:
            lines.append(line)
    return lines


def test_every_solution_has_a_chapter_and_back():
    assert SOLUTION_NAMES, "no notebooks in solutions/"
    assert SOLUTION_NAMES == [p.name for p in CHAPTERS]


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_chapter_is_exactly_what_release_makes(name):
    solution = notebooks.read(ROOT / "solutions" / name)
    chapter = notebooks.read(ROOT / "chapters" / name)
    assert release.matches(chapter, solution), f"chapters/{name} is stale: run python -m coursetools.release {name[:2]}"


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_release_is_byte_identical_on_rerun(name, tmp_path):
    shutil.copy(ROOT / "solutions" / name, tmp_path / name)
    out = tmp_path / "out"
    out.mkdir()
    assert release.release_one(tmp_path / name, out, execute=False) == "written"
    first = (out / name).read_bytes()
    assert release.release_one(tmp_path / name, out, execute=False) == "unchanged"
    assert (out / name).read_bytes() == first
    (out / name).unlink()
    release.release_one(tmp_path / name, out, execute=False)
    assert (out / name).read_bytes() == first


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_no_solution_or_hidden_test_line_reaches_the_learner(name):
    solution = notebooks.read(ROOT / "solutions" / name)
    chapter_text = (ROOT / "chapters" / name).read_text()
    for marker in (BEGIN_SOLUTION, END_SOLUTION, BEGIN_HIDDEN, END_HIDDEN):
        assert marker not in chapter_text
    chapter = notebooks.read(ROOT / "chapters" / name)
    chapter_lines = {ln.strip() for c in chapter.cells for ln in c.source.split("\n")}
    # Lines that also occur in visible code (e.g. `lambda: check.close(`) are not secrets.
    secret = {
        line
        for cell in solution.cells
        for begin, end in ((BEGIN_SOLUTION, END_SOLUTION), (BEGIN_HIDDEN, END_HIDDEN))
        for line in _block_lines(cell.source, begin, end)
    }
    visible = {ln.strip() for c in solution.cells for ln in _outside_blocks(c.source)}
    for line in sorted(secret - visible):
        assert line not in chapter_lines, f"{name}: leaked line {line!r}"


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_exercises_are_complete_and_nbgrader_compatible(name):
    solution = notebooks.read(ROOT / "solutions" / name)
    answers = _graded_cells(solution, "solution")
    graded = _graded_cells(solution, "grade")
    assert len(answers) >= 3 and len(graded) >= 3, f"{name}: a chapter needs at least 3 exercises"
    ids = [c.metadata.nbgrader.grade_id for c in answers + graded]
    assert len(ids) == len(set(ids)), "grade ids must be unique"
    number = int(name[:2])
    for cell in answers:
        meta = cell.metadata.nbgrader
        assert meta["solution"] and not meta["grade"] and not meta["locked"] and meta["schema_version"] == 3
        assert re.fullmatch(rf"ex{number:02d}_\d+", meta["grade_id"])
        assert BEGIN_SOLUTION in cell.source
    for cell in graded:
        meta = cell.metadata.nbgrader
        assert meta["grade"] and meta["locked"] and meta["points"] > 0 and not meta["solution"]
        answer_id = meta["grade_id"].removesuffix("_check")
        assert answer_id in ids and meta["grade_id"] == answer_id + "_check"
        label = release.exercise_label(answer_id)
        assert "check.exercise(" in cell.source and f'"{label}"' in cell.source, f"{answer_id}: report {label}"
        assert BEGIN_HIDDEN in cell.source, f"{answer_id}: hidden tests missing"


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_solutions_pass_and_stubs_report_not_attempted(name):
    """The stored outputs (which nbval re-validates) show every solution passing and every stub not."""
    for folder, expected in (("solutions", "passed"), ("chapters", "not attempted yet")):
        nb = notebooks.read(ROOT / folder / name)
        for cell in _graded_cells(nb, "grade"):
            label = release.exercise_label(cell.metadata.nbgrader.grade_id)
            assert f"Exercise {label}: {expected}" in _stdout(cell), f"{folder}/{name} {label}"


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_stubs_fail_the_hidden_tests(name, tmp_path):
    """Run the learner's version with the hidden tests put back: every graded cell must fail."""
    solution = notebooks.read(ROOT / "solutions" / name)
    chapter = notebooks.read(ROOT / "chapters" / name)
    hidden = {c.metadata.nbgrader.grade_id: c.source for c in _graded_cells(solution, "grade")}
    for cell in chapter.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in hidden:
            cell.source = hidden[grade_id]
    client_nb = nbformat.from_dict(chapter)
    from nbclient import NotebookClient

    NotebookClient(client_nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT / "chapters")}}).execute()
    for cell in client_nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in hidden:
            errors = [o for o in cell.outputs if o.output_type == "error"]
            assert errors and errors[0].ename == "AssertionError", f"{grade_id}: a stub passed its hidden tests"


def test_release_stubs_keep_indentation_and_name_the_exercise():
    cell = nbformat.v4.new_code_cell(
        "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n"
        "check()\n### BEGIN HIDDEN TESTS\nsecret()\n### END HIDDEN TESTS"
    )
    cell.metadata["nbgrader"] = {"grade_id": "ex07_3", "solution": True}
    out = release.release_cell(cell)
    assert out.source == (
        "def f(x):\n    y = 1\n    # YOUR CODE HERE\n"
        '    raise NotImplementedError("Exercise 7.3: not attempted yet")\ncheck()'
    )
    with pytest.raises(release.ReleaseError):
        release.release_cell(nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1\n"))


def _visible_part(source: str) -> str:
    lines = source.split("\n")
    cut = next((i for i, line in enumerate(lines) if line.strip() == BEGIN_HIDDEN), len(lines))
    return "\n".join(lines[:cut])


def _is_constant(node) -> bool:
    import ast

    return all(isinstance(n, ast.Constant | ast.UnaryOp | ast.BinOp | ast.operator | ast.unaryop
                          | ast.List | ast.Tuple | ast.Load) for n in ast.walk(node))


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_visible_checks_do_not_print_the_answer_in_their_source(name):
    """A learner sees the check cell: `check.number(answer_3_2(), 4.0)` would give the answer away.

    Derived numbers and choices are checked against a digest (check.number_digest/choice_digest)
    or by plugging the answer back into a property; the exact value lives in the hidden tests.
    """
    import ast

    solution = notebooks.read(ROOT / "solutions" / name)
    for cell in _graded_cells(solution, "grade"):
        for node in ast.walk(ast.parse(_visible_part(cell.source))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("number", "choice") and len(node.args) >= 2):
                got = node.args[0]
                direct = isinstance(got, ast.Call) and isinstance(got.func, ast.Name) and got.func.id.startswith("answer_")
                assert not (direct and _is_constant(node.args[1])), \
                    f"{cell.metadata.nbgrader.grade_id}: the visible check shows the answer: {ast.unparse(node)}"
