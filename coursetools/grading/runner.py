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


def main(reply_fd: int) -> int:
    # A write past the file-size limit then fails with an error instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
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
    """Run one probe's ``got`` expression on fresh copies of its arguments, in a frame of its own."""
    probe = int(frame["probes"][0])
    if frame.get("env") is not None:
        env = arguments.decode(marshal.loads(frame["env"]))
    elif probe in pending:
        encoded, copied = pending.pop(probe)
        env = arguments.decode(encoded) if encoded is not None else copied
    else:
        return None  # the check's setup failed before this probe: its record says so already
    arguments.restore_rng(env.pop(arguments.RNG, {}))
    args = [env[name] for name in frame["params"]]
    function = _FUNCTION(frame["code"], shell.user_ns, "probe")
    frame.clear()
    del env
    recorder(probe, lambda: function(*args))
    return None


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
