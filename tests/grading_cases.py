"""Submissions for tests/test_grading.py, generated from whatever solutions/ holds at test time.

Nothing here hard-codes a chapter's exercises or points: they come from the nbgrader metadata. A
learner's notebook is the release of the solutions notebook (what `chapters/` holds); a *right*
answer is the solution's answer cell without the markers; a *blank* one is the released stub; a
*wrong* one is the solution followed by a few lines that make every function, class or value the
cell defines return something else (a tensor shifted and scaled, a number plus one, an unknown
letter). Exercises graded by hand get the model answer, another text, or nothing.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from course_paths import ROOT

from coursetools import notebooks, release
from coursetools.grading import flow

SOLUTIONS_DIR = ROOT / "solutions"
STATES = ("right", "wrong", "blank")


def chapter_path(prefix: str, solutions_dir: Path = SOLUTIONS_DIR) -> Path:
    found = sorted(solutions_dir.glob(f"{prefix}_*.ipynb"))
    assert found, f"no solutions/{prefix}_*.ipynb"
    return found[0]


def strip_markers(source: str) -> str:
    return "\n".join(ln for ln in source.split("\n")
                     if ln.strip() not in (release.BEGIN_SOLUTION, release.END_SOLUTION))


WRONG_SUFFIX = '''

def __wrong(value):
    import torch
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool:
            return ~value
        if value.is_floating_point() or value.is_complex():
            return value * 1.5 + 0.5
        return value + 1
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 1.5 + 1
    if isinstance(value, str):
        return value + "?"
    if isinstance(value, (tuple, list)):
        return type(value)(__wrong(v) for v in value)
    return None


def __wrap(function):
    def wrong(*args, **kwargs):
        return __wrong(function(*args, **kwargs))
    return wrong


for __name in {names!r}:
    __value = globals()[__name]
    if isinstance(__value, type):
        if hasattr(__value, "forward"):
            __value.forward = __wrap(__value.forward)
        else:
            globals()[__name] = None
    elif callable(__value):
        globals()[__name] = __wrap(__value)
    else:
        globals()[__name] = __wrong(__value)
'''


@dataclass
class Exercise:
    grade_id: str
    label: str
    points: float
    manual: bool
    answer_cell: int  # index in the solutions notebook
    cell_id: str  # of the answer cell (the same in the learner's notebook)
    check_cell: int | None  # None for exercises graded by hand
    right: str  # the answer cell's source (or the model text)
    blank: str  # the released stub
    defines: frozenset[str] = frozenset()  # names the answer cell defines (imports excluded)
    depends_on: set[str] = field(default_factory=set)  # grade ids whose answers this one needs

    @property
    def wrong(self) -> str:
        if self.manual:
            return "I think the softmax makes the model slower, but I am not sure why."
        return self.right + WRONG_SUFFIX.format(names=sorted(self.defines))

    @property
    def blank_status(self) -> str:
        return "not attempted" if "NotImplementedError" in self.blank else "failed"

    def source(self, state: str) -> str:
        return {"right": self.right, "wrong": self.wrong, "blank": self.blank}[state]


class Course:
    """One chapter's exercises, read from solutions/ metadata."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.stem
        self.solution = notebooks.read(path)
        self.learner = release.release_notebook(self.solution)
        learner_by_id = {c.get("id"): c for c in self.learner.cells}
        self.exercises: list[Exercise] = []
        checks: dict[str, int] = {}
        for index, cell in enumerate(self.solution.cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade") and not meta.get("solution"):
                checks[meta["grade_id"].removesuffix("_check")] = index
        for index, cell in enumerate(self.solution.cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if not meta.get("solution"):
                continue
            grade_id = meta["grade_id"]
            manual = bool(meta.get("grade"))
            points = float(meta["points"]) if manual else float(
                self.solution.cells[checks[grade_id]].metadata.nbgrader.points)
            names = flow.analyse(strip_markers(cell.source)) if cell.cell_type == "code" else flow.Names()
            imported = {name for name, _ in names.imports}
            self.exercises.append(Exercise(
                grade_id, release.exercise_label(grade_id), points, manual, index, cell.id, checks.get(grade_id),
                strip_markers(cell.source).strip() if manual else strip_markers(cell.source),
                learner_by_id[cell.id].source, frozenset(names.defines - imported)))
        self._dependencies()

    def _dependencies(self) -> None:
        """B depends on A when B's answer or check reads a name A's answer defines, directly or through
        read-only cells."""
        provides: dict[str, set[str]] = {}  # name -> grade ids it comes from
        for index, cell in enumerate(self.solution.cells):
            if cell.cell_type != "code":
                continue
            meta = cell.get("metadata", {}).get("nbgrader", {})
            names = flow.analyse(strip_markers(cell.source))
            used = set().union(*(provides.get(n, set()) for n in names.uses)) if names.uses else set()
            mine = next((e for e in self.exercises if e.answer_cell == index), None)
            owner = next((e for e in self.exercises if e.check_cell == index), None)
            if mine is not None:
                mine.depends_on |= used
                for name in names.defines:
                    provides[name] = {mine.grade_id} | used
            elif owner is not None:
                owner.depends_on |= used - {owner.grade_id}
            elif not meta:
                for name in names.defines:
                    provides[name] = set(used)

    @property
    def automatic(self) -> list[Exercise]:
        return [e for e in self.exercises if not e.manual]

    @property
    def total(self) -> float:
        return sum(e.points for e in self.automatic)

    def exercise(self, grade_id: str) -> Exercise:
        return next(e for e in self.exercises if e.grade_id == grade_id)

    def notebook(self, states: dict[str, str] | None = None, sources: dict[str, str] | None = None,
                 default: str = "blank") -> nbformat.NotebookNode:
        """The learner's notebook with each answer cell in the given state (or with the given source)."""
        nb = copy.deepcopy(self.learner)
        cells = {c.get("id"): c for c in nb.cells}
        for e in self.exercises:
            state = (states or {}).get(e.grade_id, default)
            cells[e.cell_id].source = (sources or {}).get(e.grade_id, e.source(state))
        return nb

    def index_in_learner(self, grade_id: str) -> int:
        """Position of an answer or check cell (by grade id) in the learner's notebook."""
        return next(i for i, c in enumerate(self.learner.cells)
                    if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)

    def expected(self, states: dict[str, str]) -> dict[str, tuple[float, set[str]]]:
        """label -> (points, allowed statuses) for a submission with these answer states."""
        out = {}
        for e in self.exercises:
            state = states.get(e.grade_id, "blank")
            if e.manual:
                out[e.label] = (0.0, {"not attempted"} if state == "blank" else {"needs manual grading"})
                continue
            deps_right = all(states.get(d, "blank") == "right" for d in e.depends_on)
            if state == "right" and deps_right:
                out[e.label] = (e.points, {"passed"})
            elif not deps_right:
                out[e.label] = (0.0, {"failed", "not attempted"})
            else:
                out[e.label] = (0.0, {"failed"} if state == "wrong" else {e.blank_status})
        return out

    def class_patterns(self, students: int, seed: int) -> list[dict[str, str]]:
        """Answer states for a class: all right, all wrong, all blank, then mixtures that give every
        exercise every state; a right answer whose dependencies are not right becomes wrong (its
        outcome would otherwise depend on how the other answer is wrong)."""
        rng = random.Random(seed)
        patterns = [{e.grade_id: s for e in self.exercises} for s in STATES][:students]
        k = 0
        while len(patterns) < students:
            pattern = {e.grade_id: STATES[(k + i + rng.randrange(2)) % 3] for i, e in enumerate(self.exercises)}
            for e in self.exercises:
                if pattern[e.grade_id] == "right" and any(pattern.get(d) != "right" for d in e.depends_on):
                    pattern[e.grade_id] = "wrong"
            patterns.append(pattern)
            k += 1
        return patterns


def first_function(source: str) -> str | None:
    """The name of the only top-level function an answer cell defines, if it defines exactly one."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    return functions[0] if len(functions) == 1 else None


def add_cell(nb: nbformat.NotebookNode, source: str, position: int | None = None, **metadata) -> nbformat.NotebookNode:
    """A code cell the learner added (at ``position``, default: the end)."""
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata.update(metadata)
    nb.cells.insert(len(nb.cells) if position is None else position, cell)
    return nb


def write(folder: Path, student: str, content, name: str) -> Path:
    target = folder / student / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(nbformat.writes(content))
    return target
