"""Run one notebook's cells in a fresh, limited, isolated process tree, and leave nothing behind.

Isolation (``mode="bwrap"``, the default; Linux bubblewrap, Debian package ``bubblewrap``):
- the sandbox's file system holds the system (``/usr``, ``/etc``, ``/bin``, ``/lib*``), Python, a
  read-only snapshot of the course library at ``/course`` (``utils/`` and ``coursetools/``), and the
  run's own scratch folder at ``/submission``; nothing else of the machine or of the repository exists
  there (no ``solutions/``, ``.git``, ``_build``, other checkouts, other submissions, the gradebook);
  ``/tmp`` and ``/dev/shm`` are private and empty;
- its own PID, IPC, UTS, network and cgroup namespaces: no network, and every process it starts dies
  with the namespace when the run ends (``--die-with-parent``: killing bwrap kills them all);
- when the grader runs as root, a user id of its own for the run, reserved with a lock shared by all
  grader processes on the machine (``/run/course-grader/uids``), so that the process limit counts only
  this run and no two runs ever share an id;
- resource limits: address space, file size, number of processes, and a CPU-time backstop.

Time is judged by the grader's clock, outside: the grader sends one cell at a time
(coursetools.grading.runner) and measures each cell's CPU time (of the whole process tree) and wall
time. CPU time is what counts, because it does not grow when the machine is busy; the wall-clock limit
is a multiple of it, for programs that sleep or block. When the last cell is done the grader kills the
process tree at once, whatever threads are still running.

``mode="none"`` runs without bubblewrap (weaker, see ``WEAKER_WITHOUT_SANDBOX``); as root it still
switches to a reserved unprivileged user id, and kills every process of that id and the whole process
group afterwards.
"""

from __future__ import annotations

import fcntl
import functools
import json
import marshal
import os
import pwd
import resource
import secrets
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from coursetools.grading import cgroups
from coursetools.notebooks import REPO_ROOT

UID_RANGE = range(61000, 62000)  # per-run user ids, reserved with a lock file each
UID_LOCK_DIRS = (Path("/run/course-grader/uids"), Path(tempfile.gettempdir()) / "course-grader-uids")
LIBRARY = ("utils", "coursetools")  # what of the repository a submission sees
SANDBOX_LIBRARY = "/course"
SANDBOX_WORKDIR = "/submission"
MAX_REPLY_BYTES = 4096
WEAKER_WITHOUT_SANDBOX = (
    "submissions can read every file the grading user can read (including solutions/ with the hidden "
    "tests, and the other submissions), reach the network, and see other processes"
)


@dataclass(frozen=True)
class Limits:
    cell_cpu_seconds: float = 60.0  # CPU time of one cell (the whole process tree)
    notebook_cpu_seconds: float = 300.0  # CPU time of the whole notebook
    wall_factor: float = 4.0  # wall-clock limits are this many times the CPU limits (on a quiet machine)
    startup_seconds: float = 120.0  # wall time to start Python and IPython in the sandbox (on a quiet machine)
    memory_bytes: int = 6 << 30  # memory of all the run's processes together (and address space per process)
    file_bytes: int = 64 << 20  # one file
    scratch_bytes: int = 1 << 30  # all files the run writes: its folder, and each of /tmp and /dev/shm
    processes: int = 64  # processes and threads of the run together
    cpus: float = 1.0  # CPU share of the run where it gets a control group

    @property
    def cell_wall_seconds(self) -> float:
        return self.cell_cpu_seconds * self.wall_factor

    @property
    def notebook_wall_seconds(self) -> float:
        return self.notebook_cpu_seconds * self.wall_factor


