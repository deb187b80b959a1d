"""The grader: correct scores, and no way to cheat it or break it (adversarial submissions).

The submissions are built at test time from solutions/03 and chapters/03. Chapter 03 has three
exercises: 3.1 (2 points), 3.2 (1 point), 3.3 (1 point).
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re

import nbformat
import numpy as np
import psutil
import pytest
from course_paths import ROOT, SOLUTIONS

from coursetools import notebooks
from coursetools.grading import grade as grading
from coursetools.grading import plaindata, probes, sandbox
from coursetools.release import BEGIN_SOLUTION, END_SOLUTION

CHAPTER = "03_scaled_dot_product_attention"
POINTS = {"3.1": 2, "3.2": 1, "3.3": 1}
TEST_LIMITS = sandbox.Limits(cell_seconds=20, notebook_seconds=120, cpu_seconds=150, memory_bytes=3 << 30)


def _solution_answers() -> dict[str, str]:
    sol = notebooks.read(ROOT / "solutions" / f"{CHAPTER}.ipynb")
    answers = {}
    for cell in sol.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            lines = [ln for ln in cell.source.split("\n") if ln.strip() not in (BEGIN_SOLUTION, END_SOLUTION)]
            answers[meta["grade_id"]] = "\n".join(lines)
    return answers


ANSWERS = _solution_answers()
WRONG = {
    "ex03_1": "def softmax_jacobian(p):\n    return torch.zeros(*p.shape, p.shape[-1], dtype=p.dtype)",
    "ex03_2": "def answer_3_2():\n    return 5.0",
    "ex03_3": 'def answer_3_3():\n    return "a"',
}


def learner(answers: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The chapter as a learner would hand it in, with some answer cells filled in."""
    nb = notebooks.read(ROOT / "chapters" / f"{CHAPTER}.ipynb")
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if answers and grade_id in answers:
            cell.source = answers[grade_id]
    return nb


def correct(**overrides: str) -> nbformat.NotebookNode:
    return learner({**ANSWERS, **overrides})


def _index_of(nb, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)


def with_extra_cell(nb, source: str, before: str | None = None, metadata: dict | None = None):
    cell = nbformat.v4.new_code_cell(source)
    if metadata:
        cell.metadata.update(metadata)
    position = _index_of(nb, before) if before else 2
    nb.cells.insert(position, cell)
    return nb


def edited_check(nb):
    nb.cells[_index_of(nb, "ex03_1_check")].source = 'print("Exercise 3.1: passed")'
    return nb


