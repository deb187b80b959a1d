"""Enter the points of exercises graded by hand (explain exercises) into the gradebook.

    python -m coursetools.grading.hand grades/

The first run writes ``grades/hand-graded.csv``: one row per answer the grader marked "needs manual
grading" (student, chapter, exercise, max_points, and empty ``points`` and ``comment`` columns). Read
the answers in ``grades/manual/<chapter>/<exercise>.md``, fill in ``points`` (and a comment if you
like) in any spreadsheet or editor, and run the command again: it checks every mark (a number from 0
to max_points, for an answer that exists) and writes ``grades/final-gradebook.csv``, the gradebook with
those rows' points filled in and their status "graded by hand" (the comment becomes the reason).

``hand-graded.csv`` is yours: re-grading (``python -m coursetools.grading``) rewrites gradebook.csv,
feedback/ and manual/ but never this file, and a later run of this command keeps every mark in it,
adds rows for new answers, and says which marks no longer match an answer (a resubmission, say).
Rows without points stay "needs manual grading" in the final gradebook, and the command says how many.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from pathlib import Path

# The gradebook's columns and status, as coursetools.grading.grade writes them (a test checks they agree);
# not imported from there, so that this command starts without loading the grader.
FIELDS = ["student", "chapter", "exercise", "points", "max_points", "status", "reason"]
NEEDS_MANUAL = "needs manual grading"

MARKS = "hand-graded.csv"
FINAL = "final-gradebook.csv"
MARK_FIELDS = ["student", "chapter", "exercise", "max_points", "points", "comment"]
GRADED_BY_HAND = "graded by hand"


class MarksError(ValueError):
    pass


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _write(path: Path, fields: list[str], rows: list[dict[str, str]]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(buffer.getvalue(), encoding="utf-8")
    os.replace(tmp, path)


def _key(row: dict[str, str]) -> tuple[str, str, str]:
    return row["student"], row["chapter"], row["exercise"]


def merge(grades: Path) -> tuple[int, int, list[str]]:
    """Update hand-graded.csv and write final-gradebook.csv; return (marked, still unmarked, warnings)."""
    gradebook = grades / "gradebook.csv"
    if not gradebook.is_file():
        raise MarksError(f"{gradebook} not found: run `python -m coursetools.grading submissions/ --out {grades}` first")
    rows = _read(gradebook)
    if not rows or list(rows[0]) != FIELDS:
        raise MarksError(f"{gradebook}: not a gradebook written by coursetools.grading")
    manual = {_key(r): r for r in rows if r["status"] == NEEDS_MANUAL}
    marks_path = grades / MARKS
    marks = {}
    if marks_path.exists():
        for line, mark in enumerate(_read(marks_path), start=2):
            if any(mark.get(f) is None for f in MARK_FIELDS):
                raise MarksError(f"{marks_path}: the columns must be {', '.join(MARK_FIELDS)}")
            if _key(mark) in marks:
                raise MarksError(f"{marks_path} line {line}: {', '.join(_key(mark))} appears twice")
            marks[_key(mark)] = mark | {"line": str(line)}
    warnings, marked = [], {}
    for key, mark in marks.items():
        points = mark["points"].strip()
        if key not in manual:
            if points:
                warnings.append(f"line {mark['line']}: {', '.join(key)} has points but no answer to grade by hand "
                                "in gradebook.csv (kept in hand-graded.csv, not used)")
            continue
        if not points:
            continue
        try:
            value = float(points)
        except ValueError:
            raise MarksError(f"{marks_path} line {mark['line']}: points {points!r} is not a number") from None
        top = float(manual[key]["max_points"])
        if not 0 <= value <= top:
            raise MarksError(f"{marks_path} line {mark['line']}: {', '.join(key)}: points {points} outside 0 to {top:g}")
        marked[key] = (value, mark["comment"].strip())
    for key, row in manual.items():  # new answers get a row; existing marks are kept as they are
        marks.setdefault(key, {**{f: row[f] for f in ("student", "chapter", "exercise", "max_points")},
                               "points": "", "comment": ""})
    _write(marks_path, MARK_FIELDS, sorted(marks.values(), key=_key))
    final = []
    for row in rows:
        if _key(row) in marked and row["status"] == NEEDS_MANUAL:
            value, comment = marked[_key(row)]
            row = row | {"points": f"{value:g}", "status": GRADED_BY_HAND, "reason": comment}
        final.append(row)
    _write(grades / FINAL, FIELDS, final)
    return len(marked), len(manual) - len(marked), warnings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.grading.hand", description=__doc__.splitlines()[0])
    parser.add_argument("grades", type=Path, help="the grader's --out folder (with gradebook.csv)")
    args = parser.parse_args(argv)
    try:
        marked, unmarked, warnings = merge(args.grades)
    except MarksError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"{marked} answer(s) graded by hand entered into {args.grades / FINAL}"
          + (f"; {unmarked} still without points: fill them in {args.grades / MARKS} (answers in "
             f"{args.grades / 'manual'}/) and run this again" if unmarked else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
