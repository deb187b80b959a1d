"""How long grading a class takes: a generated class of N per chapter, graded at --jobs 1 and --jobs 2.

    python -m benchmarks.grading_throughput --chapters 02 09 --students 30 --jobs 1 2
    python -m benchmarks.grading_throughput ... --record   # writes benchmarks/results/grading_throughput.json

The class is generated from solutions/ as the grader's own tests make it (tests/grading_cases.py:
right, wrong and blank answers mixed per exercise). Each measurement runs the instructor's command,
`python -m coursetools.grading SUBS --out OUT --jobs J`, in a subprocess and records: the wall time
of the whole command; the part after the reference run (the grader prints it); the CPU time of every
run's process tree as the grader reports it (sampled with psutil, the reference runs included; the
rusage of the command, also kept, undercounts: processes killed inside the sandbox are never waited
for by the command); the load average before and after (the 1-minute figure), and the number of
CPU cores. On a machine shared with other work, wall times are
upper bounds for a quiet one; the CPU time per notebook is the figure that load changes least.
Without --record the result goes to benchmarks/out/grading_throughput.json (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
AFTER_REFERENCE = re.compile(r"graded (\d+) notebooks in (\d+) s after the reference runs; (\d+) runs used (\d+) s")


def make_class(chapter: str, students: int, folder: Path, seed: int = 29) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    import nbformat
    from grading_cases import Course, chapter_path

    course = Course(chapter_path(chapter))
    for k, states in enumerate(course.class_patterns(students, seed=seed)):
        target = folder / f"student{k:02d}" / f"{course.name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(course.notebook(states), target)


def measure_one(subs: Path, out: Path, jobs: int, extra: list[str]) -> dict:
    load_before = os.getloadavg()
    command = [sys.executable, "-m", "coursetools.grading", str(subs), "--out", str(out), "--jobs", str(jobs), *extra]
    start = time.monotonic()
    log = out.with_suffix(".log")
    with open(log, "w") as handle:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    text = log.read_text()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{text[-3000:]}")
    found = AFTER_REFERENCE.search(text)
    graded, after_reference = (int(found.group(1)), float(found.group(2))) if found else (None, None)
    return {"jobs": jobs, "wall_s": round(wall, 1), "after_reference_s": after_reference, "notebooks": graded,
            "waited_cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "grader_reported_cpu_s": float(found.group(4)) if found else None,
            "load_before": round(load_before[0], 2), "load_after": round(os.getloadavg()[0], 2)}


def _graded_at_jobs_2(data: dict):
    """Per chapter graded at --jobs 2: (chapter, its rows, rows by --jobs, the --jobs 2 row, start-up seconds)."""
    for chapter, rows in sorted(data["chapters"].items()):
        by_jobs = {r["jobs"]: r for r in rows}
        two = by_jobs.get(2)
        if two is not None:
            yield chapter, rows, by_jobs, two, two["wall_s"] - two["after_reference_s"]


def table(data: dict, class_size: int = 30) -> str:
    """The README's table: per chapter, seconds per notebook at each --jobs, and a class of ``class_size``."""
    lines = [f"| chapter | class graded | s per notebook, --jobs 1 | s per notebook, --jobs 2 | start and reference run (s) "
             f"| CPU s per notebook | load average | a class of {class_size}, --jobs 2 |",
             "|---|---|---|---|---|---|---|---|"]
    for chapter, rows, by_jobs, two, start in _graded_at_jobs_2(data):
        loads = [x for r in rows for x in (r["load_before"], r["load_after"])]
        if two["students"] == class_size:
            whole = f"{two['wall_s'] / 60:.0f} min (measured)"
        else:
            whole = f"about {(start + class_size * two['per_notebook_s']) / 60:.0f} min (estimated)"
        one = f"{by_jobs[1]['per_notebook_s']:.1f}" if 1 in by_jobs else "not measured"
        lines.append(f"| {chapter} | {two['students']} | {one} | {two['per_notebook_s']:.1f} | {start:.0f} | "
                     f"{two['cpu_per_notebook_s']:.1f} | {min(loads):.0f}–{max(loads):.0f} | {whole} |")
    return "\n".join(lines)


def plan(data: dict, class_size: int = 30) -> str:
    """The README's "a class of N takes about ..." sentence, per chapter, from the record.

    A chapter graded as a class of at least ``class_size`` is "measured"; one graded as a smaller class (4)
    is an estimate, and the sentence says so: its line is (start and reference run) + N x (s per notebook).
    """
    measured, estimated, speedups = [], [], []
    for chapter, _rows, by_jobs, two, start in _graded_at_jobs_2(data):
        line = f"chapter {chapter} about {start / 60:.1f} + {two['per_notebook_s'] / 60:.2f} × N minutes"
        (measured if two["students"] >= class_size else estimated).append((chapter, line, two["students"]))
        if 1 in by_jobs:
            speedups.append((chapter, by_jobs[1]["per_notebook_s"] / two["per_notebook_s"]))
    parts = ["So, on such a machine, a class of N takes about (start and reference run) + N × (seconds per "
             "notebook) at `--jobs 2`"]
    if measured:
        sizes = sorted({n for _, _, n in measured})
        parts.append(f"; measured (a class of {', '.join(map(str, sizes))}): " + ", ".join(line for _, line, _ in measured))
    if estimated:
        sizes = sorted({n for _, _, n in estimated})
        parts.append(f"; **estimated** from a class of {', '.join(map(str, sizes))} (fewer than {class_size} students, so "
                     "not a measurement of a class): " + ", ".join(line for _, line, _ in estimated))
    text = "".join(parts) + "."
    if speedups:
        text += (" `--jobs 2` graded " + " and ".join(f"{x:.1f} times as fast" + (" as `--jobs 1`" if i == 0 else "")
                                                      + f" for chapter {c}" for i, (c, x) in enumerate(speedups))
                 + f" ({'the chapters' if len(speedups) > 1 else 'the chapter'} measured at both).")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapters", nargs="+", default=["02", "09"])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/grading_throughput.json")
    parser.add_argument("--append", action="store_true", help="keep the chapters already in the output file")
    parser.add_argument("grader_args", nargs=argparse.REMAINDER, help="after --: passed to the grader")
    args = parser.parse_args(argv)
    extra = [a for a in args.grader_args if a != "--"]
    target = (HERE / "results" if args.record else HERE / "out") / "grading_throughput.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(target.read_text()) if args.append and target.exists() else {}
    data.update({"cores": os.cpu_count(), "grader_args": extra,
                 "when": data.get("when") or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    chapters = data.setdefault("chapters", {})
    for chapter in args.chapters:
        with tempfile.TemporaryDirectory(prefix="grading-throughput-") as tmp:
            subs = Path(tmp) / "submissions"
            make_class(chapter, args.students, subs)
            rows = []
            for jobs in args.jobs:
                row = measure_one(subs, Path(tmp) / f"grades-{jobs}", jobs, extra)
                row["students"] = args.students
                if row["after_reference_s"] is not None and row["notebooks"]:
                    row["per_notebook_s"] = round(row["after_reference_s"] / row["notebooks"], 2)
                    if row["grader_reported_cpu_s"] is not None:
                        row["cpu_per_notebook_s"] = round(row["grader_reported_cpu_s"] / row["notebooks"], 2)
                print(chapter, json.dumps(row), flush=True)
                rows.append(row)
            chapters[chapter] = rows
        target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
