"""A control group per run, where the kernel allows one: a memory budget, a process cap, a CPU share and
exact CPU accounting for all of a submission's processes together, and a kill that leaves none behind.

Each run gets a child of the grader's own control group (so every limit the machine already puts on the
grader still holds), in cgroup v2 (``memory.max``, ``memory.peak``, ``pids.max``, ``cpu.max``,
``cpu.stat``, ``cgroup.kill``) or in the v1 hierarchies (``memory.limit_in_bytes``,
``memory.max_usage_in_bytes``, ``pids.max``, ``cpu.cfs_quota_us``, ``cpuacct.usage``, ``freezer.state``).
The run's first process joins it between fork and exec, while it is still the grader's; the submission,
without privileges, cannot leave it.

Where none can be made (no permission, no such controller, cgroup v2 without delegation) :func:`Slot.create`
returns None, and the grader falls back on per-process limits and a watchdog that sums the memory and
CPU time of the run's process tree (coursetools.grading.sandbox); the grader says which it uses.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count()


def _own_paths() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _v2_mount() -> Path | None:
    for candidate in (V1_ROOT, V1_ROOT / "unified"):
        if (candidate / "cgroup.controllers").exists():
            return candidate
    return None


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


class Slot:
    """One run's control group(s). ``create`` returns None where the kernel does not give us one."""

    def __init__(self, version: int, folders: dict[str, Path]) -> None:
        self.version = version
        self.folders = folders  # controller -> folder ("" for v2's single folder)

    # ------------------------------------------------------------------ making one

    @classmethod
    def create(cls, memory_bytes: int, processes: int, cpus: float) -> Slot | None:
        name = f"course-grader-{os.getpid()}-{next(_counter)}"
        own = _own_paths()
        slot = cls._create_v1(name, own, memory_bytes, processes, cpus)
        if slot is None:
            slot = cls._create_v2(name, own, memory_bytes, processes, cpus)
        return slot

    @classmethod
    def _create_v1(cls, name: str, own: dict[str, str], memory_bytes: int, processes: int, cpus: float):
        needed = ("memory", "pids", "cpuacct")
        if not all(c in own and (V1_ROOT / c).is_dir() for c in needed):
            return None
        folders: dict[str, Path] = {}
        try:
            for controller in ("memory", "pids", "cpuacct", "cpu", "freezer"):
                if controller not in own or not (V1_ROOT / controller).is_dir():
                    continue
                folder = V1_ROOT / controller / own[controller].lstrip("/") / name
                folder.mkdir()
                folders[controller] = folder
            slot = cls(1, folders)
            _write(folders["memory"] / "memory.limit_in_bytes", str(memory_bytes))
            try:
                _write(folders["memory"] / "memory.memsw.limit_in_bytes", str(memory_bytes))  # no escape to swap
            except OSError:
                pass
            _write(folders["pids"] / "pids.max", str(processes))
            if "cpu" in folders:
                _write(folders["cpu"] / "cpu.cfs_period_us", "100000")
                _write(folders["cpu"] / "cpu.cfs_quota_us", str(max(1000, int(cpus * 100000))))
            return slot
        except OSError:
            for folder in folders.values():
                try:
                    folder.rmdir()
                except OSError:
                    pass
            return None

    @classmethod
    def _create_v2(cls, name: str, own: dict[str, str], memory_bytes: int, processes: int, cpus: float):
        mount = _v2_mount()
        if mount is None or "" not in own:
            return None
        parent = mount / own[""].lstrip("/")
        try:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            if not {"memory", "pids"} <= set(enabled):
                return None  # not delegated to us; enabling it would mean moving the grader itself
            folder = parent / name
            folder.mkdir()
        except OSError:
            return None
        slot = cls(2, {"": folder})
        try:
            _write(folder / "memory.max", str(memory_bytes))
            try:
                _write(folder / "memory.swap.max", "0")
            except OSError:
                pass
            _write(folder / "pids.max", str(processes))
            if "cpu" in enabled:
                _write(folder / "cpu.max", f"{max(1000, int(cpus * 100000))} 100000")
            return slot
        except OSError:
            slot.remove()
            return None

    # ------------------------------------------------------------------ using it

    def join(self) -> None:
        """Move the calling process into the slot (call it in the child, between fork and exec)."""
        for folder in self.folders.values():
            _write(folder / "cgroup.procs", "0")

    def _read(self, controller: str, name: str) -> str | None:
        folder = self.folders.get(controller if self.version == 1 else "")
        try:
            return (folder / name).read_text() if folder is not None else None
        except OSError:
            return None

    def cpu_seconds(self) -> float | None:
        """CPU time of every process that ever ran in the slot, ended ones included."""
        if self.version == 1:
            text = self._read("cpuacct", "cpuacct.usage")
            return int(text) / 1e9 if text else None
        text = self._read("", "cpu.stat")
        for line in (text or "").splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
        return None

    def start_memory_peak(self) -> int | None:
        """Reset the slot's memory peak to its current use and return that use (bytes), or None where the kernel
        cannot reset it (cgroup v2 before Linux 6.12: ``memory.peak`` is not writable there)."""
        try:
            if self.version == 1:
                usage = int(self._read("memory", "memory.usage_in_bytes") or "")
                _write(self.folders["memory"] / "memory.max_usage_in_bytes", "0")  # := the current use
                return usage
            self.stop_memory_peak()
            fd = os.open(self.folders[""] / "memory.peak", os.O_RDWR | os.O_CLOEXEC)
            try:
                os.write(fd, b"reset\n")  # resets the peak seen through this descriptor
                usage = int(self._read("", "memory.current") or "")
            except (OSError, ValueError):
                os.close(fd)
                raise
            self._peak_fd = fd
            return usage
        except (OSError, ValueError, KeyError):
            return None

    def stop_memory_peak(self) -> int | None:
        """The slot's memory peak since :meth:`start_memory_peak` (bytes), or None."""
        if self.version == 1:
            return self.memory_peak()
        fd, self._peak_fd = getattr(self, "_peak_fd", None), None
        if fd is None:
            return None
        try:
            text = os.pread(fd, 64, 0).decode()
            return int(text) if text.strip().isdigit() else None
        except OSError:
            return None
        finally:
            os.close(fd)

    def memory_peak(self) -> int | None:
        text = self._read("memory", "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
        return int(text) if text and text.strip().isdigit() else None

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the slot for going over its memory budget."""
        text = self._read("memory", "memory.oom_control" if self.version == 1 else "memory.events") or ""
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                return True
        if self.version == 1:
            failcnt = self._read("memory", "memory.failcnt")
            peak, limit = self.memory_peak(), self._read("memory", "memory.limit_in_bytes")
            return bool(failcnt and int(failcnt) > 0 and peak and limit and peak >= int(limit) - (1 << 20))
        return False

    def pids(self) -> list[int]:
        text = self._read("pids", "cgroup.procs") if self.version == 1 else self._read("", "cgroup.procs")
        return [int(p) for p in (text or "").split() if p.isdigit()]

    def kill(self, timeout: float = 10.0) -> int:
        """Kill every process in the slot, again and again until none is left; return how many rounds it took
        (a process that forks a new one as it dies is caught: the group is frozen first where it can be)."""
        if self.version == 2 and (self.folders[""] / "cgroup.kill").exists():
            try:
                _write(self.folders[""] / "cgroup.kill", "1")
            except OSError:
                pass
        freezer = self.folders.get("freezer") if self.version == 1 else None
        deadline = time.monotonic() + timeout
        rounds = 0
        while True:
            pids = self.pids()
            if not pids or time.monotonic() > deadline:
                break
            rounds += 1
            if freezer is not None:
                try:
                    _write(freezer / "freezer.state", "FROZEN")
                except OSError:
                    freezer = None
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if freezer is not None:
                try:
                    _write(freezer / "freezer.state", "THAWED")  # a killed task dies once thawed
                except OSError:
                    pass
            time.sleep(0.02)
        return rounds

    def remove(self) -> None:
        if self.version == 2:
            self.stop_memory_peak()
        self.kill()
        for folder in self.folders.values():
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)  # the last task is still exiting


def describe(slot_or_reason: Slot | str | None) -> str:
    if isinstance(slot_or_reason, Slot):
        return f"cgroup v{slot_or_reason.version}"
    return "no cgroup"


def available() -> tuple[bool, str]:
    """Whether runs get a control group here, and a sentence for the grader's output."""
    slot = Slot.create(1 << 30, 64, 1.0)
    if slot is None:
        return False, ("no control group can be made here (no permission, or cgroup v2 without delegation): each "
                       "run's memory, process count and CPU time are limited per process and by a watchdog that sums "
                       "them over the run's process tree")
    version = slot.version
    slot.remove()
    return True, (f"each run gets a control group (cgroup v{version}) with a memory budget, a process cap, one CPU "
                  "and exact CPU accounting for all its processes")
