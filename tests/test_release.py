"""solutions/ is the source; chapters/ must be exactly what the release tool makes of it."""

from __future__ import annotations

import re
import shutil

import nbformat
import pytest
from course_paths import CHAPTERS, ROOT, SOLUTIONS
from machine_load import scaled

from coursetools import notebooks, release
from coursetools.release import BEGIN_HIDDEN, BEGIN_SOLUTION, END_HIDDEN, END_SOLUTION

SOLUTION_NAMES = [p.name for p in SOLUTIONS]


def _graded_cells(nb, flag):
    """Code cells with the nbgrader flag (manually graded explain cells are markdown: see _manual_cells)."""
    return [c for c in nb.cells if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get(flag)]


def _manual_cells(nb):
    return [c for c in nb.cells if c.cell_type == "markdown" and c.get("metadata", {}).get("nbgrader", {}).get("grade")]


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_manually_graded_cells_are_nbgrader_compatible(name):
    """An explain exercise: a markdown cell that is both answer and grade cell, with a model answer."""
    solution = notebooks.read(ROOT / "solutions" / name)
    chapter = notebooks.read(ROOT / "chapters" / name)
    number = int(name[:2])
    for cell in _manual_cells(solution):
        meta = cell.metadata.nbgrader
        assert meta["solution"] and meta["points"] > 0 and not meta["locked"] and meta["schema_version"] == 3
        assert re.fullmatch(rf"ex{number:02d}_\d+", meta["grade_id"])
        assert BEGIN_SOLUTION in cell.source and END_SOLUTION in cell.source
    released = {c.metadata.nbgrader.grade_id: c.source for c in _manual_cells(chapter)}
    assert set(released) == {c.metadata.nbgrader.grade_id for c in _manual_cells(solution)}
    assert all(source.strip() == "YOUR ANSWER HERE" for source in released.values())


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


