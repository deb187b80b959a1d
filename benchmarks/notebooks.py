"""Execution time of every notebook (solutions and chapters), the whole test suite and the book build."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def time_notebook(path: Path) -> float:
    nb = nbformat.read(str(path), as_version=4)
    start = time.perf_counter()
    # The kernel's log level: otherwise each kernel prints "[IPKernelApp] WARNING | Kernel is running over
    # TCP without encryption" (the kernel listens on 127.0.0.1 only), 20 times per run.
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                   extra_arguments=["--IPKernelApp.log_level=ERROR"]).execute()
    return time.perf_counter() - start


def measure(with_suite: bool) -> dict:
    rows, loads = {}, {}
    for folder in ("solutions", "chapters"):
        for path in sorted((ROOT / folder).glob("[0-9][0-9]_*.ipynb")):
            name = f"{folder}/{path.name}"
            rows[name] = time_notebook(path)
            # The 1-minute load average right after the run: a time is a quiet-machine figure only if
            # this stayed below the number of cores the run used (one notebook at a time: about 1-2).
            loads[name] = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
            print(f"{rows[name]:6.1f} s  {name}  (load average {loads[name]})", flush=True)
    result = {"notebook_seconds": rows, "load_average_after": loads, "cpu_count": os.cpu_count(),
              "budget_seconds": 60}
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        jb = Path(sys.executable).with_name("jupyter-book")
        subprocess.run([str(jb), "build", str(ROOT), "--path-output", out, "-W", "-n", "--keep-going"],
                       check=True, capture_output=True)
        result["book_build_seconds"] = time.perf_counter() - start
    if with_suite:
        start = time.perf_counter()
        subprocess.run([str(Path(sys.executable).with_name("pytest"))], cwd=ROOT, check=False)
        result["test_suite_seconds"] = time.perf_counter() - start
    return result
