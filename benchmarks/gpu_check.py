"""On a CUDA device: the course's components against the CPU, attention and module timings with peak
memory, chapter 11's Triton kernel against PyTorch's SDPA, the latency chart, and every notebook.

    python -m benchmarks.gpu_check                    # every measurement section -> benchmarks/results/gpu.json
    python -m benchmarks.gpu_check --only flash       # some sections: components, attention, flash, modules, latency
    python -m benchmarks.gpu_check --quick            # smaller sizes and fewer repetitions (a tight device budget)
    python -m benchmarks.gpu_check --notebooks        # execute every notebook of solutions/ and chapters/ on CUDA
    python -m benchmarks.gpu_check --notebooks --folders solutions --output OUT/gpu_solutions.json
                                                      # one folder per call: each notebook's row is written as
                                                      # soon as it finishes, so a run cut short keeps its rows
    bash benchmarks/gpu_check.sh --wheels DIR ...     # the same, on a machine without the Jupyter stack

What it needs: a CUDA device, torch, and for the `flash` section Triton (torch's CUDA wheels bring it);
`--notebooks` also needs nbclient, nbformat, ipykernel and ipywidgets (and matplotlib, tqdm, which the
notebooks import). It exits 2, saying what is missing, when something is. Each section merges its result
into gpu.json, so sections can be run in separate calls.

Timings use the course's one timer (utils.timing: warm-up, synchronisation, interleaved repetitions,
medians); peak memory is torch.cuda.max_memory_allocated() during one training step, minus the memory
held before it (inputs and weights). Components are built on the CPU with a fixed seed, copied to the GPU
and compared with the tolerances of utils.tolerances.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.timing import interleaved, time_call
from utils.tolerances import tolerance

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SECTIONS = ("components", "attention", "flash", "modules", "latency")
NOTEBOOK_NEEDS = ("nbclient", "nbformat", "ipykernel", "ipywidgets", "matplotlib", "tqdm")
# Vendor figures (dense bfloat16 tensor-core peak, TFLOP/s): NVIDIA's H100 SXM / H200 datasheets.
VENDOR_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0}
# Issue 15's targets for chapter 11's kernel against SDPA (bfloat16, causal, B = 4, H = 8, d = 64).
TARGETS = {"forward_backward_time": 1.5, "forward_time": 1.3, "peak_memory": 1.2}


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


# --------------------------------------------------------------------------------------------------
# Measuring one training step: time (utils.timing) and peak memory (the CUDA caching allocator)


def _training_step(fn: Callable[..., torch.Tensor], leaves: list[torch.Tensor], backward: bool = True):
    """A closure: fn(*leaves), then (if backward) a backward pass with a fixed upstream gradient."""
    def run():
        if backward:
            for t in leaves:
                t.grad = None
            out = fn(*leaves)
            out.backward(torch.ones_like(out))
        else:
            with torch.no_grad():
                fn(*leaves)
    return run


def peak_memory(step: Callable[[], object]) -> int:
    """Bytes allocated at the peak of ``step()`` beyond what was allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def _guarded(fn: Callable[[], dict]) -> dict:
    """Run one measurement; an out-of-memory or other error becomes a row, not a crash."""
    try:
        return fn()
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return {"error": "out of memory"}
    except Exception as exc:
        torch.cuda.empty_cache()
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def measured_bf16_tflops(n: int = 8192) -> float:
    """The chip's bfloat16 matrix-product rate, measured now (one n×n×n product)."""
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return 2 * n**3 / time_call(lambda: a @ b, repeats=10, warmup=3, device="cuda").min_s / 1e12


def vendor_bf16_tflops() -> float | None:
    name = torch.cuda.get_device_name()
    return next((v for key, v in VENDOR_BF16_TFLOPS.items() if key in name), None)


# --------------------------------------------------------------------------------------------------
# Attention: the course's naive (ch. 3), tiled (ch. 8) and Triton (ch. 11) against SDPA


def _attention_contenders(is_causal: bool) -> dict[str, Callable[..., torch.Tensor]]:
    from utils.attention import scaled_dot_product_attention
    from utils.efficient_attention import tiled_attention

    contenders = {
        "naive": lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=is_causal)[0],
        "tiled": lambda q, k, v: tiled_attention(q, k, v, is_causal=is_causal),
        "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=is_causal),
    }
    try:
        from utils import flash_attention as fa

        if fa.TRITON_AVAILABLE and not fa.INTERPRETED:
            contenders["triton"] = lambda q, k, v: fa.flash_attention(q, k, v, is_causal=is_causal, autotune=True)
    except ImportError:
        pass
    return contenders


