"""Grade a folder of submissions against the hidden tests in solutions/.

    python -m coursetools.grading submissions/ --out grades/ --jobs 2

``submissions/<student>/<NN_name>.ipynb`` (any number of students and chapters). Writes
``grades/gradebook.csv`` (one row per student x exercise, plus one per file not graded),
``grades/feedback/<student>.md`` and ``grades/manual/<chapter>/<exercise>.md`` (every learner's text
for each exercise graded by hand). The gradebook is written last, in one atomic step.

How a submission is graded:
1. The notebook to run is rebuilt from solutions/: every read-only cell (prose, code, checks) comes
   from there; only the learner's answer cells (matched by nbgrader ``grade_id``, else by cell id)
   and cells the learner added come from the submission. Edited, deleted, duplicated or forged test
   cells therefore change nothing. Read-only cells that no answer, added cell or check needs (by the
   names they define; coursetools.grading.flow) are left out, unless ``--all-cells``.
2. Each check cell becomes a probe function (coursetools.grading.probes): in its own scope it records
   the values of the learner's functions on the grader's inputs, as plain data, and judges nothing;
   expected values are never computed in the submission's process.
3. The notebook runs in its own process tree, sandboxed, one cell at a time, with CPU-time, wall-time,
   memory, file-size and process limits (coursetools.grading.sandbox). A run stopped by a time limit
   is run once more before the timeout is recorded.
4. The grader reads the records with coursetools.grading.safeio (no links, no FIFOs, size caps) and
   compares them with the reference values (the same probes run on the solutions notebook, held in
   the grader's memory) with utils.checks. An exercise earns its points only if every probe passes.
   Exercises graded by hand (an answer cell with nbgrader ``grade`` and ``solution``) get 0 automatic
   points and the status "needs manual grading"; their text goes to the feedback and to ``manual/``.
"""

from __future__ import annotations

import argparse
import ast
import csv
import difflib
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from coursetools import notebooks, release
from coursetools.grading import cgroups, flow, plaindata, probes, safeio, sandbox
from coursetools.handin import manual_answer
from utils import checks

FIELDS = ["student", "chapter", "exercise", "points", "max_points", "status", "reason"]
MAX_NOTEBOOK_BYTES = 50 << 20
MAX_CELL_CHARS = 1 << 20  # one cell's source; the cells together may hold four times as much
MAX_ARGUMENT_BYTES = 32 << 20  # one probe's arguments, sent from the reference run to each submission
MAX_REASON = 200
MAX_MANUAL_CHARS = 20_000
NEEDS_MANUAL = "needs manual grading"
COPY_SUFFIX = re.compile(r" \(\d+\)$")  # "03_x (1).ipynb", as browsers name a second download


class GradingRefused(RuntimeError):
    """The grader will not run with these settings (the message says why and what to do)."""


@dataclass
class Exercise:
    grade_id: str  # of the answer cell, e.g. ex03_1
    label: str  # 3.1
    points: float
    manual: bool = False
    cell_id: str | None = None  # of the manual answer cell


@dataclass
class Row:
    student: str
    chapter: str
    exercise: str
    points: float
    max_points: float
    status: str
    reason: str
    answer: str | None = field(default=None, repr=False)  # the learner's text, for manual exercises


