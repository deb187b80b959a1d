"""Make the learner's notebooks in chapters/ from the master notebooks in solutions/.

    python -m coursetools.release                 # every chapter; execute those whose source changed
    python -m coursetools.release 03 05           # only chapters whose name starts with 03 or 05
    python -m coursetools.release --execute-solutions 03   # also re-run solutions/03_* (outputs, widgets)
    python -m coursetools.release --force 03      # re-execute chapter 03 even if its source is unchanged
    python -m coursetools.release --check         # exit 1 if chapters/ is not what this tool makes

The markers are nbgrader's:
- ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` becomes ``# YOUR CODE HERE`` and a
  ``raise NotImplementedError(...)`` naming the exercise (in Markdown: "YOUR ANSWER HERE");
- ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS`` disappears.
Cell metadata (nbgrader flags, grade ids, points, tags) is kept as it is. The output is
deterministic: a chapter whose generated source is unchanged is left byte for byte as it was.
"""

from __future__ import annotations

import argparse
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


def release_cell(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The learner's version of one cell, with outputs cleared."""
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
        lines = _strip_block(lines, BEGIN_SOLUTION, END_SOLUTION, lambda ind: ["YOUR ANSWER HERE"])
        if BEGIN_HIDDEN in new.source:
            raise ReleaseError("hidden tests belong in code cells")
    new.source = "\n".join(lines)
    return new


def release_notebook(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The learner's notebook: solutions stubbed, hidden tests removed, no outputs."""
    nb = copy.deepcopy(solution)
    nb.cells = [release_cell(c) for c in solution.cells]
    nb.metadata.pop(notebooks.WIDGET_STATE_KEY, None)
    return nb


def matches(chapter: nbformat.NotebookNode, solution: nbformat.NotebookNode) -> bool:
    """Whether a chapter's source is exactly what releasing ``solution`` makes."""
    return notebooks.source_fingerprint(chapter) == notebooks.source_fingerprint(
        release_notebook(solution)
    )


def release_one(
    solution_path: Path, chapters_dir: Path, execute: bool = True, force: bool = False
) -> str:
    """Release one notebook; return 'unchanged', 'written' or 'written+executed'.

    A chapter whose source already matches is left untouched unless ``force`` (for example after
    a change to a `utils/` module the notebook imports, which changes its outputs, not its source).
    """
    solution = notebooks.read(solution_path)
    target = chapters_dir / solution_path.name
    if not force and target.exists() and matches(notebooks.read(target), solution):
        return "unchanged"
    chapter = release_notebook(solution)
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
    parser = argparse.ArgumentParser(description="Generate chapters/ from solutions/.")
    parser.add_argument("names", nargs="*", help="chapter prefixes such as 03 (default: all)")
    parser.add_argument("--check", action="store_true", help="exit 1 if chapters/ is out of date")
    parser.add_argument("--no-execute", action="store_true", help="write without running")
    parser.add_argument("--force", action="store_true", help="re-execute even unchanged chapters")
    parser.add_argument(
        "--execute-solutions", action="store_true", help="first re-run the solutions notebooks"
    )
    args = parser.parse_args(argv)
    chapters_dir = notebooks.CHAPTERS
    chapters_dir.mkdir(exist_ok=True)
    paths = selected(args.names, notebooks.SOLUTIONS)
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