def attention_table(lengths: tuple[int, ...], dtypes: tuple[torch.dtype, ...], repeats: int) -> list[dict]:
    """B = 4, H = 8, d = 64, causal, forward + backward: time and peak memory of each contender, each N."""
    rows = []
    for dtype in dtypes:
        for n in lengths:
            for name, fn in _attention_contenders(True).items():
                if name == "naive" and 4 * 8 * n * n * torch.finfo(dtype).bits // 8 * 4 > 0.9 * torch.cuda.mem_get_info()[1]:
                    rows.append({"n": n, "dtype": str(dtype), "method": name, "error": "out of memory (not run)"})
                    continue

                def measure(fn=fn, n=n, dtype=dtype):
                    leaves = [torch.randn(4, 8, n, 64, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3)]
                    step = _training_step(fn, leaves)
                    timing = time_call(step, repeats=repeats, warmup=2, device="cuda")
                    peak = peak_memory(step)
                    flops = 3.5 * 4 * 4 * 8 * n * n * 64 * 0.5
                    return {"seconds": timing.median_s, "min_seconds": timing.min_s, "peak_bytes": peak,
                            "tflops": flops / timing.median_s / 1e12}

                row = {"n": n, "dtype": str(dtype), "method": name, **_guarded(measure)}
                rows.append(row)
                print(f"attention N={n:6d} {str(dtype):15s} {name:7s} " + (
                    f"{row['seconds'] * 1e3:8.2f} ms  {row['peak_bytes'] / 1e9:7.2f} GB  {row['tflops']:6.1f} TFLOP/s"
                    if "error" not in row else row["error"]), flush=True)
    return rows


# --------------------------------------------------------------------------------------------------
# Chapter 11's kernel: correctness of the compiled path, then the targets of issue 15


FLASH_CASES = [  # (B, H, N_q, N_k, d, d_v), dtype, causal
    ((2, 3, 37, 53, 16, 8), torch.float32, False),
    ((2, 3, 37, 53, 16, 8), torch.float32, True),
    ((1, 4, 1000, 1000, 64, 64), torch.float32, True),
    ((1, 2, 777, 513, 80, 80), torch.float32, False),
    ((2, 4, 1024, 1024, 128, 128), torch.float32, True),
    ((2, 4, 1000, 1000, 64, 64), torch.float16, True),
    ((2, 4, 1000, 1000, 128, 128), torch.float16, False),
    ((2, 4, 1000, 1000, 64, 64), torch.bfloat16, True),
    ((2, 4, 999, 1031, 96, 96), torch.bfloat16, False),
    ((1, 2, 4096, 4096, 16, 16), torch.bfloat16, True),
]


def flash_correctness(autotune: bool = False) -> list[dict]:
    """Outputs and gradients of the compiled kernels against SDPA within the tolerance policy ("fused")."""
    from utils import flash_attention as fa

    rows = []
    for shape, dtype, causal in FLASH_CASES:
        b, h, n_q, n_k, d, d_v = shape
        gen = torch.Generator().manual_seed(0)
        q, k, v, grad_out = (torch.randn(*s, generator=gen).to("cuda", dtype) for s in
                             [(b, h, n_q, d), (b, h, n_k, d), (b, h, n_k, d_v), (b, h, n_q, d_v)])
        results = []
        try:
            for fn in (lambda a, c, e: fa.flash_attention(a, c, e, is_causal=causal, autotune=autotune),
                       lambda a, c, e: F.scaled_dot_product_attention(a, c, e, is_causal=causal)):
                leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
                out = fn(*leaves)
                results.append([out, *torch.autograd.grad(out, leaves, grad_out)])
            tol = tolerance("cuda", dtype, kernel="fused")
            errors = [(a.float() - r.float()).abs().max().item() for a, r in zip(*results)]
            ok = all(torch.allclose(a.float(), r.float(), **tol) for a, r in zip(*results))
            row = {"shape": list(shape), "dtype": str(dtype), "causal": causal, "ok": ok,
                   "max_abs_errors": dict(zip(("out", "dq", "dk", "dv"), errors)), **tol}
        except Exception as exc:
            row = {"shape": list(shape), "dtype": str(dtype), "causal": causal, "ok": False,
                   "error": f"{type(exc).__name__}: {str(exc)[:400]}"}
        rows.append(row)
        print(f"flash {str(shape):32s} {str(dtype):15s} causal={causal!s:5s} "
              f"{'ok' if row['ok'] else 'FAILED ' + row.get('error', str(row.get('max_abs_errors')))}", flush=True)
    return rows


