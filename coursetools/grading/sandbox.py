"""Run a list of cells in a fresh, limited, isolated process, and clean up everything it started.

Isolation, outermost first:
- Linux bubblewrap when installed (`bwrap`, Debian package `bubblewrap`): read-only root, private
  /tmp, the hidden folders (solutions/, the submissions, the gradebook) replaced by empty ones, its
  own PID, IPC, UTS and network namespaces (so no network), killed with its parent;
- inside it, when the grader runs as root, a user id of its own per grading slot (setpriv), so the
  process limit and the final clean-up ("kill every process of this uid") touch nothing else;
- resource limits: CPU seconds, address space, file size, number of processes;
- wall-clock limits per cell and per notebook, enforced from outside (the submission cannot catch
  SIGKILL).
Without bubblewrap grading still works, with a warning that isolation is weaker.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from coursetools.notebooks import REPO_ROOT

NOBODY_BASE_UID = 61000  # slot k runs as uid 61000 + k


@dataclass(frozen=True)
class Limits:
    cell_seconds: float = 60.0
    notebook_seconds: float = 300.0
    cpu_seconds: int = 300
    memory_bytes: int = 6 << 30
    file_bytes: int = 64 << 20
    processes: int = 256


@dataclass
class RunResult:
    status: str  # finished | cell timeout | notebook timeout | crashed
    detail: str
    seconds: float


@functools.cache
def bubblewrap_available() -> bool:
    """Whether bwrap exists and can create the namespaces we need on this machine."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False
    try:
        probe = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
             "--die-with-parent", "true"],
            capture_output=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _python_paths() -> list[Path]:
    """Folders the sandboxed Python needs to read, for re-binding under a private /root."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent}
    return sorted(p for p in paths if p.is_dir())


def _traversable_parents(path: Path) -> list[str]:
    """bwrap creates the missing folders above a mount point with mode 700; create them 755 first."""
    args = []
    for parent in reversed(path.parents):
        if str(parent).startswith(("/tmp/", "/root/")):
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


def _bwrap_prefix(workdir: Path, hidden: list[Path], as_root: bool) -> list[str]:
    args = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
    if as_root:
        # root's home is private (mode 700): give the sandbox an empty one with only Python in it.
        args += ["--perms", "0755", "--tmpfs", "/root"]
    # Python and the course (which may live under /tmp or /root, both replaced above) stay visible.
    for path in [*_python_paths(), REPO_ROOT]:
        if str(path).startswith(("/tmp/", "/root/")):
            args += _traversable_parents(path) + ["--ro-bind", str(path), str(path)]
    args += _traversable_parents(workdir) + ["--bind", str(workdir), str(workdir)]
    for folder in hidden:
        if folder.exists():
            args += ["--tmpfs", str(folder.resolve())]
    namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if not as_root:
        namespaces.append("--unshare-user")
    args += namespaces + ["--die-with-parent", "--new-session", "--chdir", str(workdir)]
    return args


def _set_limits(limits: Limits, processes: int | None) -> None:
    """preexec_fn: runs in the child between fork and exec."""
    os.setsid()
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def _processes_of_current_user() -> int:
    uid = os.getuid()
    return sum(1 for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid)


def kill_uid(uid: int) -> int:
    """Kill every process of ``uid`` (a grading slot's own user); return how many."""
    return _kill([p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid])


def _kill(victims: list[psutil.Process]) -> int:
    for proc in victims:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(victims, timeout=5)
    return len(victims)


def run_cells(
    cells: list[str],
    workdir: Path,
    limits: Limits,
    slot: int = 0,
    hidden: list[Path] | None = None,
    sandbox: bool = True,
) -> RunResult:
    """Run ``cells`` with coursetools.grading.runner in ``workdir``; records land in workdir/got, /expected."""
    workdir.mkdir(parents=True, exist_ok=True)
    as_root = os.geteuid() == 0
    # A uid per slot needs root to switch to and the sandbox to reach Python under /root.
    uid = NOBODY_BASE_UID + slot if (as_root and sandbox) else None
    job = workdir / "job.json"
    job.write_text(json.dumps({"cells": cells, "workdir": str(workdir)}))
    for sub in ("got", "expected"):
        (workdir / sub).mkdir(exist_ok=True)
    if uid is not None:
        for path in [workdir, *workdir.rglob("*")]:
            os.chown(path, uid, uid)
        kill_uid(uid)  # nothing left over from an earlier run in this slot
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "IPYTHONDIR": str(workdir / ".ipython"),
        "MPLCONFIGDIR": str(workdir / ".matplotlib"),
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
        "COURSE_DEVICE": "cpu",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
    }
    token = f"{os.getpid()}-{slot}-{time.monotonic_ns()}"
    env["COURSE_GRADER_RUN"] = token
    command = [sys.executable, "-m", "coursetools.grading.runner", str(job)]
    if uid is not None:
        command = [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}",
                   "--clear-groups", "--"] + command
    if sandbox:
        command = _bwrap_prefix(workdir, hidden or [], as_root) + command
    # The process limit counts per user: for a slot uid it is the slot's own; otherwise leave room
    # for what this user already runs (root is exempt from it anyway).
    processes = limits.processes if uid is not None else (
        None if as_root else _processes_of_current_user() + limits.processes)
    output = open(workdir / "output.txt", "wb")  # noqa: SIM115 (closed below)
    start = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
        preexec_fn=functools.partial(_set_limits, limits, processes),
    )
    heartbeat, last_beat, beat_time = workdir / "heartbeat", None, start
    result = None
    try:
        while result is None:
            try:
                proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            try:
                beat = heartbeat.read_text()[:20]
            except OSError:
                beat = None
            if beat != last_beat:
                last_beat, beat_time = beat, now
            if proc.returncode is not None:
                if beat == "done":
                    result = RunResult("finished", "", now - start)
                else:
                    cell = f" in cell {beat}" if beat else ""
                    reason = _exit_reason(proc.returncode)
                    result = RunResult("crashed", f"the notebook's process ended{cell} ({reason})", now - start)
            elif now - start > limits.notebook_seconds:
                result = RunResult("notebook timeout", f"over {limits.notebook_seconds:g} s in all", now - start)
            elif beat not in (None, "done") and now - beat_time > limits.cell_seconds:
                result = RunResult("cell timeout", f"cell {beat} ran over {limits.cell_seconds:g} s", now - start)
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        output.close()
        if uid is not None:
            kill_uid(uid)
        kill_marked(token)
    return result


def kill_marked(token: str) -> int:
    """Kill processes whose environment carries this run's marker (the clean-up without a slot uid)."""
    victims = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("COURSE_GRADER_RUN") == token:
                victims.append(proc)
        except psutil.Error:
            continue
    return _kill(victims)


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
