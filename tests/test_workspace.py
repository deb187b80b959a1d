"""The learner's workspace (issue 19.3): answers live in my-work/, which git and the tests ignore."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from course_paths import ROOT

from coursetools import workspace


@pytest.fixture()
def source(tmp_path):
    """A small chapters/ folder: two notebooks."""
    folder = tmp_path / "chapters"
    folder.mkdir()
    for name in ("01_first.ipynb", "02_second.ipynb"):
        (folder / name).write_text(json.dumps({"cells": [], "name": name}))
    return folder


def test_create_copies_missing_chapters_and_never_overwrites(tmp_path, source):
    mine = tmp_path / "my-work"
    assert [p.name for p in workspace.create(mine, source)] == ["01_first.ipynb", "02_second.ipynb"]
    (mine / "01_first.ipynb").write_text("my answers")
    assert workspace.create(mine, source) == []
    assert (mine / "01_first.ipynb").read_text() == "my answers"
    (mine / "02_second.ipynb").unlink()
    assert [p.name for p in workspace.create(mine, source)] == ["02_second.ipynb"]


def test_reset_restores_one_chapter_and_keeps_the_old_copy(tmp_path, source):
    mine = tmp_path / "my-work"
    workspace.create(mine, source)
    (mine / "01_first.ipynb").write_text("my answers")
    (mine / "02_second.ipynb").write_text("other answers")
    fresh, moved = workspace.reset("01", mine, source)
    assert fresh.read_text() == (source / "01_first.ipynb").read_text()
    assert moved.parent == mine / ".old" and moved.read_text() == "my answers"
    assert (mine / "02_second.ipynb").read_text() == "other answers", "only the named chapter is reset"
    _, again = workspace.reset("01", mine, source)
    assert again != moved and again.exists() and moved.exists(), "a second reset keeps both old copies"


@pytest.mark.parametrize("prefix", ["", "7", "0"])
def test_reset_names_the_chapters_when_the_prefix_is_wrong(tmp_path, source, prefix):
    with pytest.raises(workspace.WorkspaceError, match="01_first" if prefix else "name a chapter"):
        workspace.reset(prefix, tmp_path / "my-work", source)


def test_status_says_which_chapters_are_yours(tmp_path, source):
    mine = tmp_path / "my-work"
    workspace.create(mine, source)
    (mine / "02_second.ipynb").unlink()
    lines = workspace.status(mine, source)
    assert lines[0] == "01_first: yours" and "not in my-work/ yet" in lines[1]


def test_status_compares_contents_not_file_times(tmp_path, source):
    """Issue 27: a `touch` made a false "newer version", and a later save hid a real update."""
    mine = tmp_path / "my-work"
    workspace.create(mine, source)
    chapter, copy = source / "01_first.ipynb", mine / "01_first.ipynb"
    os.utime(chapter, (time.time() + 3600, time.time() + 3600))  # chapters/ touched, not changed
    assert workspace.status(mine, source)[0] == "01_first: yours"
    chapter.write_text(json.dumps({"cells": [], "name": "01_first.ipynb", "fixed": True}))  # a real update
    copy.write_text("my answers")
    os.utime(copy, (time.time() + 7200, time.time() + 7200))  # ...and the learner saved after it
    assert "chapters/ has a newer version" in workspace.status(mine, source)[0]
    workspace.reset("01", mine, source)
    assert workspace.status(mine, source)[0] == "01_first: yours", "reset records the version it copied"


def test_status_without_a_record_says_what_it_knows(tmp_path, source):
    """Copies made before the record existed: the same content as chapters/ is known, anything else is not."""
    mine = tmp_path / "my-work"
    workspace.create(mine, source)
    (mine / workspace.RECORD).unlink()
    (mine / "02_second.ipynb").write_text("my answers")
    lines = workspace.status(mine, source)
    assert lines[0] == "01_first: yours (the same as chapters/)"
    assert "whether chapters/ is newer is unknown" in lines[1]


def test_lab_passes_every_option_after_lab_to_jupyterlab(monkeypatch, tmp_path):
    """The argv as typed (`lab --no-browser --ip=127.0.0.1 --port=8888`) reaches JupyterLab in order;
    tests/test_readme_commands.py starts the real JupyterLab with the README's command."""
    launched = []
    monkeypatch.setattr(workspace, "WORKSPACE", tmp_path / "my-work")
    monkeypatch.setattr(workspace, "create", lambda: [])
    monkeypatch.setattr(workspace.os, "execv", lambda path, argv: launched.append(argv))
    for given in (["--no-browser", "--ip=127.0.0.1", "--port=8888"], ["--", "--no-browser", "--port=8888"]):
        workspace.main(["lab", *given])
        expected = [a for a in given if a != "--"]
        assert launched[-1][-len(expected):] == expected
        assert "--" not in launched[-1] and "--no-browser" in launched[-1]