@dataclass
class Job:
    """One cell to run: ``kind`` "cell" (source run by IPython), "check" (a check's compiled setup, which
    hands each probe's arguments over, or in the reference run its expected form) or "probe" (one probe's
    compiled ``got`` expression and its arguments)."""

    kind: str
    label: str  # for messages: "cell 12", "the check of 3.1"
    source: str = ""
    code: Any = None
    form: str = "got"
    probes: list[int] = field(default_factory=list)
    seed: int = 0
    params: tuple[str, ...] = ()  # "probe": the names its code takes, in order
    env: bytes | None = None  # "probe": its arguments (coursetools.grading.arguments), or None: from its setup
    dump: bool = False  # "check" in the reference run: record each probe's arguments too
    memory: bool = False  # "probe": the grader measures the memory the run's processes use during it
    prepare: bool = False  # "probe": only make its arguments (the job before a measured one)

    def frame(self, index: int, nonce: str = "") -> bytes:
        """The job as sent: ``nonce`` is a fresh random token the runner must echo when the job is done, so
        that a thread of the notebook's that writes "done" messages blindly is caught as a protocol breach."""
        body: dict[str, Any] = {"kind": self.kind, "index": index, "nonce": nonce}
        if self.kind == "cell":
            body["source"] = self.source
        elif self.kind == "probe":
            body.update(code=self.code, probes=list(self.probes), params=list(self.params), env=self.env,
                        prepare=self.prepare, measured=self.memory)
        else:
            body.update(code=self.code, form=self.form, probes=list(self.probes), seed=self.seed, dump=self.dump)
        data = marshal.dumps(body)
        return struct.pack(">I", len(data)) + data


@dataclass
class RunResult:
    status: str  # finished | cpu limit | wall limit | memory limit | disk limit | crashed | protocol | no start
    detail: str  # for people: what happened, where
    wall_seconds: float
    cpu_seconds: float
    cells_done: int  # jobs that reported done
    stopped_at: int | None = None  # index of the job during which the run stopped, if it did
    errors: dict[int, str] = field(default_factory=dict)  # job index -> exception name it raised
    leftovers: int = 0  # processes still alive after the run (killed then)
    # probe index -> growth of the run's peak memory during its job (bytes; None: it could not be measured),
    # for the jobs with ``memory`` set
    memory: dict[int, int | None] = field(default_factory=dict)

    @property
    def timed_out(self) -> bool:
        return self.status in ("cpu limit", "wall limit")


# --------------------------------------------------------------------------------------------------
# Is bubblewrap usable?


@functools.cache
def bubblewrap_status() -> tuple[bool, str]:
    """(usable, why not): whether bwrap exists and can create the namespaces used here."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False, "bubblewrap (bwrap) is not installed"
    try:
        probe = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
             "--die-with-parent", "true"],
            capture_output=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bubblewrap (bwrap) is installed but does not start here ({type(exc).__name__})"
    if probe.returncode != 0:
        message = probe.stderr.decode(errors="replace").strip().splitlines()
        return False, ("bubblewrap (bwrap) is installed but cannot create namespaces here"
                       + (f" ({message[-1][:120]})" if message else ""))
    return True, ""


def bubblewrap_available() -> bool:
    return bubblewrap_status()[0]


# --------------------------------------------------------------------------------------------------
# User ids reserved per run


def _lock_dir() -> Path:
    for folder in UID_LOCK_DIRS:
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            if os.access(folder, os.W_OK):
                return folder
        except OSError:
            continue
    raise RuntimeError("no folder for the user-id locks (/run/course-grader or the temp folder)")


def _uid_in_use(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True  # a real account: never borrow it
    except KeyError:
        pass
    for proc in psutil.process_iter(["uids"]):
        uids = proc.info.get("uids")
        if uids and uid in (uids.real, uids.effective):
            return True  # something else runs with it (a leftover we did not start): leave it alone
    return False


class UidReservation:
    """A user id held for one run: a lock file stays locked (flock) while the reservation lives.

    Any grader process on the machine skips ids whose lock is held; the lock goes with the process
    if it dies, and an id still used by some process is never taken.
    """

    def __init__(self) -> None:
        folder = _lock_dir()
        for uid in UID_RANGE:
            fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            if _uid_in_use(uid):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return
        raise RuntimeError(f"no free user id in {UID_RANGE.start}-{UID_RANGE.stop - 1} for a grading run")

    def release(self) -> int:
        """Kill anything still running as this id (only this run used it), then free the id.

        Returns how many processes were still alive 2 s after the run's process tree was killed.
        """
        deadline = time.monotonic() + 2.0
        while _processes_of(self.uid) and time.monotonic() < deadline:
            time.sleep(0.05)  # the PID namespace is being torn down
        killed = kill_uid(self.uid)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        return killed


def _processes_of(uid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["uids", "status"]):
        uids = proc.info.get("uids")
        if uids and uid in (uids.real, uids.effective, uids.saved) and proc.info.get("status") != "zombie":
            found.append(proc)
    return found


def kill_uid(uid: int, timeout: float = 20.0) -> int:
    """Kill every process of ``uid``, again and again until none is left; return how many there were at first.

    Each round also runs ``kill -KILL -1`` as that user: the kernel then signals all of the user's processes
    in one pass that a fork cannot slip through, so a process that keeps forking a new one and exiting (its
    process id changing faster than a list of processes can be read) dies too.
    """
    first = None
    deadline = time.monotonic() + timeout
    setpriv, kill = shutil.which("setpriv") or "/usr/bin/setpriv", shutil.which("kill") or "/bin/kill"
    while True:
        victims = _processes_of(uid)
        first = len(victims) if first is None else first
        if not victims or time.monotonic() > deadline:
            return first
        if os.geteuid() == 0:
            try:
                subprocess.run([setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", kill, "-s", "KILL",
                                "--", "-1"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=10, cwd="/", env={"PATH": "/usr/bin:/bin"})
            except (OSError, subprocess.SubprocessError):
                pass
        _kill(victims, wait=0.5)


def _kill(victims: list[psutil.Process], wait: float = 5.0) -> int:
    for proc in victims:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(victims, timeout=wait)
    return len(victims)


# --------------------------------------------------------------------------------------------------
# The sandbox's file system


def stage_library(scratch: Path, root: Path = REPO_ROOT) -> Path:
    """A read-only snapshot of the course library (utils/, coursetools/) for submissions to import."""
    stage = scratch / "course"
    for name in LIBRARY:
        shutil.copytree(root / name, stage / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                        symlinks=False)
    for path in [stage, *stage.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return stage


def _python_paths() -> list[Path]:
    """Folders the sandboxed Python needs: the environment, the base installation, the real executable's."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent}
    return sorted(p for p in paths if p.is_dir())


