"""Points of exercises graded by hand, entered with the README's command (issue 27)."""

from __future__ import annotations

import csv
import subprocess
import sys

from course_paths import ROOT

from coursetools.grading import grade, hand
from coursetools.grading.grade import FIELDS, NEEDS_MANUAL

README = (ROOT / "README.md").read_text()
COMMAND = ".venv/bin/python -m coursetools.grading.hand grades/"


def gradebook(rows):
    lines = [",".join(FIELDS)] + [",".join(map(str, row)) for row in rows]
    return "\n".join(lines) + "\n"


def read(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def run(cwd):
    assert COMMAND in README, "the README gives this command"
    argv = [sys.executable, *COMMAND.split()[1:]]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_hand_marks_go_into_the_final_gradebook_and_survive_regrading(tmp_path):
    grades = tmp_path / "grades"
    grades.mkdir()
    (grades / "gradebook.csv").write_text(gradebook([
        ("ada", "03_scaled_dot_product_attention", "3.1", 2, 2, "passed", ""),
        ("ada", "03_scaled_dot_product_attention", "3.6", 0, 3, NEEDS_MANUAL, "graded by hand"),
        ("bob", "03_scaled_dot_product_attention", "3.6", 0, 3, NEEDS_MANUAL, "graded by hand"),
    ]))
    first = run(tmp_path)
    assert first.returncode == 0, first.stderr
    assert "2 still without points" in first.stdout
    marks = read(grades / "hand-graded.csv")
    assert [(m["student"], m["exercise"], m["points"]) for m in marks] == [("ada", "3.6", ""), ("bob", "3.6", "")]
    # As the README says: the first run already writes final-gradebook.csv, its hand rows not yet graded.
    assert "already a `grades/final-gradebook.csv`" in README
    assert [r["status"] for r in read(grades / "final-gradebook.csv")] == ["passed", NEEDS_MANUAL, NEEDS_MANUAL]
    marks[0]["points"], marks[0]["comment"] = "2.5", "clear, misses the d_k argument"
    with (grades / "hand-graded.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(marks[0]))
        writer.writeheader()
        writer.writerows(marks)
    second = run(tmp_path)
    assert second.returncode == 0, second.stderr
    final = {(r["student"], r["exercise"]): r for r in read(grades / "final-gradebook.csv")}
    assert final[("ada", "3.6")]["points"] == "2.5" and final[("ada", "3.6")]["status"] == "graded by hand"
    assert final[("ada", "3.6")]["reason"] == "clear, misses the d_k argument"
    assert final[("bob", "3.6")]["status"] == NEEDS_MANUAL and final[("ada", "3.1")]["points"] == "2"
    assert "1 still without points" in second.stdout
    # Re-grading rewrites gradebook.csv (a new student); the marks already entered stay.
    (grades / "gradebook.csv").write_text(gradebook([
        ("ada", "03_scaled_dot_product_attention", "3.6", 0, 3, NEEDS_MANUAL, "graded by hand"),
        ("cy", "03_scaled_dot_product_attention", "3.6", 0, 3, NEEDS_MANUAL, "graded by hand"),
    ]))
    third = run(tmp_path)
    assert third.returncode == 0, third.stderr
    assert {m["student"]: m["points"] for m in read(grades / "hand-graded.csv")} == {"ada": "2.5", "bob": "", "cy": ""}
    assert {r["student"]: r["points"] for r in read(grades / "final-gradebook.csv")} == {"ada": "2.5", "cy": "0"}


def test_a_mark_out_of_range_is_refused_with_its_line(tmp_path):
    grades = tmp_path / "grades"
    grades.mkdir()
    (grades / "gradebook.csv").write_text(gradebook([
        ("ada", "03_scaled_dot_product_attention", "3.6", 0, 3, NEEDS_MANUAL, "graded by hand")]))
    (grades / "hand-graded.csv").write_text("student,chapter,exercise,max_points,points,comment\n"
                                            "ada,03_scaled_dot_product_attention,3.6,3,4,\n")
    done = run(tmp_path)
    assert done.returncode == 2 and "line 2" in done.stderr and "outside 0 to 3" in done.stderr
    assert not (grades / "final-gradebook.csv").exists()


def test_the_command_reads_the_columns_the_grader_writes():
    assert hand.FIELDS == grade.FIELDS and hand.NEEDS_MANUAL == grade.NEEDS_MANUAL
