"""The learner's workspace: your own copies of the chapters, in `my-work/`, which git ignores.

    python -m coursetools.workspace lab          # create my-work/ if needed, then open JupyterLab on it
    python -m coursetools.workspace              # create my-work/ (copies only chapters you do not have yet)
    python -m coursetools.workspace reset 03     # a fresh copy of chapter 03 (your old one is kept in my-work/.old/)
    python -m coursetools.workspace status       # which chapters you have, and which are new or updated

Why: `chapters/` is generated from `solutions/` and checked by the tests (chapters/ must be exactly
what the release tool makes). Answering the exercises there would make `pytest` fail and would be
overwritten by the next release. In `my-work/` your answers are yours: nothing in the course
writes there except these commands, and `reset` never deletes (it moves the old copy aside).

`lab` adds `--allow-root` when it runs as root (containers, cloud machines), where JupyterLab
otherwise refuses to start; every argument after `lab` is passed to JupyterLab as it is, for example
`lab --no-browser --ip=127.0.0.1 --port=8888` (a leading `--` is dropped).

`status` compares contents, not file times: when a chapter is copied, the digest (SHA-256) of the
`chapters/` file it came from is recorded in `my-work/.copies.json`; a chapter has a newer version
when `chapters/` no longer has that digest. Saving your copy, or touching a file, changes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

# Standard library only (no nbformat): the set-up runs this module, and `lab` starts without delay.
REPO_ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = REPO_ROOT / "chapters"
WORKSPACE = REPO_ROOT / "my-work"
OLD = ".old"
RECORD = ".copies.json"  # {chapter file name: SHA-256 of the chapters/ file when it was copied}


class WorkspaceError(ValueError):
    pass


def chapters(source: Path | None = None) -> list[Path]:
    return sorted((source or CHAPTERS).glob("[0-9][0-9]_*.ipynb"))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recorded(workspace: Path) -> dict[str, str]:
    """The digests recorded when the chapters were copied ({} if none, or if the record is unreadable)."""
    try:
        record = json.loads((workspace / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in record.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(record, dict) else {}


def _copy(chapter: Path, target: Path) -> None:
    """Copy one chapter and record the digest of what was copied."""
    data = chapter.read_bytes()
    target.write_bytes(data)
    record = recorded(target.parent)
    record[chapter.name] = hashlib.sha256(data).hexdigest()
    (target.parent / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def create(workspace: Path = WORKSPACE, source: Path | None = None) -> list[Path]:
    """Copy every chapter that is not in ``workspace`` yet; never overwrite. Return what was copied."""
    if workspace.exists() and not workspace.is_dir():
        raise WorkspaceError(f"workspace: {workspace} exists and is not a folder")
    workspace.mkdir(parents=True, exist_ok=True)
    copied = []
    for chapter in chapters(source):
        target = workspace / chapter.name
        if not target.exists():
            _copy(chapter, target)
            copied.append(target)
    return copied


def _match(prefix: str, source: Path | None) -> Path:
    if not prefix or not prefix.strip():
        raise WorkspaceError("reset: name a chapter, for example `reset 03`")
    found = [p for p in chapters(source) if p.name.startswith(prefix.strip())]
    if len(found) != 1:
        names = ", ".join(p.stem for p in chapters(source))
        what = "no chapter" if not found else f"{len(found)} chapters"
        raise WorkspaceError(f"reset: {what} starting with {prefix!r}; the chapters are: {names}")
    return found[0]


def reset(prefix: str, workspace: Path = WORKSPACE, source: Path | None = None) -> tuple[Path, Path | None]:
    """Replace the workspace copy of one chapter with a fresh one; move the old copy to ``.old/``.

    Returns (fresh copy, where the old one went or None).
    """
    chapter = _match(prefix, source)
    workspace.mkdir(parents=True, exist_ok=True)
    target = workspace / chapter.name
    moved = None
    if target.exists():
        old = workspace / OLD
        old.mkdir(exist_ok=True)
        moved = old / f"{chapter.stem}-{time.strftime('%Y%m%d-%H%M%S')}.ipynb"
        counter = 1
        while moved.exists():
            moved = old / f"{chapter.stem}-{time.strftime('%Y%m%d-%H%M%S')}-{counter}.ipynb"
            counter += 1
        shutil.move(str(target), moved)
    _copy(chapter, target)
    return target, moved


def status(workspace: Path = WORKSPACE, source: Path | None = None) -> list[str]:
    """One line per chapter: missing from the workspace, or yours (and whether chapters/ has changed since
    it was copied, judged by content: the digest recorded at the copy against the chapter's digest now)."""
    lines = []
    record = recorded(workspace)
    for chapter in chapters(source):
        mine = workspace / chapter.name
        now = digest(chapter)
        if not mine.exists():
            lines.append(f"{chapter.stem}: not in {workspace.name}/ yet (run `python -m coursetools.workspace`)")
        elif chapter.name not in record:
            if digest(mine) == now:
                lines.append(f"{chapter.stem}: yours (the same as chapters/)")
            else:
                lines.append(f"{chapter.stem}: yours; copied without a record of its version, so whether "
                             f"chapters/ is newer is unknown (`reset {chapter.name[:2]}` takes chapters/ "
                             "now, keeping yours in .old/)")
        elif record[chapter.name] != now:
            lines.append(f"{chapter.stem}: yours; chapters/ has a newer version (`reset {chapter.name[:2]}` "
                         "takes it, keeping yours in .old/)")
        else:
            lines.append(f"{chapter.stem}: yours")
    return lines


# JupyterLab's defaults for the course (labconfig/default_setting_overrides.json): no "Would you like to
# get notified about official Jupyter news?" prompt and no update check (the course runs offline). A
# learner's own settings still win; the folder joins JUPYTER_CONFIG_PATH only for the Lab we start.
LAB_CONFIG = Path(__file__).resolve().parent / "lab_config"
# The course's own Lab extension (issue 30; hand-written, no build): text outputs keep their lines and
# scroll in their box instead of wrapping, and every figure gets its cell's description as alt text.
LAB_EXTENSIONS = LAB_CONFIG / "labextensions"
# The options that make a Lab the course's (the learner's `lab` command and the hub's single-user servers).
LAB_OPTIONS = ("--LabApp.news_url=None", f"--LabApp.extra_labextensions_path={LAB_EXTENSIONS}")


def lab_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the course's Lab defaults on JUPYTER_CONFIG_PATH."""
    env = dict(os.environ if env is None else env)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(p for p in (str(LAB_CONFIG), env.get("JUPYTER_CONFIG_PATH")) if p)
    return env


def lab_command(workspace: Path = WORKSPACE, extra: list[str] | None = None) -> list[str]:
    """The JupyterLab command line: root folder the workspace, --allow-root when run as root, no
    "Would you like to receive official Jupyter news?" prompt (news off: the course runs offline), and
    the course's Lab extension (LAB_EXTENSIONS)."""
    command = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={workspace}", *LAB_OPTIONS]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    return command + list(extra or [])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    jupyter_args: list[str] = []
    if argv[:1] == ["lab"]:  # everything after `lab` belongs to JupyterLab, options included
        argv, jupyter_args = ["lab"], argv[1:]
        if jupyter_args[:1] == ["--"]:
            jupyter_args = jupyter_args[1:]
    parser = argparse.ArgumentParser(prog="python -m coursetools.workspace",
                                     description="Your workspace: copies of the chapters in my-work/.")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("create", help="copy the chapters you do not have yet (the default)")
    sub.add_parser("lab", help="create the workspace if needed and open JupyterLab on it; every argument "
                               "after `lab` is passed to JupyterLab (e.g. --no-browser --port=8888)")
    reset_parser = sub.add_parser("reset", help="a fresh copy of one chapter (yours moves to my-work/.old/)")
    reset_parser.add_argument("chapter", help="its number, for example 03")
    sub.add_parser("status", help="which chapters you have")
    args = parser.parse_args(argv)
    try:
        if args.command == "reset":
            fresh, moved = reset(args.chapter)
            kept = f"; your previous copy is {moved.relative_to(WORKSPACE.parent)}" if moved else ""
            print(f"{fresh.relative_to(WORKSPACE.parent)} is a fresh copy of chapters/{fresh.name}{kept}")
            return 0
        if args.command == "status":
            try:
                print("\n".join(status()), flush=True)
            except BrokenPipeError:  # `status | head`: the reader left early; that is not an error
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        copied = create()
        if copied:
            print(f"copied {len(copied)} chapter(s) into {WORKSPACE.name}/: " + ", ".join(p.stem for p in copied))
        if args.command == "lab":
            command = lab_command(extra=jupyter_args)
            print("opening JupyterLab on my-work/:", " ".join(command), flush=True)
            if os.name == "nt":  # os.execv does not replace the process on Windows
                import subprocess

                return subprocess.call(command, env=lab_environment())
            os.environ.update(lab_environment())
            os.execv(command[0], command)
        elif not copied:
            print(f"{WORKSPACE.name}/ already has every chapter (see `status`)")
        return 0
    except WorkspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