def python_fails_as_another_user() -> str | None:
    """Why a reserved unprivileged user cannot start this Python and import the course library, or None.

    Forced without the sandbox as root, submissions run under such a user; a folder it may not enter on the way
    to the environment (a checkout made with `mktemp -d` is mode 0700) would stop every submission from starting.
    Probed by running it, since permission bits alone do not say (some kernels and file systems allow more).
    """
    reservation = UidReservation()
    try:
        uid = reservation.uid
        command = [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                   "--clear-groups", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--",
                   sys.executable, "-c", "import sys, torch; print(sys.prefix)"]  # torch: the environment's packages
        try:
            probe = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd="/",
                                   env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"starting {sys.executable} as user id {uid} failed: {error}"
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["no message"])[-1]
            return f"user id {uid} cannot start {sys.executable} (exit {probe.returncode}: {last})"
        return None
    finally:
        reservation.release()


SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class RootView:
    """A bubblewrap root being built: the system folders read-only (``args``), then whatever is bound with
    :meth:`ro_bind`, each with the parent folders it needs (made once, 0755) unless a bind already covers it.
    The grader's sandbox and the hub's student servers both start from it."""

    def __init__(self) -> None:
        self.args: list[str] = []
        self.bound: list[str] = []
        self._made: set[str] = set()
        for path in SYSTEM:
            if os.path.islink(path):
                self.args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                self.args += ["--ro-bind", path, path]
                self.bound.append(path)

    def covered(self, path: str) -> bool:
        return any(path == b or path.startswith(b.rstrip("/") + "/") for b in self.bound)

    def parents(self, path: str) -> list[str]:
        out = []
        for parent in reversed(Path(path).parents):
            p = str(parent)
            if p != "/" and p not in self._made and not self.covered(p):
                self._made.add(p)
                out += ["--perms", "0755", "--dir", p]
        return out

    def ro_bind(self, path: str) -> None:
        """Bind ``path`` read-only at the same place, unless a bind already covers it."""
        if not self.covered(path):
            self.args += self.parents(path) + ["--ro-bind", path, path]
            self.bound.append(path)


