"""The grader: exact scores, and no way to cheat it or break it (issues 14 and 20).

Every submission is generated at test time from whatever solutions/ holds (tests/grading_cases.py):
exercises, points, probes and answers come from the notebooks' nbgrader metadata, so these tests keep
working while chapters change. Chapters 03 and 08 carry the attacks (the chapters the independent
test of issue 20 used); the class of issue 14 adds a third chapter.

Issue 20, item by item (each ends as a passing test here):
 1. blank notebook + symlinks -> 0 ............ test_records_are_read_without_following_links,
    test_adversarial_scores (symlink_dir, symlink_files, symlink_dir_08),
    test_reference_values_never_touch_the_disk
 2. FIFO, /dev/zero: no hang, no blow-up ........ test_records_are_read_without_following_links,
    test_adversarial_scores (fifo_and_dev_zero), test_gradebook_complete_and_no_hidden_tests
 3. answer key readable in the sandbox ......... test_sandbox_sees_only_the_course_library,
    test_adversarial_scores (answer_key_routes)
 4. concurrent runs, CPU hog ................... test_user_ids_are_reserved_per_run,
    test_concurrent_runs_give_identical_gradebooks, test_grading_beside_a_cpu_hog
 5. expected values in the globals ............. test_got_form_holds_no_expected_values,
    test_adversarial_scores (globals_and_frames_03, globals_and_frames_08)
 6. NumPy scalars .............................. test_numpy_scalars_are_numbers_and_strings,
    test_adversarial_scores (numpy_scalars)
 7. --no-sandbox as root ....................... test_no_sandbox_refuses_root_and_says_why,
    test_no_sandbox_forced_as_root_contains_the_submission
 8. crafted records ............................ test_crafted_records_fail_one_probe_each,
    test_adversarial_scores (crafted_records)
 9. feedback injection, hidden code ............ test_text_from_submissions_is_one_escaped_line,
    test_hidden_test_source_never_reaches_the_submission, test_adversarial_scores (injection_and_theft),
    test_feedback_has_one_total_and_no_hidden_names
10. time limits on the grader's clock ......... test_time_limits_are_the_graders
11. file names, sizes, formats, signals ....... test_file_cases_each_get_one_documented_row,
    test_adversarial_scores (nbformat_3, segfault), test_exit_reasons_name_the_signal
12. nbgrader route in the README .............. test_readme_documents_grading_and_the_nbgrader_route
Issue 14, item 5 and manual exercises ........ test_class_of_30_across_three_chapters,
    test_every_chapter_passes_its_own_probes, test_manual_exercises_are_listed_for_hand_grading,
    test_handin_lists_manual_exercises
Issue 31 (round three): the attacks are in the class graded here (stack_walk_08, leak_03,
    split_and_retyped, chdir_and_tmp, numpy_longdouble_str_subclass, huge_cell, a 254-byte student name),
    the limits of a whole submission in tests/test_grading_limits.py, whose docstring maps every item;
    8.2's memory (buffers made before the call, clear_refs, query blocks, the solution 3/3 five times):
    test_tiled_forward_memory_counts_buffers_made_before_the_call and the two tests after it.
"""

from __future__ import annotations

import ast
import copy
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import nbformat
import numpy as np
import psutil
import pytest
from course_paths import ROOT, SOLUTIONS
from grading_cases import Course, add_cell, chapter_path, first_function, write

from coursetools import notebooks, release
from coursetools.grading import grade as grading
from coursetools.grading import plaindata, probes, safeio, sandbox
from utils import checks

# CPU time counts; the wall clock allows five times as much, for a machine shared with other work.
TEST_LIMITS = sandbox.Limits(cell_cpu_seconds=6, notebook_cpu_seconds=60, wall_factor=5, memory_bytes=3 << 30)
CH03 = Course(chapter_path("03"))
CH08 = Course(chapter_path("08"))


def needs_bubblewrap() -> None:
    usable, why = sandbox.bubblewrap_status()
    if not usable:
        if os.environ.get("CI"):
            pytest.fail(f"{why}; the grading tests need the sandbox (.ci/run installs Debian's bubblewrap)")
        pytest.skip(why)


def _read_gradebook(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _kinds(course: Course) -> dict[str, set[str]]:
    chapter = grading.Chapter(course.path)
    kinds: dict[str, set[str]] = {}
    for probe in chapter.probes:
        kinds.setdefault(probe.exercise, set()).add(probe.kind)
    return kinds


def _pick(course: Course, kind: str):
    """An exercise whose probes are all of ``kind`` and whose answer is one function."""
    kinds = _kinds(course)
    for e in course.automatic:
        if kinds.get(e.grade_id) == {kind} and first_function(e.right):
            return e
    return None


def _dependents(course: Course, grade_id: str) -> set[str]:
    return {grade_id} | {e.grade_id for e in course.automatic if grade_id in e.depends_on}


def points(course: Course, lost: set[str] = frozenset(), stop_before: int | None = None) -> dict[str, float]:
    """label -> expected points: full marks except ``lost`` exercises (and those depending on them) and,
    when the run stops at solutions cell ``stop_before``, every exercise whose check comes after it."""
    lost = set().union(*(_dependents(course, g) for g in lost)) if lost else set()
    out = {}
    for e in course.exercises:
        ok = not e.manual and e.grade_id not in lost and (stop_before is None or e.check_cell < stop_before)
        out[e.label] = e.points if ok else 0.0
    return out


def zero(course: Course) -> dict[str, float]:
    return {e.label: 0.0 for e in course.exercises}


def wrapped(course: Course, exercise, body: str, right: bool = True) -> str:
    """The exercise's answer cell where its function ``f`` is replaced by ``body`` (which may call
    ``__original``, the solution's function)."""
    name = first_function(exercise.right)
    head = exercise.right if right else exercise.blank
    return f"{head}\n__original = {name}\n\ndef {name}(*args, **kwargs):\n{textwrap.indent(body, '    ')}\n"


# --------------------------------------------------------------------------------------------------
# Attacks (source code a submission holds)

LOOP = "while True:\n    pass\n"
IGNORE_SIGNALS = (
    "import signal\nfor _s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGXCPU):\n"
    "    signal.signal(_s, signal.SIG_IGN)\n"
)
SLEEP = "import time\ntime.sleep(10 ** 6)\n"
ALWAYS_EQUAL = (
    "class _Yes:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
    "    def __float__(self):\n        return float(__original(*args, **kwargs))\n"
    "return _Yes()"
)
# A float subclass counts as the number it holds (in the self-check too): one holding a wrong number and
# claiming to equal anything gets nothing.
FLOAT_SUBCLASS = (
    "class _F(float):\n    def __eq__(self, other):\n        return True\n    __hash__ = float.__hash__\n"
    "    def __float__(self):\n        return float(__original(*args, **kwargs))\n"
    "return _F(__original(*args, **kwargs) * 1.5 + 1)"
)
NUMPY_SCALAR = (
    "import numpy as np\nvalue = __original(*args, **kwargs)\n"
    "if isinstance(value, str):\n    return np.str_(value)\n"
    "if isinstance(value, bool):\n    return np.bool_(value)\n"
    "if isinstance(value, int):\n    return np.int64(value)\n"
    "if isinstance(value, float):\n"
    "    return np.float32(value) if float(np.float32(value)) == value else np.sqrt(np.float64(value) ** 2)\n"
    "return value"
)
MEMORY_HOG = "hog = [bytearray(1 << 29) for _ in range(100)]\nreturn __original(*args, **kwargs)"
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
    "import math, builtins, numpy.testing, torch, utils.checks\n"
    "math.isclose = lambda *a, **k: True\n"
    "torch.allclose = lambda *a, **k: True\n"
    "torch.equal = lambda *a, **k: True\n"
    "numpy.testing.assert_allclose = lambda *a, **k: None\n"
    "for _name in ('close', 'number', 'choice'):\n"
    "    setattr(utils.checks, _name, lambda *a, **k: utils.checks.Verdict(True, 'ok'))\n"
    "utils.checks.require = lambda *a, **k: None\n"
    "import coursetools.grading.plaindata as _p\n"
    "_p.dump_status = lambda *a, **k: None"
)
WRITE_OUTSIDE = (
    "for _target in {targets!r}:\n"
    "    try:\n        open(_target, 'w').write('escaped')\n    except OSError:\n        pass\n"
)
DETACHED = (
    "import subprocess, sys\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(4242)'], start_new_session=True)\n"
    "subprocess.Popen(['sleep', '4243'], start_new_session=True)"
)
BIG_FILE = "try:\n    open('big.bin', 'wb').write(b'0' * (300 << 20))\nexcept OSError:\n    pass\n"
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
SEGFAULT = "import ctypes\nctypes.string_at(0)\n"
# Where the grader used to keep the reference values (issue 20, item 1): the submission's records are
# replaced by links there, to forged records next to them, and to files a reader must never open.
SYMLINK_DIR = (
    "import os, shutil\n"
    "shutil.rmtree('records/got', ignore_errors=True)\n"
    "os.makedirs('records/forged', exist_ok=True)\n"
    "{forge}\n"
    "os.symlink('forged', 'records/got')\n"
)
SYMLINK_FILES = (
    "import os, json\n"
    "os.makedirs('records/forged', exist_ok=True)\n"
    "{forge}\n"
    "for name in os.listdir('records/forged'):\n"
    "    target = os.path.join('records/got', name)\n"
    "    if os.path.lexists(target):\n        os.remove(target)\n"
    "    os.symlink(os.path.join('..', 'forged', name), target)\n"
)
SYMLINK_REFERENCE = (
    "import os, shutil, glob\n"
    "shutil.rmtree('records/got', ignore_errors=True)\n"
    "os.symlink('../../reference-{chapter}/expected', 'records/got')\n"
)
FIFO_AND_DEV_ZERO = (
    "import os, glob\n"
    "records = sorted(glob.glob('records/got/probe_*.json'))\n"
    "for k, path in enumerate(records):\n"
    "    os.remove(path)\n"
    "    if k % 2 == 0:\n        os.mkfifo(path)\n"
    "    else:\n        os.symlink('/dev/zero', path)\n"
)
GLOBALS_AND_FRAMES = r'''
import sys
import torch
want = __original(*args, **kwargs)
spaces = [dict(globals())]
frame = sys._getframe(1)
while frame is not None:
    spaces.append(dict(frame.f_locals))
    frame = frame.f_back

def like(value):
    if isinstance(value, torch.Tensor):
        for space in spaces:
            for item in list(space.values()):
                for c in (item if isinstance(item, (tuple, list)) else [item]):
                    if (isinstance(c, torch.Tensor) and c.shape == value.shape and c.dtype == value.dtype
                            and all(c is not a for a in args)):
                        return c
        return torch.full_like(value, float("nan"))
    if isinstance(value, (tuple, list)):
        return type(value)(like(v) for v in value)
    return value

return like(want)
'''
# Issue 31, item 9: a notebook that moves to another folder first, and answers that write to /tmp.
CHDIR = "%cd /tmp\nimport os\nos.chdir('/')"
WRITES_TMP = (
    "import os, tempfile\nfor _folder in ('/tmp', tempfile.gettempdir(), '/dev/shm'):\n"
    "    with open(os.path.join(_folder, 'scratch.txt'), 'w') as _f:\n        _f.write('x')\n"
    "return __original(*args, **kwargs)"
)
# np.longdouble, np.longlong and a str subclass: the self-check accepts them, so the grader does.
WIDE_SCALARS = (
    "import numpy as np\nvalue = __original(*args, **kwargs)\n"
    "class _S(str):\n    pass\n"
    "if isinstance(value, str):\n    return _S(value)\n"
    "if isinstance(value, bool):\n    return value\n"
    "if isinstance(value, int):\n    return np.longlong(value)\n"
    "if isinstance(value, float):\n    return np.longdouble(value)\n"
    "return value"
)
# Issue 31, item 1: a blank merge that ignores its arguments and looks, up the call stack, in every live
# object and in the constants of the code that called it, for the scores its arguments were made from.
STACK_WALK = r'''
import gc, sys, torch
def _stats(scores):
    m = scores.amax(dim=-1, keepdim=True)
    return m, torch.exp(scores - torch.where(m == float("-inf"), torch.zeros_like(m), m)).sum(dim=-1, keepdim=True)
found = []
frame = sys._getframe(1)
while frame is not None:
    found += list(frame.f_locals.values()) + list(frame.f_code.co_consts)
    frame = frame.f_back
found += [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
def tensors(x, depth=0):
    if isinstance(x, torch.Tensor):
        yield x
        if x._base is not None:
            yield x._base
    elif depth < 3 and isinstance(x, (tuple, list)):
        for y in x:
            yield from tensors(y, depth + 1)
    elif depth < 3 and isinstance(x, dict):
        for y in list(x.values()):
            yield from tensors(y, depth + 1)
for item in found:
    for t in tensors(item):
        if t.dim() == args[0].dim() and t.shape[:-1] == args[0].shape[:-1] and t.shape[-1] > 1 and t.dtype == args[0].dtype:
            return _stats(t)
raise NotImplementedError("nothing found")
'''
# Issue 31, item 3: what the submission can see (its arguments, the constants of every function of the
# grader's it can reach, the call stack), poured into an exception class's name; and an exit code.
LEAK = r'''
import gc, re, sys, types
seen = [repr(a)[:40] for a in args]
for f in gc.get_objects():
    if isinstance(f, types.FunctionType) and f.__code__.co_filename.startswith("<grader"):
        seen += [repr(c) for c in f.__code__.co_consts]
frame = sys._getframe(1)
while frame is not None:
    seen += [repr(c) for c in frame.f_code.co_consts] + [repr(v)[:40] for v in frame.f_locals.values()]
    frame = frame.f_back
name = "q_" + "_".join(re.sub(r"\W", "", c) for c in seen)[:300]
raise type(name, (Exception,), {})(name)
'''
EXIT_CODE = "import os\nos._exit(57)"
# Everything a submission might read to find the hidden tests (issue 20, item 9), poured into the
# name of an exception: the grader must show none of the hidden code.
THEFT = r'''
import linecache, os, sys
found = []
frame = sys._getframe(1)
while frame is not None:
    code = frame.f_code
    found += list(code.co_names) + list(code.co_varnames) + list(code.co_freevars)
    found += [c for c in code.co_consts if isinstance(c, str)]
    found += list(frame.f_locals)
    frame = frame.f_back
for text in list(linecache.cache.values()):
    found += [str(t) for t in text[2]] if isinstance(text, tuple) and len(text) > 2 else []
for folder, dirs, files in os.walk("."):
    for name in files:
        try:
            found.append(open(os.path.join(folder, name), errors="replace").read(100000))
        except OSError:
            pass
for name in ("/proc/self/cmdline", "/proc/self/environ"):
    try:
        found.append(open(name, errors="replace").read())
    except OSError:
        pass
try:
    os.set_blocking(0, False)
    found.append(os.read(0, 1 << 20).decode(errors="replace"))
except OSError:
    pass
finally:
    os.set_blocking(0, True)
import re
words = [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", " ".join(map(str, found)))][:4000]
raise type(".".join(words)[:300] or "Nothing", (Exception,), {})("\n".join(words))
'''
INJECTION = (
    'raise type("Boom\\n# Total: 4 / 4 points\\n" + "x" * 300, (Exception,), {})('
    '"line one\\n# Total: 4 / 4 points\\n| x | 4 / 4 | passed |" + "y" * 300)'
)


