"""Runs the cells the grader sends, one at a time. Started by coursetools.grading.sandbox, never by hand.

    python -m coursetools.grading.runner REPLY_FD

The grader drives: it writes one frame per cell to this process's stdin (a 4-byte length, then a
``marshal``-ed dict made by the grader) and waits, on its own clock, for ``{"done": i}`` on the
reply pipe before it sends the next cell; after the last cell it kills the whole process tree, so a
thread left running gains nothing. Nothing is written to disk in advance: a cell's code exists in
this process only once the grader sends it, and a check arrives as a compiled function, never as
source text.

Ordinary cells run in one IPython shell, as in a kernel (errors are shown and execution continues,
like nbgrader). A check runs as a function in its own scope with a recorder that writes plain data
to ``records/got`` (or ``records/expected`` in the reference run); the random generators are seeded
before each check so that its inputs do not depend on which other cells ran. Nothing here judges.
"""

from __future__ import annotations

import gc
import json
import marshal
import os
import random
import select
import signal
import struct
import sys
from pathlib import Path


def _read_exact(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        try:
            chunk = os.read(fd, size - len(data))
        except BlockingIOError:  # a cell made our input non-blocking: wait for it
            select.select([fd], [], [])
            continue
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _seed(seed: int) -> None:
    random.seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed % (1 << 32))
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


_FUNCTION = type(_seed)  # types.FunctionType, taken before any cell runs (a cell may replace types.FunctionType)

# madvise advice that makes used memory look unused to the grader's count of it (coursetools.grading.sandbox.
# MemoryPeak reads the pages' referenced bits): MADV_FREE (8), MADV_COLD (20), MADV_PAGEOUT (21).
_UNCOUNTING_ADVICE = (8, 20, 21)
_MADVISE = {0xC000003E: 28, 0xC00000B7: 233}  # audit arch (x86_64, aarch64) -> madvise's system call number
_PROCESS_MADVISE = 440