def bwrap_command(workdir: Path, library: Path, as_root: bool, scratch_bytes: int = Limits.scratch_bytes) -> list[str]:
    """The bubblewrap prefix: a new, nearly empty root with only what a submission needs."""
    view = RootView()
    # The private /tmp and /dev/shm first: a Python environment that lives under /tmp (a CI checkout in
    # /tmp, say) is then bound on top of the empty /tmp instead of being hidden by it.
    # Both writable by the run's user (1777, as on any machine) and each at most ``scratch_bytes``.
    # /proc read-only: a submission cannot write its own clear_refs, which the grader's memory count relies on.
    view.args += ["--dev", "/dev", "--proc", "/proc", "--remount-ro", "/proc"]
    for folder in ("/tmp", "/dev/shm"):
        view.args += ["--perms", "1777", "--size", str(scratch_bytes), "--tmpfs", folder]
    for path in map(str, _python_paths()):
        view.ro_bind(path)
    args = [shutil.which("bwrap") or "bwrap", *view.args]
    args += ["--ro-bind", str(library), SANDBOX_LIBRARY, "--bind", str(workdir), SANDBOX_WORKDIR]
    args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if not as_root:
        args.append("--unshare-user")
    args += ["--die-with-parent", "--new-session", "--chdir", SANDBOX_WORKDIR]
    return args


# --------------------------------------------------------------------------------------------------
# How busy the machine is


class Calibration:
    """How much longer than its CPU time a CPU-bound process takes here now: the machine's load average over
    the cores this process may use (1 on a quiet machine, 20 when 40 busy processes share 2 cores), read at
    most every half second. Wall-clock limits count wall time divided by it ("quiet seconds"), so a busy
    machine stretches them as much as it stretches the work, and a program that sleeps or waits is still
    stopped."""

    def __init__(self) -> None:
        self.ratio = 1.0
        self._last = -1.0

    def measure(self) -> float:
        now = time.monotonic()
        if now - self._last < 0.5:
            return self.ratio
        self._last = now
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
        self.ratio = max(1.0, load / max(cores, 1))
        return self.ratio


CALIBRATION = Calibration()