def sdpa_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool) -> str:
    """The kernel PyTorch's dispatcher picks for F.scaled_dot_product_attention on these inputs
    (FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION or MATH), so that a recorded SDPA time names the
    kernel that produced it. Uses torch._fused_sdp_choice, a private function: "unknown" where it is missing."""
    from torch.nn.attention import SDPBackend

    try:
        choice = torch._fused_sdp_choice(q, k, v, None, 0.0, is_causal)
    except (AttributeError, RuntimeError):
        return "unknown"
    return choice.name if isinstance(choice, SDPBackend) else SDPBackend(int(choice)).name


def flash_targets(lengths: tuple[int, ...], repeats: int) -> list[dict]:
    """bfloat16, causal, B = 4, H = 8, d = 64: the Triton kernel (autotuned) against SDPA, forward alone and
    forward + backward, interleaved; peak memory of a training step; TFLOP/s; issue 15's targets."""
    from utils import flash_attention as fa

    rows = []
    for n in lengths:
        leaves = [torch.randn(4, 8, n, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3)]
        ours = lambda a, b, c: fa.flash_attention(a, b, c, is_causal=True, autotune=True)  # noqa: E731
        sdpa = lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True)  # noqa: E731
        row: dict = {"n": n, "dtype": "torch.bfloat16", "causal": True, "batch": 4, "heads": 8, "d": 64,
                     "sdpa_backend": sdpa_backend(*leaves, is_causal=True)}
        try:
            with torch.no_grad():
                error = (ours(*leaves).float() - sdpa(*leaves).float()).abs().max().item()
            forward = interleaved({"triton": _training_step(ours, leaves, backward=False),
                                   "sdpa": _training_step(sdpa, leaves, backward=False)},
                                  repeats=repeats, warmup=3, device="cuda")
            both = interleaved({"triton": _training_step(ours, leaves), "sdpa": _training_step(sdpa, leaves)},
                               repeats=repeats, warmup=3, device="cuda")
            peaks = {name: peak_memory(_training_step(fn, leaves)) for name, fn in (("triton", ours), ("sdpa", sdpa))}
            flops_forward = fa.sdpa_flops(32, n, n, 64, is_causal=True)
            flops_both = fa.sdpa_flops(32, n, n, 64, is_causal=True, backward=True)
            row.update({
                "max_abs_error_vs_sdpa": error,
                "forward_seconds": {k: t.median_s for k, t in forward.items()},
                "forward_backward_seconds": {k: t.median_s for k, t in both.items()},
                "peak_bytes": peaks,
                "forward_tflops": {k: flops_forward / t.median_s / 1e12 for k, t in forward.items()},
                "forward_backward_tflops": {k: flops_both / t.median_s / 1e12 for k, t in both.items()},
                "ratios": {"forward_time": forward["triton"].median_s / forward["sdpa"].median_s,
                           "forward_backward_time": both["triton"].median_s / both["sdpa"].median_s,
                           "peak_memory": peaks["triton"] / peaks["sdpa"]},
            })
            row["targets_met"] = {k: row["ratios"][k] <= limit for k, limit in TARGETS.items()}
            print(f"triton vs sdpa N={n:6d}: forward {row['ratios']['forward_time']:.2f}x, "
                  f"forward+backward {row['ratios']['forward_backward_time']:.2f}x, "
                  f"peak memory {row['ratios']['peak_memory']:.2f}x; TFLOP/s (fwd+bwd) "
                  f"{row['forward_backward_tflops']['triton']:.0f} vs {row['forward_backward_tflops']['sdpa']:.0f}",
                  flush=True)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
            print(f"triton vs sdpa N={n}: {row['error']}", flush=True)
        rows.append(row)
        del leaves
        torch.cuda.empty_cache()
    return rows


# --------------------------------------------------------------------------------------------------
# The course's modules against PyTorch's