def clean_text(text: object, limit: int = MAX_REASON) -> str:
    """One short line: control characters and newlines become spaces, runs of spaces one space."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(text))
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def markdown_escape(text: str) -> str:
    """Text that Markdown shows as it is: no headings, tables, links, emphasis or HTML."""
    return re.sub(r"([\\`*_{}\[\]()<>#+\-.!|~])", r"\\\1", text)


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+|~+", text)), default=0)
    return "`" * max(3, longest + 1)


def _label_key(label: str) -> tuple:
    return tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.]", label)) if label != "-" else (-1,)


# --------------------------------------------------------------------------------------------------
# What the grader knows about a chapter


class Chapter:
    """One chapter as the grader sees it, all from solutions/."""

    def __init__(self, path: Path) -> None:
        self.name = path.stem
        self.solution = notebooks.read(path)
        learner = release.release_notebook(self.solution)
        by_id = {c.get("id"): c for c in learner.cells if c.get("id")}
        # The learner's version of each solution cell, by cell id (the release may drop cells, such as
        # rubrics for instructors), else released on its own.
        self.learner_cells = [by_id.get(c.get("id")) or release.release_cell(c) for c in self.solution.cells]
        self.exercises: list[Exercise] = []
        self.answer_ids: set[str] = set()  # code answer cells
        self.checks: dict[int, probes.CheckCell] = {}  # solution cell index -> check
        self.names: dict[int, flow.Names] = {}  # read-only code cells: what they define and use
        self.probes: list[probes.Probe] = []
        for index, cell in enumerate(self.solution.cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            grade_id = meta.get("grade_id")
            if meta.get("solution") and meta.get("grade"):
                self.exercises.append(Exercise(grade_id, release.exercise_label(grade_id), float(meta["points"]),
                                               manual=True, cell_id=cell.get("id")))
                if cell.cell_type == "code":
                    self.answer_ids.add(grade_id)
            elif meta.get("solution") and cell.cell_type == "code":
                self.answer_ids.add(grade_id)
            elif meta.get("grade") and cell.cell_type == "code":
                answer = grade_id.removesuffix("_check")
                check = probes.transform(cell.source, answer, len(self.probes))
                self.checks[index] = check
                self.probes.extend(check.probes)
                self.exercises.append(Exercise(answer, release.exercise_label(answer), float(meta["points"])))
            elif cell.cell_type == "code":
                self.names[index] = flow.analyse(self.learner_cells[index].source)
        self.reference: dict[int, dict] = {}
        self.reference_kept: set[int] | None = None
        self.reference_memory: dict[int, int | None] = {}  # probe -> the solution's measured memory (bounded probes)
        # probe -> its arguments from the reference run (coursetools.grading.arguments), for the checks
        # whose setup reads nothing a learner's answer makes: their setup never runs in a submission.
        self.envs: dict[int, bytes] = {}
        self.learner_setup = self._setups_reading_answers()
        self.lock = threading.Lock()

    def _setups_reading_answers(self) -> set[int]:
        """Check cells whose setup reads, directly or through other cells, a name an answer cell defines:
        their inputs depend on the learner's answers, so their setup runs in the submission."""
        answer_defines: set[str] = set()
        others: list[flow.Names] = list(self.names.values())
        for cell in self.solution.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("solution"):
                answer_defines |= flow.analyse(cell.source).defines
        for check in self.checks.values():
            for statement in ast.parse(check.public_source).body if check.public_source else []:
                others.append(flow.analyse(ast.unparse(statement), ipython=False))  # each helper on its own
        tainted = set(answer_defines)
        changed = True
        while changed:
            changed = False
            for names in others:
                if (names.uses & tainted or flow.STAR in names.defines) and not names.defines <= tainted:
                    tainted |= names.defines
                    changed = True
        return {index for index, check in self.checks.items() if check.setup_uses & tainted}

    def data_checks(self) -> set[int]:
        """Check cells whose probes get their arguments from the reference run."""
        return {index for index, check in self.checks.items() if index not in self.learner_setup
                and all(p.index in self.envs for p in check.probes)}

    @property
    def manual(self) -> list[Exercise]:
        return [e for e in self.exercises if e.manual]

    def jobs(self, answers: dict[str, str], extras: dict[str | None, list[str]], reference: bool,
             prune: bool) -> list[sandbox.Job]:
        """The cells to run, in order: read-only ones from solutions/, answers and added cells as given."""
        roots: set[str] = set()
        for source in [*answers.values(), *(s for cells in extras.values() for s in cells)]:
            roots |= flow.analyse(source).uses
        for cell in self.solution.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if reference and cell.cell_type == "code" and meta.get("solution"):
                roots |= flow.analyse(cell.source).uses
        for check in self.checks.values():
            roots |= check.got_uses | check.public_uses | (check.expected_uses if reference else set())
        if not prune:
            kept = set(self.names)
        else:
            kept = flow.closure(self.names, roots)
            if not reference and self.reference_kept is not None:
                # The submission runs at least what the reference ran, so both see the same state.
                kept = flow.closure(self.names, roots, kept=self.reference_kept)
        data = self.data_checks()
        jobs = [sandbox.Job("cell", "a cell you added at the top", source=s) for s in extras.get(None, [])]
        for index, cell in enumerate(self.solution.cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            grade_id = meta.get("grade_id")
            if cell.cell_type == "code":
                if meta.get("solution"):
                    # An answer cell the learner deleted runs nothing (not the released stub, which would
                    # replace a function retyped in a new cell above it): as in the learner's notebook.
                    source = cell.source if reference else answers.get(grade_id)
                    if source is not None:
                        jobs.append(sandbox.Job("cell", f"your answer cell {release.exercise_label(grade_id)} "
                                                f"(cell {index + 1})", source=source))
                elif index in self.checks:
                    check = self.checks[index]
                    label = f"the check of exercise {release.exercise_label(check.exercise)} (cell {index + 1})"
                    indices = [p.index for p in check.probes]
                    if check.public_source:
                        jobs.append(sandbox.Job("cell", label, source=check.public_source))
                    from_reference = not reference and index in data
                    if not from_reference:  # the setup runs here and hands each probe its arguments
                        jobs.append(sandbox.Job("check", label, code=check.compiled("got"), form="got",
                                                probes=indices, seed=1000 + index, dump=reference))
                    for probe in check.probes:
                        i = probe.index
                        env = self.envs[i] if from_reference else None
                        if probe.max_memory is not None:  # its arguments first, then the measured call alone
                            jobs.append(sandbox.Job("probe", label, probes=[i], env=env, prepare=True))
                            env = None
                        jobs.append(sandbox.Job("probe", label, code=check.compiled_probe(i), probes=[i],
                                                params=check.probe_sources[i][1], env=env,
                                                memory=probe.max_memory is not None))
                    if reference:
                        jobs.append(sandbox.Job("check", label, code=check.compiled("expected"), form="expected",
                                                probes=indices, seed=1000 + index))
                elif index in kept:
                    jobs.append(sandbox.Job("cell", f"cell {index + 1}", source=self.learner_cells[index].source))
            for source in extras.get(cell.get("id"), []):
                jobs.append(sandbox.Job("cell", f"a cell you added after cell {index + 1}", source=source))
        if reference:
            self.reference_kept = kept
        return jobs


# --------------------------------------------------------------------------------------------------
# Reading a submission


def _strip_and_measure(data: dict, max_cell_chars: int) -> str:
    """Drop what grading never reads (outputs, attachments) and refuse a cell whose source is over the limit,
    before anything parses a cell's code; '' if the notebook may go on."""
    total = 0
    for cell in data.get("cells", []):
        if not isinstance(cell, dict):
            continue
        cell.pop("outputs", None)
        cell.pop("attachments", None)
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        source = cell.get("source", "")
        size = sum(len(s) for s in source if isinstance(s, str)) if isinstance(source, list) else \
            len(source) if isinstance(source, str) else 0
        total += size
        if size > max_cell_chars:
            return (f"a cell of {size / 2**20:.1f} million characters is over the limit of "
                    f"{max_cell_chars / 2**20:g} million for a cell (--max-cell-mb)")
    if total > 4 * max_cell_chars:
        return (f"the cells hold {total / 2**20:.1f} million characters, over the limit of "
                f"{4 * max_cell_chars / 2**20:g} million for a notebook's cells (4 x --max-cell-mb)")
    return ""


def read_submission(path: Path, max_bytes: int = MAX_NOTEBOOK_BYTES, max_cell_chars: int = MAX_CELL_CHARS
                    ) -> tuple[nbformat.NotebookNode | None, str]:
    """The notebook (nbformat 4, upgraded from 3 if need be), or None and the reason it cannot be graded.

    The file's size is checked before it is read, each cell's size before any of its code is parsed, and
    outputs are dropped unread (a submission's outputs play no part in grading)."""
    try:
        size = os.lstat(path).st_size
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    if size > max_bytes:
        return None, (f"the file is {size / 2**20:.1f} MB, over the {max_bytes / 2**20:g} MB limit for a "
                      "notebook (--max-notebook-mb)")
    try:
        raw = safeio.read_path(path, max_bytes)
        text = raw.decode("utf-8")
        data = json.loads(text)
    except safeio.Refused as exc:
        return None, f"cannot be read safely ({clean_text(exc, 80)})"
    except UnicodeDecodeError:
        return None, "not a valid notebook (not UTF-8 text)"
    except (ValueError, RecursionError, OSError) as exc:
        return None, f"not a valid notebook (not JSON: {type(exc).__name__})"
    if not isinstance(data, dict):
        return None, "not a valid notebook (no notebook object)"
    major = data.get("nbformat")
    if major == 3:
        try:
            converted = nbformat.reads(text, as_version=4)
        except Exception as exc:
            return None, f"not a valid notebook (nbformat 3 that cannot be converted: {type(exc).__name__})"
        problem = _strip_and_measure(converted, max_cell_chars)
        return (None, problem) if problem else (converted, "")
    if major != 4 or not isinstance(data.get("cells"), list):
        shown = major if type(major) is int else "unknown"
        return None, f"not a valid notebook (nbformat {shown}; version 4 or 3 is needed)"
    problem = _strip_and_measure(data, max_cell_chars)
    if problem:
        return None, problem
    try:
        return nbformat.from_dict(data), ""
    except Exception as exc:  # malformed structure
        return None, f"not a valid notebook ({type(exc).__name__})"


def _cell_text(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _grade_id(cell: dict) -> str | None:
    """A submitted cell's nbgrader grade id (None if it has none, or its metadata is malformed)."""
    metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
    meta = metadata.get("nbgrader") if isinstance(metadata.get("nbgrader"), dict) else {}
    return meta.get("grade_id") if isinstance(meta.get("grade_id"), str) else None


def _kept(released: str, submitted: str) -> bool:
    """Whether ``submitted`` keeps most of a released cell's text (an edit of it, not a cell of its own)."""
    return difflib.SequenceMatcher(None, released, submitted).ratio() >= 0.5


def _course_cells_by_position(chapter: Chapter, cells: list) -> dict[int, str]:
    """For a submission without the course's cell ids: submission cell index -> the released cell's id it is.

    The two cell lists are aligned in order (difflib), so a match never jumps backwards: a cell with a course
    grade id is the released cell with that grade id; a cell whose type and text are a released cell's, at its
    place, is that cell; a cell that sits where a released cell sits and keeps most of its text is that cell,
    edited (a read-only cell the learner edited is dropped, as in version 4, instead of running as an added
    cell); an answer cell whose metadata was stripped, where the answer sits, is the answer; a cell whose text
    is exactly a released cell's left unmatched is that cell, moved. Any other cell (a copy of a cell elsewhere,
    a new cell, a read-only cell rewritten by more than half) is the learner's own and runs. Cells the learner
    never gets (rubrics) are left out of the alignment.
    """
    released: list[tuple[str, tuple, str, str]] = []  # (solution id, key, cell type, text)
    for solution_cell, learner_cell in zip(chapter.solution.cells, chapter.learner_cells):
        if not solution_cell.get("id") or learner_cell is None or release.is_rubric(solution_cell):
            continue  # a rubric cell is never in the learner's notebook: aligning against it shifts the rest
        graded = solution_cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        kind, text = learner_cell.get("cell_type"), learner_cell.source.strip()
        released.append((solution_cell["id"], ("graded", graded) if isinstance(graded, str) else (kind, text),
                         kind, text))
    graded_ids = {key[1] for _, key, _, _ in released if key[0] == "graded"}
    submitted: list[tuple[int, tuple, str, str]] = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            continue
        grade_id = _grade_id(cell)
        kind, text = cell.get("cell_type"), _cell_text(cell).strip()
        submitted.append((index, ("graded", grade_id) if grade_id in graded_ids else (kind, text), kind, text))
    course_ids: dict[int, str] = {}
    matcher = difflib.SequenceMatcher(None, [r[1] for r in released], [s[1] for s in submitted], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            course_ids.update((submitted[j1 + k][0], released[i1 + k][0]) for k in range(i2 - i1))
        elif tag == "replace":
            # Pair each cell with the next released cell of its type that is an answer (its metadata stripped)
            # or whose text it mostly keeps (an edit, not a new cell). A cell of the learner's own in place of a
            # deleted one is theirs (it runs); so is a read-only cell rewritten by more than half (without ids
            # the two cannot be told apart, and running the learner's code is the safer error).
            old, new = released[i1:i2], submitted[j1:j2]
            start = 0
            for n in new:
                for k in range(start, len(old)):
                    if old[k][2] == n[2] and (old[k][1][0] == "graded" or _kept(old[k][3], n[3])):
                        course_ids[n[0]] = old[k][0]
                        start = k + 1
                        break
    # A cell moved elsewhere (its text exactly a released cell's left unmatched) is that cell, as in version 4.
    used = set(course_ids.values())
    unmatched: dict[tuple, str] = {}
    for cell_id, key, _, _ in released:
        if cell_id not in used and key[0] != "graded":
            unmatched.setdefault(key, cell_id)
    for index, key, _, _ in submitted:
        if index not in course_ids and key in unmatched:
            course_ids[index] = unmatched.pop(key)
    # A second cell with an answer's grade id (a split or copied answer cell) is that answer cell too.
    by_grade_id = {key[1]: cell_id for cell_id, key, _, _ in reversed(released) if key[0] == "graded"}
    for index, key, _, _ in submitted:
        if key[0] == "graded" and index not in course_ids:
            course_ids[index] = by_grade_id[key[1]]
    return course_ids


def split_submission(chapter: Chapter, submission: nbformat.NotebookNode) -> tuple[dict, dict, dict]:
    """The learner's code answers (by grade_id, else cell id), added cells (anchored after a known cell)
    and texts of exercises graded by hand (grade id -> text)."""
    known_ids = {c.get("id") for c in chapter.solution.cells if c.get("id")}
    by_cell_id = {
        c.get("id"): c.metadata["nbgrader"]["grade_id"]
        for c in chapter.solution.cells
        if c.get("id") and c.get("metadata", {}).get("nbgrader", {}).get("solution")
    }
    manual_ids = {e.grade_id for e in chapter.manual}
    check_ids = {f"{e.grade_id}_check" for e in chapter.exercises}
    # A notebook saved in nbformat < 4.5 has no cell ids (reading it as version 4 makes up new ones), nor has a
    # notebook whose cells were pasted into a new one: then each cell is matched to the released cell it is by
    # its place and text (_course_cells_by_position), so added and edited cells are treated as in version 4.
    course_ids: dict[int, str] = {}
    if not any(isinstance(c, dict) and c.get("id") in known_ids for c in submission.cells):
        course_ids = _course_cells_by_position(chapter, submission.cells)
    answers: dict[str, str] = {}
    texts: dict[str, str] = {}
    extras: dict[str | None, list[str]] = {}
    anchor = None
    for position, cell in enumerate(submission.cells):
        if not isinstance(cell, dict):
            continue
        grade_id = _grade_id(cell)
        cell_id = cell.get("id") if isinstance(cell.get("id"), str) else None
        source = _cell_text(cell)
        if position in course_ids:
            cell_id = course_ids[position]
        if grade_id not in chapter.answer_ids | manual_ids and cell_id in by_cell_id:
            grade_id = by_cell_id[cell_id]  # metadata stripped, cell id kept
        # An answer in several cells with the same grade id (JupyterLab's "split cell" copies the metadata,
        # and so does a copy of the cell) counts as all of them, run in their order, as in the notebook.
        if grade_id in manual_ids:
            texts[grade_id] = f"{texts[grade_id]}\n\n{source}" if grade_id in texts else source
            if cell.get("cell_type") == "code":
                answers[grade_id] = f"{answers[grade_id]}\n\n{source}" if grade_id in answers else source
        elif cell.get("cell_type") != "code":
            pass
        elif grade_id in chapter.answer_ids:
            answers[grade_id] = f"{answers[grade_id]}\n\n{source}" if grade_id in answers else source
        elif cell_id in known_ids:
            pass  # a read-only cell: the solutions/ version is used
        elif grade_id not in check_ids:
            extras.setdefault(anchor, []).append(source)  # a cell the learner added
        if cell_id in known_ids:
            anchor = cell_id
    return answers, extras, texts


# --------------------------------------------------------------------------------------------------
# Judging


def _verdict(probe: probes.Probe, got: dict, expected: dict) -> checks.Verdict:
    """Judge one probe in the grader's process. Never raises."""
    name = clean_text(probe.kwargs.get("name", "your result"), 80)
    if expected.get("status") != "value":
        return checks.Verdict(False, "internal: the reference value is missing (tell your instructor)")
    status = got.get("status")
    if status == "not attempted":
        return checks.Verdict(False, "not attempted")
    if status == "raised":
        return checks.Verdict(False, f"{name}: your code raised {got.get('detail') or 'an exception'}")
    if status == "invalid":
        return checks.Verdict(False, f"{name}: your result's record is unusable ({got.get('detail', '')})")
    if status != "value":
        return checks.Verdict(False, f"{name}: no result (the notebook stopped before this check)")
    value = got["value"]
    if isinstance(value, plaindata.Unsupported):
        return checks.Verdict(False, f"{name}: returned {value!r}, which is not a plain value")
    kwargs = dict(probe.kwargs)
    try:
        if probe.kind == "close":
            if "device" in got and got["device"] != expected.get("device"):
                return checks.Verdict(False, f"{name}: expected a tensor on {expected.get('device')}, "
                                             f"got {got['device']}")
            kwargs["check_device"] = False
            return checks.close(value, expected["value"], **kwargs)
        if probe.kind == "number":
            return checks.number(value, expected["value"], **kwargs)
        return checks.choice(value, expected["value"], probe.options or [], **kwargs)
    except Exception as exc:  # a value that breaks the comparison fails this probe only
        return checks.Verdict(False, f"{name}: your result could not be compared ({type(exc).__name__})")


# What a failed probe's row may say: chosen by the grader from this fixed vocabulary, never text, names or
# numbers the submission produced (an exception's class name, a value, a shape, a device, a type name).
# (prefix of the comparison's message after "name: ", what the row says); the first match counts.
CATEGORIES = (
    ("expected a tensor, got None", "no result returned (got None: a missing `return`?)"),
    ("expected a number, got None", "no result returned (got None: a missing `return`?)"),
    ("expected a tensor, got a function", "wrong type (a function, not a tensor: call it)"),
    ("expected a torch.Tensor", "wrong type (expected a tensor)"),
    ("expected a tensor", "wrong type (expected a tensor)"),
    ("expected shape", "wrong shape"),
    ("expected dtype", "wrong dtype"),
    ("expected a tensor on", "wrong device"),
    ("contains NaN", "contains NaN"),
    ("expected NaN", "wrong values (a number where NaN is expected)"),
    ("expected a single number", "wrong type (expected a single number)"),
    ("expected a number", "wrong type (expected a number)"),
    ("could not be read as a number", "wrong type (expected a number)"),
    ("got NaN", "got NaN"),
    ("expected one of", "not one of the options"),
    ("your result could not be compared", "your result could not be compared"),
    ("could not be compared", "your result could not be compared"),
)


def _reason(probe: probes.Probe, got: dict, verdict: checks.Verdict) -> str:
    """The row's reason for a failed probe, from the fixed vocabulary above (hidden probes name no input)."""
    name = clean_text(probe.kwargs.get("name", "your result"), 80)
    status = got.get("status")
    value = got.get("value")
    if verdict.message.startswith("internal:"):
        what = "internal: the reference value is missing (tell your instructor)"
    elif status == "raised":
        what = f"your code raised {got.get('detail') or 'an exception'}"
    elif status == "invalid":
        what = "your result's record is unusable"
    elif status != "value":
        what = "no result (the notebook stopped before this check)"
    elif isinstance(value, plaindata.Unsupported):
        what = "returned an object that is not a plain value (a tensor, a number or a string)"
    else:
        rest = verdict.message.removeprefix(f"{name}: ")
        what = next((text for prefix, text in CATEGORIES if rest.startswith(prefix)), None)
        if what is None:
            if probe.kind == "choice":
                what = "not the right option"
            elif probe.kind == "number":
                what = "wrong value"
            else:
                what = "wrong values"
    return f"a hidden test failed ({what})" if probe.hidden else f"{name}: {what}"


MEMORY_OVER = "used more memory than allowed: the grader measures the memory your notebook's processes use in the call"
MEMORY_UNMEASURED = "its memory could not be measured: another process started or ended during the call"


def _memory_verdict(probe: probes.Probe, run: sandbox.RunResult) -> checks.Verdict:
    """A probe with a memory bound: the memory the run used during its job (its peak's growth, or the pages it
    used, gave back or wrote out, whichever is larger), measured by the grader
    (coursetools.grading.sandbox.MemoryPeak), against the bound. The reason comes from the two texts above."""
    if probe.max_memory is None:
        return checks.PASS
    used = run.memory.get(probe.index)
    if used is None:
        return checks.Verdict(False, MEMORY_UNMEASURED)
    if used > probe.max_memory:
        return checks.Verdict(False, MEMORY_OVER)
    return checks.PASS


def _stopped_reason(run: sandbox.RunResult, retried: bool) -> str:
    again = " (the same in a second run)" if retried and run.timed_out else ""
    return f"no result{again}: {run.status}: {run.detail}"


def judge(chapter: Chapter, student: str, records: int | str, run: sandbox.RunResult, retried: bool,
          check_jobs: dict[str, int], texts: dict[str, str]) -> list[Row]:
    """Rows for one submission. ``records``: a descriptor of the records folder, or why there is none;
    ``check_jobs``: exercise grade id -> index of its check job in the run."""
    rows = []
    for exercise in chapter.exercises:
        if exercise.manual:
            rows.append(_manual_row(chapter, student, exercise, texts.get(exercise.grade_id)))
            continue
        failure, status = "", "failed"
        for probe in (p for p in chapter.probes if p.exercise == exercise.grade_id):
            if isinstance(records, str):
                failure = f"no result: {records}"
                break
            got = plaindata.load(records, f"probe_{probe.index}")
            verdict = _verdict(probe, got, chapter.reference.get(probe.index, {}))
            if verdict.ok:
                memory = _memory_verdict(probe, run)
                if memory.ok:
                    continue
                name = clean_text(probe.kwargs.get("name", "your result"), 80)
                failure = f"a hidden test failed ({memory.message})" if probe.hidden else f"{name}: {memory.message}"
                break
            if got.get("status") == "not attempted":
                status, failure = "not attempted", "the answer cell still raises NotImplementedError"
            elif got.get("status") == "missing":
                job = check_jobs.get(exercise.grade_id)
                if run.status != "finished" and (run.stopped_at is None or job is None or job >= run.stopped_at):
                    failure = _stopped_reason(run, retried)
                else:
                    failure = "no result: the check did not run"
            else:
                failure = _reason(probe, got, verdict)
            break
        if not failure:
            rows.append(Row(student, chapter.name, exercise.label, exercise.points, exercise.points, "passed", ""))
        else:
            rows.append(Row(student, chapter.name, exercise.label, 0.0, exercise.points, status, clean_text(failure)))
    return rows


def _manual_row(chapter: Chapter, student: str, exercise: Exercise, text: str | None) -> Row:
    released = next(c for c in chapter.learner_cells
                    if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == exercise.grade_id).source
    answer = manual_answer(text or "", released)
    if answer is None:
        return Row(student, chapter.name, exercise.label, 0.0, exercise.points, "not attempted",
                   "no answer written (this exercise is graded by hand)")
    words = len(answer.split())
    return Row(student, chapter.name, exercise.label, 0.0, exercise.points, NEEDS_MANUAL,
               f"answered ({words} words); graded by hand", answer=answer[:MAX_MANUAL_CHARS])


# --------------------------------------------------------------------------------------------------
# The grader


class Grader:
    def __init__(self, solutions_dir: Path, limits: sandbox.Limits, mode: str, prune: bool = True,
                 max_notebook_bytes: int = MAX_NOTEBOOK_BYTES, names: set[str] | None = None,
                 max_cell_chars: int = MAX_CELL_CHARS) -> None:
        paths = sorted(solutions_dir.glob("[0-9][0-9]_*.ipynb"))
        self.chapter_names = {p.stem: p for p in paths}
        self.chapters: dict[str, Chapter] = {}
        self.broken: dict[str, str] = {}  # chapter -> why it cannot be graded (an error in solutions/)
        for path in paths:
            if names is None or path.stem in names:
                try:
                    self.chapters[path.stem] = Chapter(path)
                except Exception as exc:  # an authoring error: that chapter cannot be graded, others can
                    self.broken[path.stem] = f"solutions/{path.name} cannot be graded: {type(exc).__name__}: {exc}"
        self.limits, self.mode, self.prune = limits, mode, prune
        self.max_notebook_bytes = max_notebook_bytes
        self.max_cell_chars = max_cell_chars
        self.cpu_seconds = 0.0  # CPU time of every run so far (all processes in the sandboxes)
        self.runs = 0
        self._count = threading.Lock()
        self.scratch = Path(tempfile.mkdtemp(prefix="course-grading-"))
        os.chmod(self.scratch, 0o711)  # runs reach their own folder; nobody can list the others
        self.library = sandbox.stage_library(self.scratch)
        self.reference_limits = sandbox.Limits(
            cell_cpu_seconds=max(600.0, limits.cell_cpu_seconds), notebook_cpu_seconds=max(1800.0, limits.notebook_cpu_seconds),
            wall_factor=limits.wall_factor, memory_bytes=max(limits.memory_bytes, 6 << 30),
            file_bytes=limits.file_bytes, scratch_bytes=limits.scratch_bytes, processes=limits.processes,
            cpus=limits.cpus)

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _run(self, jobs: list[sandbox.Job], limits: sandbox.Limits, forms: tuple[str, ...], read):
        """Run once, and once more if a time limit stopped it; then ``read(run, retried, records, tail)``.

        ``records`` maps each form to an open descriptor of its records folder (or a string saying why
        there is none); ``tail`` is the end of the run's output. Everything is deleted afterwards.
        """
        retried = False
        for attempt in range(2):
            workdir = Path(tempfile.mkdtemp(prefix="run-", dir=self.scratch))
            output = workdir.with_name(workdir.name + ".out")
            dir_fd = safeio.open_dir(workdir)  # opened before the run: the submission cannot swap it
            records: dict[str, int | str] = {}
            try:
                run = sandbox.run_jobs(jobs, workdir, self.library, limits, mode=self.mode, output=output)
                with self._count:
                    self.cpu_seconds += run.cpu_seconds
                    self.runs += 1
                if run.timed_out and attempt == 0:
                    retried = True
                    continue
                for form in forms:
                    try:
                        records[form] = safeio.open_subdir(dir_fd, f"records/{form}")
                    except (safeio.Refused, FileNotFoundError) as exc:
                        records[form] = f"the folder of your results was replaced or removed ({clean_text(exc, 100)})"
                return read(run, retried, records, _tail(output))
            finally:
                for fd in [dir_fd, *(v for v in records.values() if isinstance(v, int))]:
                    os.close(fd)
                shutil.rmtree(workdir, ignore_errors=True)
                output.unlink(missing_ok=True)
        raise AssertionError("unreachable")

    def prepare(self, name: str) -> None:
        """Run the solutions notebook's probes once, to get every expected value (kept in memory)."""
        chapter = self.chapters[name]
        with chapter.lock:
            if chapter.reference:
                return
            jobs = chapter.jobs({}, {}, reference=True, prune=self.prune)

            def read(run, retried, records, tail):
                expected_fd, got_fd, env_fd = records["expected"], records["got"], records["env"]
                if isinstance(expected_fd, str) or isinstance(got_fd, str) or isinstance(env_fd, str):
                    raise RuntimeError(f"solutions/{name}: the reference run left no records ({run.status}: "
                                       f"{run.detail}); the end of its output:\n{tail}")
                envs = {}
                for probe in chapter.probes:
                    try:
                        envs[probe.index] = safeio.read_bytes(env_fd, f"probe_{probe.index}.bin", MAX_ARGUMENT_BYTES)
                    except (FileNotFoundError, safeio.Refused):
                        pass  # not encodable (or too large): that check's setup runs in each submission
                reference = {}
                for probe in chapter.probes:
                    expected = plaindata.load(expected_fd, f"probe_{probe.index}")
                    got = plaindata.load(got_fd, f"probe_{probe.index}")
                    reference[probe.index] = expected
                    verdict = _verdict(probe, got, expected)
                    if verdict.ok and not _memory_verdict(probe, run).ok:
                        used = run.memory.get(probe.index)
                        verdict = checks.Verdict(False, f"its memory bound of {probe.max_memory / 2**20:g} MiB ("
                                                 + ("not measurable" if used is None else f"{used / 2**20:.1f} MiB used")
                                                 + ")")
                    if not verdict.ok:
                        raise RuntimeError(
                            f"solutions/{name}: the solution fails its own probe {probe.index} of exercise "
                            f"{release.exercise_label(probe.exercise)}: {verdict.message} (run: {run.status} "
                            f"{run.detail}; cells that raised: {run.errors}); the end of its output:\n{tail}")
                chapter.reference_memory = dict(run.memory)
                return reference, envs

            chapter.reference, chapter.envs = self._run(jobs, self.reference_limits, ("expected", "got", "env"), read)

    def grade_one(self, student: str, path: Path, chapter: Chapter) -> list[Row]:
        submission, problem = read_submission(path, self.max_notebook_bytes, self.max_cell_chars)
        if submission is None:
            return [Row(student, chapter.name, e.label, 0.0, e.points, "failed", clean_text(problem))
                    for e in chapter.exercises]
        answers, extras, texts = split_submission(chapter, submission)
        jobs = chapter.jobs(answers, extras, reference=False, prune=self.prune)
        check_jobs = {}
        for index, job in enumerate(jobs):
            if job.kind in ("check", "probe"):
                exercise = next(p.exercise for p in chapter.probes if p.index == job.probes[0])
                check_jobs[exercise] = index  # the last job of the exercise's check

        def read(run, retried, records, tail):
            return judge(chapter, student, records["got"], run, retried, check_jobs, texts)

        return self._run(jobs, self.limits, ("got",), read)


def _tail(path: Path, size: int = 4000) -> str:
    """The end of a run's output (a file the grader opened for it, outside the submission's folder)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - size))
            return handle.read(size).decode(errors="replace")
    except OSError:
        return ""


# --------------------------------------------------------------------------------------------------
# Finding the submissions


@dataclass
class Found:
    student: str
    chapter: str
    path: Path | None  # the file to grade; None when the chapter is ambiguous
    note: str = ""  # for an ambiguous chapter: the reason


def _candidate_chapter(relative: Path, chapters: dict[str, Path]) -> tuple[str | None, bool]:
    """(chapter, is a notebook) for a file name like 03_x.ipynb, 03_x (1).IPYNB or 03_x.py."""
    stem, suffix = os.path.splitext(relative.name)
    stem = COPY_SUFFIX.sub("", stem)
    lowered = {name.lower(): name for name in chapters}
    chapter = lowered.get(stem.lower())
    return chapter, suffix.lower() == ".ipynb"


def discover(submissions: Path, chapters: dict[str, Path], progress=print) -> tuple[list[Found], list[Row]]:
    """Every student's notebook per chapter, and one "ignored" row for every other file.

    The rules (README): ``<student>/<chapter>.ipynb`` is graded. Otherwise a single file whose name is
    the chapter's up to letter case, a browser's copy suffix " (1)" or a subfolder is graded. Several
    such files and no exact name: the chapter gets 0 with a reason naming them. Any other file, a file
    in a hidden folder (such as .ipynb_checkpoints), a hidden file and a link each get one row with
    status "ignored" (0 of 0 points) saying why.
    """
    found: list[Found] = []
    ignored: list[Row] = []
    entries = sorted(submissions.iterdir())
    groups: dict[str, list[str]] = {}
    for entry in entries:
        if not entry.name.startswith(".") and entry.is_dir() and not entry.is_symlink():
            groups.setdefault(_name_key(student_name(entry.name)), []).append(student_name(entry.name))
    for names in groups.values():
        if len(names) > 1:
            shown = ", ".join(clean_text(n, 60) for n in names)
            progress(f"WARNING: student folders {shown} differ only in letter case or Unicode normalisation: each is "
                     "graded under its own name, and their feedback files get distinct names")
            for name in names:
                ignored.append(Row(name, "-", "-", 0.0, 0.0, "note", clean_text(
                    f"another student folder has the same name up to letter case or Unicode normalisation "
                    f"({shown}); both are graded, each under its own name")))
    for entry in entries:
        if entry.name.startswith("."):
            continue  # not a student (.DS_Store, .git): skipped
        if entry.is_symlink() or not entry.is_dir():
            progress(f"WARNING: {entry.name} is not a student folder (submissions/<student>/<chapter>.ipynb): skipped")
            continue
        student = student_name(entry.name)
        candidates: dict[str, list[Path]] = {}
        for folder, dirs, files in os.walk(entry, followlinks=False):
            dirs.sort()
            relative_folder = Path(folder).relative_to(entry)
            for name in sorted(files) + sorted(d for d in dirs if os.path.islink(os.path.join(folder, d))):
                relative = relative_folder / name
                full = Path(folder) / name
                shown = clean_text(relative.as_posix(), 100)
                chapter, is_notebook = _candidate_chapter(relative, chapters)
                hidden = any(part.startswith(".") for part in relative.parts)
                if hidden:
                    reason = f"{shown}: a hidden file or folder is not graded"
                elif full.is_symlink():
                    reason = f"{shown}: a link is not graded"
                elif chapter and is_notebook:
                    candidates.setdefault(chapter, []).append(relative)
                    continue
                elif chapter:
                    reason = f"{shown}: not a notebook; only {chapter}.ipynb is graded"
                else:
                    reason = f"{shown}: not a notebook of this course"
                ignored.append(Row(student, chapter or "-", "-", 0.0, 0.0, "ignored", reason))
        for chapter, paths in sorted(candidates.items()):
            exact = Path(f"{chapter}.ipynb")
            chosen = exact if exact in paths else (paths[0] if len(paths) == 1 else None)
            if chosen is None:
                names = ", ".join(clean_text(p.as_posix(), 60) for p in paths)
                found.append(Found(student, chapter, None, clean_text(
                    f"several files could be this chapter's notebook ({names}); hand in one named {chapter}.ipynb",
                    MAX_REASON)))
                continue
            found.append(Found(student, chapter, entry / chosen))
            for other in paths:
                if other != chosen:
                    ignored.append(Row(student, chapter, "-", 0.0, 0.0, "ignored", clean_text(
                        f"{other.as_posix()}: not graded, {chosen.as_posix()} is graded for this chapter")))
    return found, ignored


def student_name(raw: str) -> str:
    """A student folder's name as the gradebook shows it: bytes that are not UTF-8 and characters that are not
    printable written as escapes (``\\xff``), so that every name can be written and no two names merge."""
    text = os.fsencode(raw).decode("utf-8", "backslashreplace")
    return "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in text)


def _name_key(name: str) -> str:
    """Names that look the same to a person (or to a case-insensitive file system) share this key."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFC", name)).casefold()


SIMPLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def file_stems(students: set[str]) -> dict[str, str]:
    """student -> the stem of their feedback file: the name itself when it is short, plain ASCII and unique
    up to letter case; otherwise a readable part of it and a digest of the whole name (stable across runs,
    at most 60 characters, so any file system takes it)."""
    keys: dict[str, int] = {}
    for student in students:
        keys[_name_key(student)] = keys.get(_name_key(student), 0) + 1
    stems = {}
    for student in sorted(students):
        if SIMPLE_NAME.fullmatch(student) and keys[_name_key(student)] == 1:
            stems[student] = student
            continue
        ascii_part = unicodedata.normalize("NFKD", student).encode("ascii", "ignore").decode()
        readable = re.sub(r"[^A-Za-z0-9._-]+", "_", ascii_part).strip("._-")[:40] or "student"
        digest = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        stems[student] = f"{readable}-{digest}"
    return stems


# --------------------------------------------------------------------------------------------------
# Writing the results


def _sorted(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.student, r.chapter, _label_key(r.exercise), r.status, r.reason))