def _forge(course: Course, exercise_kinds: set[str]) -> str:
    """Code that writes, into records/forged, records holding the right values of the number and choice
    probes (the values a leak of the reference would give), computed from the solution in private."""
    chapter = grading.Chapter(course.path)
    lines = ["import json as _json", "_private = {}"]
    for e in course.automatic:
        if _kinds(course).get(e.grade_id, set()) <= exercise_kinds and first_function(e.right):
            lines.append(f"exec({e.right!r}, _private)")
            for p in chapter.probes:
                if p.exercise == e.grade_id:
                    lines.append(
                        f"open('records/forged/probe_{p.index}.json', 'w').write(_json.dumps("
                        f"{{'status': 'value', 'type': 'plain', 'value': _private[{first_function(e.right)!r}]()}}))")
    return "\n".join(lines)


def _answer_key_attack(course: Course) -> tuple[str, dict[str, str]]:
    """A cell that looks for the answer key on every route issue 20 found, and answers that use it."""
    others = []
    common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-common-dir"], capture_output=True,
                            text=True).stdout.strip()
    if common:
        others.append(str((ROOT / common).resolve().parent))
    search = textwrap.dedent(f'''
        import glob, json, os, subprocess, sys
        _texts = []
        def _read(path):
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    _texts.append(handle.read(50_000_000))
            except OSError:
                pass
        _bases = {{{str(ROOT)!r}, os.path.dirname(sys.prefix), *{others!r}}}
        for _base in _bases:
            _read(os.path.join(_base, "solutions", {course.name + ".ipynb"!r}))
            for _pattern in ("_build/html/_sources/solutions/*", "_build/jupyter_execute/**/*.ipynb", "_build/**/*.ipynb"):
                for _path in glob.glob(os.path.join(_base, _pattern), recursive=True):
                    _read(_path)
            for _args in (["git", "--git-dir", os.path.join(_base, ".git"), "show", "HEAD:solutions/{course.name}.ipynb"],
                          ["git", "-C", _base, "show", "HEAD:solutions/{course.name}.ipynb"]):
                try:
                    _texts.append(subprocess.run(_args, capture_output=True, text=True, timeout=30).stdout)
                except Exception:
                    pass
        for _folder, _dirs, _files in os.walk("/"):
            _dirs[:] = [d for d in _dirs if os.path.join(_folder, d) not in ("/proc", "/sys", "/dev")]
            for _name in _files:
                if _name.endswith(".ipynb") and "site-packages" not in _folder:
                    _read(os.path.join(_folder, _name))
        def _key(grade_id):
            for text in _texts:
                try:
                    nb = json.loads(text)
                except ValueError:
                    continue
                for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
                    meta = cell.get("metadata", {{}}).get("nbgrader", {{}})
                    source = "".join(cell.get("source", ""))
                    if meta.get("grade_id") == grade_id and "BEGIN SOLUTION" in source:
                        return "\\n".join(l for l in source.split("\\n") if "### " not in l)
            raise NotImplementedError("no key found")
    ''')
    answers = {e.grade_id: f"exec(_key({e.grade_id!r}), globals())" for e in course.automatic}
    return search, answers


def _crafted(course: Course) -> tuple[str, set[str]]:
    """Records overwritten with crafted content after the checks ran; the exercises they belong to."""
    chapter = grading.Chapter(course.path)
    by_kind = {}
    for p in chapter.probes:
        by_kind.setdefault(p.kind, p)
    lines = ["import json, numpy as np"]
    hit = set()
    if "choice" in by_kind or "number" in by_kind:
        p = by_kind.get("choice") or by_kind["number"]
        lines.append(f"open('records/got/probe_{p.index}.json', 'w').write('[' * 100000 + ']' * 100000)")
        hit.add(p.exercise)
    if "close" in by_kind:
        p = by_kind["close"]
        lines += [f"np.save('records/got/probe_{p.index}.npy', np.array(['a', 'b']))",
                  f"open('records/got/probe_{p.index}.json', 'w').write(json.dumps({{'status': 'value', "
                  "'type': 'tensor', 'dtype': 'torch.float32', 'device': 'cpu', 'shape': [2]}))"]
        hit.add(p.exercise)
    if "number" in by_kind:
        p = by_kind["number"]
        lines.append(f"open('records/got/probe_{p.index}.json', 'w').write(json.dumps({{'status': 'value', "
                     "'type': 'plain', 'value': {'__float__': 'four'}}))")
        hit.add(p.exercise)
    return "\n".join(lines), hit


def _with_cells(nb, *sources):
    for source in sources:
        add_cell(nb, source)
    return nb


def adversarial_cases(outside: list[str]) -> dict[str, tuple[str, object, dict[str, float]]]:
    """student -> (chapter, submission, label -> expected points)."""
    c, c8 = CH03, CH08
    num = _pick(c, "number") or _pick(c, "choice")
    choice = _pick(c, "choice") or num
    close = _pick(c, "close")
    close8 = _pick(c8, "close")
    first, last = c.automatic[0], c.automatic[-1]
    assert num and close and close8, "chapters 03 and 08 need a number/choice and a tensor exercise"
    right = {e.grade_id: "right" for e in c.exercises}
    blank = {e.grade_id: "blank" for e in c.exercises}
    wrong = {e.grade_id: "wrong" for e in c.exercises}
    key_search, key_answers = _answer_key_attack(c)
    crafted, crafted_hit = _crafted(c)
    injected = {choice.grade_id: wrapped(c, choice, INJECTION), num.grade_id: wrapped(c, num, THEFT)}
    nb_edited = c.notebook(right, sources={first.grade_id: first.wrong})
    nb_edited.cells[c.index_in_learner(f"{first.grade_id}_check")].source = f'print("Exercise {first.label}: passed")'
    nb_deleted = c.notebook(right)
    nb_deleted.cells = [x for x in nb_deleted.cells if not x.get("metadata", {}).get("nbgrader", {}).get("grade")
                        or x.get("metadata", {}).get("nbgrader", {}).get("solution")]
    nb_duplicated = c.notebook(right)
    i = c.index_in_learner(f"{last.grade_id}_check")
    duplicate = nbformat.from_dict(json.loads(json.dumps(nb_duplicated.cells[i])))
    duplicate.id = "duplicate1"
    nb_duplicated.cells.insert(i, duplicate)
    nb_stripped = c.notebook(right)
    for cell in nb_stripped.cells:
        cell.metadata = {}
    nb_stripped.metadata = {}
    right8 = {e.grade_id: "right" for e in c8.exercises}
    merge = c8.exercise("ex08_1")
    # Issue 31, item 9: an answer split in two cells by JupyterLab (both keep the metadata), and another
    # whose cell was deleted and retyped in a new cell (no metadata, a new id) above where it was.
    split_and_retyped = c.notebook(right)
    split = first  # its work in a helper in the first half, the function itself in the second
    at = c.index_in_learner(split.grade_id)
    head = nbformat.from_dict(json.loads(json.dumps(split_and_retyped.cells[at])))
    name = first_function(split.right)
    head.source = re.sub(rf"\bdef {name}\(", "def _helper_of_mine(", split.right, count=1)
    split_and_retyped.cells[at].source = f"def {name}(*args, **kwargs):\n    return _helper_of_mine(*args, **kwargs)\n"
    head.id = "splithead1"
    split_and_retyped.cells.insert(at, head)
    gone = c.index_in_learner(last.grade_id)
    del split_and_retyped.cells[gone]
    add_cell(split_and_retyped, last.right, position=gone)
    forged_cell = {"nbgrader": {"grade": True, "grade_id": f"{first.grade_id[:-2]}_99_check", "points": 100,
                                "locked": True, "solution": False, "schema_version": 3}}
    cases = {
        "correct": (c, c.notebook(right), points(c)),
        "wrong_answer": (c, c.notebook(right, sources={num.grade_id: num.wrong}), points(c, {num.grade_id})),
        "untouched_stub": (c, c.notebook(blank), zero(c)),
        "loop_in_function": (c, c.notebook(right, sources={num.grade_id: IGNORE_SIGNALS + wrapped(c, num, LOOP)}),
                             points(c, stop_before=num.check_cell)),
        "sys_exit": (c, c.notebook(right, sources={last.grade_id: "import sys\nsys.exit()\n" + last.right}),
                     points(c, {last.grade_id})),
        "segfault": (c, c.notebook(right, sources={last.grade_id: SEGFAULT + last.right}),
                     points(c, stop_before=last.answer_cell)),
        "malformed_json": (c, b'{"cells": [', zero(c)),
        "not_a_notebook": (c, b"\x89PNG\r\n\x1a\n this is an image, not a notebook", zero(c)),
        "test_cell_edited": (c, nb_edited, points(c, {first.grade_id})),
        "test_cells_deleted": (c, nb_deleted, points(c)),
        "test_cell_duplicated": (c, nb_duplicated, points(c)),
        "metadata_stripped": (c, nb_stripped, points(c)),
        "forged_grade_cell": (c, add_cell(c.notebook(blank), 'print("Exercise 3.99: passed")', **forged_cell),
                              zero(c)),
        "extra_cells": (c, add_cell(add_cell(c.notebook(right), "def _helper():\n    return 1", position=1),
                                    "x_extra = _helper()"), points(c)),
        "always_equal_object": (c, c.notebook(right, sources={num.grade_id: wrapped(c, num, ALWAYS_EQUAL)}),
                                points(c, {num.grade_id})),
        "float_subclass": (c, c.notebook(right, sources={num.grade_id: wrapped(c, num, FLOAT_SUBCLASS)}),
                           points(c, {num.grade_id})),
        "set_custom_exc": (c, add_cell(c.notebook(wrong), CUSTOM_EXC, position=1), zero(c)),
        "ast_transformer": (c, add_cell(c.notebook(wrong), AST_TRANSFORMER, position=1), zero(c)),
        "input_transformer": (c, add_cell(c.notebook(wrong), INPUT_TRANSFORMER, position=1), zero(c)),
        "monkeypatched_checks": (c, add_cell(c.notebook(wrong), MONKEYPATCH, position=1), zero(c)),
        "answer_key_routes": (c, add_cell(c.notebook(blank, sources=key_answers), key_search, position=1), zero(c)),
        # Writes outside its folder, a detached process, a 300 MB file, 100 MB of output, a fork bomb:
        # none of it costs the submission a point or leaves a trace.
        "nasty_but_harmless": (c, _with_cells(c.notebook(right), WRITE_OUTSIDE.format(targets=outside), DETACHED,
                                              BIG_FILE, BIG_OUTPUT, FORK_BOMB), points(c)),
        "memory_hog": (c, c.notebook(right, sources={choice.grade_id: wrapped(c, choice, MEMORY_HOG)}),
                       points(c, {choice.grade_id})),
        "symlink_dir": (c, add_cell(c.notebook(blank), SYMLINK_DIR.format(forge=_forge(c, {"number", "choice"}))),
                        zero(c)),
        "symlink_files": (c, add_cell(c.notebook(blank), SYMLINK_FILES.format(forge=_forge(c, {"number", "choice"}))),
                          zero(c)),
        "fifo_and_dev_zero": (c, add_cell(c.notebook(right), FIFO_AND_DEV_ZERO), zero(c)),
        "globals_and_frames_03": (c, c.notebook(right, sources={close.grade_id: wrapped(c, close, GLOBALS_AND_FRAMES)}),
                                  points(c, {close.grade_id})),
        "numpy_scalars": (c, c.notebook(right, sources={
            e.grade_id: wrapped(c, e, NUMPY_SCALAR) for e in c.automatic
            if _kinds(c).get(e.grade_id, set()) <= {"number", "choice"} and first_function(e.right)}), points(c)),
        "crafted_records": (c, add_cell(c.notebook(right), crafted), points(c, crafted_hit)),
        "injection_and_theft": (c, c.notebook(right, sources=injected), points(c, set(injected))),
        "nbformat_3": (c, nbformat.convert(c.notebook(right), 3), points(c)),
        "globals_and_frames_08": (c8, c8.notebook({e.grade_id: "right" for e in c8.exercises}, sources={
            close8.grade_id: wrapped(c8, close8, GLOBALS_AND_FRAMES)}), points(c8, {close8.grade_id})),
        "symlink_dir_08": (c8, add_cell(c8.notebook({}), SYMLINK_DIR.format(forge=_forge(c8, {"number", "choice"}))),
                           zero(c8)),
        # Issue 31.
        "stack_walk_08": (c8, c8.notebook(right8, sources={merge.grade_id: wrapped(c8, merge, STACK_WALK, right=False)}),
                          points(c8, {merge.grade_id})),
        "leak_03": (c, c.notebook(right, sources={num.grade_id: wrapped(c, num, LEAK),
                                                  last.grade_id: wrapped(c, last, EXIT_CODE)}),
                    points(c, {num.grade_id, last.grade_id})),
        "split_and_retyped": (c, split_and_retyped, points(c)),
        "chdir_and_tmp": (c, add_cell(c.notebook(right, sources={close.grade_id: wrapped(c, close, WRITES_TMP)}),
                                      CHDIR, position=1), points(c)),
        "numpy_longdouble_str_subclass": (c, c.notebook(right, sources={
            e.grade_id: wrapped(c, e, WIDE_SCALARS) for e in c.automatic
            if _kinds(c).get(e.grade_id, set()) <= {"number", "choice"} and first_function(e.right)}), points(c)),
        "huge_cell": (c, add_cell(c.notebook(right), "x = 1  # " + "y" * (5 << 20)), zero(c)),
    }
    return cases


