"""The learner's workspace (issue 19.3): answers live in my-work/, which git and the tests ignore."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from course_paths import CHAPTERS, ROOT

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
    mine.mkdir()
    (mine / "01_first.ipynb").write_text("mine")
    lines = workspace.status(mine, source)
    assert lines[0] == "01_first: yours" and "not in my-work/ yet" in lines[1]


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
    """A learner's answers in my-work/ change nothing that pytest checks (issue 19.3)."""
    probe = workspace.WORKSPACE / f"99_probe_{uuid.uuid4().hex[:8]}.ipynb"
    created_folder = not workspace.WORKSPACE.exists()
    try:
        workspace.WORKSPACE.mkdir(exist_ok=True)
        # An answered, broken notebook: if pytest collected it, it would be an item (and fail).
        probe.write_text(json.dumps({"cells": [{"cell_type": "code", "execution_count": 1, "id": "x",
                                                "metadata": {}, "outputs": [], "source": "1/0"}],
                                     "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=ROOT)
        assert ignored.returncode == 0, "my-work/ is not git-ignored"
        collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0"], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
        assert "my-work" not in collected.stdout
        assert any(f"chapters/{CHAPTERS[0].name}" in line for line in collected.stdout.splitlines())
    finally:
        probe.unlink(missing_ok=True)
        if created_folder:
            workspace.WORKSPACE.rmdir()


def test_the_learner_installs_a_subset_of_everything():
    """requirements-learner.txt pins nothing that requirements.txt pins differently (issue 19.7)."""
    def pins(name: str) -> set[str]:
        return {line.strip() for line in (ROOT / name).read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")}

    learner, everything = pins("requirements-learner.txt"), pins("requirements.txt")
    assert learner <= everything, f"only in the learner's file: {sorted(learner - everything)}"
    assert {"torch==2.13.0", "-e ."} <= learner and not any("jupyter-book" in p or "pytest" in p for p in learner)