def module_comparisons(repeats: int) -> list[dict]:
    """Forward + backward, float32: the course's MultiHeadAttention (weights requested: its teaching path;
    not requested: its fused path where it has one) and EncoderBlock against nn.MultiheadAttention
    (need_weights=False) and nn.TransformerEncoderLayer, with time and peak-memory ratios."""
    from utils import multihead, transformer_blocks

    rows = []
    for d_model, heads, n, batch in ((512, 8, 1024, 16), (1024, 16, 2048, 8)):
        x = torch.randn(batch, n, d_model, device="cuda", requires_grad=True)  # (B, N, d_model)
        torch.manual_seed(0)
        reference = nn.MultiheadAttention(d_model, heads, batch_first=True).cuda()
        ours = multihead.MultiHeadAttention.from_torch(reference)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True).cuda()
        cases = {
            "MultiHeadAttention (need_weights=True) vs nn.MultiheadAttention": (
                lambda t: ours(t, t, t, need_weights=True)[0], lambda t: reference(t, t, t, need_weights=False)[0]),
            "MultiHeadAttention (need_weights=False) vs nn.MultiheadAttention": (
                lambda t: ours(t, t, t, need_weights=False)[0], lambda t: reference(t, t, t, need_weights=False)[0]),
        }
        try:
            block = transformer_blocks.EncoderBlock(d_model, heads, 4 * d_model).cuda()
            cases["EncoderBlock vs nn.TransformerEncoderLayer"] = (block, layer)
        except Exception as exc:
            rows.append({"case": "EncoderBlock", "d_model": d_model, "error": repr(exc)[:300]})
        for name, (course, torch_module) in cases.items():
            def measure(course=course, torch_module=torch_module):
                steps = {"course": _training_step(course, [x]), "torch": _training_step(torch_module, [x])}
                times = interleaved(steps, repeats=repeats, warmup=2, device="cuda")
                peaks = {k: peak_memory(step) for k, step in steps.items()}
                return {"seconds": {k: t.median_s for k, t in times.items()}, "peak_bytes": peaks,
                        "time_ratio": times["course"].median_s / times["torch"].median_s,
                        "memory_ratio": peaks["course"] / max(peaks["torch"], 1)}

            row = {"case": name, "d_model": d_model, "heads": heads, "n": n, "batch": batch, **_guarded(measure)}
            rows.append(row)
            print(f"{name} d={d_model}: " + (f"time {row['time_ratio']:.2f}x, peak memory {row['memory_ratio']:.2f}x"
                                             if "error" not in row else row["error"]), flush=True)
    return rows


def latency_chart(repeats: int) -> list[dict]:
    """One training step of an RNN, an LSTM and a Transformer encoder layer, d = 64, B = 8, on the GPU."""
    rows = []
    d = 64
    for n in (64, 128, 256, 512, 1024, 2048, 4096):
        x = torch.randn(8, n, d, device="cuda")
        models = {"RNN": nn.RNN(d, d, batch_first=True), "LSTM": nn.LSTM(d, d, batch_first=True),
                  "Transformer": nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True)}
        steps = {}
        for name, model in models.items():
            model = model.cuda()

            def step(model=model):
                out = model(x)
                (out[0] if isinstance(out, tuple) else out).sum().backward()

            steps[name] = step
        times = interleaved(steps, repeats=repeats, warmup=2, device="cuda")
        for name, t in times.items():
            rows.append({"model": name, "n": n, "seconds": t.median_s, "sequential_steps": n if name != "Transformer" else 1})
    return rows


def course_attention_timings(repeats: int) -> list[dict]:
    from utils.attention import scaled_dot_product_attention

    rows = []
    for n in (512, 1024, 2048, 4096):
        q, k, v = (torch.randn(4, 8, n, 64, device="cuda") for _ in range(3))  # (B, h, N, d_k)
        times = interleaved({"course": lambda: scaled_dot_product_attention(q, k, v)[0],
                             "sdpa": lambda: F.scaled_dot_product_attention(q, k, v)}, repeats=repeats, device="cuda")
        rows.append({"n": n, "course_s": times["course"].median_s, "sdpa_s": times["sdpa"].median_s,
                     "ratio": times["course"].median_s / times["sdpa"].median_s})
    return rows


# --------------------------------------------------------------------------------------------------
# Every notebook on CUDA


def missing_notebook_packages() -> list[str]:
    return [name for name in NOTEBOOK_NEEDS if importlib.util.find_spec(name) is None]