# Runs started by these tests carry this tag in their marker (graders of other checkouts may run on the
# same machine at the same time, under the same reserved user ids).
TAG = os.environ.setdefault("COURSE_GRADER_TAG", f"tests{os.getpid()}-")


def _ours(proc: psutil.Process) -> bool:
    try:
        return proc.environ().get("COURSE_GRADER_RUN", "").startswith(TAG)
    except psutil.Error:
        return False


# The command lines of the processes the adversarial submissions start. Whole markers, not the bare numbers:
# a process of another test whose command line held "4244" (a JupyterLab started by a README test) was once
# reported as a leftover.
_LEFTOVER_MARKERS = ("time.sleep(4242)", "sleep 4243", "fork-hopper-4244", "write('4242')")


def _leftover_processes() -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline", "uids"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        uid = proc.info["uids"].real if proc.info["uids"] else -1
        if any(marker in cmd for marker in _LEFTOVER_MARKERS) or (uid in sandbox.UID_RANGE and _ours(proc)):
            found.append(f"{proc.pid} uid={uid} {cmd[:80]}")
    return found


LONG_NAME = "é" * 127  # 254 bytes in UTF-8: a feedback file named after it would be too long for the disk
FILE_CASES = {
    # student -> ({relative path: "right" | "blank" | bytes}, expected points of the chapter, ignored rows)
    "file_with_py_and_upper_case": ({"{c}.ipynb": "right", "{c}.py": b"print('my code')", "{c}.IPYNB": "blank"},
                                    "full", 2),
    "file_copy_suffix": ({"{c} (1).ipynb": "right"}, "full", 0),
    "file_in_subfolder": ({"work/{c}.ipynb": "right"}, "full", 0),
    "file_in_dot_folder": ({".ipynb_checkpoints/{c}-checkpoint.ipynb": "right", ".hidden/{c}.ipynb": "right"},
                           None, 2),
    "file_two_copies": ({"{c} (1).ipynb": "right", "{c} (2).ipynb": "right"}, "zero", 0),
    "file_huge": ({"{c}.ipynb": "huge"}, "zero", 0),
}


@pytest.fixture(scope="module")
def adversarial_run(tmp_path_factory):
    needs_bubblewrap()
    base = tmp_path_factory.mktemp("grading")
    outside = [str(ROOT / "utils" / "ESCAPED_BY_SUBMISSION"), str(ROOT / "solutions" / "ESCAPED"),
               "/tmp/course-grader-escape", "/etc/course-grader-escape"]
    cases = adversarial_cases(outside)
    for student, (course, content, _) in cases.items():
        write(base / "submissions", student, content, f"{course.name}.ipynb")
    for student, (files, _, _) in FILE_CASES.items():
        for relative, what in files.items():
            relative = relative.format(c=CH03.name)
            if what == "huge":
                target = base / "submissions" / student / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as handle:
                    handle.truncate(51 << 20)  # sparse: 51 MB on paper, nothing on disk
                continue
            content = what if isinstance(what, bytes) else CH03.notebook(
                {e.grade_id: what for e in CH03.exercises})
            write(base / "submissions", student, content, relative)
    # Issue 31, item 4: a student folder whose name is 254 bytes long.
    write(base / "submissions", LONG_NAME, CH03.notebook({e.grade_id: "right" for e in CH03.exercises}),
          f"{CH03.name}.ipynb")
    log: list[str] = []
    start = time.monotonic()
    rows = grading.grade(base / "submissions", base / "out", jobs=2, limits=TEST_LIMITS, progress=log.append)
    return {"cases": cases, "rows": rows, "out": base / "out", "log": log, "outside": outside,
            "seconds": time.monotonic() - start}


def test_adversarial_scores(adversarial_run):
    """Every adversarial submission gets exactly the points of the exercises it really solved."""
    rows = adversarial_run["rows"]
    problems = []
    for student, (course, _, expected) in adversarial_run["cases"].items():
        mine = [r for r in rows if r.student == student and r.status != "ignored"]
        got = {r.exercise: r.points for r in mine}
        if got != expected:
            problems.append(f"{student}: expected {expected}, got {got} "
                            f"({[(r.exercise, r.status, r.reason) for r in mine if r.status != 'passed']})")
        if {r.exercise: r.max_points for r in mine} != {e.label: e.points for e in course.exercises}:
            problems.append(f"{student}: max points changed: {[(r.exercise, r.max_points) for r in mine]}")
        if not all(r.status in ("passed", grading.NEEDS_MANUAL) or r.reason for r in mine):
            problems.append(f"{student}: a failure without a reason")
    assert not problems, "\n".join(problems)


def test_adversarial_reasons_say_what_happened(adversarial_run):
    by = {(r.student, r.exercise): r for r in adversarial_run["rows"]}
    num = _pick(CH03, "number") or _pick(CH03, "choice")
    choice = _pick(CH03, "choice") or num
    close = _pick(CH03, "close")
    last = CH03.automatic[-1]
    loop = by[("loop_in_function", num.label)].reason
    # CPU time stops it on a machine that is not overloaded; the wall clock otherwise (both are said so).
    assert re.search(r"^no result \(the same in a second run\): (cpu limit: .* used more than 6 s of CPU time"
                     r"|wall limit: .* wall-clock limit: 30 s of a quiet machine's time)", loop), loop
    assert "killed by SIGSEGV (a segmentation fault)" in by[("segfault", last.label)].reason
    assert "not a valid notebook" in by[("malformed_json", num.label)].reason
    assert by[("untouched_stub", close.label)].status == "not attempted"
    assert by[("untouched_stub", num.label)].status == "not attempted"
    assert "not a plain value" in by[("always_equal_object", num.label)].reason
    assert "wrong value" in by[("float_subclass", num.label)].reason
    assert "MemoryError" in by[("memory_hog", choice.label)].reason
    for student in ("symlink_dir", "symlink_dir_08"):
        assert all("replaced or removed" in r.reason for r in adversarial_run["rows"]
                   if r.student == student and r.status not in ("ignored", grading.NEEDS_MANUAL)
                   and "graded by hand" not in r.reason), student
    refused = [r.reason for r in adversarial_run["rows"] if r.student in ("symlink_files", "fifo_and_dev_zero")
               and r.status == "failed"]
    assert refused and all("unusable" in reason or "not attempted" in reason or "NotImplementedError" in reason
                           for reason in refused), refused
    assert any("unusable" in reason for reason in refused)


def test_sandbox_contained_the_submissions(adversarial_run):
    for target in adversarial_run["outside"]:
        assert not os.path.exists(target), f"a submission wrote {target}"
    assert _leftover_processes() == [], "processes started by submissions survived grading"


def test_gradebook_complete_and_no_hidden_tests(adversarial_run):
    out = adversarial_run["out"]
    book = _read_gradebook(out / "gradebook.csv")
    assert list(book[0]) == grading.FIELDS
    graded = [r for r in book if r["status"] != "ignored"]
    students = set(adversarial_run["cases"]) | {s for s, (_, p, _) in FILE_CASES.items() if p} | {LONG_NAME}
    assert {r["student"] for r in graded} == students
    stems = grading.file_stems(students | {s for s in FILE_CASES})
    for student in students:
        assert (out / "feedback" / f"{stems[student]}.md").exists()
    assert {float(r["points"]) for r in graded if r["student"] == LONG_NAME} >= {e.points for e in CH03.automatic}
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == [], "temporary folders left"
    assert any(re.search(r"^\[(\d+)/\1\] ", line) for line in adversarial_run["log"]), "progress is shown"


def _hidden_names_and_lines(course: Course) -> tuple[set[str], set[str]]:
    """Names (of three letters or more) a chapter's hidden tests assign in their own statements (not in
    lambdas or comprehensions), and their source lines."""
    names, lines = set(), set()

    def assigned(body):
        for stmt in body:
            targets = (stmt.targets if isinstance(stmt, ast.Assign) else
                       [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For)) else [])
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name) and len(n.id) >= 3)
            for field in ("body", "orelse"):
                assigned(getattr(stmt, field, []) if isinstance(stmt, (ast.For, ast.While, ast.If, ast.With)) else [])

    for cell in course.solution.cells:
        if release.BEGIN_HIDDEN not in cell.source:
            continue
        hidden = cell.source.split(release.BEGIN_HIDDEN, 1)[1].split(release.END_HIDDEN, 1)[0]
        lines |= {ln.strip() for ln in hidden.split("\n") if len(ln.strip()) > 12}
        assigned(ast.parse(textwrap.dedent(hidden)).body)  # a gated cell's hidden block is indented
    return names, lines


def _fake_totals(text: str) -> list[str]:
    """Lines of a feedback file a reader could take for a heading, a total or a table row other than the
    file's own: the learner's text may appear only inside one table cell or inside a fenced block."""
    lines = text.splitlines()
    if len(lines) < 3 or not lines[2].startswith("Total:"):
        return ["no total on line 3"]
    allowed = re.compile(r"^(## \S+|### Your answer to exercise \S+ \(graded by hand\))$")
    out, fence = [], None
    for line in lines[3:]:
        if fence:
            fence = None if line == fence else fence
            continue
        opening = re.match(r"^(`{3,}|~{3,})text$", line)
        if opening:
            fence = opening.group(1)
        elif line.startswith("Total:") or (line.startswith("#") and not allowed.match(line)):
            out.append(line)
        elif line.startswith("|") and len(re.findall(r"(?<!\\)\|", line)) != 4:
            out.append(line)
    return out


