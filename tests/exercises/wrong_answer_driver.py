"""Runs a solutions notebook once, then tries learners' typical wrong answers on its exercises.

For every wrong answer it checks that (1) the hidden tests reject it (they raise AssertionError), and
(2) unless the wrong answer is marked ``PASSES_VISIBLE`` or ``RECORDS``, the visible self-check says "not yet"
and, when ``visible`` is a text, that its message names the mistake with that text; a wrong answer marked
``RECORDS`` (a valid but wrong prediction: an option, or a number) must get exactly the message the right
answer gets. After each wrong answer the
notebook's own answer is restored and must pass both checks again. This is what makes a visible check a
teacher (it names the mistake) and the hidden tests strictly stronger (they catch everything it catches,
and more).

A chapter's file ``tests/exercises/test_wrong_NN.py``::

    from wrong_answer_driver import PASSES_VISIBLE, Wrong, check_wrong_answers

    WRONG = {
        "ex03_1": [
            Wrong("softmax over the wrong axis", '''
    def masked_softmax(scores, mask):
        ...
    ''', visible="rows do not sum to 1"),
            Wrong("missing 1/sqrt(d_k)", "...", visible=PASSES_VISIBLE),
        ],
    }

    def test_wrong_answers_are_caught():
        check_wrong_answers("03", WRONG)
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
PASSES_VISIBLE = "<the visible check may pass this one; only the hidden tests must catch it>"
# A prediction: the visible check only records a valid option or number. For such a wrong answer the
# visible check must print exactly what it prints for the right answer (so trying each option reveals
# nothing), and the hidden tests must still reject it.
RECORDS = "<the visible check records it and says exactly what it says for the right answer>"


@dataclass(frozen=True)
class Wrong:
    """A wrong answer a learner would write: what the mistake is, the answer cell's code, and what the
    visible check must say (a fragment of its message), ``None`` for "fails, whatever it says", or
    ``PASSES_VISIBLE``."""

    mistake: str
    source: str
    visible: str | None = None


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _text(outputs) -> str:
    parts = []
    for out in outputs:
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
    return "".join(parts)


def _errored(outputs) -> str | None:
    for out in outputs:
        if out.get("output_type") == "error":
            return out.get("ename", "")
    return None


def check_wrong_answers(chapter: str, wrong: dict[str, list[Wrong]]) -> None:
    """Run ``solutions/<chapter>_*.ipynb`` and check every wrong answer as described above."""
    (path,) = sorted((ROOT / "solutions").glob(f"{chapter}_*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    cells = {_grade_id(c): c for c in nb.cells if _grade_id(c)}
    for exercise, answers in wrong.items():
        assert exercise in cells, f"{path.name}: no answer cell with grade_id {exercise!r}"
        assert f"{exercise}_check" in cells, f"{path.name}: no check cell {exercise}_check"
        assert len(answers) >= 3, f"{exercise}: give at least three wrong answers, got {len(answers)}"
    env = dict(os.environ, COURSE_DEVICE=os.environ.get("COURSE_DEVICE", ""))
    client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    problems: list[str] = []
    with client.setup_kernel(env=env):
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                client.execute_cell(cell, index)
                if _errored(cell.outputs) and "raises-exception" not in cell.metadata.get("tags", []):
                    raise AssertionError(f"{path.name}: cell {index} raised {_text(cell.outputs)[:300]}")

        def run(source: str):
            scratch = nbformat.v4.new_code_cell(textwrap.dedent(source))
            nb.cells.append(scratch)  # nbclient stores the executed cell back at its index
            try:
                client.execute_cell(scratch, len(nb.cells) - 1)
            finally:
                nb.cells.pop()
            return scratch.outputs

        for exercise, answers in wrong.items():
            answer_source = cells[exercise].source
            check_source = cells[f"{exercise}_check"].source
            assert BEGIN_HIDDEN in check_source, f"{exercise}_check has no hidden tests"
            visible, _, rest = check_source.partition(BEGIN_HIDDEN)
            hidden = rest.partition(END_HIDDEN)[0]
            right_said = _text(run(visible))  # the notebook's own answer is in place here
            for w in answers:
                where = f"{exercise} / {w.mistake}"
                outputs = run(w.source)
                if _errored(outputs):
                    problems.append(f"{where}: the wrong answer itself does not run: {_text(outputs)[:200]}")
                    continue
                said = _text(run(visible))
                if w.visible == RECORDS:
                    if "not yet" in said or said != right_said:
                        problems.append(f"{where}: the visible check should record it as it records the right answer "
                                        f"({right_said.strip()!r}); it printed {said.strip()!r}")
                elif w.visible != PASSES_VISIBLE:
                    if "not yet" not in said:
                        problems.append(f"{where}: the visible check did not reject it; it printed {said.strip()!r}")
                    elif w.visible is not None and w.visible.lower() not in said.lower():
                        problems.append(f"{where}: the visible check should say {w.visible!r}; it printed {said.strip()!r}")
                hidden_outputs = run(hidden)
                if _errored(hidden_outputs) != "AssertionError":
                    problems.append(f"{where}: the hidden tests did not reject it ({_text(hidden_outputs)[:200]!r})")
            run(answer_source)
            said = _text(run(visible))
            if "not yet" in said or "not attempted" in said:
                problems.append(f"{exercise}: after restoring the solution the visible check says {said.strip()!r}")
            if _errored(run(hidden)):
                problems.append(f"{exercise}: after restoring the solution the hidden tests fail")
    assert not problems, f"{path.name}:\n" + "\n".join(problems)
