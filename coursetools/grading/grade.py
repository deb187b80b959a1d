"""Grade a folder of submissions against the hidden tests in solutions/.

    python -m coursetools.grading submissions/ --out grades/ --jobs 2

``submissions/<student>/<NN_name>.ipynb`` (any number of students and chapters). Writes
``grades/gradebook.csv`` (one row per student x exercise) and ``grades/feedback/<student>.md``.

How a submission is graded:
1. The notebook to run is rebuilt from solutions/: every read-only cell (prose, code, checks) comes
   from there; only the learner's answer cells (matched by nbgrader ``grade_id``, else by cell id)
   and cells the learner added come from the submission. Edited, deleted, duplicated or forged test
   cells therefore change nothing.
2. Each check cell becomes a probe cell (coursetools.grading.probes): it records the values of the
   learner's functions on the grader's inputs, as plain data, and judges nothing.
3. The notebook runs in its own process, in a scratch folder, with time, CPU, memory, file-size and
   process limits, inside bubblewrap when available (coursetools.grading.sandbox).
4. The grader compares the recorded values with the reference values (the same probes run on the
   solutions notebook) in its own process, with utils.checks. An exercise earns its points only if
   every one of its probes passes.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import nbformat

from coursetools import notebooks, release
from coursetools.grading import plaindata, probes, sandbox
from utils import checks

FIELDS = ["student", "chapter", "exercise", "points", "max_points", "status", "reason"]


@dataclass
class Exercise:
    grade_id: str  # of the answer cell, e.g. ex03_1
    label: str  # 3.1
    points: float


@dataclass
class Row:
    student: str
    chapter: str
    exercise: str
    points: float
    max_points: float
    status: str
    reason: str


class Chapter:
    """What the grader knows about one chapter, all from solutions/."""

    def __init__(self, path: Path) -> None:
        self.name = path.stem
        self.solution = notebooks.read(path)
        self.learner = release.release_notebook(self.solution)
        self.exercises: list[Exercise] = []
        self.answer_ids: set[str] = set()
        for cell in self.solution.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("solution"):
                self.answer_ids.add(meta["grade_id"])
            if meta.get("grade"):
                answer = meta["grade_id"].removesuffix("_check")
                self.exercises.append(Exercise(answer, release.exercise_label(answer), float(meta["points"])))
        self.reference: dict[int, dict] = {}
        self.probes: list[probes.Probe] = []

    def cells_to_run(self, answers: dict[str, str], extras: dict[str | None, list[str]],
                     reference: bool) -> tuple[list[str], list[probes.Probe]]:
        """Code cells in order: read-only ones from solutions/, answers and extra cells as given."""
        cells: list[str] = list(extras.get(None, []))
        found: list[probes.Probe] = []
        for sol_cell, learner_cell in zip(self.solution.cells, self.learner.cells):
            meta = sol_cell.get("metadata", {}).get("nbgrader", {})
            grade_id = meta.get("grade_id")
            if sol_cell.cell_type == "code":
                if meta.get("solution"):
                    cells.append(sol_cell.source if reference else answers.get(grade_id, learner_cell.source))
                elif meta.get("grade"):
                    source, cell_probes = probes.transform(
                        sol_cell.source, grade_id.removesuffix("_check"), len(found), reference
                    )
                    cells.append(source)
                    found.extend(cell_probes)
                else:
                    cells.append(learner_cell.source)
            cells.extend(extras.get(sol_cell.get("id"), []))
        return cells, found


def _split_submission(chapter: Chapter, submission: nbformat.NotebookNode) -> tuple[dict, dict]:
    """The learner's answer cells (by grade_id, else cell id) and added cells (anchored after a known cell)."""
    known_ids = {c.get("id") for c in chapter.solution.cells}
    answer_cell_ids = {
        c.get("id"): c.metadata["nbgrader"]["grade_id"]
        for c in chapter.solution.cells
        if c.get("metadata", {}).get("nbgrader", {}).get("solution")
    }
    answers: dict[str, str] = {}
    extras: dict[str | None, list[str]] = {}
    anchor = None
    for cell in submission.cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            if isinstance(cell, dict) and cell.get("id") in known_ids:
                anchor = cell.get("id")
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell.get("metadata"), dict) else {}
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        if grade_id in chapter.answer_ids:
            answers[grade_id] = source  # a duplicated answer cell: the last one counts
        elif cell.get("id") in answer_cell_ids:
            answers[answer_cell_ids[cell["id"]]] = source  # metadata stripped, cell id kept
        elif cell.get("id") in known_ids:
            pass  # a read-only cell: the solutions/ version is used
        elif grade_id is None or grade_id not in {f"{g}_check" for g in chapter.answer_ids}:
            extras.setdefault(anchor, []).append(source)  # a cell the learner added
        if cell.get("id") in known_ids:
            anchor = cell.get("id")
    return answers, extras