def deleted_checks(nb):
    nb.cells = [c for c in nb.cells if not c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    return nb


def duplicated_check(nb):
    i = _index_of(nb, "ex03_2_check")
    nb.cells.insert(i, copy.deepcopy(nb.cells[i]))
    nb.cells[i].id = "duplicate1"
    return nb


def stripped_metadata(nb):
    for cell in nb.cells:
        cell.metadata = {}
    nb.metadata = {}
    return nb


LOOP_FUNCTION = "def answer_3_2():\n    while True:\n        pass"
IGNORE_SIGNALS = (
    "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
)
ALWAYS_EQUAL = (
    "class _Yes:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n\n"
    "def answer_3_2():\n    return _Yes()"
)
FLOAT_SUBCLASS = (
    "class _F(float):\n    def __eq__(self, other):\n        return True\n    __hash__ = float.__hash__\n\n"
    "def answer_3_2():\n    return _F(0.0)"
)
CUSTOM_EXC = "get_ipython().set_custom_exc((BaseException,), lambda *args, **kwargs: None)"
AST_TRANSFORMER = (
    "import ast\n"
    "class _Nothing(ast.NodeTransformer):\n"
    "    def visit_Module(self, node):\n"
    "        return ast.Module(body=[ast.Pass()], type_ignores=[])\n"
    "get_ipython().ast_transformers.append(_Nothing())"
)
INPUT_TRANSFORMER = "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])"
MONKEYPATCH = (
    "import math, numpy.testing, torch, utils.checks\n"
    "math.isclose = lambda *a, **k: True\n"
    "torch.allclose = lambda *a, **k: True\n"
    "numpy.testing.assert_allclose = lambda *a, **k: None\n"
    "for _name in ('close', 'number', 'choice'):\n"
    "    setattr(utils.checks, _name, lambda *a, **k: utils.checks.Verdict(True, 'ok'))\n"
    "utils.checks.require = lambda *a, **k: None"
)
READ_SOLUTIONS = (
    "import re\n\ndef answer_3_3():\n"
    f"    text = open({str(ROOT / 'solutions' / (CHAPTER + '.ipynb'))!r}).read()\n"
    "    return re.search(r'return \\\\\"(\\w)\\\\\"', text).group(1)"
)
WRITE_OUTSIDE = (
    "for _target in ({outside!r}, '/tmp/course-grader-escape'):\n"
    "    try:\n        open(_target, 'w').write('escaped')\n    except OSError:\n        pass\n"
)
DETACHED = (
    "import subprocess, sys\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(4242)'], start_new_session=True)\n"
    "subprocess.Popen(['sleep', '4243'], start_new_session=True)"
)
MEMORY_HOG = "def answer_3_3():\n    hog = [bytearray(1 << 29) for _ in range(100)]\n    return 'c'"
BIG_FILE = "open('big.bin', 'wb').write(b'0' * (300 << 20))\n"
BIG_OUTPUT = "for _ in range(100):\n    print('x' * (1 << 20))\n"
FORK_BOMB = (
    "import os, time\n"
    "try:\n"
    "    for _ in range(3000):\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(600)\n"
    "            os._exit(0)\n"
    "except OSError:\n"
    "    pass\n"
)


def write(folder, student, content):
    target = folder / student / f"{CHAPTER}.ipynb"
    target.parent.mkdir(parents=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(nbformat.writes(content))


def adversarial_cases(outside):
    """student -> (submission, expected total points)."""
    return {
        "correct": (correct(), 4),
        "wrong_answer": (correct(ex03_2=WRONG["ex03_2"]), 3),
        "untouched_stub": (learner(), 0),
        "loop_top_level": (correct(ex03_2="while True:\n    pass\n" + ANSWERS["ex03_2"]), 2),
        "loop_in_function": (correct(ex03_2=LOOP_FUNCTION), 2),
        "loop_sigint_ignored": (correct(ex03_2=IGNORE_SIGNALS + LOOP_FUNCTION), 2),
        "os_exit": (correct(ex03_3="import os\nos._exit(1)\n" + ANSWERS["ex03_3"]), 3),
        "sys_exit": (correct(ex03_3="import sys\nsys.exit()\n" + ANSWERS["ex03_3"]), 3),
        "malformed_json": (b'{"cells": [', 0),
        "not_a_notebook": (b"\x89PNG\r\n\x1a\n this is an image, not a notebook", 0),
        "test_cell_edited": (edited_check(correct(ex03_1=WRONG["ex03_1"])), 2),
        "test_cells_deleted": (deleted_checks(correct()), 4),
        "test_cell_duplicated": (duplicated_check(correct()), 4),
        "metadata_stripped": (stripped_metadata(correct()), 4),
        "forged_grade_cell": (with_extra_cell(learner(), 'print("Exercise 3.9: passed")', metadata={
            "nbgrader": {"grade": True, "grade_id": "ex03_9_check", "points": 100, "locked": True,
                         "solution": False, "schema_version": 3}}), 0),
        "extra_helper_cells": (with_extra_cell(
            correct(ex03_1="def softmax_jacobian(p):\n    return _diag(p) - _outer(p)"),
            "def _diag(p):\n    return torch.diag_embed(p)\n\n"
            "def _outer(p):\n    return p.unsqueeze(-1) * p.unsqueeze(-2)", before="ex03_1"), 4),
        "always_equal_object": (correct(ex03_2=ALWAYS_EQUAL), 3),
        "float_subclass": (correct(ex03_2=FLOAT_SUBCLASS), 3),
        "set_custom_exc": (with_extra_cell(learner(WRONG), CUSTOM_EXC), 0),
        "ast_transformer": (with_extra_cell(learner(WRONG), AST_TRANSFORMER), 0),
        "input_transformer": (with_extra_cell(learner(WRONG), INPUT_TRANSFORMER), 0),
        "monkeypatched_checks": (with_extra_cell(learner(WRONG), MONKEYPATCH), 0),
        "reads_solutions": (correct(ex03_3=READ_SOLUTIONS), 3),
        "writes_outside": (correct(ex03_3=WRITE_OUTSIDE.format(outside=str(outside)) + ANSWERS["ex03_3"]), 4),
        "detached_process": (correct(ex03_3=DETACHED + "\n" + ANSWERS["ex03_3"]), 4),
        "memory_hog": (correct(ex03_3=MEMORY_HOG), 3),
        "file_300_mb": (correct(ex03_3=BIG_FILE + ANSWERS["ex03_3"]), 3),
        "output_100_mb": (correct(ex03_3=BIG_OUTPUT + ANSWERS["ex03_3"]), 3),
        "fork_bomb": (correct(ex03_3=FORK_BOMB + ANSWERS["ex03_3"]), 4),
    }


def _leftover_processes() -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline", "uids"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        uid = proc.info["uids"].real if proc.info["uids"] else -1
        if "4242" in cmd or "4243" in cmd or sandbox.NOBODY_BASE_UID <= uid < sandbox.NOBODY_BASE_UID + 100:
            found.append(f"{proc.pid} uid={uid} {cmd[:80]}")
    return found


def _read_gradebook(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def adversarial_run(tmp_path_factory):
    if not sandbox.bubblewrap_available():
        message = "bubblewrap (bwrap) is not available; the adversarial suite needs the sandbox"
        if os.environ.get("CI"):
            pytest.fail(message + " (.ci/run installs Debian's bubblewrap)")
        pytest.skip(message)
    base = tmp_path_factory.mktemp("grading")
    outside = ROOT / "utils" / "ESCAPED_BY_SUBMISSION"
    cases = adversarial_cases(outside)
    for student, (content, _) in cases.items():
        write(base / "submissions", student, content)
    log: list[str] = []
    rows = grading.grade(base / "submissions", base / "out", jobs=2, limits=TEST_LIMITS, progress=log.append)
    return {"cases": cases, "rows": rows, "out": base / "out", "log": log, "outside": outside}


def test_every_adversarial_submission_gets_its_exact_score(adversarial_run):
    rows = adversarial_run["rows"]
    scores = {}
    for student in adversarial_run["cases"]:
        mine = [r for r in rows if r.student == student]
        assert len(mine) == 3, f"{student}: one row per exercise, got {len(mine)}"
        assert sum(r.max_points for r in mine) == 4, f"{student}: a forged cell must not change max points"
        assert all(r.status == "passed" or r.reason for r in mine), f"{student}: a failure needs a reason"
        scores[student] = sum(r.points for r in mine)
    expected = {s: e for s, (_, e) in adversarial_run["cases"].items()}
    assert scores == expected


def test_adversarial_reasons_say_what_happened(adversarial_run):
    by = {(r.student, r.exercise): r for r in adversarial_run["rows"]}
    assert "cell timeout" in by[("loop_top_level", "3.2")].reason
    assert "timeout" in by[("loop_sigint_ignored", "3.2")].reason
    assert "not a valid notebook" in by[("malformed_json", "3.1")].reason
    assert by[("untouched_stub", "3.1")].status == "not attempted"
    assert "not a plain value" in by[("always_equal_object", "3.2")].reason
    assert "your code raised MemoryError" in by[("memory_hog", "3.3")].reason


def test_sandbox_contained_the_submissions(adversarial_run):
    assert not adversarial_run["outside"].exists(), "a submission wrote into the repository"
    assert not os.path.exists("/tmp/course-grader-escape"), "a submission wrote into the host's /tmp"
    assert _leftover_processes() == [], "processes started by submissions survived grading"


def test_gradebook_and_feedback_are_complete_and_reveal_no_hidden_tests(adversarial_run):
    out = adversarial_run["out"]
    book = _read_gradebook(out / "gradebook.csv")
    assert list(book[0]) == grading.FIELDS
    assert len(book) == 3 * len(adversarial_run["cases"])
    hidden_sources = [c.source for c in notebooks.read(ROOT / "solutions" / f"{CHAPTER}.ipynb").cells
                      if "BEGIN HIDDEN TESTS" in c.source]
    hidden_lines = {ln.strip() for src in hidden_sources for ln in src.split("\n").__iter__()
                    if len(ln.strip()) > 12 and "HIDDEN" not in ln}
    for student in adversarial_run["cases"]:
        text = (out / "feedback" / f"{student}.md").read_text()
        assert f"# Feedback for {student}" in text and "Total:" in text
        assert not any(line in text for line in hidden_lines)
        assert "gen_hidden" not in text and "p_hidden" not in text
    assert any("[29/29]" in line for line in adversarial_run["log"]), "progress is shown"


def test_regrading_gives_identical_results_and_replaces_the_gradebook(tmp_path):
    if not sandbox.bubblewrap_available() and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not available")
    write(tmp_path / "subs", "ada", correct(ex03_3=WRONG["ex03_3"]))
    write(tmp_path / "subs", "bo", learner())
    out = tmp_path / "out"
    grading.grade(tmp_path / "subs", out, jobs=2, limits=TEST_LIMITS, progress=lambda _: None)
    first = (out / "gradebook.csv").read_text()
    (out / "feedback" / "stale.md").write_text("left from an earlier run")
    grading.grade(tmp_path / "subs", out, jobs=1, limits=TEST_LIMITS, progress=lambda _: None)
    assert (out / "gradebook.csv").read_text() == first
    assert sorted(p.name for p in (out / "feedback").iterdir()) == ["ada.md", "bo.md"]
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    rows = _read_gradebook(out / "gradebook.csv")
    assert [(r["student"], r["exercise"], r["points"]) for r in rows] == [
        ("ada", "3.1", "2.0"), ("ada", "3.2", "1.0"), ("ada", "3.3", "0.0"),
        ("bo", "3.1", "0.0"), ("bo", "3.2", "0.0"), ("bo", "3.3", "0.0"),
    ]


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_every_check_cell_can_be_turned_into_probes(path):
    nb = notebooks.read(path)
    graded = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    assert graded
    for cell in graded:
        grade_id = cell.metadata.nbgrader.grade_id
        source, found = probes.transform(cell.source, grade_id.removesuffix("_check"), 0, reference=False)
        assert found and any(p.hidden for p in found), f"{grade_id}: needs visible and hidden probes"
        assert "check.require" not in source and "check.exercise" not in source


def test_probe_cells_keep_setup_and_record_instead_of_judging():
    source = (
        "x = 1\ncheck.exercise('9.1', lambda: check.number(f(x), 2.0, name='f(1)'))\n"
        "### BEGIN HIDDEN TESTS\ny = 5\ncheck.require(lambda: check.choice(g(y), 'b', ['a', 'b']))\n"
        "### END HIDDEN TESTS"
    )
    learner_src, found = probes.transform(source, "ex09_1", 7, reference=False)
    assert learner_src.splitlines() == ["x = 1", "__probe__(7, lambda: f(x))", "y = 5", "__probe__(8, lambda: g(y))"]
    assert [(p.kind, p.hidden, p.kwargs) for p in found] == [("number", False, {"name": "f(1)"}), ("choice", True, {})]
    reference_src, _ = probes.transform(source, "ex09_1", 7, reference=True)
    assert "__probe__.expected(7, lambda: 2.0)" in reference_src
    with pytest.raises(probes.ProbeError):
        probes.transform("check.require(lambda: check.close(f(x), y, name=compute()))", "ex09_2", 0, False)


def test_plain_data_refuses_pickles_subclasses_and_oversized_files(tmp_path):
    import torch

    plaindata.dump(torch.arange(6, dtype=torch.float32).reshape(2, 3), tmp_path, "t")
    record = plaindata.load(tmp_path, "t")
    assert record["status"] == "value" and record["value"].dtype == torch.float32
    assert record["value"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]

    class Sneaky(float):
        pass

    plaindata.dump(Sneaky(4.0), tmp_path, "f")
    assert isinstance(plaindata.load(tmp_path, "f")["value"], plaindata.Unsupported)
    plaindata.dump([1, "a", None, float("inf")], tmp_path, "p")
    assert plaindata.load(tmp_path, "p")["value"] == [1, "a", None, float("inf")]
    # A pickled object array planted in place of a record is refused, not unpickled.
    np.save(tmp_path / "evil.npy", np.array([object()], dtype=object), allow_pickle=True)
    (tmp_path / "evil.json").write_text(json.dumps({"status": "value", "type": "ndarray"}))
    assert plaindata.load(tmp_path, "evil")["status"] == "invalid"
    (tmp_path / "huge.json").write_text(" " * (plaindata.MAX_JSON_BYTES + 1))
    assert plaindata.load(tmp_path, "huge")["status"] == "invalid"
    assert plaindata.load(tmp_path, "absent")["status"] == "missing"


def test_handin_check_reports_each_exercise():
    from coursetools.handin import summarise

    results, problems = summarise(ROOT / "chapters" / f"{CHAPTER}.ipynb")
    assert results == {"3.1": "not attempted yet", "3.2": "not attempted yet", "3.3": "not attempted yet"}
    assert problems == []
    solved = ROOT / "solutions" / f"{CHAPTER}.ipynb"
    results, problems = summarise(solved)
    assert set(results.values()) == {"passed"} and problems == []


def test_readme_documents_the_grading_command():
    text = (ROOT / "README.md").read_text()
    assert re.search(r"python -m utils\.grading submissions/ --out \S+ --jobs", text)
    assert "python -m coursetools.handin" in text and "nbgrader" in text
