"""Runs one notebook's code cells inside the sandbox. Started by coursetools.grading.sandbox, never by hand.

    python -m coursetools.grading.runner JOB.json

JOB.json holds the cells to run and the folders for records. Each cell runs in one IPython shell,
as in a kernel; errors are shown and execution continues, like nbgrader. Before each cell the runner
writes its index to ``heartbeat`` so the grader, outside, can enforce the per-cell time limit.
Nothing here judges: probes record values, the grader compares them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    work = Path(job["workdir"])
    os.chdir(work)
    # A write past the file-size limit then fails with an error instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    heartbeat = work / "heartbeat"

    from IPython.core.interactiveshell import InteractiveShell

    from coursetools.grading.plaindata import Recorder

    got, expected = work / "got", work / "expected"
    got.mkdir(exist_ok=True)
    expected.mkdir(exist_ok=True)
    shell = InteractiveShell.instance()
    shell.user_ns["__probe__"] = Recorder(got, expected)
    for index, source in enumerate(job["cells"]):
        heartbeat.write_text(str(index))
        shell.run_cell(source, store_history=False)
    heartbeat.write_text("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
