"""The README's commands, run as the README writes them (argv in a subprocess), not the functions behind them.

Issue 27: a command that a unit test covered failed as written. Each test here reads its command from
README.md, so a change of the README's text is a change of what is tested.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from course_paths import CHAPTERS, ROOT
from machine_load import scaled

from coursetools.setup import why

README = (ROOT / "README.md").read_text(encoding="utf-8")


def bash_blocks(section: str) -> list[str]:
    """The ```bash blocks of one README section (from its heading to the next ## heading)."""
    body = README.split(section, 1)[1]
    body = re.split(r"^## ", body, maxsplit=1, flags=re.M)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)\n```", body, re.S)]


def readme_command(pattern: str) -> list[str]:
    """The one README command (in a code block or in backquotes) that matches ``pattern``, as argv."""
    found = set(re.findall(rf"`([^`\n]*{pattern}[^`\n]*)`", README))
    found |= {
        line.split("#")[0].strip()
        for block in re.findall(r"```bash\n(.*?)\n```", README, re.S)
        for line in block.splitlines()
        if re.search(pattern, line)
    }
    assert len(found) == 1, f"README: one command matching {pattern!r} expected, found {sorted(found)}"
    return shlex.split(found.pop())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def venv_argv(argv: list[str]) -> list[str]:
    """README argv with `.venv/bin/python` meaning this test's interpreter (the course's environment)."""
    assert argv[0] == ".venv/bin/python", argv
    return [sys.executable, *argv[1:]]


# --- the set-up command -------------------------------------------------------------------------


def test_the_setup_is_one_command_for_every_machine():
    blocks = bash_blocks("## Set up and open the course")
    assert blocks[0] == "python3 -m coursetools.setup", blocks


def test_the_setup_script_needs_only_the_standard_library():
    """`python3 -m coursetools.setup` runs before anything is installed: here with site-packages off (-S)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-S", "-m", "coursetools.setup", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "--no-lab" in done.stdout and "JupyterLab" in done.stdout
    source = (ROOT / "coursetools" / "setup.py").read_text()
    imported = set(re.findall(r"^(?:from|import) (\w+)", source, re.M))
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


STUB = """#!{python}
# A stand-in for the new environment's python: records its argv; pip's install from an --index-url
# (the CPU torch step) is handed to the real pip, in isolation (no config, no local wheels).
import json, subprocess, sys
args = sys.argv[1:]
if args[:1] == ["-c"] and "importlib.metadata" in args[1]:  # the set-up asks which torch is installed
    installed = {installed!r}
    print(installed or "")
    sys.exit(0 if installed else 1)
