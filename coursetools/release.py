"""Make the learner's notebooks in chapters/ from the master notebooks in solutions/.

    python -m coursetools.release                 # every chapter; execute those whose source changed
    python -m coursetools.release 03 05           # only chapters whose name starts with 03 or 05
    python -m coursetools.release --execute-solutions 03   # also re-run solutions/03_* (outputs, widgets)
    python -m coursetools.release --force 03      # re-execute chapter 03 even if its source is unchanged
    python -m coursetools.release --check         # exit 1 if chapters/ is not what this tool makes
    python -m coursetools.release --assignment OUTDIR [03 05]   # the version an instructor hands out

The markers are nbgrader's:
- ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` becomes ``# YOUR CODE HERE`` and a
  ``raise NotImplementedError(...)`` naming the exercise; in a Markdown answer cell (an explain
  exercise, graded by hand) the text between the markers becomes "YOUR ANSWER HERE";
- ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS`` disappears;
- Markdown cells tagged ``rubric`` (the instructor's marking guide for an explain exercise) are dropped.
Cell metadata (nbgrader flags, grade ids, points, tags) is kept as it is. The output is
deterministic: a chapter whose generated source is unchanged is left byte for byte as it was.

Three versions are made from one solutions notebook:
- ``chapters/`` (self-study): visible checks give instant feedback, including digest checks that
  say whether a derived number or a multiple-choice letter is right;
- an assignment release (``--assignment OUTDIR``): the same, except that the visible checks of
  number and choice answers (``check.number_digest`` / ``check.choice_digest``) become
  ``check.number_form`` / ``check.choice_form``, which confirm only the answer's form (a finite
  number, one of the options): an instant right/wrong check of a number or a letter can be
  brute-forced, so in graded work only the hidden tests judge it;
- the book's solutions appendix (`book_solution_notebook`, applied while the book is built): the
  worked solutions with outputs, but no hidden tests, no solution markers, no nbgrader metadata and
  no rubrics, titled "Solution — Chapter N ...".
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
from pathlib import Path

import nbformat

from coursetools import notebooks

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
GRADE_ID = re.compile(r"^ex(\d+)_(\d+)")
RUBRIC_TAG = "rubric"
MARKERS = (BEGIN_SOLUTION, END_SOLUTION, BEGIN_HIDDEN, END_HIDDEN)
# The self-study checks of number and choice answers, and what the assignment release makes of them.
DIGEST_CHECKS = {"number_digest": "number_form", "choice_digest": "choice_form"}


class ReleaseError(ValueError):
    pass


def exercise_label(grade_id: str) -> str:
    """'ex03_2' or 'ex03_2_check' -> '3.2' (the name learners see)."""
    match = GRADE_ID.match(grade_id)
    if not match:
        raise ReleaseError(f"grade_id {grade_id!r} does not look like exNN_M")
    return f"{int(match.group(1))}.{int(match.group(2))}"


def _strip_block(lines: list[str], begin: str, end: str, replace) -> list[str]:
    """Replace each begin..end block (inclusive) with replace(indent) lines."""
    out: list[str] = []
    inside = False
    for line in lines:
        stripped = line.strip()
        if stripped == begin:
            if inside:
                raise ReleaseError(f"nested {begin}")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.extend(replace(indent))
        elif stripped == end:
            if not inside:
                raise ReleaseError(f"{end} without {begin}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ReleaseError(f"{begin} without {end}")
    return out


def is_rubric(cell: nbformat.NotebookNode) -> bool:
    """A Markdown cell tagged ``rubric``: the instructor's marking guide, never given to learners."""
    return RUBRIC_TAG in cell.get("metadata", {}).get("tags", [])