def _feedback(student: str, rows: list[Row]) -> str:
    manual = [r for r in rows if r.status == NEEDS_MANUAL]
    got = sum(r.points for r in rows)
    total = sum(r.max_points for r in rows)
    lines = [f"# Feedback for {markdown_escape(student)}", "",
             f"Total: {got:g} / {total:g} points"
             + (f" ({sum(r.max_points for r in manual):g} of them graded by hand, not yet included)" if manual else ""),
             ""]
    for chapter in sorted({r.chapter for r in rows}):
        mine = _sorted([r for r in rows if r.chapter == chapter])
        lines += [f"## {markdown_escape(chapter)}", "", "| exercise | points | result |", "|---|---|---|"]
        for r in mine:
            result = r.status + (f": {r.reason}" if r.reason else "")
            lines.append(f"| {markdown_escape(r.exercise)} | {r.points:g} / {r.max_points:g} | "
                         f"{markdown_escape(result)} |")
        lines.append("")
        for r in mine:
            if r.answer is not None:
                fence = _fence(r.answer)
                lines += [f"### Your answer to exercise {markdown_escape(r.exercise)} (graded by hand)", "",
                          f"{fence}text", r.answer, fence, ""]
    return "\n".join(lines)


def _manual_files(rows: list[Row]) -> dict[str, str]:
    """manual/<chapter>/<exercise>.md: every learner's text for one exercise graded by hand."""
    files: dict[str, list[str]] = {}
    for r in _sorted([r for r in rows if r.status in (NEEDS_MANUAL,) or (r.reason.startswith("no answer written"))]):
        key = f"{r.chapter}/{r.exercise}.md"
        lines = files.setdefault(key, [f"# {markdown_escape(r.chapter)}, exercise {markdown_escape(r.exercise)} "
                                       f"({r.max_points:g} points, graded by hand)", ""])
        lines += [f"## {markdown_escape(r.student)}", ""]
        if r.answer is None:
            lines += ["(no answer written)", ""]
        else:
            fence = _fence(r.answer)
            lines += [f"{fence}text", r.answer, fence, ""]
    return {k: "\n".join(v) for k, v in files.items()}