def _forbid_uncounting() -> bool:
    """Install a seccomp filter (inherited by every thread and process started later) under which madvise with
    that advice, and process_madvise, fail with EPERM; the allocators Python, NumPy and torch use never ask for
    them. Returns False where it cannot (no seccomp, another architecture)."""
    import ctypes
    import platform

    arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}.get(platform.machine())
    if arch is None:
        return False
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    program = [
        (ld, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, arch),
        (ret, 0, 0, allow),
        (ld, 0, 0, 0),  # seccomp_data.nr
        (jge, 7, 0, 0x40000000),  # x32 system calls: refused
        (jeq, 6, 0, _PROCESS_MADVISE),
        (jeq, 0, 4, _MADVISE[arch]),
        (ld, 0, 0, 32),  # seccomp_data.args[2], low 32 bits: the advice
        *[(jeq, len(_UNCOUNTING_ADVICE) - i, 0, advice) for i, advice in enumerate(_UNCOUNTING_ADVICE)],
        (ret, 0, 0, allow),  # jumps count from the next instruction: the last one is "deny"
        (ret, 0, 0, deny),
    ]

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(program))(*[Filter(*instruction) for instruction in program])
    fprog = Program(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(38, 1, None, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: required for a filter without privileges
        return False
    return libc.prctl(22, 2, ctypes.cast(ctypes.pointer(fprog), ctypes.c_void_p), 0, 0) == 0  # PR_SET_SECCOMP


def main(reply_fd: int) -> int:
    # A write past the file-size limit then fails with an error instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _forbid_uncounting()  # before any thread or cell
    reply = os.fdopen(reply_fd, "w", buffering=1)

    def send(message: dict) -> None:
        reply.write(json.dumps(message) + "\n")
        reply.flush()

    from IPython.core.interactiveshell import InteractiveShell

    from coursetools.grading import arguments
    from coursetools.grading.plaindata import Recorder, exception_name

    # Absolute paths, taken once: a cell that changes the working directory (os.chdir, %cd) still has
    # its results recorded where the grader reads them.
    records = Path.cwd() / "records"
    folders = {form: records / form for form in ("got", "expected", "env")}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    shell = InteractiveShell.instance()
    pending: dict[int, tuple] = {}  # probe -> its arguments, when its check's setup ran in this process
    send({"ready": 1})
    while True:
        try:
            (size,) = struct.unpack(">I", _read_exact(0, 4))
            frame = marshal.loads(_read_exact(0, size))
        except EOFError:  # the grader is done with this run
            os._exit(0)
        if frame["kind"] == "end":
            break
        index, nonce, probes, error = frame["index"], frame["nonce"], frame.get("probes", []), None
        if frame["kind"] == "cell":
            result = shell.run_cell(frame["source"], store_history=False)
            failure = result.error_before_exec or result.error_in_exec
            error = exception_name(failure) if failure is not None else None
        elif frame["kind"] == "probe":
            error = _probe(frame, shell, Recorder(folders["got"]), pending, arguments)
        elif frame["form"] == "got":
            _seed(frame["seed"])
            recorder = Recorder(folders["got"])
            captured: set[int] = set()
            capture = _capture(pending, captured, folders["env"] if frame.get("dump") else None, arguments)
            check = _FUNCTION(frame["code"], shell.user_ns, "check")
            del frame
            try:
                check(capture)
            except BaseException as exc:  # noqa: BLE001 (the check's setup failed: its probes say so)
                recorder.recorded |= captured
                recorder.setup_failed(probes, exc)
                error = exception_name(exc)
            del check, capture
            gc.collect()  # the setup's other values (what the arguments were made from) are gone now
        else:
            _seed(frame["seed"])
            recorder = Recorder(folders[frame["form"]])
            check = _FUNCTION(frame["code"], shell.user_ns, "check")
            del frame
            try:
                check(recorder)
            except BaseException as exc:  # noqa: BLE001 (the check's setup failed: its probes say so)
                recorder.setup_failed(probes, exc)
                error = exception_name(exc)
            del check
        send({"done": index, "nonce": nonce, "error": error})
    os._exit(0)  # do not wait for threads the notebook started


def _capture(pending: dict, captured: set, dump_to: Path | None, arguments):
    """``__probe__`` of a check's setup: takes a copy of one probe's arguments (and, in the reference run,
    records it for the grader to hand to every submission)."""

    def capture(probe: int, env: dict) -> None:
        encoded, copied = arguments.copy_env(env)
        pending[int(probe)] = (encoded, copied)
        captured.add(int(probe))
        if dump_to is not None and encoded is not None:
            (dump_to / f"probe_{int(probe)}.bin").write_bytes(marshal.dumps(encoded))

    return capture


def _probe(frame: dict, shell, recorder, pending: dict, arguments) -> str | None:
    """Run one probe's ``got`` expression on fresh copies of its arguments, in a frame of its own.

    A probe whose memory the grader measures comes in two jobs: the first (``prepare``) only makes its
    arguments, collects the garbage and gives freed heap back, so that the second, around which the grader
    measures, holds the call alone; the garbage collector is paused during that call (it would touch every
    object of the notebook, and the grader counts the memory touched)."""
    probe = int(frame["probes"][0])
    if frame.get("env") is not None:
        env = arguments.decode(marshal.loads(frame["env"]))
    elif probe in pending:
        encoded, copied = pending.pop(probe)
        env = arguments.decode(encoded) if encoded is not None else copied
    else:
        return None  # the check's setup failed before this probe: its record says so already
    if frame.get("prepare"):
        pending[probe] = (None, env)
        del env
        frame.clear()
        gc.collect()
        try:
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass
        return None
    arguments.restore_rng(env.pop(arguments.RNG, {}))
    args = [env[name] for name in frame["params"]]
    function = _FUNCTION(frame["code"], shell.user_ns, "probe")
    measured = bool(frame.get("measured"))
    frame.clear()
    del env
    if measured:
        gc.disable()
    try:
        recorder(probe, lambda: function(*args))
    finally:
        if measured:
            gc.enable()
    return None


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