def test_feedback_has_one_total_and_no_hidden_names(adversarial_run):
    """Issue 20, item 9: the exception text cannot fake a heading or a table row, and nothing of the
    hidden tests (their code, or the names they assign) reaches the feedback or the gradebook."""
    out = adversarial_run["out"]
    names, lines = _hidden_names_and_lines(CH03)
    book = (out / "gradebook.csv").read_text()
    for path in sorted((out / "feedback").glob("*.md")):
        text = path.read_text()
        assert _fake_totals(text) == [], path.name
        for line in lines:
            assert line not in text and line not in book, f"hidden line in {path.name}: {line}"
        for name in names:
            assert not re.search(rf"\b{re.escape(name)}\b", text), f"hidden name {name!r} in {path.name}"
    for row in _read_gradebook(out / "gradebook.csv"):
        assert "\n" not in row["reason"] and len(row["reason"]) <= grading.MAX_REASON
    theft = [r for r in adversarial_run["rows"] if r.student == "injection_and_theft" and r.status == "failed"]
    assert any("a hidden test failed (your code raised" in r.reason or "your code raised" in r.reason
               for r in theft), [r.reason for r in theft]


def test_file_cases_each_get_one_documented_row(adversarial_run):
    """Issue 20, item 11: each file-name case gives one stable row, as the README says."""
    rows = adversarial_run["rows"]
    full, nothing = points(CH03), zero(CH03)
    for student, (_, expected, ignored) in FILE_CASES.items():
        mine = [r for r in rows if r.student == student]
        graded = {r.exercise: r.points for r in mine if r.status != "ignored"}
        assert graded == ({"full": full, "zero": nothing, None: {}}[expected]), (student, graded)
        assert sum(r.status == "ignored" for r in mine) == ignored, (student, [(r.status, r.reason) for r in mine])
        assert all(r.max_points == 0 and r.points == 0 for r in mine if r.status == "ignored")
    by = {(r.student, r.exercise): r for r in rows if r.status != "ignored"}
    label = CH03.automatic[0].label
    assert "over the 50 MB limit for a notebook (--max-notebook-mb)" in by[("file_huge", label)].reason
    assert "several files could be this chapter's notebook" in by[("file_two_copies", label)].reason
    ignored = {}
    for r in rows:
        if r.status == "ignored":
            ignored.setdefault(r.student, []).append(r.reason)
    assert sorted(x.split(":")[1].strip() for x in ignored["file_with_py_and_upper_case"]) == [
        "not a notebook; only " + CH03.name + ".ipynb is graded",
        "not graded, " + CH03.name + ".ipynb is graded for this chapter"]
    assert all("a hidden file or folder is not graded" in x for x in ignored["file_in_dot_folder"])


def test_reasons_are_the_graders_own(adversarial_run):
    """Issue 31, item 3: an exception class named after what the submission could see (its arguments, the
    constants of the grader's functions, the call stack) and an exit code it chose reach neither the gradebook
    nor the feedback: every reason is the grader's own words."""
    out = adversarial_run["out"]
    leak = [r for r in adversarial_run["rows"] if r.student == "leak_03" and r.status != "passed"
            and r.status != grading.NEEDS_MANUAL]
    feedback = (out / "feedback" / "leak_03.md").read_text()
    own_words = feedback.split("### Your answer", 1)[0]  # the learner's own explain answer is theirs to see
    for text in [own_words, *(r.reason for r in leak)]:
        assert "q_" not in text and "57" not in re.sub(r"\\?\(cell \d+\\?\)|\d+ words", "", text), text
    allowed = re.compile(r"^(a hidden test failed \(your code raised an exception\)|[^:]+: your code raised an exception"
                         r"|no result: crashed: the notebook's process ended in .* \(an exit code other than 0 or 1\)"
                         r"|no result: the check did not run)$")
    assert leak and all(allowed.match(r.reason) for r in leak), [r.reason for r in leak]
    vocabulary = {text for _, text in grading.CATEGORIES}
    for row in adversarial_run["rows"]:
        hidden = re.match(r"^a hidden test failed \((.*)\)$", row.reason)
        if hidden:
            assert hidden.group(1) in vocabulary | {"wrong value", "wrong values", "not the right option",
                                                    "your result's record is unusable",
                                                    "returned an object that is not a plain value (a tensor, a "
                                                    "number or a string)",
                                                    "no result (the notebook stopped before this check)"} \
                or re.fullmatch(r"your code raised (an exception|[A-Za-z]+)", hidden.group(1)), row.reason


# --------------------------------------------------------------------------------------------------
# Issue 20 item by item, without a class


def test_records_are_read_without_following_links(tmp_path):
    """Item 1 and 2: links to correct records, FIFOs, /dev/zero, hard links, oversized files: refused,
    at once, whatever they point at."""
    import torch

    real = tmp_path / "real"
    real.mkdir()
    plaindata.dump(4.0, real, "probe_0")
    plaindata.dump(torch.ones(3), real, "probe_1")
    plaindata.dump(4.0, real, "linked")
    work = tmp_path / "work"
    (work / "records").mkdir(parents=True)
    os.symlink(real, work / "records" / "got")  # the folder is a link
    fd = safeio.open_dir(work)
    try:
        with pytest.raises(safeio.Refused):
            safeio.open_subdir(fd, "records/got")
        os.remove(work / "records" / "got")
        (work / "records" / "got").mkdir()
        got = safeio.open_subdir(fd, "records/got")
        os.symlink(real / "probe_0.json", work / "records" / "got" / "probe_0.json")  # a file is a link
        os.mkfifo(work / "records" / "got" / "probe_1.json")  # a named pipe: must not block
        os.symlink("/dev/zero", work / "records" / "got" / "probe_2.json")
        os.link(real / "linked.json", work / "records" / "got" / "probe_3.json")  # a hard link
        (work / "records" / "got" / "probe_4.json").write_bytes(b" " * (plaindata.MAX_JSON_BYTES + 1))
        start = time.monotonic()
        results = {i: plaindata.load(got, f"probe_{i}") for i in range(6)}
        assert time.monotonic() - start < 60  # a FIFO opened for reading would block for ever
        os.close(got)
    finally:
        os.close(fd)
    assert all(results[i]["status"] == "invalid" and "refused" in results[i]["detail"] for i in range(5)), results
    assert results[5]["status"] == "missing"
    # The same records, read where they really are, are fine: the refusal is about how they are reached.
    real_fd = safeio.open_dir(real)
    assert plaindata.load(real_fd, "probe_0") == {"status": "value", "value": 4.0}
    os.close(real_fd)


