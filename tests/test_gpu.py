"""GPU checks (marker `gpu`): every utils/ component on CUDA against the CPU, within utils.tolerances.

Skipped on machines without a CUDA device (the reason is printed); run `pytest -m gpu` on a GPU
machine, or `python -m benchmarks.gpu_check` to also record timings and the latency chart.
"""

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; none on this machine"),
]


def test_every_component_matches_the_cpu_within_the_tolerance_policy():
    from benchmarks import gpu_check

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = gpu_check.compare_components()
    float32 = [r for r in rows if r["dtype"] == "torch.float32"]
    assert float32 and all(r["ok"] for r in float32), [r for r in float32 if not r["ok"]]
    assert all(r["ok"] is not False for r in rows), [r for r in rows if r["ok"] is False]
