"""Repository-wide pytest hooks: the notebook time budget, measured on every run.

DESIGN: every notebook runs top to bottom in at most 60 s on 2 CPU cores. nbval runs a notebook as
one item per cell; this plugin adds up each notebook's cell times (kernel start included), prints
them at the end of the run, and fails the run if a notebook takes more than twice the budget (so a
noisy shared machine does not make it flaky); notebooks over the budget itself are reported.
"""

from __future__ import annotations

import os

import torch

# Chapter 11's Triton kernels run under Triton's interpreter when there is no GPU. Triton reads that choice
# when it is first imported, and torch imports it on its own (torch.utils.flop_counter does), so the choice
# is made here, before any test module imports anything; notebook kernels inherit it.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from collections import defaultdict

import pytest

BUDGET_SECONDS = 60.0
FAIL_FACTOR = 2.0
_notebook_seconds: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        _notebook_seconds[path] += report.duration


def _over(limit: float) -> dict[str, float]:
    return {p: s for p, s in _notebook_seconds.items() if s > limit}


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if not _notebook_seconds:
        return
    terminalreporter.section("notebook execution times (budget 60 s each)")
    for path, seconds in sorted(_notebook_seconds.items()):
        flag = "  OVER BUDGET" if seconds > BUDGET_SECONDS else ""
        terminalreporter.write_line(f"{seconds:6.1f} s  {path}{flag}")
    for path, seconds in _over(FAIL_FACTOR * BUDGET_SECONDS).items():
        terminalreporter.write_line(f"FAILED budget: {path} took {seconds:.0f} s (> {FAIL_FACTOR:g} x 60 s)")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _over(FAIL_FACTOR * BUDGET_SECONDS) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