def test_lab_opens_the_workspace_and_allows_root_only_as_root(monkeypatch, tmp_path):
    monkeypatch.setattr(workspace.os, "geteuid", lambda: 0, raising=False)
    command = workspace.lab_command(tmp_path, ["--no-browser"])
    assert command[1:4] == ["-m", "jupyter", "lab"] and f"--ServerApp.root_dir={tmp_path}" in command
    assert "--allow-root" in command and command[-1] == "--no-browser"
    monkeypatch.setattr(workspace.os, "geteuid", lambda: 1000, raising=False)
    assert "--allow-root" not in workspace.lab_command(tmp_path)


def test_the_cli_reports_errors_in_one_line(capsys):
    assert workspace.main(["reset", "99"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: reset: no chapter starting with '99'") and "\n" not in err


def test_my_work_is_ignored_by_git_and_by_the_tests():
    """A learner's answers in my-work/ change nothing that pytest checks (issue 19.3).

    `pytest` alone collects only its configured testpaths (pytest's documented rule), so my-work/ must lie
    outside every one of them. (Collecting the whole suite to see it took 2 minutes; issue 27.)"""
    import tomllib

    probe = workspace.WORKSPACE / f"99_probe_{uuid.uuid4().hex[:8]}.ipynb"
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", str(probe)], cwd=ROOT)
    assert ignored.returncode == 0, "my-work/ is not git-ignored"
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--nbval" in config["addopts"], "the tests collect notebooks, so a notebook in the testpaths would run"
    for path in config["testpaths"]:
        assert not workspace.WORKSPACE.resolve().is_relative_to((ROOT / path).resolve()), path


def test_the_learner_installs_a_subset_of_everything():
    """requirements-learner.txt pins nothing that requirements.txt pins differently (issue 19.7)."""
    def pins(name: str) -> set[str]:
        return {line.strip() for line in (ROOT / name).read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")}

    learner, everything = pins("requirements-learner.txt"), pins("requirements.txt")
    assert learner <= everything, f"only in the learner's file: {sorted(learner - everything)}"
    assert {"torch==2.13.0", "-e ."} <= learner and not any("jupyter-book" in p or "pytest" in p for p in learner)


# --- one consistent JupyterLab (issue 30.6) ---------------------------------------------------------
# A Lab extension's webpack bundle names the version of each shared JupyterLab package it was built against;
# under another Lab, the browser's console says "Unsatisfied version 4.5.11 ... (required ^4.6.2)" on every
# load (jupyterlab_widgets 3.0.17 under JupyterLab 4.5). Read from the installed files, without a browser.
_REQUIRED_AS_TEXT = re.compile(r'shareKey:"(@jupyterlab/[\w-]+)",[^}]*?requiredVersion:"\^(\d+)\.(\d+)\.(\d+)"')
_REQUIRED_AS_ARRAY = re.compile(  # minified (jupyterlab-myst) or not (jupyterlab_widgets 3.0.16)
    r'"default",\s*"(@jupyterlab/[\w-]+)",\s*(?:!\d|true|false),\s*\[(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\]')


def shared_requirements(extension: Path) -> set[tuple[str, int, tuple[int, int, int]]]:
    """(package, leading parts that must be equal, lowest version) for each shared @jupyterlab package."""
    found = set()
    for script in (extension / "static").glob("*.js"):
        text = script.read_text(encoding="utf-8", errors="replace")
        for name, *version in _REQUIRED_AS_TEXT.findall(text):  # "^4.6.2": the major version fixed
            found.add((name, 1 if int(version[0]) else 2, tuple(map(int, version))))
        for name, fixed, *version in _REQUIRED_AS_ARRAY.findall(text):  # webpack's [1, 4, 6, 9] is ^4.6.9
            found.add((name, int(fixed), tuple(map(int, version))))
    return found


def satisfied(version: tuple[int, ...], fixed: int, lowest: tuple[int, ...]) -> bool:
    return version[:fixed] == lowest[:fixed] and version >= lowest


def test_the_version_check_reads_both_forms_and_can_fail(tmp_path):
    static = tmp_path / "ext" / "static"
    static.mkdir(parents=True)
    (static / "remoteEntry.js").write_text(
        '{shareKey:"@jupyterlab/notebook",import:null,requiredVersion:"^4.6.2",strictVersion:!1}'
        ' j("default","@jupyterlab/apputils",!1,[1,4,6,9])'
        ' loadSingletonVersion("default", "@jupyterlab/services", false, [1,7,4,6])')
    found = shared_requirements(tmp_path / "ext")
    assert found == {("@jupyterlab/notebook", 1, (4, 6, 2)), ("@jupyterlab/apputils", 1, (4, 6, 9)),
                     ("@jupyterlab/services", 1, (7, 4, 6))}
    assert not satisfied((4, 5, 11), 1, (4, 6, 2)) and satisfied((4, 6, 11), 1, (4, 6, 9))
    assert not satisfied((5, 0, 0), 1, (4, 6, 2))


def test_every_lab_extension_fits_the_installed_jupyterlab():
    """Each installed Lab extension's shared @jupyterlab packages are satisfied by this JupyterLab's own
    versions (share/jupyter/lab/static/package.json), and `jupyter labextension list` calls none of them
    "not compatible" (jupyterlab-myst 2.7 under JupyterLab 4.6: it wants @jupyter/ydoc 3, Lab 4.6 has 4)."""
    share = Path(sys.prefix) / "share" / "jupyter"
    lab = json.loads((share / "lab" / "static" / "package.json").read_text())
    versions = {name: tuple(map(int, re.findall(r"\d+", spec)[:3]))
                for name, spec in lab["resolutions"].items() if re.fullmatch(r"~\d+\.\d+\.\d+", spec)}
    extensions = [p.parent for p in (share / "labextensions").glob("**/package.json") if (p.parent / "static").is_dir()]
    names = {json.loads((e / "package.json").read_text())["name"] for e in extensions}
    assert {"@jupyter-widgets/jupyterlab-manager", "jupyterlab-myst"} <= names, names
    unmet, reading = [], set()
    for extension in extensions:
        for name, fixed, lowest in shared_requirements(extension):
            if name in versions:
                reading.add(extension.name)
                if not satisfied(versions[name], fixed, lowest):
                    unmet.append(f"{extension.name}: {name} {lowest} (JupyterLab has {versions[name]})")
    assert reading >= {"jupyterlab-manager", "jupyterlab-myst"}, f"requirements read only from {reading}: a new bundle format?"
    assert unmet == [], f"{len(unmet)} unsatisfied: {unmet}"
    listed = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                            text=True, timeout=120)
    assert "not compatible" not in listed.stdout + listed.stderr, listed.stdout + listed.stderr
