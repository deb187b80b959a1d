"""The load factor that scales the suite's wall-clock limits, and the notebook budget that uses it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from course_paths import ROOT
from machine_load import scaled, slowdown


def test_slowdown_is_at_least_one_and_scaled_limits_grow_with_it():
    assert slowdown() >= 1.0
    assert scaled(10.0) >= 10.0


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity to share one core")
def test_a_busy_process_on_the_same_core_doubles_the_slowdown():
    # Two processes pinned to one core share it: the probe gets about half of it, so wall/CPU >= ~2.
    cpu = sorted(os.sched_getaffinity(0))[0]
    hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        probe = subprocess.run(
            [sys.executable, "-c", f"import os, sys; os.sched_setaffinity(0, {{{cpu}}}); sys.path.insert(0, 'tests');"
             "import time; time.sleep(0.3); from machine_load import slowdown; print(max(slowdown(0.2) for _ in range(3)))"],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
        )
    finally:
        hog.kill()
        hog.wait()
    assert float(probe.stdout) > 1.5, probe.stdout


def _budget_plugin():
    spec = importlib.util.spec_from_file_location("_root_conftest_copy", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_notebook_budget_fails_a_slow_notebook_on_a_quiet_machine_and_not_on_a_busy_one():
    plugin = _budget_plugin()
    plugin._notebook_seconds.update({"quiet.ipynb": 150.0, "busy.ipynb": 150.0, "fast.ipynb": 30.0})
    plugin._notebook_slowdown.update({"quiet.ipynb": [1.0, 1.1, 5.0], "busy.ipynb": [2.5, 3.0], "fast.ipynb": [1.0]})
    over = plugin._over_limit()
    assert set(over) == {"quiet.ipynb"}  # 150 s > 2 x 60 s x 1.1 (the median probe, not the unlucky 5.0)
    assert over["quiet.ipynb"][1] == pytest.approx(2 * 60 * 1.1)