def _utf8_col_to_index(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8"))


def form_checks_only(source: str, where: str = "a check cell") -> str:
    """Rewrite every ``check.number_digest`` / ``check.choice_digest`` call into its form check.

    ``check.number_digest(got, "<digest>", name=..., sig=..., salt=...)`` becomes
    ``check.number_form(got, name=...)``; ``check.choice_digest(got, "<digest>", options, ...)``
    becomes ``check.choice_form(got, options, name=...)``. Everything else in the cell is kept
    character for character.
    """
    if not any(f"{name}(" in source for name in DIGEST_CHECKS):
        return source
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ReleaseError(f"{where}: cannot parse the check cell to rewrite its digest checks: {exc}") from exc
    lines = source.split("\n")
    edits: list[tuple[int, int, int, int, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in DIGEST_CHECKS):
            continue
        kind = node.func.attr
        keywords = {k.arg: k.value for k in node.keywords}
        args = list(node.args)
        if not args and "got" not in keywords:
            raise ReleaseError(f"{where}: {kind} without the learner's answer")
        segment = lambda n: ast.get_source_segment(source, n)  # noqa: E731
        got = segment(args[0] if args else keywords["got"])
        parts = [got]
        if kind == "choice_digest":
            options = args[2] if len(args) > 2 else keywords.get("options")
            if options is None:
                raise ReleaseError(f"{where}: choice_digest without its options")
            parts.append(segment(options))
        if "name" in keywords:
            parts.append(f"name={segment(keywords['name'])}")
        text = f"{segment(node.func.value)}.{DIGEST_CHECKS[kind]}({', '.join(parts)})"
        edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, text))
    # Apply from the last call to the first so that earlier positions stay valid (calls never nest).
    for lineno, col, end_lineno, end_col, text in sorted(edits, reverse=True):
        start = _utf8_col_to_index(lines[lineno - 1], col)
        end = _utf8_col_to_index(lines[end_lineno - 1], end_col)
        head, tail = lines[lineno - 1][:start], lines[end_lineno - 1][end:]
        lines[lineno - 1 : end_lineno] = (head + text + tail).split("\n")
    return "\n".join(lines)


def release_cell(cell: nbformat.NotebookNode, assignment: bool = False) -> nbformat.NotebookNode:
    """The learner's version of one cell, with outputs cleared (``assignment``: form checks only)."""
    new = copy.deepcopy(cell)
    lines = new.source.split("\n")
    grade_id = new.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
    if new.cell_type == "code":
        if BEGIN_SOLUTION in new.source:
            label = exercise_label(grade_id) if grade_id else "this exercise"
            lines = _strip_block(
                lines,
                BEGIN_SOLUTION,
                END_SOLUTION,
                lambda ind: [
                    f"{ind}# YOUR CODE HERE",
                    f'{ind}raise NotImplementedError("Exercise {label}: not attempted yet")',
                ],
            )
        lines = _strip_block(lines, BEGIN_HIDDEN, END_HIDDEN, lambda ind: [])
        while lines and not lines[-1].strip():
            lines.pop()
        new.outputs = []
        new.execution_count = None
    else:
        lines = _strip_block(lines, BEGIN_SOLUTION, END_SOLUTION, lambda ind: [f"{ind}YOUR ANSWER HERE"])
        if BEGIN_HIDDEN in new.source:
            raise ReleaseError("hidden tests belong in code cells")
    new.source = "\n".join(lines)
    if assignment and new.cell_type == "code":
        new.source = form_checks_only(new.source, grade_id or "a code cell")
    return new


def release_notebook(solution: nbformat.NotebookNode, assignment: bool = False) -> nbformat.NotebookNode:
    """The learner's notebook: solutions stubbed, hidden tests and rubrics removed, no outputs.

    ``assignment``: the version an instructor hands out, whose visible checks of number and choice
    answers confirm only the answer's form (see the module's docstring).
    """
    nb = copy.deepcopy(solution)
    nb.cells = [release_cell(c, assignment) for c in solution.cells if not is_rubric(c)]
    nb.metadata.pop(notebooks.WIDGET_STATE_KEY, None)
    return nb