def _read_submission(path: Path) -> tuple[nbformat.NotebookNode | None, str]:
    try:
        if path.stat().st_size > 50 << 20:
            return None, "the file is larger than 50 MB"
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"not a valid notebook (not JSON: {type(exc).__name__})"
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None, "not a valid notebook (no list of cells)"
    try:
        return nbformat.from_dict(data), ""
    except Exception as exc:  # malformed structure
        return None, f"not a valid notebook ({type(exc).__name__})"


def _verdict(probe: probes.Probe, got: dict, expected: dict) -> checks.Verdict:
    """Judge one probe in the grader's process."""
    name = probe.kwargs.get("name", "your result")
    if expected.get("status") != "value":
        return checks.Verdict(False, "internal: the reference value is missing (tell your instructor)")
    status = got.get("status")
    if status == "not attempted":
        return checks.Verdict(False, "not attempted")
    if status == "raised":
        return checks.Verdict(False, f"{name}: your code raised {got.get('detail') or 'an exception'}")
    if status != "value":
        return checks.Verdict(False, f"{name}: no result (the notebook stopped before this check)")
    kwargs = dict(probe.kwargs)
    value = got["value"]
    if isinstance(value, plaindata.Unsupported):
        return checks.Verdict(False, f"{name}: returned {value!r}, which is not a plain value")
    if probe.kind == "close":
        if "device" in got and got["device"] != expected.get("device"):
            return checks.Verdict(False, f"{name}: expected a tensor on {expected.get('device')}, got {got['device']}")
        kwargs["check_device"] = False
        return checks.close(value, expected["value"], **kwargs)
    if probe.kind == "number":
        return checks.number(value, expected["value"], **kwargs)
    return checks.choice(value, expected["value"], probe.options or [], **kwargs)


def _hidden_message(verdict: checks.Verdict) -> str:
    """For hidden probes: say what kind of problem, not the hidden inputs or expected values."""
    message = verdict.message
    if "your code raised" in message:  # the exception's type is the learner's own, not a secret
        return "a hidden test failed (your code raised " + message.split("your code raised", 1)[1].strip() + ")"
    for category in ("not attempted", "raised", "no result", "shape", "dtype", "NaN", "device",
                     "not a plain value", "expected a", "internal"):
        if category in message:
            return f"a hidden test failed ({category if category != 'expected a' else 'wrong type'})"
    return "a hidden test failed (wrong values)"


