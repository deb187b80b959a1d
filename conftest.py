"""Repository-wide pytest hooks: the notebook time budget, measured on every run.

DESIGN: every notebook runs top to bottom in at most 60 s on 2 CPU cores. nbval runs a notebook as
one item per cell; this plugin adds up each notebook's cell times (kernel start included), prints
them at the end of the run, and fails the run if a notebook takes more than twice the budget, times
how much slower the machine was while it ran (``tests/machine_load.py``: wall over CPU time of a short
busy loop, sampled every few seconds while the notebook's cells report). So a busy machine, where
everything takes longer, does not fail the run, and a notebook that is slow on a quiet machine still does.
"""

from __future__ import annotations

import os

import torch

# Chapter 11's Triton kernels run under Triton's interpreter when there is no GPU. Triton reads that choice
# when it is first imported, and torch imports it on its own (torch.utils.flop_counter does), so the choice
# is made here, before any test module imports anything; notebook kernels inherit it.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "tests"))
from machine_load import slowdown  # noqa: E402

BUDGET_SECONDS = 60.0
FAIL_FACTOR = 2.0
SAMPLE_EVERY_SECONDS = 5.0
_notebook_seconds: dict[str, float] = defaultdict(float)
_notebook_slowdown: dict[str, list[float]] = defaultdict(list)
_last_sample = [0.0]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        _notebook_seconds[path] += report.duration  # setup (the kernel's start), call and teardown
    if path.endswith(".ipynb") and report.when == "call":
        now = time.perf_counter()
        if not _notebook_slowdown[path] or now - _last_sample[0] > SAMPLE_EVERY_SECONDS:
            _last_sample[0] = now
            _notebook_slowdown[path].append(slowdown())


# In CI (the CI environment variable set: `.ci/run` exports CI=true) these tests must run: a skip there would
# hide that CI never checked the class hub, the browser route or a notebook. Each of them already fails instead
# of skipping for the reason it knows about (tests/hub_fixtures.py, tests/browser.py); this catches any other.
MUST_RUN_IN_CI_FILES = ("tests/test_hub.py",)
MUST_RUN_IN_CI_MARKERS = ("browser", "book")


def must_run_in_ci(nodeid: str, markers: set[str]) -> bool:
    """Whether a test may not skip in CI: the hub tests, browser or book tests, and every notebook cell."""
    path = nodeid.split("::", 1)[0]
    return path.endswith(".ipynb") or path in MUST_RUN_IN_CI_FILES or bool(markers & set(MUST_RUN_IN_CI_MARKERS))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # noqa: ARG001
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and not hasattr(report, "wasxfail"):
        if must_run_in_ci(item.nodeid, {m.name for m in item.iter_markers()}):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            report.outcome = "failed"
            report.longrepr = f"skipped in CI ({reason}): the hub, browser, book and notebook tests never skip where CI is set"


def _factor(path: str) -> float:
    samples = sorted(_notebook_slowdown.get(path) or [1.0])
    return samples[len(samples) // 2]  # the median: one unlucky probe does not excuse a slow notebook


def _over_limit() -> dict[str, tuple[float, float]]:
    """Notebooks over FAIL_FACTOR x budget x the machine's slowdown while they ran: {path: (s, limit)}."""
    limits = {p: FAIL_FACTOR * BUDGET_SECONDS * _factor(p) for p in _notebook_seconds}
    return {p: (s, limits[p]) for p, s in _notebook_seconds.items() if s > limits[p]}


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if not _notebook_seconds:
        return
    terminalreporter.section("notebook execution times (budget 60 s each; slowdown = machine's load factor)")
    for path, seconds in sorted(_notebook_seconds.items()):
        flag = "  OVER BUDGET" if seconds > BUDGET_SECONDS * _factor(path) else ""
        terminalreporter.write_line(f"{seconds:6.1f} s  slowdown {_factor(path):4.1f}  {path}{flag}")
    for path, (seconds, _limit) in _over_limit().items():
        terminalreporter.write_line(
            f"FAILED budget: {path} took {seconds:.0f} s (> {FAIL_FACTOR:g} x 60 s x slowdown {_factor(path):.1f})"
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _over_limit() and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