def book_solution_notebook(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The solutions appendix page of the book: worked solutions, safe to publish.

    Hidden tests and rubric cells are dropped, the marker lines of the solution blocks are removed
    (their content stays), nbgrader metadata is removed, outputs and widget state are kept, and the
    first heading becomes "Solution — <heading>", so that the page is not titled like the chapter.
    """
    nb = copy.deepcopy(solution)
    cells = []
    for cell in nb.cells:
        if is_rubric(cell):
            continue
        lines = _strip_block(cell.source.split("\n"), BEGIN_HIDDEN, END_HIDDEN, lambda ind: [])
        lines = [line for line in lines if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION)]
        if cell.cell_type == "code":
            while lines and not lines[-1].strip():
                lines.pop()
        cell.source = "\n".join(lines)
        cell.get("metadata", {}).pop("nbgrader", None)
        cells.append(cell)
    nb.cells = cells
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            first, _, rest = cell.source.partition("\n")
            if first.startswith("# "):
                title = first[2:].strip()
                if not title.startswith("Solution"):
                    cell.source = f"# Solution — {title}" + ("\n" + rest if rest else "")
            break
    return nb


def matches(chapter: nbformat.NotebookNode, solution: nbformat.NotebookNode) -> bool:
    """Whether a chapter's source is exactly what releasing ``solution`` makes."""
    return notebooks.source_fingerprint(chapter) == notebooks.source_fingerprint(
        release_notebook(solution)
    )


def release_one(
    solution_path: Path, chapters_dir: Path, execute: bool = True, force: bool = False,
    assignment: bool = False,
) -> str:
    """Release one notebook; return 'unchanged', 'written' or 'written+executed'.

    A chapter whose source already matches is left untouched unless ``force`` (for example after
    a change to a `utils/` module the notebook imports, which changes its outputs, not its source).
    ``assignment``: write the assignment release (form checks only) instead of the self-study one.
    """
    solution = notebooks.read(solution_path)
    target = chapters_dir / solution_path.name
    wanted = release_notebook(solution, assignment=assignment)
    if (not force and target.exists()
            and notebooks.source_fingerprint(notebooks.read(target)) == notebooks.source_fingerprint(wanted)):
        return "unchanged"
    chapter = wanted
    if execute:
        notebooks.execute(chapter, workdir=chapters_dir)
    notebooks.write(chapter, target)
    return "written+executed" if execute else "written"


def selected(names: list[str], folder: Path) -> list[Path]:
    paths = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if names:
        paths = [p for p in paths if any(p.name.startswith(n) for n in names)]
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate chapters/ (or an assignment release) from solutions/.")
    parser.add_argument("names", nargs="*", help="chapter prefixes such as 03 (default: all)")
    parser.add_argument(
        "--assignment", metavar="OUTDIR", type=Path,
        help="write the assignment release to OUTDIR instead of chapters/: number and choice answers "
             "get form checks only (their values are judged by the hidden tests at grading)",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if chapters/ is out of date")
    parser.add_argument("--no-execute", action="store_true", help="write without running")
    parser.add_argument("--force", action="store_true", help="re-execute even unchanged chapters")
    parser.add_argument(
        "--execute-solutions", action="store_true", help="first re-run the solutions notebooks"
    )
    args = parser.parse_args(argv)
    paths = selected(args.names, notebooks.SOLUTIONS)
    if not paths:
        print(f"no notebook in solutions/ starts with {' or '.join(args.names)}", file=sys.stderr)
        return 2
    if args.assignment is not None:
        if args.check or args.execute_solutions:
            parser.error("--assignment cannot be combined with --check or --execute-solutions")
        out = args.assignment.resolve()
        if out in (notebooks.CHAPTERS.resolve(), notebooks.SOLUTIONS.resolve()):
            parser.error(f"--assignment needs a folder of its own, not {out}")
        out.mkdir(parents=True, exist_ok=True)
        for path in paths:
            status = release_one(path, out, execute=not args.no_execute, force=args.force, assignment=True)
            print(f"{out / path.name}: {status}")
        return 0
    chapters_dir = notebooks.CHAPTERS
    chapters_dir.mkdir(exist_ok=True)
    if args.check:
        stale = [
            p.name
            for p in paths
            if not (chapters_dir / p.name).exists()
            or not matches(notebooks.read(chapters_dir / p.name), notebooks.read(p))
        ]
        for name in stale:
            print(f"stale: chapters/{name} (run python -m coursetools.release)")
        return 1 if stale else 0
    for path in paths:
        if args.execute_solutions:
            nb = notebooks.read(path)
            notebooks.execute(nb, workdir=path.parent)
            notebooks.write(nb, path)
            print(f"executed solutions/{path.name}")
        status = release_one(path, chapters_dir, execute=not args.no_execute, force=args.force)
        print(f"chapters/{path.name}: {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