def _judge(chapter: Chapter, student: str, records: Path, run: sandbox.RunResult) -> list[Row]:
    rows = []
    for exercise in chapter.exercises:
        mine = [p for p in chapter.probes if p.exercise == exercise.grade_id]
        failure = ""
        for probe in mine:
            got = plaindata.load(records, f"probe_{probe.index}")
            verdict = _verdict(probe, got, chapter.reference.get(probe.index, {}))
            if not verdict.ok:
                failure = _hidden_message(verdict) if probe.hidden else verdict.message
                if got.get("status") in ("missing", "invalid") and run.status != "finished":
                    failure = f"no result: {run.status} ({run.detail})"
                break
        if not failure:
            rows.append(Row(student, chapter.name, exercise.label, exercise.points, exercise.points, "passed", ""))
        else:
            status = "not attempted" if failure == "not attempted" else "failed"
            if status == "not attempted":
                failure = "the answer cell still raises NotImplementedError"
            rows.append(Row(student, chapter.name, exercise.label, 0.0, exercise.points, status, failure[:300]))
    return rows


class Grader:
    def __init__(self, solutions_dir: Path, limits: sandbox.Limits, use_sandbox: bool, hidden: list[Path],
                 jobs: int = 1) -> None:
        self.chapters = {p.stem: Chapter(p) for p in sorted(solutions_dir.glob("[0-9][0-9]_*.ipynb"))}
        self.limits, self.use_sandbox, self.hidden = limits, use_sandbox, hidden
        self.scratch = Path(tempfile.mkdtemp(prefix="course-grading-"))
        os.chmod(self.scratch, 0o755)
        self._slot_lock = threading.Lock()
        self._free_slots = list(range(1, jobs + 1))  # slot 0 runs the references

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def prepare(self, name: str) -> None:
        """Run the solutions notebook's probes once, to get every expected value."""
        chapter = self.chapters[name]
        if chapter.reference:
            return
        cells, chapter.probes = chapter.cells_to_run({}, {}, reference=True)
        work = self.scratch / f"reference-{name}"
        reference_limits = sandbox.Limits(cell_seconds=600, notebook_seconds=1800, cpu_seconds=3600)
        run = sandbox.run_cells(cells, work, reference_limits, slot=0, sandbox=self.use_sandbox)
        for probe in chapter.probes:
            expected = plaindata.load(work / "expected", f"probe_{probe.index}")
            got = plaindata.load(work / "got", f"probe_{probe.index}")
            chapter.reference[probe.index] = expected
            if not _verdict(probe, got, expected).ok:
                raise RuntimeError(f"solutions/{name}: the solution fails its own probe {probe.index} ({run.detail})")

    def grade_one(self, student: str, path: Path) -> list[Row]:
        name = path.stem
        if name not in self.chapters:
            return [Row(student, name, "-", 0.0, 0.0, "ignored", "not a chapter of this course")]
        chapter = self.chapters[name]
        submission, problem = _read_submission(path)
        if submission is None:
            return [Row(student, name, e.label, 0.0, e.points, "failed", problem) for e in chapter.exercises]
        answers, extras = _split_submission(chapter, submission)
        cells, _ = chapter.cells_to_run(answers, extras, reference=False)
        with self._slot_lock:
            slot = self._free_slots.pop()
        work = self.scratch / f"{student}-{name}-{slot}"
        try:
            run = sandbox.run_cells(cells, work, self.limits, slot=slot, hidden=self.hidden,
                                    sandbox=self.use_sandbox)
            return _judge(chapter, student, work / "got", run)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            with self._slot_lock:
                self._free_slots.append(slot)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_results(rows: list[Row], out: Path) -> None:
    """The gradebook replaced as a whole; feedback files written to a new folder, then swapped in."""
    out.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in sorted(rows, key=lambda r: (r.student, r.chapter, r.exercise)):
        writer.writerow({f: getattr(row, f) for f in FIELDS})
    new_feedback = out / f".feedback-new-{os.getpid()}"
    shutil.rmtree(new_feedback, ignore_errors=True)
    new_feedback.mkdir()
    for student in sorted({r.student for r in rows}):
        mine = [r for r in rows if r.student == student]
        got, total = sum(r.points for r in mine), sum(r.max_points for r in mine)
        lines = [f"# Feedback for {student}", "", f"Total: {got:g} / {total:g} points", ""]
        for chapter in sorted({r.chapter for r in mine}):
            lines += [f"## {chapter}", "", "| exercise | points | result |", "|---|---|---|"]
            for r in sorted((r for r in mine if r.chapter == chapter), key=lambda r: r.exercise):
                result = r.status + (f": {r.reason}" if r.reason else "")
                lines.append(f"| {r.exercise} | {r.points:g} / {r.max_points:g} | {result.replace('|', '/')} |")
            lines.append("")
        (new_feedback / f"{student}.md").write_text("\n".join(lines), encoding="utf-8")
    old = out / "feedback"
    if old.exists():
        trash = out / f".feedback-old-{os.getpid()}"
        os.replace(old, trash)
        os.replace(new_feedback, old)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(new_feedback, old)
    _write_atomically(out / "gradebook.csv", buffer.getvalue())