def _outside_hidden(source: str) -> list[str]:
    """Lines of a cell outside its hidden-test block (solution blocks included)."""
    inside, lines = False, []
    for line in source.split("\n"):
        if line.strip() == BEGIN_HIDDEN:
            inside = True
        elif line.strip() == END_HIDDEN:
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
    """The stored outputs (which nbval re-validates) show every solution passing and every stub not; a
    multiple-choice prediction's check records the solution's answer, never says "passed" (issue 24, 01-T2)."""
    for folder, expected in (("solutions", "passed"), ("chapters", "not attempted yet")):
        nb = notebooks.read(ROOT / folder / name)
        for cell in _graded_cells(nb, "grade"):
            label = release.exercise_label(cell.metadata.nbgrader.grade_id)
            if folder == "solutions" and "check.prediction(" in cell.source.partition("### BEGIN HIDDEN TESTS")[0]:
                assert f"Exercise {label}: your prediction is recorded, not judged here" in _stdout(cell), label
                continue
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

    NotebookClient(client_nb, timeout=int(scaled(300)), kernel_name="python3", allow_errors=True,
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


# --- explain exercises, rubrics, the assignment release and the book's appendix (issue 14, items 3-4) ---

HEX_DIGEST = re.compile(r"['\"][0-9a-f]{16}['\"]")


def _explain_notebook():
    """A tiny solutions notebook with an explain exercise (manual grading) and its rubric."""
    nb = nbformat.v4.new_notebook()
    answer = nbformat.v4.new_markdown_cell(
        "**Your answer** (two or three sentences):\n\n### BEGIN SOLUTION\nThe scale keeps the variance of the "
        "scores at 1, so the softmax does not saturate.\n### END SOLUTION"
    )
    answer.metadata["nbgrader"] = {"grade": True, "solution": True, "points": 2, "grade_id": "ex03_7",
                                   "schema_version": 3, "locked": False, "task": False}
    rubric = nbformat.v4.new_markdown_cell("Rubric: 1 point for the variance, 1 for saturation.")
    rubric.metadata["tags"] = ["rubric"]
    nb.cells = [nbformat.v4.new_markdown_cell("# Chapter 3 — Scaled dot-product attention\n\nIntro."),
                answer, rubric, nbformat.v4.new_markdown_cell("After the exercise.")]
    return nb


def test_explain_answers_are_blanked_and_rubrics_dropped_for_learners():
    for assignment in (False, True):
        learner = release.release_notebook(_explain_notebook(), assignment=assignment)
        sources = [c.source for c in learner.cells]
        assert sources[1] == "**Your answer** (two or three sentences):\n\nYOUR ANSWER HERE"
        assert learner.cells[1].metadata["nbgrader"]["grade_id"] == "ex03_7", "manual grading needs the metadata"
        assert not any("Rubric" in s or "variance of the scores" in s for s in sources)
        assert sources[-1] == "After the exercise."


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_no_rubric_or_explain_answer_reaches_the_learner(name):
    solution = notebooks.read(ROOT / "solutions" / name)
    chapter = notebooks.read(ROOT / "chapters" / name)
    rubrics = [c.source for c in solution.cells if release.is_rubric(c)]
    chapter_text = "\n".join(c.source for c in chapter.cells)
    for rubric in rubrics:
        assert rubric not in chapter_text, f"{name}: a rubric reached chapters/"
    assert not any(release.is_rubric(c) for c in chapter.cells)


def test_form_checks_only_rewrites_digest_calls_and_keeps_the_rest():
    source = (
        'x = 1  # √d_k stays as it is\n'
        'check.exercise("3.2", lambda: check.number_digest(answer_3_2(), "cdcaf1e0d766ced6", '
        'name="σ of the score", sig=5, salt="ex03_2"))\n'
        'check.exercise(\n    "3.3",\n    lambda: check.choice_digest(\n        answer_3_3(),\n'
        '        "277e2221fde2f015",\n        options=["a", "b"],\n        salt="ex03_3",\n    ),\n)'
    )
    out = release.form_checks_only(source)
    assert out == (
        'x = 1  # √d_k stays as it is\n'
        'check.exercise("3.2", lambda: check.number_form(answer_3_2(), name="σ of the score"))\n'
        'check.exercise(\n    "3.3",\n    lambda: check.choice_form(answer_3_3(), ["a", "b"]),\n)'
    )
    assert release.form_checks_only("print(1)") == "print(1)"
    with pytest.raises(release.ReleaseError):
        release.form_checks_only("check.number_digest(%magic)")


def test_assignment_form_checks_run_and_reveal_nothing(capsys):
    """The rewritten checks run: a wrong number of the right form is accepted, a non-number is not."""
    from utils import checks as check

    cell = 'check.exercise("3.2", lambda: check.number_digest(answer(), "cdcaf1e0d766ced6", salt="ex03_2"))'
    rewritten = release.form_checks_only(cell)
    for value, expected in ((3.0, "right form"), (4.0, "right form"), ("four", "not yet")):
        exec(rewritten, {"check": check, "answer": lambda v=value: v})  # noqa: S102 -- our own cell
        line = capsys.readouterr().out
        assert expected in line and "4.0" not in line.replace(str(value), ""), line
    choice = release.form_checks_only('check.exercise("3.3", lambda: check.choice_digest(answer(), "x", ["a", "b"]))')
    exec(choice, {"check": check, "answer": lambda: "a"})  # noqa: S102
    assert "right form" in capsys.readouterr().out
    exec(choice, {"check": check, "answer": lambda: "z"})  # noqa: S102
    assert "not yet" in capsys.readouterr().out


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_assignment_release_differs_from_chapters_only_in_form_checks(name, tmp_path):
    out = tmp_path / "assignment"
    assert release.main(["--assignment", str(out), "--no-execute", name[:2]]) == 0
    assignment = notebooks.read(out / name)
    chapter = release.release_notebook(notebooks.read(ROOT / "solutions" / name))
    assert len(assignment.cells) == len(chapter.cells)
    for ours, theirs in zip(assignment.cells, chapter.cells):
        assert ours.metadata == theirs.metadata
        if "_digest(" in theirs.source:
            assert "_digest(" not in ours.source and not HEX_DIGEST.search(ours.source), ours.source
            assert "_form(" in ours.source
        else:
            assert ours.source == theirs.source
    # Re-running is a no-op, and the self-study chapters are untouched.
    assert release.release_one(ROOT / "solutions" / name, out, execute=False, assignment=True) == "unchanged"
    assert release.matches(notebooks.read(ROOT / "chapters" / name), notebooks.read(ROOT / "solutions" / name))


def test_assignment_refuses_the_chapters_folder():
    with pytest.raises(SystemExit):
        release.main(["--assignment", str(ROOT / "chapters"), "--no-execute"])


def test_book_solution_keeps_the_worked_answer_and_drops_what_is_not_for_publication():
    page = release.book_solution_notebook(_explain_notebook())
    sources = [c.source for c in page.cells]
    assert sources[0].startswith("# Solution — Chapter 3 — Scaled dot-product attention")
    assert "The scale keeps the variance" in sources[1]
    assert not any(marker in s for s in sources for marker in (BEGIN_SOLUTION, END_SOLUTION))
    assert not any("Rubric" in s for s in sources)
    assert all("nbgrader" not in c.metadata for c in page.cells)


@pytest.mark.parametrize("name", SOLUTION_NAMES)
def test_book_solution_pages_have_no_hidden_tests_and_keep_outputs(name):
    solution = notebooks.read(ROOT / "solutions" / name)
    page = release.book_solution_notebook(solution)
    text = "\n".join(c.source for c in page.cells)
    for marker in (BEGIN_SOLUTION, END_SOLUTION, BEGIN_HIDDEN, END_HIDDEN):
        assert marker not in text
    hidden = {line for c in solution.cells for line in _block_lines(c.source, BEGIN_HIDDEN, END_HIDDEN)}
    # The page shows worked solutions, so a hidden-test line that also occurs outside the hidden blocks
    # (a generic `d_k = x.size(-1)` in a solution) reveals nothing; every other hidden-test line must be absent.
    elsewhere = {ln.strip() for c in solution.cells for ln in _outside_hidden(c.source)}
    page_lines = {ln.strip() for ln in text.split("\n")}
    assert not (hidden - elsewhere) & page_lines
    assert page.cells[0].source.startswith("# Solution — Chapter ")
    assert [c.get("outputs") for c in page.cells if c.cell_type == "code"] == \
        [c.get("outputs") for c in solution.cells if c.cell_type == "code" and not release.is_rubric(c)]
    assert page.metadata.get("widgets") == solution.metadata.get("widgets")


def test_executing_a_notebook_prints_no_kernel_warning(tmp_path):
    """A newcomer's `release --execute-solutions NN` printed ipykernel's "running over TCP without encryption"
    warning once per notebook, which reads as a security problem; the kernel's own errors still reach stderr."""
    import subprocess
    import sys

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    script = ("import sys, nbformat; from pathlib import Path; from coursetools import notebooks\n"
              f"nb = notebooks.execute(nbformat.read({str(path)!r}, as_version=4), Path({str(tmp_path)!r}))\n"
              "print(nb.cells[0].outputs[0].text.strip())\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("42")
    assert "without encryption" not in done.stdout + done.stderr, done.stderr