with open({log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:3] == ["-m", "pip", "install"] and "--index-url" in args:
    sys.exit(subprocess.call([{python!r}, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed",
                              "--no-deps", *args[3:]]))
"""


def stub_environment(tmp_path: Path, torch_installed: str | None = None) -> tuple[Path, Path]:
    venv, log = tmp_path / "venv", tmp_path / "calls.jsonl"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(STUB.format(python=sys.executable, log=str(log), installed=torch_installed))
    python.chmod(0o755)
    return venv, log


def recorded(log: Path) -> list[list[str]]:
    """The stub's calls, less the set-up's check that an existing environment has pip."""
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls[0] == ["-m", "pip", "--version"], calls[0]
    return calls[1:]


def test_setup_falls_back_when_the_cpu_index_cannot_be_reached(tmp_path):
    """The README's set-up with PyTorch's CPU index on a closed local port: real pip fails to reach it,
    the script says so in one sentence and installs torch from the default index with the rest, then
    opens JupyterLab with the options given."""
    venv, log = stub_environment(tmp_path)
    closed = f"http://127.0.0.1:{free_port()}/whl/cpu"  # bound and released: nothing listens there
    argv = shlex.split(bash_blocks("## Set up and open the course")[0])
    python3 = shutil.which(argv[0]) or sys.executable
    done = subprocess.run(
        [
            python3,
            *argv[1:],
            "--torch",
            "cpu",
            "--torch-index",
            closed,
            "--venv",
            str(venv),
            "--no-browser",
            "--port=8899",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    calls = recorded(log)
    assert calls[0][:3] == ["-m", "pip", "install"] and calls[0][-2:] == ["--index-url", closed]
    assert "torch==2.13.0" in calls[0]
    assert calls[1] == ["-m", "pip", "install", "-r", "requirements-learner.txt"], calls
    assert calls[-1] == ["-m", "coursetools.workspace", "lab", "--no-browser", "--port=8899"], calls
    fallback = [line for line in done.stdout.splitlines() if "could not be used" in line]
    assert len(fallback) == 1 and closed in fallback[0] and "default package index" in fallback[0]
    assert "about 3.8 GB more disk" in fallback[0], "the sentence says what the fallback costs"
    assert "pip could not connect: [Errno 111] Connection refused" in fallback[0], fallback[0]
    assert "ResolutionImpossible" not in fallback[0], "pip's misleading last line is not what it says"
    assert "Retrying" not in done.stdout + done.stderr, "pip's retry warnings are not shown"


def test_setup_run_again_does_not_announce_a_download_for_the_torch_it_has(tmp_path):
    """A newcomer who runs the set-up a second time (to finish an interrupted install, say) was told again
    that PyTorch's CPU build is "about 180 MiB to download", although the pinned version was installed."""
    venv, log = stub_environment(tmp_path, torch_installed="2.13.0+cpu")
    done = subprocess.run(
        [sys.executable, "-m", "coursetools.setup", "--torch", "cpu", "--no-lab", "--venv", str(venv)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "MiB to download" not in done.stdout and "--index-url" not in done.stdout, done.stdout
    assert "torch 2.13.0+cpu is already installed in venv" in done.stdout, done.stdout
    assert recorded(log)[0] == ["-m", "pip", "install", "-r", "requirements-learner.txt"]
    other, log_other = stub_environment(tmp_path / "older", torch_installed="2.12.1")
    done = subprocess.run(
        [sys.executable, "-m", "coursetools.setup", "--torch", "cpu", "--torch-index",
         f"http://127.0.0.1:{free_port()}/whl/cpu", "--no-lab", "--venv", str(other)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert "about 180 MiB to download" in done.stdout, "another version installed: the pinned one is fetched"


def test_setup_uses_the_default_index_where_pypi_has_the_right_build(tmp_path):
    venv, log = stub_environment(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coursetools.setup",
            "--torch",
            "default",
            "--full",
            "--no-lab",
            "--venv",
            str(venv),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    calls = recorded(log)
    assert not any("--index-url" in call for call in calls)
    assert calls[0] == ["-m", "pip", "install", "-r", "requirements.txt"]
    assert calls[-1] == ["-m", "coursetools.workspace"], "--no-lab copies the chapters, opens nothing"


def test_setup_chooses_the_cpu_index_only_on_linux_without_an_nvidia_gpu():
    from coursetools.setup import torch_route

    assert torch_route("auto", "Linux", nvidia=False) == "cpu"
    assert torch_route("auto", "Linux", nvidia=True) == "default"
    assert torch_route("auto", "Darwin", nvidia=False) == "default"
    assert torch_route("auto", "Windows", nvidia=False) == "default"
    assert torch_route("cpu", "Darwin", nvidia=False) == "cpu"


# --- JupyterLab on a remote machine ---------------------------------------------------------------


def test_the_remote_lab_command_works_as_written(tmp_path):
    """`.venv/bin/python -m coursetools.workspace lab --no-browser --ip=127.0.0.1 --port=8888` (the README's
    remote-machine example) in a copy of the course: JupyterLab answers on that address and port with
    my-work/ as its root (on another free port: 8888 may be taken)."""
    argv = venv_argv(readme_command(r"coursetools\.workspace lab --no-browser"))
    port = free_port()
    argv = [f"--port={port}" if arg == "--port=8888" else arg for arg in argv]
    assert argv[4] == "--no-browser" and argv[-1] == f"--port={port}", "options first and last"
    course = tmp_path / "course"
    shutil.copytree(
        ROOT / "coursetools", course / "coursetools", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(ROOT / "chapters", course / "chapters")
    env = {
        **os.environ,
        "PYTHONPATH": str(course),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "BROWSER": "false",
    }
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=course, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline, token = time.time() + scaled(120), None
        while time.time() < deadline and token is None:
            assert proc.poll() is None, log.read_text()[-3000:]
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\w+)", log.read_text())
            token = found and found.group(1)
            time.sleep(0.5)
        assert token, "JupyterLab printed no URL in time:\n" + log.read_text()[-3000:]
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/api/contents?token={token}", timeout=30
        ) as page:
            listed = {item["name"] for item in json.load(page)["content"]}
        assert {p.name for p in CHAPTERS} <= listed, "JupyterLab's root is my-work/, with every chapter"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=30) as page:
            config = re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', page.read().decode(), re.S)
        # Issue 30.6: a fresh learner is not greeted by the "Jupyter news?" prompt: the news feed is off
        # and the setting that the prompt asks about defaults to "false" (the prompt shows only at "none").
        assert config and json.loads(config.group(1))["news"] == {"disabled": True}
        # Issue 30.3/30.5: the course's Lab extension (outputs keep their lines, figures get alt text) is served
        served = {e["name"]: e for e in json.loads(config.group(1))["federated_extensions"]}
        assert served["transformer-course-lab"]["extension"] == "./extension", sorted(served)
        settings_url = f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/apputils-extension:notification"
        with urllib.request.urlopen(f"{settings_url}?token={token}", timeout=30) as page:
            schema = json.load(page)["schema"]["properties"]
        assert schema["fetchNews"]["default"] == "false" and schema["checkForUpdates"]["default"] is False
        # Issue 30 review: with Lab's default windowing, Run All raised "Cannot read properties of undefined
        # (reading 'node')" in the page; the learner's Lab draws every cell (what the Lab tests run with)
        tracker_url = f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/notebook-extension:tracker"
        with urllib.request.urlopen(f"{tracker_url}?token={token}", timeout=30) as page:
            tracker = json.load(page)["schema"]["properties"]
        assert tracker["windowingMode"]["default"] == "none", tracker["windowingMode"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert sorted(p.name for p in (course / "my-work").glob("*.ipynb")) == [p.name for p in CHAPTERS]
    opening = [line for line in log.read_text().splitlines() if line.startswith("opening JupyterLab")]
    assert opening and opening[0].endswith(f"--no-browser --ip=127.0.0.1 --port={port}"), opening


# --- the chapter table -----------------------------------------------------------------------------


def _minutes(text: str) -> float:
    """'90 minutes', '70 min', '2 hours 15 minutes', '2 h 15 min', '2¼ hours', '3 h' -> minutes."""
    text = text.replace("¼", ".25").replace("½", ".5").replace("¾", ".75")
    hours = re.match(r"\s*([\d.]+)\s*(?:h|hours?)\b", text)
    rest = text[hours.end():] if hours else text
    minutes = re.match(r"\s*([\d.]+)\s*(?:min|minutes)\b", rest)
    assert hours or minutes, f"no study time in {text[:60]!r}"
    return (float(hours.group(1)) * 60 if hours else 0.0) + (float(minutes.group(1)) if minutes else 0.0)


def test_the_chapter_table_gives_each_chapter_its_own_study_time():
    """The README's "time to study" column is each chapter's own "*Time:* about ..." line (exercises included)."""
    rows = re.findall(r"^\| (\d\d) \| `(\d\d_\w+)` \|[^|\n]*\| ([^|\n]*) \|[^|\n]*\|$", README, re.M)
    assert len(rows) >= 12, "the chapter table's rows were not found"
    wrong = []
    for number, name, cell in rows:
        chapter = ROOT / "chapters" / f"{name}.ipynb"
        assert chapter.exists(), f"README row {number}: no {chapter.name}"
        cells = json.loads(chapter.read_text())["cells"]
        text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        own = re.findall(r"\*Time:\*\s*about ([^:;,(\n]*)", text)
        assert len(own) == 1, f"{chapter.name}: one '*Time:* about ...' line expected, found {own}"
        if _minutes(own[0]) != _minutes(cell.split("(")[0]):
            wrong.append(f"{number}: README {cell!r}, the chapter about {own[0].strip()!r}")
    assert not wrong, "; ".join(wrong)


def test_study_times_are_read_as_minutes():
    assert [_minutes(t) for t in ("90 minutes", "70 min", "2 hours 15 minutes", "2 h 15 min", "2¼ hours", "3 h")] == [
        90, 70, 135, 135, 135, 180]


# --- nbgrader ----------------------------------------------------------------------------------------


def test_the_nbgrader_route_keeps_jupyterlab_4_5(tmp_path):
    """The README's nbgrader install, resolved by pip without installing anything (`--dry-run --report`):
    JupyterLab stays 4.5.x, which jupyterlab-myst 2.7 needs (plain `pip install nbgrader` took 4.6)."""
    argv = readme_command(r"pip install -r requirements-nbgrader\.txt")
    assert argv[:3] == [".venv/bin/pip", "install", "-r"], argv
    report = tmp_path / "report.json"
    pip = [sys.executable, "-m", "pip", *argv[1:], "--dry-run", "--quiet", "--report", str(report)]
    done = subprocess.run(pip, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if done.returncode != 0 and why(done).startswith("pip could not connect"):
        pytest.skip(f"the package index cannot be reached here ({why(done)})")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    chosen = {
        item["metadata"]["name"].lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    assert "nbgrader" in chosen or _installed("nbgrader"), chosen
    lab = chosen.get("jupyterlab") or _installed("jupyterlab")
    myst = chosen.get("jupyterlab-myst") or _installed("jupyterlab-myst")
    assert lab.startswith("4.5."), f"the nbgrader route takes JupyterLab {lab}"
    assert myst.startswith("2."), f"the nbgrader route takes jupyterlab-myst {myst}"
    # ... and the extension loads in that JupyterLab: the route keeps the JupyterLab and jupyterlab-myst
    # installed here, and JupyterLab's own compatibility check (`jupyter labextension list`, which says
    # "not compatible" / "incompatible" after the plain `pip install nbgrader`) passes them.
    assert (lab, myst) == (_installed("jupyterlab"), _installed("jupyterlab-myst")), (
        "the nbgrader route changes JupyterLab or jupyterlab-myst: check that the extension loads"
    )
    listed = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], cwd=ROOT,
                            capture_output=True, text=True, timeout=scaled(120))
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    assert re.search(r"^\s*jupyterlab-myst v2\.\S+ enabled OK\b", text, re.M), text
    assert "compatible" not in text, text


def _installed(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return ""


# --- the hand-in check -------------------------------------------------------------------------------


def _notebook(cells: list[tuple[str, str]]) -> str:
    made = [
        {"cell_type": kind, "id": f"c{i}", "metadata": {}, "source": source}
        | ({"execution_count": None, "outputs": []} if kind == "code" else {})
        for i, (kind, source) in enumerate(cells)
    ]
    return json.dumps(
        {
            "cells": made,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def test_the_handin_check_names_the_heading_and_says_its_exit_status(tmp_path):
    """The README's hand-in command, from a folder with my-work/: exit 1 while anything has not passed,
    a raising cell named by its heading and first line, and no kernel warning first; exit 0 when done."""
    argv = venv_argv(readme_command(r"coursetools\.handin my-work/"))
    notebook = tmp_path / argv[-1]
    notebook.parent.mkdir()
    notebook.write_text(
        _notebook(
            [
                ("markdown", "### Exercise 3.1 — a softmax (implement)"),
                ("code", "print('Exercise 3.1: passed')"),
                ("markdown", "## 7. The implementation\n\nSome prose."),
                ("code", "# my attempt\nraise ValueError('shapes differ')"),
            ]
        )
    )
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Exercise 3.1: passed" in done.stdout
    assert (
        "the cell under “7. The implementation” that starts `# my attempt` raised ValueError" in done.stdout
    )
    assert "cell 4" not in done.stdout and "TCP" not in done.stderr, done.stderr
    notebook.write_text(_notebook([("markdown", "# Chapter"), ("code", "print('Exercise 3.1: passed')")]))
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Exit status" in README.split("coursetools.handin my-work/", 1)[1][:1500], (
        "README says what it returns"
    )


# --- the workspace commands --------------------------------------------------------------------------


def test_the_workspace_commands_work_as_written(tmp_path):
    """The README's `status` and `reset 03`, in a copy of the course: status judges by content (a touch of
    chapters/ is no new version, an edit is, whatever the file times), and reset keeps the old copy."""
    commands = {}
    for line in bash_blocks("## Your workspace")[0].splitlines():
        argv = shlex.split(line.split("#")[0])
        commands[argv[3]] = venv_argv(argv)
    assert set(commands) == {"lab", "status", "reset"}, commands
    course = tmp_path / "course"
    shutil.copytree(
        ROOT / "coursetools", course / "coursetools", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(ROOT / "chapters", course / "chapters")
    env = {**os.environ, "PYTHONPATH": str(course)}

    def run(argv):
        done = subprocess.run(argv, cwd=course, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.splitlines()

    run([sys.executable, "-m", "coursetools.workspace"])  # what the set-up does with --no-lab
    chapter = next((course / "chapters").glob("03_*.ipynb"))
    mine = course / "my-work" / chapter.name
    os.utime(chapter, (time.time() + 3600, time.time() + 3600))
    assert all(line.endswith(": yours") for line in run(commands["status"])), "a touch is no new version"
    chapter.write_text(chapter.read_text().replace('"cells": [', '"cells": [\n  ', 1))
    mine.write_text(mine.read_text() + "\n")  # the learner saves after the update
    status = {line.split(":")[0]: line for line in run(commands["status"])}
    assert "chapters/ has a newer version" in status[chapter.stem], status[chapter.stem]
    assert sum("newer" in line for line in status.values()) == 1
    said = run(commands["reset"])
    assert said[0].startswith(f"my-work/{chapter.name} is a fresh copy") and "my-work/.old/" in said[0]
    assert run(commands["status"])[2] == f"{chapter.stem}: yours"
    assert mine.read_text() == chapter.read_text()


def test_what_an_instructor_makes_is_git_ignored():
    """The assignment release, the collected submissions and the grades (README, "For instructors")."""
    for folder in ("handout", "submissions", "grades"):
        probe = f"{folder}/alice/03_scaled_dot_product_attention.ipynb"
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", probe], cwd=ROOT)
        assert ignored.returncode == 0, f"{folder}/ is not git-ignored"
        assert f"`{folder}/`" in README


def test_workspace_status_into_a_closed_pipe_says_nothing_alarming(tmp_path):
    """`workspace status | head -2` (a newcomer's finding): the reader leaving early is not a traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "coursetools.workspace", "status"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written
    _, err = proc.communicate(timeout=scaled(60))
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()[-2000:]


def test_claims_recorder_without_the_full_environment_says_what_to_install():
    """`python -m coursetools.claims --list` in the learner's environment (no pytest) names what is missing."""
    code = "import sys; sys.modules['pytest'] = None; from coursetools.claims import main; main(['--list'])"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "requirements.txt" in done.stderr