def discover(submissions: Path) -> list[tuple[str, Path]]:
    found = []
    for student_dir in sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for path in sorted(student_dir.iterdir()):
            if path.is_file() and not path.name.startswith("."):
                found.append((student_dir.name, path))
    return found


def grade(submissions: Path, out: Path, jobs: int = 1, limits: sandbox.Limits | None = None,
          solutions_dir: Path = notebooks.SOLUTIONS, use_sandbox: bool | None = None,
          progress=print) -> list[Row]:
    limits = limits or sandbox.Limits()
    if use_sandbox is None:
        use_sandbox = sandbox.bubblewrap_available()
    if not use_sandbox:
        progress("WARNING: bubblewrap (bwrap) is not available: submissions run without the sandbox, so "
                 "they can read files such as solutions/ and reach the network. Install Debian's "
                 "`bubblewrap` package for full isolation.")
    hidden = [solutions_dir.resolve(), submissions.resolve(), out.resolve()]
    work = discover(submissions)
    grader = Grader(solutions_dir, limits, use_sandbox, hidden, jobs)
    rows: list[Row] = []
    try:
        for name in sorted({p.stem for _, p in work} & set(grader.chapters)):
            progress(f"reference run: {name}")
            grader.prepare(name)
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(grader.grade_one, s, p): (s, p) for s, p in work}
            for done, future in enumerate(as_completed(futures), 1):
                student, path = futures[future]
                try:
                    result = future.result()
                except Exception as exc:  # the grader must survive any submission
                    result = [Row(student, path.stem, "-", 0.0, 0.0, "error", f"grader error: {exc}"[:300])]
                rows.extend(result)
                score = sum(r.points for r in result)
                total = sum(r.max_points for r in result)
                progress(f"[{done}/{len(work)}] {student} {path.name}: {score:g}/{total:g} "
                         f"({time.monotonic() - start:.0f} s)")
    finally:
        grader.close()
    write_results(rows, out)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.grading", description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="folder of <student>/<NN_name>.ipynb")
    parser.add_argument("--out", type=Path, default=Path("grades"), help="where gradebook.csv and feedback/ go")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel")
    parser.add_argument("--cell-timeout", type=float, default=60.0, help="seconds per cell")
    parser.add_argument("--notebook-timeout", type=float, default=300.0, help="seconds per notebook")
    parser.add_argument("--memory-gb", type=float, default=6.0, help="address-space limit per submission")
    parser.add_argument("--no-sandbox", action="store_true", help="do not use bubblewrap even if available")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    limits = sandbox.Limits(cell_seconds=args.cell_timeout, notebook_seconds=args.notebook_timeout,
                            cpu_seconds=int(args.notebook_timeout) + 10,
                            memory_bytes=int(args.memory_gb * (1 << 30)))
    rows = grade(args.submissions, args.out, max(1, args.jobs), limits,
                 use_sandbox=False if args.no_sandbox else None)
    print(f"wrote {args.out / 'gradebook.csv'} ({len(rows)} rows) and {args.out / 'feedback'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