def run_notebooks(folders: tuple[str, ...] = ("solutions", "chapters"), timeout: int = 600,
                  on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """Execute each notebook with nbclient on a fresh kernel (the kernel sees CUDA); record time and result.

    ``on_row`` is called with each notebook's row as soon as it is known, so that a run stopped partway
    (a time limit on a borrowed GPU machine) keeps what it measured.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("MPLBACKEND", "Agg")
    rows = []
    for folder in folders:
        for path in sorted((ROOT / folder).glob("[0-9][0-9]_*.ipynb")):
            nb = nbformat.read(str(path), as_version=4)
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                    resources={"metadata": {"path": str(path.parent)}})
            start = time.perf_counter()
            try:
                client.execute()
                row = {"notebook": f"{folder}/{path.name}", "ok": True}
            except CellExecutionError as exc:
                text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # without terminal colours
                row = {"notebook": f"{folder}/{path.name}", "ok": False, "error": text[-1500:]}
            except Exception as exc:  # kernel death, timeout
                row = {"notebook": f"{folder}/{path.name}", "ok": False, "error": f"{type(exc).__name__}: {exc}"[:1500]}
            row["seconds"] = round(time.perf_counter() - start, 1)
            rows.append(row)
            if on_row is not None:
                on_row(row)
            print(f"{row['seconds']:6.1f} s  {row['notebook']}  {'ok' if row['ok'] else 'FAILED'}", flush=True)
    return rows


# --------------------------------------------------------------------------------------------------


def _merge_into_results(update: dict, output: Path) -> None:
    result = json.loads(output.read_text()) if output.exists() else {}
    result.update(update)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=1) + "\n")


def record_notebook_rows(rows: list[dict], header: dict, output: Path) -> None:
    """Add notebook rows to ``output``, replacing earlier rows of the same notebooks."""
    previous = json.loads(output.read_text()).get("notebooks", []) if output.exists() else []
    done = {r["notebook"] for r in rows}
    merged = [r for r in previous if r["notebook"] not in done] + rows
    _merge_into_results({"notebooks_run": header, "notebooks": sorted(merged, key=lambda r: r["notebook"])}, output)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections among {', '.join(SECTIONS)} (default: all)")
    parser.add_argument("--notebooks", action="store_true", help="execute every notebook instead of measuring")
    parser.add_argument("--folders", default="solutions,chapters", help="with --notebooks: which folders")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    parser.add_argument("--output", type=Path, default=RESULTS / "gpu.json", help="the JSON file to update")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing measured (run this on a machine with an NVIDIA GPU)")
        return 2
    header = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cuda": torch.version.cuda, "python": sys.version.split()[0],
              "date": time.strftime("%Y-%m-%d")}
    if args.notebooks:
        missing = missing_notebook_packages()
        if missing:
            print("--notebooks needs " + ", ".join(NOTEBOOK_NEEDS) + "; missing here: " + ", ".join(missing) + ".\n"
                  "Install them from wheels: bash benchmarks/gpu_check.sh --wheels DIR --notebooks "
                  "(get the wheels for this Python with bash benchmarks/gpu_check.sh --download DIR on a machine "
                  "that reaches PyPI).")
            return 2
        rows = run_notebooks(tuple(args.folders.split(",")),
                             on_row=lambda row: record_notebook_rows([row], header, args.output))
        rows = json.loads(args.output.read_text())["notebooks"] if rows else []
        failed = [r["notebook"] for r in rows if not r["ok"]]
        print(f"wrote {args.output}; {len(rows) - len(failed)} of {len(rows)} notebooks pass" +
              (f"; failed: {', '.join(failed)}" if failed else ""))
        return 1 if failed else 0

    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"--only: unknown sections {sorted(unknown)}; choose among {', '.join(SECTIONS)}")
    torch.backends.cuda.matmul.allow_tf32 = False  # the tolerance policy assumes true float32
    torch.backends.cudnn.allow_tf32 = False
    repeats = 3 if args.quick else 7
    lengths = (4096, 8192) if args.quick else (4096, 8192, 16384)
    update: dict = {"run": header}
    bad = 0
    if "components" in sections:
        update["components"] = compare_components()
        bad += sum(r["ok"] is False for r in update["components"])
    if "attention" in sections:
        update["attention"] = course_attention_timings(repeats)
        update["attention_table"] = attention_table(lengths, (torch.float32, torch.bfloat16), max(3, repeats // 2))
    if "flash" in sections:
        if importlib.util.find_spec("triton") is None:
            update["flash"] = {"error": "Triton is not installed: the flash section needs it"}
            print(update["flash"]["error"])
        else:
            correctness = flash_correctness()
            bad += sum(not r["ok"] for r in correctness)
            update["flash"] = {
                "correctness": correctness,
                "targets": TARGETS,
                "vendor_bf16_dense_tflops": vendor_bf16_tflops(),
                "measured_bf16_matmul_tflops": measured_bf16_tflops(),
                "versus_sdpa": flash_targets(lengths, repeats),
            }
    if "modules" in sections:
        update["modules"] = module_comparisons(repeats)
    if "latency" in sections:
        update["latency"] = latency_chart(repeats)
    _merge_into_results(update, args.output)
    print(f"wrote {args.output}; {bad} comparisons out of tolerance")
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        traceback.print_exc()
        sys.exit(130)