def _folder_bytes(path: Path, cap_entries: int = 100_000) -> int:
    """Bytes of the files under ``path`` (links not followed); past ``cap_entries`` entries, more than any limit."""
    total, seen, stack = 0, 0, [str(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if seen > cap_entries:
                        return 1 << 62
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def _status_bytes(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise OSError(f"no {field} for process {pid}")


def _io_written(pid: int) -> int:
    """Bytes the process has passed to write() and its kin so far (``wchar`` of ``/proc/<pid>/io``)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise OSError(f"no wchar for process {pid}")


class MemoryPeak:
    """The memory a run used during one job, measured by the grader from outside the run: the largest of

    - the growth of its peak: with a control group, the kernel's peak of all the slot's processes (every one,
      even one that started and ended within the job), reset just before the job; without one, each process's
      peak resident size (VmHWM, reset through ``/proc/<pid>/clear_refs`` before the job) and the tree's
      resident memory polled meanwhile;
    - the writable memory its processes used during the job (utils.checks.touched_bytes, after their
      referenced bits were cleared through ``clear_refs`` before it), plus the private memory they gave back
      (utils.checks.private_bytes fell) and the bytes they passed to write() (``wchar``; not send(), whose
      socket queues only a control group counts): so a buffer filled before the job and reused, freed or
      written out during it counts as much as a new one.

    The submission cannot undo the count: ``/proc`` is read-only in the sandbox (no writing its own
    ``clear_refs``) and the runner forbids the ``madvise`` advice that clears referenced bits
    (coursetools.grading.runner). Without a control group, a process that was not there at the start, or one
    that ended within the job (its parent's children's CPU time grew), makes the job unmeasurable (None): its
    memory could have escaped the count."""

    def __init__(self, run: _Run) -> None:
        from utils import checks

        self.checks = checks
        self.run = run
        self.base: int | None = None
        self.peak = 0
        self.ok = True
        self.pids: set[int] = set()
        self.reaped = 0.0
        self.mode = "tree"
        try:
            procs = self._procs()
            for proc in procs:
                with open(f"/proc/{proc.pid}/clear_refs", "w") as handle:
                    handle.write("1")  # every page: not referenced
            self.private = {p.pid: checks.private_bytes(p.pid) for p in procs}
            self.written = {p.pid: _io_written(p.pid) for p in procs}
        except (OSError, psutil.Error, ValueError):
            self.ok = False
            return
        if run.slot is not None:
            self.base = run.slot.start_memory_peak()
            if self.base is not None:
                self.mode = "slot"
                return
        try:
            for proc in procs:
                with open(f"/proc/{proc.pid}/clear_refs", "w") as handle:
                    handle.write("5")  # VmHWM := the current resident size
            self.pids = {p.pid for p in procs}
            self.reaped = self._reaped(procs)
            self.base = sum(_status_bytes(p.pid, "VmRSS") for p in procs)
            self.peak = self.base
        except (OSError, psutil.Error, ValueError):
            self.ok = False

    def _procs(self) -> list[psutil.Process]:
        """The run's processes: its process tree, and with a control group every process in it."""
        procs = {p.pid: p for p in [self.run.root, *self.run.root.children(recursive=True)]}
        if self.run.slot is not None:
            for pid in self.run.slot.pids():
                if pid not in procs:
                    try:
                        procs[pid] = psutil.Process(pid)
                    except psutil.Error:
                        continue
        return list(procs.values())

    @staticmethod
    def _reaped(procs: list[psutil.Process]) -> float:
        total = 0.0
        for proc in procs:
            times = proc.cpu_times()
            total += times.children_user + times.children_system
        return total

    def poll(self) -> None:
        if self.mode != "tree" or not self.ok:
            return
        try:
            procs = [self.run.root, *self.run.root.children(recursive=True)]
        except psutil.Error:
            self.ok = False
            return
        if {p.pid for p in procs} != self.pids:
            self.ok = False  # another process: what it used may end before it is seen
            return
        self.peak = max(self.peak, _tree_rss(self.run.root))

    def _used(self) -> int:
        """Writable memory used during the job, private memory given back and bytes written (see above)."""
        used = 0
        for proc in self._procs():
            try:
                used += self.checks.touched_bytes(proc.pid)
                if proc.pid in self.private:
                    used += max(0, self.private[proc.pid] - self.checks.private_bytes(proc.pid))
                    used += max(0, _io_written(proc.pid) - self.written[proc.pid])
            except (OSError, ValueError):
                continue  # it ended meanwhile: its pages are gone (and counted in the peak where they mattered)
        for pid in set(self.private) - {p.pid for p in self._procs()}:
            used += self.private[pid]  # a process of the start ended during the job: all it held was given back
        return used

    def growth(self) -> int | None:
        if self.base is None or not self.ok:
            return None
        if self.mode == "slot":
            peak = self.run.slot.stop_memory_peak()
            if peak is None:
                return None
            try:
                return max(peak - self.base, self._used())
            except psutil.Error:
                return None
        self.poll()
        if not self.ok:
            return None
        try:
            procs = [self.run.root, *self.run.root.children(recursive=True)]
            if self._reaped(procs) > self.reaped:
                return None  # a process started and ended within the job
            peak = max(self.peak, sum(_status_bytes(p.pid, "VmHWM") for p in procs))
            return max(peak - self.base, self._used())
        except (OSError, psutil.Error, ValueError):
            return None


def _tree_rss(root: psutil.Process) -> int:
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


# --------------------------------------------------------------------------------------------------
# Running


def _set_limits(limits: Limits, processes: int | None, cpu_backstop: int, slot=None) -> None:
    """preexec_fn: runs in the child between fork and exec."""
    os.setsid()
    if slot is not None:
        slot.join()
    try:  # the kernel's out-of-memory killer takes the submission's processes before anything else
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_backstop, cpu_backstop + 5))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def _processes_of_current_user() -> int:
    uid = os.getuid()
    return sum(1 for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid)


def _tree_cpu(root: psutil.Process) -> float:
    """CPU seconds used so far by ``root`` and every process below it (ended ones included once reaped)."""
    total = 0.0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            continue
    return total


SIGNAL_MEANING = {
    "SIGSEGV": "a segmentation fault", "SIGABRT": "aborted", "SIGBUS": "a bus error",
    "SIGFPE": "a floating-point exception", "SIGILL": "an illegal instruction",
    "SIGKILL": "killed", "SIGXCPU": "the CPU-time limit", "SIGXFSZ": "the file-size limit",
}


def exit_reason(code: int, sandboxed: bool) -> str:
    """'killed by SIGSEGV (a segmentation fault)' or 'exit code 1'. bwrap reports a signal as 128 + n."""
    number = -code if code < 0 else (code - 128 if sandboxed and 128 < code < 128 + 65 else None)
    if number is not None:
        try:
            name = signal.Signals(number).name
        except ValueError:
            return "killed by a signal"
        meaning = SIGNAL_MEANING.get(name)
        return f"killed by {name} ({meaning})" if meaning else "killed by a signal"
    # Only 0 and 1 as they are: any other code was chosen by the submission, and could carry a number it found.
    return f"exit code {code}" if code in (0, 1) else "an exit code other than 0 or 1"


class _Run:
    """One started process tree and the pipes to it."""

    def __init__(self, command: list[str], workdir: Path, env: dict, output: Path, limits: Limits,
                 processes: int | None, cpu_backstop: int, slot=None) -> None:
        reply_r, reply_w = os.pipe()
        command = [*command, str(reply_w)]
        self.slot = slot
        self.workdir = workdir
        with open(output, "wb") as out:
            self.proc = subprocess.Popen(
                command, cwd=workdir, env=env, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                pass_fds=(reply_w,),
                preexec_fn=functools.partial(_set_limits, limits, processes, cpu_backstop, slot),
            )
        os.close(reply_w)
        self.reply = reply_r
        os.set_blocking(reply_r, False)
        self.stdin = self.proc.stdin.fileno()
        os.set_blocking(self.stdin, False)
        self.buffer = b""
        self.eof = False
        self.root = psutil.Process(self.proc.pid)
        self.cpu = 0.0

    def tree_cpu(self) -> float:
        """CPU time of all the run's processes so far: the control group's count where there is one (every
        process, ended ones too), else the process tree's."""
        exact = self.slot.cpu_seconds() if self.slot is not None else None
        self.cpu = max(self.cpu, exact if exact is not None else _tree_cpu(self.root))
        return self.cpu

    def over_memory(self, limits: Limits) -> bool:
        """All the run's processes together went over the memory budget: the control group's kernel limit was
        hit, or, without one, the watchdog's sum of the process tree's resident memory is over it."""
        if self.slot is not None:
            return self.slot.oom_killed()  # the kernel killed one of its processes for the run's budget
        return _tree_rss(self.root) > limits.memory_bytes

    def over_disk(self, limits: Limits) -> bool:
        return _folder_bytes(self.workdir) > limits.scratch_bytes

    def pump(self, outgoing: bytes, timeout: float) -> tuple[bytes, list[bytes]]:
        """Write what the pipe takes of ``outgoing``, read replies; return (unsent rest, complete lines)."""
        wlist = [self.stdin] if outgoing else []
        rlist = [] if self.eof else [self.reply]
        try:
            readable, writable, _ = select.select(rlist, wlist, [], timeout)
        except InterruptedError:
            readable, writable = [], []
        if writable:
            try:
                written = os.write(self.stdin, outgoing[:1 << 16])
                outgoing = outgoing[written:]
            except BlockingIOError:
                pass
            except (BrokenPipeError, OSError):
                outgoing = b""  # the process is gone or closed its input; the exit is noticed below
        lines: list[bytes] = []
        if readable:
            try:
                data = os.read(self.reply, MAX_REPLY_BYTES)
            except BlockingIOError:
                data = None
            if data == b"":
                self.eof = True
            elif data:
                self.buffer += data
                *complete, self.buffer = self.buffer.split(b"\n")
                lines = complete
                if len(self.buffer) > MAX_REPLY_BYTES:
                    lines.append(self.buffer)  # an over-long line: a protocol violation
                    self.buffer = b""
        return outgoing, lines

    def kill(self) -> None:
        if self.slot is not None:
            self.slot.kill()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        self.proc.wait()
        for fd in (self.reply,):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.proc.stdin.close()
        except OSError:
            pass


def _parse_reply(line: bytes) -> dict | None:
    try:
        message = json.loads(line.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def run_jobs(
    jobs: list[Job],
    workdir: Path,
    library: Path,
    limits: Limits,
    mode: str = "bwrap",
    output: Path | None = None,
) -> RunResult:
    """Run ``jobs`` in order in a fresh process tree whose scratch folder is ``workdir``.

    ``workdir`` must be a new folder the grader made (records land in ``workdir/records``).
    """
    as_root = os.geteuid() == 0
    reservation = UidReservation() if as_root else None
    uid = reservation.uid if reservation else None
    output = output or workdir.with_name(workdir.name + ".out")
    try:
        if uid is not None:
            os.chown(workdir, uid, uid)
        os.chmod(workdir, 0o700)
        inside_workdir = SANDBOX_WORKDIR if mode == "bwrap" else str(workdir)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": inside_workdir,
            "TMPDIR": "/tmp" if mode == "bwrap" else inside_workdir,
            "IPYTHONDIR": f"{inside_workdir}/.ipython",
            "MPLCONFIGDIR": f"{inside_workdir}/.matplotlib",
            "MPLBACKEND": "Agg",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "COURSE_DEVICE": "cpu",
            "CUDA_VISIBLE_DEVICES": "",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONPATH": SANDBOX_LIBRARY if mode == "bwrap" else str(library),
            "LANG": "C.UTF-8",
            # A marker of this run (and of whoever started the grader: COURSE_GRADER_TAG, for tests on a
            # machine where other graders run too).
            "COURSE_GRADER_RUN": f"{os.environ.get('COURSE_GRADER_TAG', '')}{os.getpid()}-{time.monotonic_ns()}",
        }
        command = [sys.executable, "-m", "coursetools.grading.runner"]
        if uid is not None:
            command = [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                       "--clear-groups", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all",
                       "--"] + command
        if mode == "bwrap":
            command = bwrap_command(workdir, library, as_root, limits.scratch_bytes) + command
        # The process limit counts per user: a reserved id counts only this run; otherwise leave room
        # for what this user already runs (root is exempt from it anyway).
        processes = limits.processes if uid is not None else (
            None if as_root else _processes_of_current_user() + limits.processes)
        cpu_backstop = int(limits.notebook_cpu_seconds) + 30
        slot = cgroups.Slot.create(limits.memory_bytes, limits.processes, limits.cpus) if as_root else None
        try:
            run = _Run(command, workdir, env, output, limits, processes, cpu_backstop, slot)
            try:
                result = _drive(run, jobs, limits, sandboxed=mode == "bwrap")
            finally:
                run.kill()
                if mode != "bwrap" and uid is None:
                    result_token = env["COURSE_GRADER_RUN"]
                    kill_marked(result_token)
        finally:
            if slot is not None:
                slot.remove()
        if reservation is not None:
            result.leftovers = reservation.release()
            reservation = None
        return result
    finally:
        if reservation is not None:
            reservation.release()


def _drive(run: _Run, jobs: list[Job], limits: Limits, sandboxed: bool) -> RunResult:
    """Send the jobs one at a time and judge time on the grader's clock."""
    start = time.monotonic()
    errors: dict[int, str] = {}

    memory: dict[int, int | None] = {}

    def result(status: str, detail: str, stopped: int | None, done: int) -> RunResult:
        return RunResult(status, detail, time.monotonic() - start, run.tree_cpu(), done, stopped, errors,
                         memory=memory)

    def exited(stopped: int | None, done: int, where: str) -> RunResult:
        code = run.proc.wait()
        if run.slot is not None and run.slot.oom_killed():
            return result("memory limit", f"the notebook's processes together went over the memory limit of "
                          f"{limits.memory_bytes / 2**30:g} GB {where.strip()}", stopped, done)
        return result("crashed", f"the notebook's process ended {where}({exit_reason(code, sandboxed)})",
                      stopped, done)

    quiet = {"start": 0.0, "run": 0.0, "cell": 0.0}  # wall time in quiet seconds (wall time / CALIBRATION), since each began
    last = [time.monotonic()]

    def tick() -> float:
        now = time.monotonic()
        step = (now - last[0]) / CALIBRATION.measure()
        last[0] = now
        for key in quiet:
            quiet[key] += step
        return now

    # Start-up: Python, IPython and the runner, under the wall-clock start-up limit.
    while True:
        _, lines = run.pump(b"", 0.1)
        if any(_parse_reply(line) == {"ready": 1} for line in lines):
            break
        if lines:
            return result("protocol", "the notebook's process broke the grader's protocol at start-up", 0, 0)
        if run.eof or run.proc.poll() is not None:
            return exited(0, 0, "while starting ")
        tick()
        if quiet["start"] > limits.startup_seconds:
            return result("wall limit", f"Python did not start within {limits.startup_seconds:g} s (of a quiet "
                          "machine's time)", 0, 0)
    cpu_start = run.tree_cpu()
    quiet["run"] = 0.0
    for index, job in enumerate(jobs):
        nonce = secrets.token_hex(16)
        outgoing = job.frame(index, nonce)
        cell_start, cpu_cell = time.monotonic(), run.tree_cpu()
        peak = MemoryPeak(run) if job.memory else None
        quiet["cell"] = 0.0
        last_cpu_check = 0.0
        done = False
        while not done:
            outgoing, lines = run.pump(outgoing, 0.05)
            for line in lines:
                message = _parse_reply(line)
                if (message is None or set(message) != {"done", "nonce", "error"} or message["done"] != index
                        or message["nonce"] != nonce or not (message["error"] is None or isinstance(message["error"], str))):
                    return result("protocol", f"the notebook's process broke the grader's protocol in "
                                  f"{job.label}", index, index)
                if message["error"] is not None:
                    errors[index] = message["error"][:120]
                done = True
                if peak is not None:
                    memory[job.probes[0]] = peak.growth()
            if done:
                break
            if peak is not None:
                peak.poll()
            if run.eof or run.proc.poll() is not None:
                return exited(index, index, f"in {job.label} ")
            now = tick()
            if now - last_cpu_check >= 0.25:
                last_cpu_check = now
                cpu = run.tree_cpu()
                if cpu - cpu_cell > limits.cell_cpu_seconds:
                    return result("cpu limit", f"{job.label} used more than {limits.cell_cpu_seconds:g} s of "
                                  "CPU time", index, index)
                if cpu - cpu_start > limits.notebook_cpu_seconds:
                    return result("cpu limit", f"the notebook used more than {limits.notebook_cpu_seconds:g} s "
                                  f"of CPU time (in {job.label})", index, index)
                if run.over_memory(limits):
                    return result("memory limit", f"the notebook's processes together went over the memory limit "
                                  f"of {limits.memory_bytes / 2**30:g} GB in {job.label}", index, index)
                if run.over_disk(limits):
                    return result("disk limit", f"the notebook's files went over the limit of "
                                  f"{limits.scratch_bytes / 2**20:g} MB in {job.label}", index, index)
            if quiet["cell"] > limits.cell_wall_seconds:
                return result("wall limit", f"{job.label} was stopped by the wall-clock limit: "
                              f"{limits.cell_wall_seconds:g} s of a quiet machine's time, {now - cell_start:.0f} s of "
                              f"wall time here, with only {run.tree_cpu() - cpu_cell:.1f} s of CPU time: it slept or "
                              "waited", index, index)
            if quiet["run"] > limits.notebook_wall_seconds:
                return result("wall limit", f"the notebook was stopped by the wall-clock limit of "
                              f"{limits.notebook_wall_seconds:g} s of a quiet machine's time (in {job.label})",
                              index, index)
    return result("finished", "", None, len(jobs))


def kill_marked(token: str) -> int:
    """Kill processes whose environment carries this run's marker (clean-up without a reserved id)."""
    victims = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("COURSE_GRADER_RUN") == token:
                victims.append(proc)
        except psutil.Error:
            continue
    return _kill(victims)
