"""The one timer (utils.timing) and the tolerance policy (utils.tolerances)."""

from __future__ import annotations

import pytest
import torch

from utils import timing, tolerances


def test_interleaved_times_every_contender_and_orders_them_by_work():
    a = torch.randn(256, 256)
    calls = {"small": 0, "large": 0}

    def small():
        calls["small"] += 1
        return a[:16, :16] @ a[:16, :16]

    def large():
        calls["large"] += 1
        for _ in range(20):
            a @ a
        return None

    result = timing.interleaved({"small": small, "large": large}, repeats=5, warmup=2)
    assert calls == {"small": 7, "large": 7}
    assert result["small"].repeats == 5 and result["small"].min_s <= result["small"].median_s
    # 20 products of 256x256 against one of 16x16: >1000x the FLOPs, so the order survives any load.
    assert result["large"].min_s > result["small"].median_s


def test_cpu_clock_counts_work_not_waiting():
    """clock="cpu" is the calling thread's CPU time: a sleep (waiting, as when other processes hold the
    cores) adds almost nothing to it, while the wall clock sees all of it."""
    import time

    def wait():
        time.sleep(0.05)

    a = torch.randn(128, 128)

    def work():
        for _ in range(50):
            a @ a

    cpu = timing.interleaved({"wait": wait, "work": work}, repeats=3, warmup=0, clock="cpu")
    wall = timing.interleaved({"wait": wait}, repeats=3, warmup=0)
    assert wall["wait"].min_s >= 0.05
    assert cpu["wait"].median_s < 0.01  # a sleep costs no CPU time
    assert cpu["work"].min_s > 0


def test_cpu_clock_refuses_a_gpu_and_unknown_clocks():
    with pytest.raises(ValueError, match="clock='cpu' measures CPU time"):
        timing.interleaved({"f": lambda: None}, clock="cpu", device="cuda")
    with pytest.raises(ValueError, match="clock must be 'wall' or 'cpu', got 'gpu'"):
        timing.interleaved({"f": lambda: None}, clock="gpu")


@pytest.mark.parametrize("bad", [{"repeats": 0}, {"warmup": -1}, {"repeats": 1.5}])
def test_interleaved_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="repeats|warmup"):
        timing.interleaved({"f": lambda: None}, **{"repeats": 3, **bad})


def test_interleaved_rejects_non_callables_and_empty():
    with pytest.raises(TypeError, match="'f' must be callable"):
        timing.interleaved({"f": 3})
    with pytest.raises(ValueError, match="at least one"):
        timing.interleaved({})


def test_assert_close_accepts_within_policy_and_names_the_failure():
    x = torch.randn(4, 5)
    assert tolerances.assert_close(x + 1e-7, x, what="tiny") < 1e-6
    with pytest.raises(AssertionError, match=r"shifted: max \|error\| 0.001 .* first bad entry at \(0, 0\)"):
        tolerances.assert_close(x + 1e-3, x, what="shifted")
    with pytest.raises(AssertionError, match="shape"):
        tolerances.assert_close(x, x.T, what="t")
    nan = x.clone()
    nan[1, 2] = float("nan")
    with pytest.raises(AssertionError, match="non-finite"):
        tolerances.assert_close(nan, x, what="nan")


def test_kernel_families_only_widen_the_policy():
    for kernel, rules in tolerances.KERNELS.items():
        for (device, dtype), tol in rules.items():
            base = tolerances.POLICY[(device, dtype)]
            assert tol["atol"] >= base["atol"] and tol["rtol"] >= base["rtol"], (kernel, device, dtype)
    with pytest.raises(ValueError, match="kernel must be one of"):
        tolerances.tolerance("cpu", torch.float32, kernel="cuDNN")
    assert tolerances.tolerance("cuda", torch.float32, kernel="cudnn")["rtol"] == 1e-2
