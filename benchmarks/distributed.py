"""Chapter 13's table: each scheme's largest error against its single-device reference and its memory per rank,
measured on p = 1, 2, 4 gloo processes on the CPU.

    python -m benchmarks.distributed            # prints the table, writes benchmarks/out/results/distributed.json
    python -m benchmarks.distributed --record   # writes benchmarks/results/distributed.json (read by the chapter)

Errors: every rank's parameters (data parallelism, after 3 SGD steps), outputs, input and weight gradients (tensor
parallelism), outputs and q, k, v gradients (ring attention) against one process, the largest absolute difference.
Memory, each row its own: the data-parallel runs' state counted from shapes (same small MLP as their errors);
``memory_worker``'s storages and profiled peak in separate rows "DDP (PyTorch), memory" and "FSDP, memory" (a
nine-layer MLP with Adam, no error measured there); the tensor-parallel layers' weight bytes (counted from shapes);
``ring_memory_worker``'s largest allocation and profiled peak, for each ring row's own mask and order at the N of its
errors. Every row names its model and N. Takes about two minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
WORLDS = (1, 2, 4)
RING_N = 256  # ring attention's sequence length, for its errors and its memory alike


def _max_error(pairs) -> float:
    return max(float((got.detach().double() - want.detach().double()).abs().max()) for got, want in pairs)


def measure(p: int) -> dict[str, dict]:
    """One row per scheme at ``p`` ranks (the largest figure over ranks). Each row holds only what was measured or
    counted for it, and says on which model and N (``model``) and what its memory figures are (``memory``)."""
    from utils import data_parallel as dp
    from utils import ring_attention as ra
    from utils import tensor_parallel as tp
    from utils.distributed import run_on_ranks

    runs = run_on_ranks(dp.data_parallel_worker, p, steps=3, backend="gloo")
    reference = dp.single_process_reference(steps=3)
    memory = run_on_ranks(dp.memory_worker, p, backend="gloo")
    small = "MLP " + "-".join(map(str, dp.WIDTHS)) + ", SGD with momentum, 3 steps, batch 32"
    rows: dict[str, dict] = {}
    for scheme, name in (("naive", "DDP (hand-written)"), ("bucketed", "DDP (bucketed)"), ("torch_ddp", "DDP (PyTorch)"),
                         ("fsdp", "FSDP")):
        rows[name] = {"max_error": _max_error((g, w) for run in runs for g, w in zip(run[scheme]["params"], reference["params"])),
                      "state_bytes": max(run[scheme]["bytes"] for run in runs), "model": small,
                      "memory": "parameters, gradients, momentum of this run (counted from shapes)"}
    nine = f"MLP {dp.MEMORY_WIDTHS[0]}-{dp.MEMORY_WIDTHS[1]}x{len(dp.MEMORY_WIDTHS) - 2}-{dp.MEMORY_WIDTHS[-1]}, Adam, batch 32"
    for key, name in (("DDP", "DDP (PyTorch), memory"), ("FSDP", "FSDP, memory")):
        rows[name] = {"max_error": None, "state_bytes": max(m[key]["state"] for m in memory),
                      "peak_bytes": max(m[key]["peak"] for m in memory), "model": nine,
                      "memory": "parameters, gradients, Adam state (storages); peak in a step (profiler); no error measured"}
    tp_runs = run_on_ranks(tp.tensor_parallel_worker, p, backend="gloo")
    mha, ffn = tp.tp_reference_layers(0)
    x, grad_out = tp.tp_inputs(0)
    for name, layer in (("attention", mha), ("ffn", ffn)):
        x_leaf = x.clone().requires_grad_(True)
        y = layer(x_leaf, is_causal=True)[0] if name == "attention" else layer(x_leaf)
        y.backward(grad_out)
        pairs = [(r[name]["output"], y) for r in tp_runs] + [(r[name]["grad_x"], x_leaf.grad) for r in tp_runs]
        for rank, r in enumerate(tp_runs):  # every weight gradient: this rank's shard against the same slice of one device's
            grads = r[name]["grads"]
            if name == "attention":
                cols = tp.shard_slice(mha.d_model, rank, p)
                pairs += [(grads[f"{proj}.{w}"], getattr(getattr(mha, proj), w).grad[cols])
                          for proj in ("q_proj", "k_proj", "v_proj") for w in ("weight", "bias")]
                pairs += [(grads["out_proj.weight"], mha.out_proj.weight.grad[:, cols]), (grads["out_bias"], mha.out_proj.bias.grad)]
            else:
                hidden = tp.shard_slice(ffn.linear1.out_features, rank, p)
                pairs += [(grads["linear1.weight"], ffn.linear1.weight.grad[hidden]), (grads["linear1.bias"], ffn.linear1.bias.grad[hidden]),
                          (grads["linear2.weight"], ffn.linear2.weight.grad[:, hidden]), (grads["bias2"], ffn.linear2.bias.grad)]
        rows[f"tensor parallel ({name})"] = {"max_error": _max_error(pairs), "state_bytes": max(r[name]["weight_bytes"] for r in tp_runs),
                                             "model": f"{name}, input {tuple(x.shape)}",
                                             "memory": "weights (counted from shapes); error: output, input and weight gradients"}
    ring_runs = run_on_ranks(ra.ring_attention_worker, p, length=RING_N, backend="gloo")
    for case in ring_runs[0]:
        is_causal, order = case
        want = ra.sdpa_reference(0, is_causal, length=RING_N)
        error = _max_error((ra.unshard_sequence([r[case][k] for r in ring_runs], order), want[k]) for k in ("out", "dq", "dk", "dv"))
        ring_memory = run_on_ranks(ra.ring_memory_worker, p, length=RING_N, order=order, is_causal=is_causal, backend="gloo")
        rows[f"ring attention ({'causal' if is_causal else 'full'}, {order})"] = {
            "max_error": error, "largest_allocation_bytes": max(r["largest"] for r in ring_memory),
            "peak_bytes": max(r["peak"] for r in ring_memory), "model": f"N = {RING_N}, this mask and order",
            "memory": "largest allocation and peak of the forward (profiler); error: output and q, k, v gradients"}
    return rows


def table(results: dict[str, dict[str, dict]]) -> str:
    schemes = list(next(iter(results.values())))
    lines = [f"{'scheme':>36} | " + " | ".join(f"p={p}: max error, memory per rank (bytes)" for p in results)]
    for scheme in schemes:
        cells = []
        for rows in results.values():
            row = rows[scheme]
            mem = [f"{row[k]:,}" for k in ("state_bytes", "largest_allocation_bytes", "peak_bytes") if k in row]
            error = "-" if row["max_error"] is None else f"{row['max_error']:.1e}"
            cells.append(f"{error:>7}, {' / '.join(mem):<22}")
        lines.append(f"{scheme:>36} | " + " | ".join(cells) + f" | {rows[scheme]['model']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/distributed.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = {str(p): measure(p) for p in WORLDS}
    print(table(results))
    target = HERE / ("results" if args.record else "out/results") / "distributed.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    machine = {"python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine(),
               "backend": "gloo", "device": "cpu", "when": time.strftime("%Y-%m-%d")}
    target.write_text(json.dumps({"machine": machine, "worlds": results}, indent=1) + "\n")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
