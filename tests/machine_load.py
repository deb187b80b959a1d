"""How much slower this machine is right now than when it is quiet: the factor a wall-clock limit scales by.

A test's verdict must not depend on the machine's speed. Where a wall-clock limit is still needed (a
budget, a backstop against a hang), it is a quiet-machine figure multiplied by ``slowdown()``: the ratio
of wall time to CPU time of a short busy loop in this process. On an idle machine the loop gets a whole
core (ratio about 1); with other work competing for the cores it gets a share of one, and the ratio is
the factor by which any CPU-bound work here is stretched. It needs no reference figure for the machine,
so it holds on a fast laptop and a slow CI runner alike.
"""

from __future__ import annotations

import time

_PROBE_CPU_SECONDS = 0.02


def slowdown(cpu_seconds: float = _PROBE_CPU_SECONDS) -> float:
    """Wall time over CPU time of ``cpu_seconds`` of busy work in this process (>= 1)."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    while time.process_time() - cpu0 < cpu_seconds:
        pass
    return max(1.0, (time.perf_counter() - wall0) / (time.process_time() - cpu0))


def scaled(quiet_seconds: float, samples: int = 3) -> float:
    """A wall-clock limit: ``quiet_seconds`` (the limit on a quiet machine) times the slowest of a few probes."""
    return quiet_seconds * max(slowdown() for _ in range(samples))