def test_a_notebook_without_cell_ids_is_read_as_the_course_s_cells():
    """A notebook saved in nbformat 3 (no cell ids; read as version 4, it gets new ones) has the same answers as the nbformat 4 original and no
    added cells: its read-only cells are matched by their text. Before, every one of them ran as "a cell you
    added at the top", all before the first answer, and one over the cell's CPU limit failed the whole
    chapter (the final CI of 2026-12-02: 0 of 9 points for a right nbformat-3 submission)."""
    chapter = grading.Chapter(CH03.path)
    original = CH03.notebook({e.grade_id: "right" for e in CH03.exercises})
    answers, extras, _ = grading.split_submission(chapter, original)
    old = nbformat.reads(nbformat.writes(nbformat.convert(copy.deepcopy(original), 3)), as_version=4)
    assert not {c.get("id") for c in old.cells} & {c.get("id") for c in original.cells}  # none of the ids kept
    old_answers, old_extras, _ = grading.split_submission(chapter, old)
    assert (old_answers, old_extras) == (answers, extras) and extras == {}, (list(old_extras), len(old_extras.get(None, [])))
    # A cell the learner added to such a notebook is still added, after the cell it follows.
    cells = list(old.cells)
    cells.insert(4, nbformat.v4.new_code_cell("x_added = 1"))
    _, added, _ = grading.split_submission(chapter, nbformat.from_dict({**old, "cells": cells}))
    assert added == {chapter.solution.cells[3].get("id"): ["x_added = 1"]}, added
    # An answer typed in a new cell below the untouched stub runs after the stub, as in version 4 (the red team of
    # stop 35: anchored before it, the stub redefined the function as "not attempted").
    learner = release.release_notebook(chapter.solution)
    stub = next(i for i, c in enumerate(learner.cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ex03_1")
    cells = list(learner.cells)
    cells.insert(stub + 1, nbformat.v4.new_code_cell("def my_answer():\n    return 42"))
    v4 = nbformat.from_dict({**learner, "cells": cells})
    v3 = nbformat.reads(nbformat.writes(nbformat.convert(copy.deepcopy(v4), 3)), as_version=4)
    orders = []
    for nb in (v4, v3):
        labels = [j.label for j in chapter.jobs(*grading.split_submission(chapter, nb)[:2], reference=False, prune=True)]
        orders.append(labels)
    assert orders[0] == orders[1], (orders[0], orders[1])
    answer_at = orders[1].index(next(label for label in orders[1] if label.startswith("your answer cell 3.1")))
    assert orders[1][answer_at + 1].startswith("a cell you added after cell"), orders[1][answer_at - 1:answer_at + 2]



def test_a_notebook_without_cell_ids_treats_edited_and_copied_cells_as_version_4_does():
    """Stop 35's red team (F2): with no course cell ids, a read-only cell the learner edited became an added cell
    (its whole edited copy ran beside the course's, which version 4 drops), and a cell added after a copy of a
    read-only cell was anchored after the original, before the names it uses existed. Cells are now matched by
    place and text, in order: each case splits into the same answers and added cells as the version-4 notebook."""
    chapter = grading.Chapter(CH03.path)
    learner = release.release_notebook(chapter.solution)

    def v3(nb):
        return nbformat.reads(nbformat.writes(nbformat.convert(copy.deepcopy(nb), 3)), as_version=4)

    def grade_id(cell):
        return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")

    setup = next(k for k, c in enumerate(learner.cells) if c.cell_type == "code" and not grade_id(c) and "import" in c.source)
    stub = next(k for k, c in enumerate(learner.cells) if grade_id(c) == "ex03_1")
    right = CH03.notebook({e.grade_id: "right" for e in CH03.exercises})
    cases = {}
    cells = copy.deepcopy(list(learner.cells))
    cells[setup].source += "\nprint('my note')"
    cases["a line added to a read-only cell"] = cells
    cells = copy.deepcopy(list(learner.cells))
    cells[stub:stub] = [nbformat.v4.new_code_cell(learner.cells[setup].source), nbformat.v4.new_code_cell("probe = 1")]
    cases["a read-only cell copied lower, then a cell added"] = cells
    cases["the right notebook"] = copy.deepcopy(list(right.cells))
    # Stop 36's red team: a cell of one's own in place of a deleted read-only cell runs (it was dropped as an
    # edit); a moved read-only cell is that cell (it ran again as an added cell); an answer whose metadata was
    # stripped, with a cell added after it, is still the answer (hand-graded and code); rubric cells, which
    # learners never get, no longer shift the alignment.
    own = max(k for k in range(setup + 1, stub) if learner.cells[k].cell_type == "code" and not grade_id(learner.cells[k]))
    cells = copy.deepcopy(list(learner.cells))
    cells[own] = nbformat.v4.new_code_cell("def my_helper(q):\n    return q * 2")
    cases["a read-only cell replaced by one's own"] = cells
    cells = copy.deepcopy(list(learner.cells))
    cells.append(cells.pop(own))
    cases["a read-only cell moved to the end"] = cells
    manual = next(k for k, c in enumerate(learner.cells) if grade_id(c) in {e.grade_id for e in chapter.manual})
    cells = copy.deepcopy(list(learner.cells))
    cells[manual].source, cells[manual].metadata = "Because the gradient ...", {}
    cells.insert(manual + 1, nbformat.v4.new_markdown_cell("my notes"))
    cases["a hand-graded answer stripped, a note after it"] = cells
    cells = copy.deepcopy(list(learner.cells))
    cells[stub].source, cells[stub].metadata = "def masked_softmax_lse(scores, allowed):\n    return 1", {}
    cells.insert(stub + 1, nbformat.v4.new_code_cell("print(masked_softmax_lse(1, 2))"))
    cases["a code answer stripped, a cell added after it"] = cells
    for case, cells in cases.items():
        v4 = nbformat.from_dict({**learner, "cells": cells})
        assert grading.split_submission(chapter, v3(v4)) == grading.split_submission(chapter, v4), case
    # The one case that differs, by choice: a read-only cell rewritten (less than half its text kept) cannot be
    # told from a cell of one's own in its place, so it runs as an added cell (version 4 drops it).
    cells = copy.deepcopy(list(learner.cells))
    cells[setup].source = "x = 1  # all of it replaced"
    _, extras, _ = grading.split_submission(chapter, v3(nbformat.from_dict({**learner, "cells": cells})))
    assert extras == {chapter.solution.cells[setup - 1].get("id"): ["x = 1  # all of it replaced"]}, extras
    # An answer cell whose metadata was stripped, at the answer's place, is still that answer.
    old = v3(right)
    answer_at = next(k for k, c in enumerate(old.cells) if grade_id(c) == "ex03_1")
    old.cells[answer_at].metadata = {}
    answers, _, _ = grading.split_submission(chapter, old)
    assert answers["ex03_1"] == grading.split_submission(chapter, right)[0]["ex03_1"]

def test_reference_values_never_touch_the_disk():
    """Item 1: after the reference run the expected values live in the grader's memory only."""
    needs_bubblewrap()
    grader = grading.Grader(SOLUTIONS[0].parent, TEST_LIMITS, "bwrap", names={CH03.name})
    try:
        grader.prepare(CH03.name)
        left = sorted(p.relative_to(grader.scratch).as_posix() for p in grader.scratch.rglob("*")
                      if not p.relative_to(grader.scratch).as_posix().startswith("course"))
        assert left == [], left
        chapter = grader.chapters[CH03.name]
        assert set(chapter.reference) == {p.index for p in chapter.probes}
        assert all(r["status"] == "value" for r in chapter.reference.values())
    finally:
        grader.close()


def test_sandbox_sees_only_the_course_library(tmp_path):
    """Item 3: inside the sandbox the repository is utils/ and coursetools/ and nothing else."""
    needs_bubblewrap()
    library = sandbox.stage_library(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    os.chmod(tmp_path, 0o711)
    routes = [ROOT / ".git", ROOT / "solutions", ROOT / "_build", ROOT / "chapters", ROOT / "README.md",
              Path(sys.prefix).parent / "solutions", Path(sys.prefix).parent / ".git"]
    common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-common-dir"], capture_output=True,
                            text=True).stdout.strip()
    routes.append((ROOT / common).resolve().parent / "solutions")
    # The Python environment is bound at its own path (a venv records absolute paths), so the folders above
    # it exist inside the sandbox; each must show only the next step towards the environment.
    python_paths = [p for p in sandbox._python_paths()
                    if not any(str(p).startswith(s + "/") for s in sandbox.SYSTEM)]
    above_python: dict[str, set[str]] = {}
    for path in python_paths:
        for parent in path.parents:
            if str(parent) != "/":
                above_python.setdefault(str(parent), set()).add(path.parts[len(parent.parts)])
    source = textwrap.dedent(f"""
        import json, os, subprocess
        seen = {{}}
        for path in {[str(r) for r in routes]!r}:
            seen[path] = os.path.exists(path)
        git = subprocess.run(["git", "--git-dir", {str(ROOT / '.git')!r}, "log", "-1"], capture_output=True)
        seen["git"] = git.returncode == 0
        seen["/"] = sorted(os.listdir("/"))
        seen["/course"] = sorted(os.listdir("/course"))
        notebooks = []
        for folder, dirs, files in os.walk("/"):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in ("/proc", "/sys", "/dev")]
            notebooks += [os.path.join(folder, f) for f in files if f.endswith(".ipynb")]
            if ".git" in dirs or ("HEAD" in files and "objects" in dirs and "refs" in dirs):
                notebooks.append(folder + " (a git repository)")
        seen["notebooks"] = [n for n in notebooks if "site-packages" not in n]
        seen["above_python"] = {{a: sorted(os.listdir(a)) for a in {sorted(above_python)!r}}}
        open("seen.json", "w").write(json.dumps(seen))
    """)
    # Keep the folder: run in a copy of the workdir logic, then read what the cell saw.
    result = sandbox.run_jobs([sandbox.Job("cell", "cell 1", source=source)], work, library, TEST_LIMITS)
    assert result.status == "finished", result
    seen = json.loads((work / "seen.json").read_text())
    assert not any(seen[str(r)] for r in routes), {k: v for k, v in seen.items() if v is True}
    assert seen["git"] is False
    assert seen["/course"] == ["coursetools", "utils"]
    assert seen["notebooks"] == [], seen["notebooks"][:10]
    python_roots = {p.parts[1] for p in python_paths}
    assert not set(seen["/"]) - {"bin", "course", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "root",
                                 "sbin", "submission", "tmp", "usr", "work", "opt", "home", "srv", "var",
                                 *python_roots}
    for folder, listing in seen["above_python"].items():
        assert set(listing) <= above_python[folder], (folder, listing)
    command = sandbox.bwrap_command(work, library, as_root=True)
    sources = [command[i + 1] for i, a in enumerate(command) if a in ("--bind", "--ro-bind")]
    allowed = {*sandbox.SYSTEM, str(library), str(work), *map(str, sandbox._python_paths())}
    assert set(sources) <= allowed, set(sources) - allowed
    assert "/" not in sources and str(ROOT) not in sources


def test_user_ids_are_reserved_per_run():
    """Item 4: two reservations never share an id, in one process or across processes."""
    if os.geteuid() != 0:
        pytest.skip("user ids are switched only when grading as root")
    a, b = sandbox.UidReservation(), sandbox.UidReservation()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from coursetools.grading import sandbox
        r = sandbox.UidReservation()
        print(r.uid, flush=True)
        time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        other = int(holder.stdout.readline())
        c = sandbox.UidReservation()
        assert len({a.uid, b.uid, c.uid, other}) == 4
        c.release()
    finally:
        holder.kill()
        holder.wait()
        a.release()
        b.release()


def test_got_form_holds_no_expected_values():
    """Item 5: in every chapter, the code that runs in the submission computes no expected value and
    keeps its inputs in the probe's own scope (no global is assigned)."""
    for path in SOLUTIONS:
        chapter = grading.Chapter(path)
        for index, check in chapter.checks.items():
            tree = ast.parse(check.got_source)
            function = tree.body[0]
            assert len(tree.body) == 1 and function.name == probes.FUNCTION
            assert not any(isinstance(n, (ast.Global, ast.Nonlocal))
                           for n in ast.walk(tree))
            # The names the original cell gives only to expected values are gone from the probe's scope:
            # the got form's own statements bind only renamed inputs (``_gN``) and ``_`` for discarded values.
            expected_only = _expected_only_names(chapter.solution.cells[index].source)
            top = {n.id for stmt in function.body for n in ast.walk(stmt) if isinstance(n, ast.Name)
                   and not any(stmt is d for d in function.body if isinstance(d, (ast.FunctionDef, ast.ClassDef)))}
            assert not top & expected_only, f"{path.name} {check.exercise}: {top & expected_only}"
            bound = {n.id for stmt in function.body if isinstance(stmt, ast.Assign) for t in stmt.targets
                     for n in ([t] if isinstance(t, ast.Name) else t.elts if isinstance(t, (ast.Tuple, ast.List)) else [])
                     if isinstance(n, ast.Name)}
            assert all(re.fullmatch(r"_g\d+|_", name) for name in bound), f"{path.name} {check.exercise}: {bound}"
            discards = [i for i, stmt in enumerate(function.body) if isinstance(stmt, ast.Assign)
                        and "_" in {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}]
            assert all(isinstance(function.body[i + 1], ast.Delete) for i in discards), check.exercise


def _expected_only_names(source: str) -> set[str]:
    """Names a check cell assigns that appear in an `expected` argument and in no `got` argument."""
    tree = ast.parse(source)
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    in_got, in_expected = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in probes.KINDS \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "check" and len(node.args) >= 2:
            in_got |= {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
            in_expected |= {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
    return (in_expected - in_got) & assigned


def test_numpy_scalars_are_numbers_and_strings(tmp_path):
    """Item 6: NumPy scalars are accepted by the grader exactly when the learner's self-check accepts
    them; objects that merely claim to be equal are not."""
    values = {"sqrt": np.sqrt(16.0), "f32": np.float32(4.0), "i64": np.int64(4), "str": np.str_("c"),
              "bool": np.bool_(True)}
    for stem, value in values.items():
        plaindata.dump(value, tmp_path, stem)
    fd = safeio.open_dir(tmp_path)
    try:
        got = {stem: plaindata.load(fd, stem)["value"] for stem in values}
    finally:
        os.close(fd)
    assert got == {"sqrt": 4.0, "f32": 4.0, "i64": 4, "str": "c", "bool": True}
    assert [type(v) for v in got.values()] == [float, float, int, str, bool]
    for value in (np.sqrt(16.0), np.float32(4.0), np.int64(4)):
        assert checks.number(value, 4.0) and checks.number(got["sqrt"], 4.0)
    assert checks.choice(np.str_("c"), "c", ["a", "b", "c"]) and checks.choice(got["str"], "c", ["a", "b", "c"])

    class Liar(np.float64):
        def __eq__(self, other):
            return True

    class Text(str):
        def lower(self):
            return "c"

    # Issue 31, item 9: a subclass counts as the built-in value it holds, in the grader as in the self-check,
    # whatever its own __eq__ or lower() claim; np.longdouble and np.longlong are numbers in both.
    wide = {"liar": Liar(1.0), "text": Text("a"), "longdouble": np.longdouble(4.0), "longlong": np.longlong(4)}
    for stem, value in wide.items():
        plaindata.dump(value, tmp_path, stem)
    fd = safeio.open_dir(tmp_path)
    loaded = {stem: plaindata.load(fd, stem)["value"] for stem in wide}
    os.close(fd)
    assert loaded == {"liar": 1.0, "text": "a", "longdouble": 4.0, "longlong": 4}
    assert [type(v) for v in loaded.values()] == [float, str, float, int]
    assert not checks.number(Liar(1.0), 4.0) and not checks.number(loaded["liar"], 4.0)
    assert not checks.choice(Text("a"), "c", ["a", "c"]) and not checks.choice(loaded["text"], "c", ["a", "c"])
    assert checks.choice(Text("c"), "c", ["a", "c"]) and checks.choice(loaded["text"], "a", ["a", "c"])
    for value in (np.longdouble(4.0), np.longlong(4)):
        assert checks.number(value, 4.0) and checks.number_form(value)


# Issue 31, item 9(f): a Jacobian returned in float64 for a float32 input (values right, dtype not). Decided:
# refused in both, since the statement asks for the input's dtype (README, "What counts as the same answer").
FLOAT64_JACOBIANS = {
    "ex01_1": "def rnn_step_jacobian(h_t, W_hh):\n    return ((1 - h_t**2).unsqueeze(-1) * W_hh).double()\n",
    "ex03_2": "def softmax_jacobian(p):\n    return (torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)).double()\n",
}


def _self_check(course: Course, grade_id: str, answer: str) -> tuple[str, str]:
    """What the learner's own check cell of ``grade_id`` says of ``answer``: its status in utils.checks.RESULTS
    and the line it prints."""
    import contextlib
    import io

    check_cell = course.solution.cells[course.exercise(grade_id).check_cell].source
    visible = check_cell.partition(release.BEGIN_HIDDEN)[0]
    import math

    import torch

    space = {"torch": torch, "math": math, "check": checks}
    exec(compile(answer, f"<answer {grade_id}>", "exec"), space)
    label = course.exercise(grade_id).label
    checks.RESULTS.pop(label, None)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(visible, f"<check {grade_id}>", "exec"), space)
    return checks.RESULTS[label], printed.getvalue()


def test_float64_jacobian_for_float32_input_fails_in_both(tmp_path):
    """Item 9(f): exercises 1.1 and 3.2 with a Jacobian that is right in float64 for a float32 input: the
    grader gives 0 with "wrong dtype" and the learner's self-check says "not yet" too; the solution passes both."""
    needs_bubblewrap()
    courses = {"ex01_1": Course(chapter_path("01")), "ex03_2": CH03}
    for grade_id, course in courses.items():
        write(tmp_path / "subs", "float64", course.notebook({grade_id: "right"},
                                                            sources={grade_id: FLOAT64_JACOBIANS[grade_id]}),
              f"{course.name}.ipynb")
        write(tmp_path / "subs", "solution", course.notebook({grade_id: "right"}), f"{course.name}.ipynb")
    rows = grading.grade(tmp_path / "subs", tmp_path / "out", jobs=2, limits=TEST_LIMITS, progress=lambda _: None)
    for grade_id, course in courses.items():
        exercise = course.exercise(grade_id)
        row = {r.student: r for r in rows if r.chapter == course.name and r.exercise == exercise.label}
        assert row["float64"].points == 0 and row["float64"].reason == "a hidden test failed (wrong dtype)", row
        assert row["solution"].points == exercise.points, row
        status, said = _self_check(course, grade_id, FLOAT64_JACOBIANS[grade_id])
        assert status == "failed" and "dtype torch.float64" in said and "the grader refuses any other dtype" in said, said
        assert _self_check(course, grade_id, exercise.right)[0] == "passed"


def test_crafted_records_fail_one_probe_each(tmp_path):
    """Item 8: malformed records fail only their own probe, with a reason; nothing raises."""
    records = {
        "deep": "[" * 100_000 + "]" * 100_000,
        "float_four": json.dumps({"status": "value", "type": "plain", "value": {"__float__": "four"}}),
        "strings": json.dumps({"status": "value", "type": "tensor", "dtype": "torch.float32", "device": "cpu",
                               "shape": [2]}),
        "objects": json.dumps({"status": "value", "type": "ndarray", "shape": [1]}),
        "shape_lie": json.dumps({"status": "value", "type": "tensor", "dtype": "torch.float32", "device": "cpu",
                                 "shape": [5]}),
        "no_status": json.dumps({"type": "plain", "value": 4}),
        "long_int": json.dumps({"status": "value", "type": "plain", "value": 0}).replace("0", "9" * 5000),
        "not_utf8": b"\xff\xfe\x00",
        "raised_text": json.dumps({"status": "raised", "detail": "Boom\n# Total: 4 / 4\n| a | b |"}),
    }
    for stem, content in records.items():
        path = tmp_path / f"{stem}.json"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    np.save(tmp_path / "strings.npy", np.array(["a", "b"]))
    np.save(tmp_path / "objects.npy", np.array([object()], dtype=object), allow_pickle=True)
    np.save(tmp_path / "shape_lie.npy", np.zeros(2, dtype=np.float32))
    fd = safeio.open_dir(tmp_path)
    try:
        loaded = {stem: plaindata.load(fd, stem) for stem in records}
    finally:
        os.close(fd)
    for stem, record in loaded.items():
        if stem == "raised_text":
            assert record == {"status": "raised", "detail": "an exception"}
        else:
            assert record["status"] == "invalid" and record["detail"], (stem, record)
    probe = probes.Probe(0, "ex03_1", "number", hidden=True)
    verdict = grading._verdict(probe, loaded["float_four"], {"status": "value", "value": 4.0})
    assert not verdict.ok and grading._reason(probe, loaded["float_four"], verdict) == (
        "a hidden test failed (your result's record is unusable)")


def test_text_from_submissions_is_one_escaped_line():
    """Item 9: whatever a submission puts in its exception, the gradebook gets one short line and the
    feedback shows it as text."""
    evil = "Boom\n# Total: 4 / 4 points\n| 3.1 | 2 / 2 | passed |\r\x1b[2J" + "x" * 300
    line = grading.clean_text(evil)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and len(line) <= grading.MAX_REASON
    assert plaindata.describe_exception(evil) == "an exception"
    assert plaindata.describe_exception("torch.linalg.LinAlgError") == "torch.linalg.LinAlgError"
    row = grading.Row("ada", CH03.name, "3.1", 0.0, 2.0, "failed", line)
    text = grading._feedback("ada", [row])
    assert _fake_totals(text) == [] and "| passed |" not in text and "\\# Total" in text
    manual = grading.Row("ada", CH03.name, "3.9", 0.0, 1.0, grading.NEEDS_MANUAL, "answered",
                         answer="# Total: 99 / 99\n```\n| x |")
    text = grading._feedback("ada", [row, manual])
    fence = grading._fence(manual.answer)
    assert f"{fence}text\n# Total: 99 / 99\n```\n| x |\n{fence}" in text and len(fence) == 4


def test_hidden_test_source_never_reaches_the_submission():
    """Item 9: what crosses into the submission is compiled code sent one cell at a time; no hidden test
    line and no name a hidden test assigns is in it (locals are renamed), and no job file exists."""
    for course in (CH03, CH08):
        chapter = grading.Chapter(course.path)
        names, lines = _hidden_names_and_lines(course)
        jobs = chapter.jobs({}, {}, reference=False, prune=True)
        wire = b"".join(job.frame(i) for i, job in enumerate(jobs)).decode("latin-1")
        checks_wire = b"".join(job.frame(i) for i, job in enumerate(jobs) if job.kind == "check").decode("latin-1")
        for line in lines:
            assert line not in wire, line
        for name in names:
            assert not re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", checks_wire), name
        assert "BEGIN HIDDEN" not in wire and "BEGIN SOLUTION" not in wire
    assert "job.json" not in Path(sandbox.__file__).read_text()


def test_time_limits_are_the_graders(tmp_path):
    """Item 10: the process ends when the last cell ends (a non-daemon thread does not hold it); a
    thread that fakes progress or a cell that patches the clocks does not stretch a cell's limit."""
    needs_bubblewrap()
    library = sandbox.stage_library(tmp_path / "lib")
    os.chmod(tmp_path, 0o711)
    limits = sandbox.Limits(cell_cpu_seconds=2, notebook_cpu_seconds=30, wall_factor=15)

    def run(*sources, limits=limits):
        work = Path(tempfile.mkdtemp(dir=tmp_path))
        jobs = [sandbox.Job("cell", f"cell {i + 1}", source=s) for i, s in enumerate(sources)]
        return sandbox.run_jobs(jobs, work, library, limits)

    thread = "import threading, time\nthreading.Thread(target=time.sleep, args=(1000,)).start()"
    result = run(thread, "x = 1")
    assert result.status == "finished" and result.wall_seconds < 500, result  # it did not wait the 1000 s
    fake_progress = textwrap.dedent("""
        import os, sys, threading, time, json
        fd = int(sys.argv[1])
        def fake():
            for i in range(10 ** 6):
                os.write(fd, (json.dumps({"done": i % 50, "error": None}) + "\\n").encode())
                time.sleep(0.001)
        threading.Thread(target=fake, daemon=True).start()
        while True:
            pass
    """)
    result = run(fake_progress, *["x = 1"] * 30)
    assert result.status in ("protocol", "cpu limit") and result.stopped_at == 0, result
    clocks = "import time\ntime.time = lambda: 0.0\ntime.monotonic = lambda: 0.0\ntime.perf_counter = lambda: 0.0\n" + LOOP
    result = run(clocks)
    assert result.status == "cpu limit" and "cell 1 used more than 2 s of CPU time" in result.detail, result
    sleepy = sandbox.Limits(cell_cpu_seconds=1, notebook_cpu_seconds=30, wall_factor=4)
    result = run(SLEEP, limits=sleepy)
    assert result.status == "wall limit" and "wall-clock limit" in result.detail, result
    # 4 s of a quiet machine's time: at least 4 s of wall time, more on a busy machine (issue 31, item 10).
    assert "4 s of a quiet machine's time" in result.detail and result.wall_seconds >= sleepy.cell_wall_seconds
    assert _leftover_processes() == []


def test_exit_reasons_name_the_signal():
    assert sandbox.exit_reason(139, sandboxed=True) == "killed by SIGSEGV (a segmentation fault)"
    assert sandbox.exit_reason(-9, sandboxed=False) == "killed by SIGKILL (killed)"
    assert sandbox.exit_reason(1, sandboxed=True) == "exit code 1"
    assert sandbox.exit_reason(137, sandboxed=False) == "an exit code other than 0 or 1"
    assert sandbox.exit_reason(128 + 40, sandboxed=True) == "killed by a signal"  # a number the submission chose


# --------------------------------------------------------------------------------------------------
# Item 4: concurrent runs and a busy machine


def _small_class(folder: Path) -> dict[str, dict[str, float]]:
    """Two submissions of chapter 03, all right and mixed (right, wrong, blank); student -> label -> points."""
    right = {e.grade_id: "right" for e in CH03.exercises}
    mixed = CH03.class_patterns(4, seed=20)[3]
    expected = {}
    for student, states in (("ana", right), ("cai", mixed)):
        write(folder, student, CH03.notebook(states), f"{CH03.name}.ipynb")
        expected[student] = {label: pts for label, (pts, _) in CH03.expected(states).items()}
    return expected


def _scores(gradebook: Path) -> dict[str, dict[str, float]]:
    scores: dict[str, dict[str, float]] = {}
    for row in _read_gradebook(gradebook):
        scores.setdefault(row["student"], {})[row["exercise"]] = float(row["points"])
    return scores


GRADE_COMMAND = [sys.executable, "-m", "coursetools.grading", "--cell-timeout", "6", "--notebook-timeout", "60",
                 "--wall-factor", "5", "--memory-gb", "3", "--jobs", "1"]


def test_concurrent_runs_give_identical_gradebooks(tmp_path):
    """Item 4: the same class graded by two, then four grader processes at once: identical gradebooks,
    all right (a run no longer kills another run's processes or shares its user ids)."""
    needs_bubblewrap()
    expected = _small_class(tmp_path / "subs")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for count in (2, 4):
        procs = [subprocess.Popen([*GRADE_COMMAND, str(tmp_path / "subs"), "--out", str(tmp_path / f"out{count}-{k}")],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for k in range(count)]
        outputs = [p.communicate(timeout=600)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs), outputs
        books = [(tmp_path / f"out{count}-{k}" / "gradebook.csv").read_text() for k in range(count)]
        assert len(set(books)) == 1, f"{count} concurrent runs disagree"
        assert _scores(tmp_path / f"out{count}-0" / "gradebook.csv") == expected
    assert _leftover_processes() == []


def test_grading_beside_a_cpu_hog(tmp_path):
    """Item 4: with every core busy, the same grades; limits count CPU time, so correct work is not cut off."""
    needs_bubblewrap()
    expected = _small_class(tmp_path / "subs")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        rows = grading.grade(tmp_path / "subs", tmp_path / "out", jobs=2, limits=TEST_LIMITS, progress=lambda _: None)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert _scores(tmp_path / "out" / "gradebook.csv") == expected
    assert not any("limit" in r.reason for r in rows), [r.reason for r in rows if "limit" in r.reason]


# --------------------------------------------------------------------------------------------------
# Item 7: without the sandbox


def test_no_sandbox_refuses_root_and_says_why(tmp_path, monkeypatch):
    messages: list[str] = []
    if os.geteuid() == 0:
        with pytest.raises(grading.GradingRefused) as refused:
            grading.resolve_mode("none", allow_root=False, progress=messages.append)
        assert "refusing to grade as root without the sandbox" in str(refused.value)
        assert "switched off with --no-sandbox" in str(refused.value) and "--allow-root" in str(refused.value)
        assert "is not installed" not in str(refused.value) or not sandbox.bubblewrap_available()
        # In a checkout other users cannot enter (`mktemp -d` makes 0700) --allow-root is refused for that
        # reason instead: the next test covers it; here the environment is taken as reachable.
        monkeypatch.setattr(sandbox, "python_fails_as_another_user", lambda: None)
        assert grading.resolve_mode("none", allow_root=True, progress=messages.append) == "none"
        assert "reserved unprivileged user id" in messages[-1]
    else:
        assert grading.resolve_mode("none", allow_root=False, progress=messages.append) == "none"
        assert "as your own user" in messages[-1]
    assert "switched off with --no-sandbox" in messages[-1] and "solutions/" in messages[-1]
    (tmp_path / "subs").mkdir()
    result = subprocess.run([sys.executable, "-m", "coursetools.grading", str(tmp_path / "subs"), "--out",
                             str(tmp_path / "out"), "--no-sandbox"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    if os.geteuid() == 0:
        assert result.returncode == 2 and "refusing to grade as root" in result.stderr
        assert not (tmp_path / "out").exists()


def test_no_sandbox_as_root_refuses_an_environment_others_cannot_reach(tmp_path, monkeypatch):
    """Item 7: forced without the sandbox as root, a Python the reserved user cannot start is refused up front
    with the reason, instead of every submission failing to start."""
    if os.geteuid() != 0:
        pytest.skip("this is about grading as root")
    closed = Path(tempfile.mkdtemp(dir="/tmp")) / "closed"
    try:
        os.chmod(closed.parent, 0o755)  # mkdtemp makes it 0700: only `closed` is to be shut
        closed.mkdir()
        python = closed / "python"
        python.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")  # the other user must read it
        python.chmod(0o755)
        os.chmod(closed, 0o700)
        monkeypatch.setattr(sys, "executable", str(python))
        failure = sandbox.python_fails_as_another_user()
        if failure is None:
            pytest.skip("this kernel lets other users into a mode-700 folder, so the case cannot be made here")
        assert "cannot start" in failure and str(python) in failure
        with pytest.raises(grading.GradingRefused, match="reserved unprivileged user.*cannot start"):
            grading.resolve_mode("none", allow_root=True, progress=lambda _: None)
        monkeypatch.setattr(sandbox, "python_fails_as_another_user", lambda: None)
        assert grading.resolve_mode("none", allow_root=True, progress=lambda _: None) == "none"
    finally:
        shutil.rmtree(closed.parent)


def test_no_sandbox_forced_as_root_contains_the_submission(tmp_path):
    """Item 7: forced without the sandbox as root, a submission runs as an unprivileged user: it cannot
    write solutions/, the grader's code or /etc, and a detached child cannot rewrite the gradebook."""
    if os.geteuid() != 0:
        pytest.skip("this is about grading as root")
    failure = sandbox.python_fails_as_another_user()
    if failure is not None:  # e.g. a checkout made with `mktemp -d` (mode 0700); the grader refuses, tested above
        pytest.skip(f"an unprivileged submission user cannot start Python here: {failure}")
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    shutil.copy(CH03.path, solutions / CH03.path.name)
    out = tmp_path / "out"
    targets = [str(solutions / "ESCAPED"), str(ROOT / "coursetools" / "ESCAPED"), "/etc/course-grader-escape",
               str(out / "gradebook.csv")]
    rewrite = textwrap.dedent(f"""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3); open({str(out / 'gradebook.csv')!r}, 'w').write('4242')"],
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    """)
    right = {e.grade_id: "right" for e in CH03.exercises}
    nb = add_cell(add_cell(CH03.notebook(right), WRITE_OUTSIDE.format(targets=targets)), rewrite)
    write(tmp_path / "subs", "ada", nb, f"{CH03.name}.ipynb")
    messages: list[str] = []
    try:
        grading.grade(tmp_path / "subs", out, limits=TEST_LIMITS, solutions_dir=solutions, sandbox_mode="none",
                      allow_root=True, progress=messages.append)
        time.sleep(4)  # longer than the detached child waited
        assert _scores(out / "gradebook.csv") == {"ada": points(CH03)}
        for target in targets[:3]:
            assert not os.path.exists(target), target
        assert _leftover_processes() == []
        assert any("WARNING: the sandbox is switched off with --no-sandbox" in m for m in messages)
    finally:
        for target in targets[:3]:
            if os.path.exists(target):
                os.remove(target)


# --------------------------------------------------------------------------------------------------
# Issue 14: a class, and exercises graded by hand


def _class_chapters() -> list[Course]:
    names = ["03", "08"] + [p.name[:2] for p in SOLUTIONS if p.name[:2] not in ("03", "08")]
    return [CH03, CH08, Course(chapter_path(names[2]))]


def test_class_of_30_across_three_chapters(tmp_path):
    """Issue 14, item 5: ten students x three chapters, answers right, wrong or blank per exercise:
    every row's points and status are exactly what the answers deserve."""
    needs_bubblewrap()
    courses = _class_chapters()
    expected: dict[tuple[str, str, str], tuple[float, set[str]]] = {}
    for course in courses:
        for k, states in enumerate(course.class_patterns(10, seed=14)):
            student = f"student{k:02d}"
            write(tmp_path / "subs", student, course.notebook(states), f"{course.name}.ipynb")
            for label, outcome in course.expected(states).items():
                expected[(student, course.name, label)] = outcome
    rows = grading.grade(tmp_path / "subs", tmp_path / "out", jobs=2, limits=TEST_LIMITS, progress=lambda _: None)
    got = {(r.student, r.chapter, r.exercise): r for r in rows}
    assert set(got) == set(expected)
    problems = [f"{key}: expected {pts} {statuses}, got {got[key].points} {got[key].status} ({got[key].reason})"
                for key, (pts, statuses) in expected.items()
                if got[key].points != pts or got[key].status not in statuses]
    assert not problems, "\n".join(problems)
    assert len({(r.student, r.chapter) for r in rows}) == 30


MANUAL_NOTEBOOK = [
    ("markdown", "# Chapter 99: a tiny chapter for the grader's tests", {}),
    ("code", "from utils import checks as check", {}),
    ("markdown", "### Exercise 99.1 (implement, ★, 2 min)\n\nReturn twice `x`.", {}),
    ("code", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
     {"grade": False, "grade_id": "ex99_1", "locked": False, "schema_version": 3, "solution": True, "task": False}),
    ("code", 'check.exercise("99.1", lambda: check.number(double(2), 4.0, name="double(2)"))\n'
             "### BEGIN HIDDEN TESTS\n"
             'check.require(lambda: check.number(double(21), 42.0, name="double(21)"))\n'
             "### END HIDDEN TESTS",
     {"grade": True, "grade_id": "ex99_1_check", "locked": True, "points": 2, "schema_version": 3,
      "solution": False, "task": False}),
    ("markdown", "### Exercise 99.2 (explain, ★★, 10 min)\n\nWhy does attention scale the scores?", {}),
    ("markdown", "### BEGIN SOLUTION\nThe scores' variance grows with $d_k$; the scale keeps the softmax out of "
                 "saturation.\n### END SOLUTION",
     {"grade": True, "grade_id": "ex99_2", "locked": False, "points": 3, "schema_version": 3, "solution": True,
      "task": False}),
    ("markdown", "Rubric: 3 points for variance and saturation.", {"tags": ["rubric"]}),
]


def _manual_solutions(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    for kind, source, meta in MANUAL_NOTEBOOK:
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        if meta.get("tags"):
            cell.metadata["tags"] = meta["tags"]
        elif meta:
            cell.metadata["nbgrader"] = meta
        nb.cells.append(cell)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "99_manual_demo.ipynb"
    notebooks.write(nb, path)
    return path


def test_manual_exercises_are_listed_for_hand_grading(tmp_path):
    """Explain exercises: answered ones are "needs manual grading" with 0 automatic points and their
    maximum; blank ones "not attempted"; the text goes to the feedback (as text) and to manual/."""
    needs_bubblewrap()
    course = Course(_manual_solutions(tmp_path / "solutions"))
    answer = "Because the variance of q·k grows like d_k.\n\n# Total: 99 / 99 points\n```python\nprint(1)\n```"
    cases = {
        "ana": ({e.grade_id: "right" for e in course.exercises}, {}),
        "ben": ({"ex99_1": "right", "ex99_2": "blank"}, {}),
        "cai": ({"ex99_1": "wrong"}, {"ex99_2": answer}),
    }
    for student, (states, sources) in cases.items():
        write(tmp_path / "subs", student, course.notebook(states, sources), f"{course.name}.ipynb")
    # A second chapter whose hidden test is not a probe (an authoring error): its rows say so, the
    # other chapter is graded as usual.
    broken = notebooks.read(course.path)
    broken.cells[4].source = broken.cells[4].source.replace(
        'check.require(lambda: check.number(double(21), 42.0, name="double(21)"))', "assert double(21) == 42")
    notebooks.write(broken, tmp_path / "solutions" / "98_broken.ipynb")
    write(tmp_path / "subs", "ana", course.notebook({}), "98_broken.ipynb")
    log: list[str] = []
    rows = grading.grade(tmp_path / "subs", tmp_path / "out", limits=TEST_LIMITS, solutions_dir=tmp_path / "solutions",
                         progress=log.append)
    errors = [r for r in rows if r.chapter == "98_broken"]
    assert [(r.exercise, r.status, r.max_points) for r in errors] == [("99.1", "error", 2.0), ("99.2", "error", 3.0)]
    assert all("the chapter cannot be graded" in r.reason for r in errors)
    assert any(line.startswith("ERROR: chapter 98_broken is not graded") for line in log)
    rows = [r for r in rows if r.chapter != "98_broken"]
    by = {(r.student, r.exercise): (r.points, r.max_points, r.status) for r in rows}
    assert by == {
        ("ana", "99.1"): (2.0, 2.0, "passed"), ("ana", "99.2"): (0.0, 3.0, "needs manual grading"),
        ("ben", "99.1"): (2.0, 2.0, "passed"), ("ben", "99.2"): (0.0, 3.0, "not attempted"),
        ("cai", "99.1"): (0.0, 2.0, "failed"), ("cai", "99.2"): (0.0, 3.0, "needs manual grading"),
    }
    feedback = (tmp_path / "out" / "feedback" / "cai.md").read_text()
    assert answer in feedback and "````text\n" + answer + "\n````" in feedback
    assert sum("Total:" in line for line in feedback.splitlines()) == 2  # ours, and the learner's text in a fence
    assert feedback.count("\nTotal: 0 / 5 points (3 of them graded by hand, not yet included)") == 1
    ana = (tmp_path / "out" / "feedback" / "ana.md").read_text()
    assert "The scores' variance grows with $d_k$" in ana
    manual = (tmp_path / "out" / "manual" / course.name / "99.2.md").read_text()
    assert "## ana" in manual and "## cai" in manual and "## ben\n\n(no answer written)" in manual
    assert answer in manual
    book = [r for r in _read_gradebook(tmp_path / "out" / "gradebook.csv") if r["chapter"] != "98_broken"]
    model = course.exercise("ex99_2").right
    assert [r["reason"] for r in book if r["exercise"] == "99.2"] == [
        f"answered ({len(model.split())} words); graded by hand", "no answer written (this exercise is graded by hand)",
        f"answered ({len(answer.split())} words); graded by hand"]


def test_handin_lists_manual_exercises(tmp_path):
    """The hand-in check lists explain exercises as answered / not answered (to be graded by hand)."""
    from coursetools.handin import ANSWERED, NOT_ANSWERED, summarise

    course = Course(_manual_solutions(tmp_path / "solutions"))
    blank, answered = tmp_path / "blank.ipynb", tmp_path / "answered.ipynb"
    notebooks.write(course.notebook({}), blank)
    notebooks.write(course.notebook({e.grade_id: "right" for e in course.exercises}), answered)
    env_path = os.environ.get("PYTHONPATH")
    results, problems = summarise(blank)
    assert results == {"99.1": "not attempted yet", "99.2": NOT_ANSWERED}, (results, problems, env_path)
    results, problems = summarise(answered)
    assert results == {"99.1": "passed", "99.2": ANSWERED} and problems == []


# --------------------------------------------------------------------------------------------------
# Probes, the README


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_every_check_cell_can_be_turned_into_probes(path):
    chapter = grading.Chapter(path)
    assert chapter.checks
    for check in chapter.checks.values():
        assert check.probes and any(p.hidden for p in check.probes), f"{check.exercise}: needs hidden probes"
        for form in ("got", "expected"):
            assert check.compiled(form).co_name == probes.FUNCTION
        assert "check.require" not in check.got_source and "check.exercise" not in check.got_source


def test_every_chapter_passes_its_own_probes():
    """Issue 14, item 5: the grader can grade every chapter's exercises as they are now: each solutions
    notebook, run as the grader runs a submission (only the cells the exercises need, checks sliced),
    passes every one of its probes against the expected values of the full checks."""
    needs_bubblewrap()
    grader = grading.Grader(SOLUTIONS[0].parent, TEST_LIMITS, "bwrap")
    try:
        assert grader.broken == {}
        from concurrent.futures import ThreadPoolExecutor

        def prepare(name):
            try:
                grader.prepare(name)
                return ""
            except RuntimeError as exc:
                return str(exc)[:2000]

        with ThreadPoolExecutor(2) as pool:
            failures = [f for f in pool.map(prepare, sorted(grader.chapters)) if f]
        assert not failures, "\n\n".join(failures)
    finally:
        grader.close()


def test_probe_cells_keep_setup_and_record_instead_of_judging():
    source = (
        "x = 1\nref = 2.0 * x\ncheck.exercise('9.1', lambda: check.number(f(x), ref, name='f(1)'))\n"
        "### BEGIN HIDDEN TESTS\ntorch.manual_seed(5)\ny_hidden = torch.randn(3)\nwant = g_ref(y_hidden)\n"
        "check.require(lambda: check.choice(g(y_hidden), 'b', ['a', 'b']))\n"
        "### END HIDDEN TESTS"
    )
    check = probes.transform(source, "ex09_1", 7)
    got = check.got_source.splitlines()
    assert got[0] == f"def {probes.FUNCTION}({probes.RECORDER}):"
    # The setup hands over only the arguments; each got expression is a function of them (issue 31, item 1).
    assert [line.strip() for line in got[1:]] == [
        "_g0 = 1", "__probe__(7, {'_g0': _g0})", "torch.manual_seed(5)", "_g1 = torch.randn(3)",
        "__probe__(8, {'_g1': _g1})"]
    assert check.probe_sources == {7: ("def __grader_probe__(_g0):\n    return f(_g0)", ("_g0",)),
                                   8: ("def __grader_probe__(_g1):\n    return g(_g1)", ("_g1",))}
    assert check.setup_uses == {"torch"}
    assert "ref" not in check.got_source and "want" not in check.got_source and "y_hidden" not in check.got_source
    assert "__probe__(7, lambda: ref)" in check.expected_source
    assert [(p.kind, p.hidden, p.kwargs) for p in check.probes] == [("number", False, {"name": "f(1)"}),
                                                                   ("choice", True, {})]
    assert check.got_uses == {"f", "g", "torch"}
    # A loop over literal values is written out; a statement drawing from a generator the inputs use
    # stays (b); the expected-only statement does not (ref); a tuple's expected part becomes `_`;
    # visible helpers are global (public), visible values are not.
    source = (
        "def helper(t):\n    return t * LIMIT\nLIMIT = 3\nJ = helper(2)\n"
        "check.exercise('9.3', lambda: check.number(f(1), J))\n### BEGIN HIDDEN TESTS\n"
        "gen = torch.Generator().manual_seed(1)\nb = torch.randn(3, generator=gen)\nx = torch.randn(3, generator=gen)\n"
        "ref = g_ref(x, b)\nx2, want = make(gen)\n"
        "for tau in (0.5, 2.0):\n    check.require(lambda: check.number(f(x, tau), ref / tau))\n"
        "check.require(lambda: check.number(f(x2), want))\n### END HIDDEN TESTS"
    )
    check = probes.transform(source, "ex09_3", 0)
    assert check.public_source.split("\n")[-1] == "LIMIT = 3" and "J =" not in check.public_source
    body = [line.strip() for line in check.got_source.splitlines()[1:]]
    assert "J" not in check.got_source and "ref" not in check.got_source and len(check.probes) == 4
    assert body[1:5] == ["_g1 = torch.Generator().manual_seed(1)", "_g0 = torch.randn(3, generator=_g1)",
                         "_g3 = torch.randn(3, generator=_g1)", "_g4, _ = make(_g1)"] and body[5] == "del _"
    assert [line for line in body if line.startswith("__probe__")][1:3] == [
        "__probe__(1, {'_g2': _g2, '_g3': _g3})", "__probe__(2, {'_g2': _g2, '_g3': _g3})"]
    assert check.probe_sources[1] == ("def __grader_probe__(_g2, _g3):\n    return f(_g3, _g2)", ("_g2", "_g3"))
    with pytest.raises(probes.ProbeError):
        probes.transform("check.require(lambda: check.close(f(x), y, name=compute()))", "ex09_2", 0)
    for hidden in ("assert f(2) == 4", "if True:\n    check.require(lambda: check.number(f(2), 4.0))",
                   "check.number(f(2), 4.0)"):
        with pytest.raises(probes.ProbeError, match="a hidden test must be"):
            probes.transform(f"check.exercise('9.1', lambda: check.number(f(1), 2.0))\n{release.BEGIN_HIDDEN}\n"
                             f"{hidden}\n{release.END_HIDDEN}", "ex09_1", 0)


def test_readme_documents_grading_and_the_nbgrader_route():
    """Item 12 (and item 11's rules): the README says how to grade, the file rules and limits, and that
    nbgrader needs the course library in its kernel and the activated environment for alembic."""
    text = (ROOT / "README.md").read_text()
    assert re.search(r"python -m coursetools\.grading submissions/ --out \S+ --jobs", text)
    assert "python -m coursetools.handin" in text and "nbgrader" in text
    flat = " ".join(text.split())
    for needle in ("needs manual grading", "--max-notebook-mb", "50 MB", "nbformat 3", "(1).ipynb",
                   ".ipynb_checkpoints", "--allow-root", "alembic", "importable in nbgrader's kernel",
                   "silently gives 0", "--max-cell-mb", "--scratch-mb", "split cell", "a quiet machine's seconds",
                   "control group", "kill -KILL -1", "oom_score_adj", "np.longdouble", "fixed vocabulary",
                   "gc.get_objects()", "NFC/NFKC"):
        assert needle in flat, f"README: missing {needle!r}"


# --------------------------------------------------------------------------------------------------
# Issue 31, item 2 (round four): exercise 8.2's memory counts what the call uses, not only what it adds

# Each answer returns the right values and holds the whole N_q x N_k float64 score matrix (128 MiB) during the
# call, in memory made before it. The grader counted only the growth of the peak, so these got 3/3.
CH08_BUFFER_ATTACKS = {
    # A buffer made and filled when the answer cell runs, reused by the call (NumPy: torch's count of the
    # tensors it creates, another hidden test, does not see it).
    "buffer_at_cell_time": textwrap.dedent("""
        import math
        import numpy as np
        import torch

        _BUFFER = np.ones(1024 * 16384)

        def tiled_forward(q, k, v, block):
            qn, kn, vn = (t.detach().double().numpy() for t in (q, k, v))
            s = _BUFFER[: qn.shape[0] * kn.shape[0]].reshape(qn.shape[0], kn.shape[0])
            np.matmul(qn, kn.T, out=s)
            s /= math.sqrt(qn.shape[1])
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            return torch.from_numpy((s / s.sum(axis=-1, keepdims=True)) @ vn).to(q.dtype)
    """),
    # The same buffer, made and filled by the first (small) call and reused by the measured one.
    "buffer_on_first_call": textwrap.dedent("""
        import math
        import numpy as np
        import torch

        _STORE = {}

        def tiled_forward(q, k, v, block):
            if "s" not in _STORE:
                _STORE["s"] = np.ones(1024 * 16384)
            qn, kn, vn = (t.detach().double().numpy() for t in (q, k, v))
            s = _STORE["s"][: qn.shape[0] * kn.shape[0]].reshape(qn.shape[0], kn.shape[0])
            np.matmul(qn, kn.T, out=s)
            s /= math.sqrt(qn.shape[1])
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            return torch.from_numpy(s @ vn).to(q.dtype)
    """),
    # A buffer in shared memory (an anonymous shared mmap made at cell time), marked cold after use
    # (MADV_COLD clears the referenced bits: the runner refuses it, the attack goes on regardless).
    "shared_memory_made_cold": textwrap.dedent("""
        import math
        import mmap
        import numpy as np
        import torch

        _MAP = mmap.mmap(-1, 1024 * 16384 * 8)
        _ALL = np.frombuffer(_MAP, dtype=np.float64)
        _ALL[:] = 1.0

        def tiled_forward(q, k, v, block):
            qn, kn, vn = (t.detach().double().numpy() for t in (q, k, v))
            s = _ALL[: qn.shape[0] * kn.shape[0]].reshape(qn.shape[0], kn.shape[0])
            np.matmul(qn, kn.T, out=s)
            s /= math.sqrt(qn.shape[1])
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            out = (s / s.sum(axis=-1, keepdims=True)) @ vn
            for advice in (20, 8, 21):  # MADV_COLD, MADV_FREE, MADV_PAGEOUT
                try:
                    _MAP.madvise(advice)
                except OSError:
                    pass
            return torch.from_numpy(out).to(q.dtype)
    """),
    # A buffer made at cell time, filled by the call and freed before it returns.
    "buffer_freed_before_return": textwrap.dedent("""
        import math
        import numpy as np
        import torch

        _STORE = {"s": np.ones(1024 * 16384)}

        def tiled_forward(q, k, v, block):
            qn, kn, vn = (t.detach().double().numpy() for t in (q, k, v))
            buffer = _STORE.get("s")
            if buffer is None or buffer.size < qn.shape[0] * kn.shape[0]:
                buffer = np.empty(qn.shape[0] * kn.shape[0])
            s = buffer[: qn.shape[0] * kn.shape[0]].reshape(qn.shape[0], kn.shape[0])
            np.matmul(qn, kn.T, out=s)
            s /= math.sqrt(qn.shape[1])
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            out = (s / s.sum(axis=-1, keepdims=True)) @ vn
            if qn.shape[0] * kn.shape[0] >= 1 << 20:
                del buffer, s
                _STORE.clear()  # 128 MiB go back to the system before the call returns
            return torch.from_numpy(out).to(q.dtype)
    """),
}

# Without a control group the grader reads each process's VmHWM, reset through /proc/<pid>/clear_refs: a
# submission that resets its own (the whole matrix built, then "5" written) got 3/3. /proc is read-only in
# the sandbox now, and writing "1" (clear the referenced bits) fails as well.
CH08_CLEAR_REFS = textwrap.dedent("""
    import math
    import numpy as np
    import torch

    def _reset():
        for value in ("1", "5"):
            try:
                with open("/proc/self/clear_refs", "w") as handle:
                    handle.write(value)
            except OSError:
                pass

    def tiled_forward(q, k, v, block):
        qn, kn, vn = (t.detach().double().numpy() for t in (q, k, v))
        s = qn @ kn.T / math.sqrt(qn.shape[1])
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        out = (s / s.sum(axis=-1, keepdims=True)) @ vn
        del s
        _reset()
        return torch.from_numpy(out).to(q.dtype)
""")

# Blocks of `block` queries, each with whole rows of N_k scores and a plain softmax (no online softmax): not
# what the exercise asks (its statement says so); at the measured size (N_k = 65536) one block of 128 query
# rows holds 64 MiB of scores, over the 32 MiB bound, in the grader as in the visible check.
CH08_QUERY_BLOCKS = textwrap.dedent("""
    import math
    import torch

    def tiled_forward(q, k, v, block):
        rows = []
        for i in range(0, q.size(0), block):
            s = q[i : i + block] @ k.T
            s.mul_(1 / math.sqrt(q.size(-1)))
            s.sub_(s.amax(dim=-1, keepdim=True)).exp_()
            rows.append((s @ v).div_(s.sum(dim=-1, keepdim=True)))
            del s
        return torch.cat(rows)
""")

HONEST_RUNS = 5


def _grade_08_by_command(tmp_path, students: dict[str, str | None], *, with_cgroup: bool = True) -> dict:
    """Grade a class of chapter 08 (every answer right except 8.2's as given) with the instructor's command at
    --jobs 2; student -> the 8.2 row. Without a control group: the same command with cgroups.Slot.create
    answering None (as where none can be made)."""
    subs = tmp_path / "subs"
    right = {e.grade_id: "right" for e in CH08.exercises}
    for student, source in students.items():
        write(subs, student, CH08.notebook(right, sources={} if source is None else {"ex08_2": source}),
              f"{CH08.name}.ipynb")
    out = tmp_path / "out"
    command = [*GRADE_COMMAND[:-2], "--jobs", "2", str(subs), "--out", str(out)]
    if not with_cgroup:
        command[1:3] = ["-c", "import sys; from coursetools.grading import cgroups; "
                        "cgroups.Slot.create = classmethod(lambda cls, *a, **k: None); "
                        "from coursetools.grading.grade import main; sys.exit(main(sys.argv[1:]))"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert ("no control group" in proc.stdout + proc.stderr) != with_cgroup, (proc.stdout + proc.stderr)[-2000:]
    with open(out / "gradebook.csv", newline="") as handle:
        return {r["student"]: r for r in csv.DictReader(handle) if r["exercise"] == "8.2"}


def test_tiled_forward_memory_counts_buffers_made_before_the_call(tmp_path):
    """Issue 31, item 2: a buffer made before the measured call (at cell time or by a first call), reused,
    made cold or freed during it, and a loop over blocks of queries get 0 for 8.2 with the grader's memory
    reason; the solution, in five submissions of one class, gets 3/3 every time."""
    needs_bubblewrap()
    honest = {f"honest_{k}": None for k in range(HONEST_RUNS)}
    got = _grade_08_by_command(tmp_path, {**honest, **CH08_BUFFER_ATTACKS, "query_blocks": CH08_QUERY_BLOCKS})
    assert {s: float(got[s]["points"]) for s in honest} == dict.fromkeys(honest, 3.0), got
    attacks = [*CH08_BUFFER_ATTACKS, "query_blocks"]
    assert {s: float(got[s]["points"]) for s in attacks} == dict.fromkeys(attacks, 0.0), got
    assert {got[s]["reason"] for s in attacks} == {f"a hidden test failed ({grading.MEMORY_OVER})"}, got
    assert _leftover_processes() == []


def test_tiled_forward_memory_without_a_control_group(tmp_path):
    """Issue 31, item 2, without a control group (each process's VmHWM and referenced pages, read from
    outside): resetting its own counters through /proc/self/clear_refs, or a buffer made at cell time, gets
    0 for 8.2; the solution 3/3 (twice)."""
    needs_bubblewrap()
    students = {"honest_0": None, "honest_1": None, "clear_refs": CH08_CLEAR_REFS,
                "buffer_at_cell_time": CH08_BUFFER_ATTACKS["buffer_at_cell_time"]}
    got = _grade_08_by_command(tmp_path, students, with_cgroup=False)
    assert [float(got[s]["points"]) for s in students] == [3.0, 3.0, 0.0, 0.0], got
    assert got["clear_refs"]["reason"] == f"a hidden test failed ({grading.MEMORY_OVER})", got["clear_refs"]


def test_sandbox_proc_is_read_only_and_uncounting_advice_is_refused(tmp_path):
    """Issue 31, item 2: inside the sandbox a submission cannot write /proc/self/clear_refs (read-only /proc),
    and madvise(MADV_COLD / MADV_FREE / MADV_PAGEOUT) fails with EPERM (the runner's seccomp filter), in the
    runner and in a child process; ordinary madvise still works."""
    needs_bubblewrap()
    library = sandbox.stage_library(tmp_path / "lib")
    os.chmod(tmp_path, 0o711)
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    probe = textwrap.dedent("""
        import errno, mmap, subprocess, sys
        found = []
        try:
            open("/proc/self/clear_refs", "w").write("5")
            found.append("clear_refs written")
        except OSError as exc:
            found.append(f"clear_refs {errno.errorcode[exc.errno]}")
        m = mmap.mmap(-1, 1 << 16)
        for advice in (8, 20, 21, 4):
            try:
                m.madvise(advice)
                found.append(f"{advice} ok")
            except OSError as exc:
                found.append(f"{advice} {errno.errorcode[exc.errno]}")
        child = subprocess.run([sys.executable, "-c", "import mmap; mmap.mmap(-1, 4096).madvise(20)"],
                               capture_output=True, text=True)
        found.append("child refused" if "PermissionError" in child.stderr else "child allowed")
        open("found.txt", "w").write(" | ".join(found))
    """)
    result = sandbox.run_jobs([sandbox.Job("cell", "cell 1", source=probe)], work, library, TEST_LIMITS)
    assert result.status == "finished", result
    assert (work / "found.txt").read_text() == ("clear_refs EROFS | 8 EPERM | 20 EPERM | 21 EPERM | 4 ok | "
                                                "child refused")
