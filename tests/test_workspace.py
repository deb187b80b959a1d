"""The learner's workspace (issue 19.3): answers live in my-work/, which git and the tests ignore."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

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
