"""Before handing in: run a notebook on a fresh kernel and say which exercises pass their self-checks.

    python -m coursetools.handin chapters/03_scaled_dot_product_attention.ipynb

or, from a cell of the notebook itself (save it first):

    from coursetools.handin import check_before_handing_in
    check_before_handing_in("03_scaled_dot_product_attention.ipynb")

The notebook is run on a copy, so nothing in it changes. Hidden tests are not included: passing
the self-checks is necessary, not sufficient, for full marks.
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

LINE = re.compile(r"^Exercise (\d+\.\d+): (passed|not attempted yet|not yet\. .*)$", re.M)


def summarise(path: Path, timeout: int = 300) -> tuple[dict[str, str], list[str]]:
    """Run a copy of the notebook; return ({exercise: result line}, [problems])."""
    nb = nbformat.read(str(path), as_version=4)
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": tmp}})
        try:
            client.execute()
        except (CellTimeoutError, DeadKernelError) as exc:
            problems.append(f"the notebook did not finish: {type(exc).__name__}")
    results: dict[str, str] = {}
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(f"cell {index + 1} raised {output.get('ename')}: {output.get('evalue', '')[:120]}")
            for match in LINE.finditer(output.get("text", "")):
                results[match.group(1)] = match.group(2)
    return results, problems


def report(path: Path) -> bool:
    results, problems = summarise(path)
    print(f"{path.name}: {sum(r == 'passed' for r in results.values())} of {len(results)} exercises pass "
          "their self-checks")
    for exercise, result in sorted(results.items(), key=lambda kv: [int(x) for x in kv[0].split(".")]):
        print(f"  Exercise {exercise}: {result}")
    for problem in problems:
        print(f"  problem: {problem}")
    return bool(results) and all(r == "passed" for r in results.values()) and not problems


def check_before_handing_in(notebook: str | Path) -> None:
    """From inside a notebook: run the saved file in a separate process and print the summary."""
    subprocess.run([sys.executable, "-m", "coursetools.handin", str(notebook)], check=False)


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    if not paths:
        print(__doc__)
        return 2
    ok = all([report(p) for p in paths])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