def _new_folder(out: Path, name: str) -> Path:
    new = out / f".{name}-new-{os.getpid()}"
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir()
    return new


def _swap_in(out: Path, name: str, new: Path) -> None:
    old = out / name
    if old.exists() or old.is_symlink():
        trash = out / f".{name}-old-{os.getpid()}"
        shutil.rmtree(trash, ignore_errors=True)
        os.replace(old, trash)
        os.replace(new, old)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(new, old)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _gradebook(rows: list[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in _sorted(rows):
        writer.writerow({f: getattr(row, f) for f in FIELDS})
    return buffer.getvalue()


def write_results(rows: list[Row], out: Path, write=lambda path, text: path.write_text(text, encoding="utf-8")
                  ) -> list[Row]:
    """Feedback and manual answers made in new folders first; a file that cannot be written becomes an
    "error" row of its student. Then the gradebook, atomically, then the new folders swapped in whole.
    Nothing of the new folders is left behind if anything fails. Returns the rows as written."""
    out.mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    students = sorted({r.student for r in rows})
    stems = file_stems(set(students))
    folders = {}
    try:
        folders["feedback"] = _new_folder(out, "feedback")
        for student in students:
            try:
                write(folders["feedback"] / f"{stems[student]}.md", _feedback(student, [r for r in rows if r.student == student]))
            except (OSError, UnicodeError) as exc:
                rows.append(Row(student, "-", "-", 0.0, 0.0, "error", clean_text(
                    f"your feedback file could not be written ({getattr(exc, 'strerror', None) or type(exc).__name__}); "
                    "tell your instructor")))
        folders["manual"] = _new_folder(out, "manual")
        for relative, text in _manual_files(rows).items():
            target = folders["manual"] / relative
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                write(target, text)
            except (OSError, UnicodeError):
                continue  # every answer is also in its student's feedback
        _write_atomically(out / "gradebook.csv", _gradebook(rows))
        for name, folder in folders.items():
            _swap_in(out, name, folder)
    finally:
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)
    return rows


# --------------------------------------------------------------------------------------------------
# The command


def _labels_from_metadata(path: Path) -> list[tuple[str, float]]:
    """(label, points) of a chapter's exercises from nbgrader metadata alone (for a chapter that cannot be
    graded), or one row "-" if even that cannot be read."""
    try:
        found = []
        for cell in notebooks.read(path).cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade"):
                found.append((release.exercise_label(meta["grade_id"]), float(meta.get("points", 0))))
        return sorted(found, key=lambda x: _label_key(x[0])) or [("-", 0.0)]
    except Exception:
        return [("-", 0.0)]


def resolve_mode(sandbox_mode: str, allow_root: bool, progress=print) -> str:
    """"bwrap" or "none", or raise GradingRefused with what to do."""
    usable, why = sandbox.bubblewrap_status()
    as_root = os.geteuid() == 0
    if sandbox_mode in ("auto", "bwrap"):
        if usable:
            return "bwrap"
        raise GradingRefused(f"{why}. Install Debian's `bubblewrap` package (apt-get install bubblewrap), or "
                             f"pass --no-sandbox to grade without isolation: then {sandbox.WEAKER_WITHOUT_SANDBOX}.")
    if sandbox_mode != "none":
        raise ValueError(f"sandbox_mode must be 'auto', 'bwrap' or 'none', got {sandbox_mode!r}")
    cause = "switched off with --no-sandbox" + ("" if usable else f"; besides, {why}")
    if as_root and not allow_root:
        raise GradingRefused(
            f"refusing to grade as root without the sandbox ({cause}). Without it {sandbox.WEAKER_WITHOUT_SANDBOX}. "
            "Use the sandbox (drop --no-sandbox), run as an ordinary user, or add --allow-root to go on: "
            "submissions then run under a reserved unprivileged user id.")
    if as_root:
        failure = sandbox.python_fails_as_another_user()
        if failure is not None:
            raise GradingRefused(
                f"submissions would run as a reserved unprivileged user, and {failure}. Grade from a Python "
                "environment other users can reach (a folder on its way may be closed to them: chmod o+x it), "
                "or use the sandbox.")
    who = ("as a reserved unprivileged user id per run, so they cannot write files only root may write, and "
           "every process of that id is killed after the run" if as_root else
           "as your own user, so they can also change or delete any file you can; every process they start in "
           "their process group or with the run's marker is killed after the run, but a process that leaves both "
           "can survive")
    progress(f"WARNING: the sandbox is {cause}: {sandbox.WEAKER_WITHOUT_SANDBOX}. Submissions run {who}.")
    return "none"


def _protect_grader() -> None:
    """Make the kernel's out-of-memory killer spare the grader (runs ask to be taken first; see sandbox)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("-800")
    except OSError:
        pass  # not root: the runs' +1000 still puts them first


def grade(submissions: Path, out: Path, jobs: int = 1, limits: sandbox.Limits | None = None,
          solutions_dir: Path = notebooks.SOLUTIONS, sandbox_mode: str = "auto", allow_root: bool = False,
          prune: bool = True, max_notebook_bytes: int = MAX_NOTEBOOK_BYTES, progress=print,
          max_cell_chars: int = MAX_CELL_CHARS) -> list[Row]:
    limits = limits or sandbox.Limits()
    mode = resolve_mode(sandbox_mode, allow_root, progress)
    _protect_grader()
    progress(f"limits: {cgroups.available()[1]}")
    chapter_paths = {p.stem: p for p in sorted(solutions_dir.glob("[0-9][0-9]_*.ipynb"))}
    found, ignored = discover(submissions, chapter_paths, progress)
    grader = Grader(solutions_dir, limits, mode, prune, max_notebook_bytes, names={f.chapter for f in found},
                    max_cell_chars=max_cell_chars)
    rows: list[Row] = list(ignored)
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            names = sorted({f.chapter for f in found if f.path is not None} - set(grader.broken))
            for name in names:
                progress(f"reference run: {name}")
            for name, future in [(name, pool.submit(grader.prepare, name)) for name in names]:
                try:
                    future.result()
                except Exception as exc:  # the solution fails its own checks: nobody is judged by them
                    grader.broken[name] = f"{type(exc).__name__}: {exc}"
            for name, message in sorted(grader.broken.items()):
                progress(f"ERROR: chapter {name} is not graded: {message}")
            for name in names:
                chapter = grader.chapters[name]
                local = sorted(release.exercise_label(chapter.checks[i].exercise) for i in chapter.checks
                               if name not in grader.broken and i not in chapter.data_checks())
                if local:
                    progress(f"note: {name}: the checks of exercises {', '.join(local)} run their setup in each "
                             "submission (it reads an answer's names, or makes arguments that are not plain data)")
            start = time.monotonic()
            futures = {}
            for item in found:
                if item.chapter in grader.broken:
                    reason = clean_text(f"grader error: the chapter cannot be graded "
                                        f"({grader.broken[item.chapter].splitlines()[0]}); tell your instructor")
                    labels = _labels_from_metadata(chapter_paths[item.chapter])
                    rows.extend(Row(item.student, item.chapter, label, 0.0, pts, "error", reason)
                                for label, pts in labels)
                    continue
                chapter = grader.chapters[item.chapter]
                if item.path is None:
                    rows.extend(Row(item.student, chapter.name, e.label, 0.0, e.points, "failed", item.note)
                                for e in chapter.exercises)
                    continue
                futures[pool.submit(grader.grade_one, item.student, item.path, chapter)] = item
            for done, future in enumerate(as_completed(futures), 1):
                item = futures[future]
                chapter = grader.chapters[item.chapter]
                try:
                    result = future.result()
                except Exception as exc:  # the grader must survive any submission
                    result = [Row(item.student, chapter.name, e.label, 0.0, e.points, "error",
                                  clean_text(f"grader error: {type(exc).__name__}: {exc}")) for e in chapter.exercises]
                rows.extend(result)
                score = sum(r.points for r in result)
                total = sum(r.max_points for r in result)
                progress(f"[{done}/{len(futures)}] {item.student} {item.path.name}: {score:g}/{total:g} "
                         f"({time.monotonic() - start:.0f} s)")
        progress(f"graded {len(futures)} notebooks in {time.monotonic() - start:.0f} s after the reference runs; "
                 f"{grader.runs} runs used {grader.cpu_seconds:.0f} s of CPU time in all")
    finally:
        grader.close()
    return write_results(rows, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.grading", description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="folder of <student>/<NN_name>.ipynb")
    parser.add_argument("--out", type=Path, default=Path("grades"), help="where gradebook.csv and feedback/ go")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel")
    parser.add_argument("--cell-timeout", type=float, default=60.0,
                        help="CPU seconds per cell (default 60); the wall-clock limit is --wall-factor times it")
    parser.add_argument("--notebook-timeout", type=float, default=300.0,
                        help="CPU seconds per notebook (default 300); wall clock: --wall-factor times it")
    parser.add_argument("--wall-factor", type=float, default=4.0, help="wall-clock limit / CPU limit (default 4)")
    parser.add_argument("--memory-gb", type=float, default=6.0,
                        help="memory of all of a submission's processes together (default 6)")
    parser.add_argument("--scratch-mb", type=float, default=1024.0,
                        help="files a submission may write, in its folder and in each of /tmp and /dev/shm (default 1024)")
    parser.add_argument("--max-notebook-mb", type=float, default=50.0, help="larger files get 0 (default 50)")
    parser.add_argument("--max-cell-mb", type=float, default=1.0,
                        help="million characters in one cell; a notebook with a larger cell gets 0 (default 1)")
    parser.add_argument("--all-cells", action="store_true",
                        help="run every cell of the chapter, not only those the exercises need")
    parser.add_argument("--no-sandbox", action="store_true", help="run submissions without bubblewrap (weaker)")
    parser.add_argument("--allow-root", action="store_true", help="with --no-sandbox: grade even as root")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    limits = sandbox.Limits(cell_cpu_seconds=args.cell_timeout, notebook_cpu_seconds=args.notebook_timeout,
                            wall_factor=args.wall_factor, memory_bytes=int(args.memory_gb * (1 << 30)),
                            scratch_bytes=int(args.scratch_mb * (1 << 20)))
    try:
        rows = grade(args.submissions, args.out, max(1, args.jobs), limits,
                     sandbox_mode="none" if args.no_sandbox else "auto", allow_root=args.allow_root,
                     prune=not args.all_cells, max_notebook_bytes=int(args.max_notebook_mb * (1 << 20)),
                     max_cell_chars=int(args.max_cell_mb * (1 << 20)))
    except GradingRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'gradebook.csv'} ({len(rows)} rows), {args.out / 'feedback'}/ and {args.out / 'manual'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
