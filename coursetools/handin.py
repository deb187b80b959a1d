"""Before handing in: run a notebook on a fresh kernel and say which exercises pass their self-checks.

    python -m coursetools.handin chapters/03_scaled_dot_product_attention.ipynb

or, from a cell of the notebook itself (save it first):

    from coursetools.handin import check_before_handing_in
    check_before_handing_in("03_scaled_dot_product_attention.ipynb")

The notebook is run on a copy, so nothing in it changes. Hidden tests are not included: passing
the self-checks is necessary, not sufficient, for full marks. Exercises graded by hand (a Markdown
answer cell with nbgrader ``grade`` and ``solution``) are listed as "answered" or "not answered":
nothing checks their content before the instructor reads it.

Exit status: 0 when every exercise passes its self-check, every exercise graded by hand is answered
and no cell raised; 1 otherwise (the lines printed say what is missing); 2 when a notebook named is
not there. A cell that raised is named by the heading it sits under and its first line, as JupyterLab
shows them (JupyterLab shows no cell numbers).

This check only runs the notebook: handing in is how your course collects work (a learning platform,
e-mail, or the instructor's JupyterHub); hand in the `.ipynb` file itself, saved, under its own name.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

LINE = re.compile(r"^Exercise (\d+\.\d+): (.+)$", re.M)  # passed / not attempted yet / not yet. ... / a form check
PLACEHOLDER = "YOUR ANSWER HERE"
ANSWERED, NOT_ANSWERED = "answered (graded by hand)", "not answered (graded by hand)"
# A form-only self-check (a multiple-choice prediction, an assignment's number) says this: the answer is
# recorded and graded from the hidden tests at hand-in. utils.checks.RECORDED (a test keeps them equal;
# importing utils here would import torch).
RECORDED = "graded when you hand in"


def _ready(result: str) -> bool:
    """Whether an exercise's line means it is ready to hand in: passed, recorded, or answered by hand."""
    return result in ("passed", ANSWERED) or RECORDED in result


def manual_answer(text: str, released: str | None = None) -> str | None:
    """The learner's answer in a cell graded by hand, or None if it is still blank.

    ``released`` is the cell as handed out (its text without the placeholder does not count as an
    answer); without it, only the placeholder "YOUR ANSWER HERE" and white space count as blank.
    """
    answer = text.replace(PLACEHOLDER, "").strip()
    if released is not None and answer == released.replace(PLACEHOLDER, "").strip():
        return None
    return answer or None


def manual_exercises(nb) -> dict[str, str]:
    """{exercise label: answered / not answered} for the cells graded by hand."""
    from coursetools.release import exercise_label

    found = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and meta.get("solution") and meta.get("grade_id"):
            found[exercise_label(meta["grade_id"])] = ANSWERED if manual_answer(cell.source) else NOT_ANSWERED
    return found


HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)


def where(nb, index: int) -> str:
    """A cell as a learner finds it in JupyterLab: the heading above it and its first line."""
    heading = None
    for cell in nb.cells[index::-1]:
        if cell.cell_type == "markdown":
            found = HEADING.findall(cell.source)
            if found:
                heading = found[-1]
                break
    first = next((line.strip() for line in nb.cells[index].source.splitlines() if line.strip()), "")
    place = f"under “{heading}”" if heading else "before the first heading"
    return f"the cell {place} that starts `{first[:60]}`" if first else f"an empty cell {place}"


def summarise(path: Path, timeout: int = 300) -> tuple[dict[str, str], list[str]]:
    """Run a copy of the notebook; return ({exercise: result line}, [problems])."""
    nb = nbformat.read(str(path), as_version=4)
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        # log_level: without it the kernel prints ipykernel's "running over TCP without encryption"
        # warning first; the kernel listens on 127.0.0.1 only, for this one run.
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": tmp}},
                                extra_arguments=["--IPKernelApp.log_level=ERROR"])
        try:
            client.execute()
        except (CellTimeoutError, DeadKernelError) as exc:
            problems.append(f"the notebook did not finish: {type(exc).__name__}")
    results: dict[str, str] = {}
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(f"{where(nb, index)} raised {output.get('ename')}: "
                                f"{output.get('evalue', '')[:120]}")
            for match in LINE.finditer(output.get("text", "")):
                results[match.group(1)] = match.group(2)
    results.update(manual_exercises(nb))
    return results, problems


def report(path: Path) -> bool:
    results, problems = summarise(path)
    automatic = {k: v for k, v in results.items() if v not in (ANSWERED, NOT_ANSWERED)}
    manual = {k: v for k, v in results.items() if v in (ANSWERED, NOT_ANSWERED)}
    line = f"{path.name}: {sum(_ready(r) for r in automatic.values())} of {len(automatic)} exercises pass their self-checks"
    if manual:
        line += f"; {sum(r == ANSWERED for r in manual.values())} of {len(manual)} to be graded by hand are answered"
    print(line)
    for exercise, result in sorted(results.items(), key=lambda kv: [int(x) for x in kv[0].split(".")]):
        print(f"  Exercise {exercise}: {result}")
    for problem in problems:
        print(f"  problem: {problem}")
    return (bool(results) and all(_ready(r) for r in results.values()) and not problems)


def check_before_handing_in(notebook: str | Path) -> None:
    """From inside a notebook: run the saved file in a separate process and print the summary."""
    subprocess.run([sys.executable, "-m", "coursetools.handin", str(notebook)], check=False)


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    if not paths:
        print(__doc__)
        return 2
    missing = [p for p in paths if not p.is_file()]
    for p in missing:
        print(f"error: {p}: no such notebook (save it first; e.g. my-work/03_scaled_dot_product_attention.ipynb)",
              file=sys.stderr)
    if missing:
        return 2
    ok = all([report(p) for p in paths])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
