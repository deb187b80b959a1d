"""On a CUDA device: every utils/ component against the CPU, attention timings, and the latency chart.

    python -m benchmarks.gpu_check            # writes benchmarks/results/gpu.json; exits 2 without CUDA

Components are built on the CPU with a fixed seed, copied to the GPU, and compared with the
tolerances of utils.tolerances (float32, and bfloat16 where the component supports it).
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.tolerances import tolerance

RESULTS = Path(__file__).resolve().parent / "results"


def _components() -> dict[str, Callable[[torch.device, torch.dtype], torch.Tensor]]:
    """Each entry computes one output on a device, from the same seeded inputs and weights."""
    from utils import (
        attention,
        efficient_attention,
        layernorm,
        multihead,
        positional,
        rnn,
        transformer_blocks,
    )

    def inputs(device, dtype, *shape):
        return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(device, dtype)

    def module(factory):
        def run(device, dtype, make_input):
            torch.manual_seed(0)
            m = factory().to(dtype)
            return copy.deepcopy(m).to(device)(make_input(device, dtype))
        return run

    mha = module(lambda: multihead.MultiHeadAttention(64, 4, fused_qkv=True))
    return {
        "attention.scaled_dot_product_attention": lambda d, t: attention.scaled_dot_product_attention(
            *(inputs(d, t, 2, 4, 33, 16) for _ in range(3)), is_causal=True)[0],
        "efficient_attention.tiled_attention": lambda d, t: efficient_attention.tiled_attention(
            inputs(d, t, 2, 4, 300, 16), inputs(d, t, 2, 4, 300, 16), inputs(d, t, 2, 4, 300, 16),
            is_causal=True, block_q=64, block_k=64),
        "multihead.MultiHeadAttention": lambda d, t: mha(d, t, lambda d2, t2: inputs(d2, t2, 2, 17, 64))[0],
        "layernorm.LayerNorm": lambda d, t: module(lambda: layernorm.LayerNorm(64))(d, t, lambda d2, t2: inputs(d2, t2, 3, 5, 64)),
        "layernorm.RMSNorm": lambda d, t: module(lambda: layernorm.RMSNorm(64))(d, t, lambda d2, t2: inputs(d2, t2, 3, 5, 64)),
        "positional.apply_rope": lambda d, t: positional.apply_rope(inputs(d, t, 2, 4, 50, 16)),
        "positional.sinusoidal_encoding": lambda d, t: positional.sinusoidal_encoding(128, 64, device=d, dtype=t),
        "transformer_blocks.EncoderBlock": lambda d, t: module(
            lambda: transformer_blocks.EncoderBlock(64, 4, 256, "gelu", norm_first=True))(
            d, t, lambda d2, t2: inputs(d2, t2, 2, 12, 64)),
        "transformer_blocks.gelu_tanh": lambda d, t: transformer_blocks.gelu_tanh(inputs(d, t, 1000)),
        "rnn.RNN": lambda d, t: module(lambda: rnn.RNN(16, 32))(d, t, lambda d2, t2: inputs(d2, t2, 3, 20, 16))[0],
    }


def compare_components() -> list[dict]:
    rows = []
    for name, run in _components().items():
        for dtype in (torch.float32, torch.bfloat16):
            try:
                cpu = run(torch.device("cpu"), torch.float32).float()
                gpu = run(torch.device("cuda"), dtype).float().cpu()
                tol = tolerance("cuda", dtype)
                error = (gpu - cpu).abs().max().item()
                ok = torch.allclose(gpu, cpu, **tol)
            except Exception as exc:  # a component without bfloat16 support is reported, not fatal
                rows.append({"component": name, "dtype": str(dtype), "ok": None, "error": repr(exc)[:200]})
                continue
            rows.append({"component": name, "dtype": str(dtype), "ok": bool(ok), "max_abs_error": error, **tol})
            print(f"{name:45s} {str(dtype):15s} max |gpu-cpu| = {error:.2e}  {'ok' if ok else 'OUT OF TOLERANCE'}")
    return rows


def _median_time(fn, repeats: int = 20) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def attention_timings() -> list[dict]:
    from utils.attention import scaled_dot_product_attention

    rows = []
    for n in (512, 1024, 2048, 4096):
        q, k, v = (torch.randn(4, 8, n, 64, device="cuda") for _ in range(3))  # (B, h, N, d_k)
        ours = _median_time(lambda: scaled_dot_product_attention(q, k, v)[0])
        theirs = _median_time(lambda: F.scaled_dot_product_attention(q, k, v))
        rows.append({"n": n, "course_s": ours, "sdpa_s": theirs, "ratio": ours / theirs})
    return rows


def latency_chart() -> list[dict]:
    """One training step of an RNN, an LSTM and a Transformer encoder layer, d = 64, on the GPU."""
    rows = []
    d = 64
    for n in (64, 128, 256, 512, 1024, 2048, 4096):
        x = torch.randn(8, n, d, device="cuda")
        models = {"RNN": nn.RNN(d, d, batch_first=True), "LSTM": nn.LSTM(d, d, batch_first=True),
                  "Transformer": nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True)}
        for name, model in models.items():
            model = model.cuda()

            def step(model=model):
                out = model(x)
                (out[0] if isinstance(out, tuple) else out).sum().backward()

            rows.append({"model": name, "n": n, "seconds": _median_time(step, 10),
                         "sequential_steps": n if name != "Transformer" else 1})
    return rows


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: nothing measured (run this on a machine with a GPU)")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # the tolerance policy assumes true float32
    torch.backends.cudnn.allow_tf32 = False
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "components": compare_components(), "attention": attention_timings(), "latency": latency_chart()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "gpu.json").write_text(json.dumps(result, indent=1) + "\n")
    bad = [r for r in result["components"] if r["ok"] is False]
    print(f"wrote {RESULTS / 'gpu.json'}; {len(bad)} components out of tolerance")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
