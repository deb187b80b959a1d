"""Chapter 13's claims on the claim seeds 0-9 at the notebook's p = 2 (the notebook asserts them on seed 0;
tests/test_distributed.py at p = 4 on seed 0): every scheme equals its single-device reference under the
tolerance policy, forward and gradients; FSDP holds exactly 1/p of the state; bucketing sends fewer
messages; causal zig-zag work is equal on every rank. One process group runs all ten seeds of a scheme."""

from __future__ import annotations

import pytest
import torch

from coursetools.claims import Claim
from utils import data_parallel as dp
from utils import ring_attention as ra
from utils import tensor_parallel as tp
from utils.distributed import run_on_ranks
from utils.evidence import CLAIM_SEEDS
from utils.tolerances import assert_close, tolerance

pytestmark = pytest.mark.claims

P = 2  # the notebook's WORLD


def _every_seed(rank: int, world_size: int, scheme: str, seeds: tuple[int, ...]) -> dict:
    worker = {"data": dp.data_parallel_worker, "tensor": tp.tensor_parallel_worker,
              "ring": ra.ring_attention_worker}[scheme]
    return {seed: worker(rank, world_size, seed=seed) for seed in seeds}


def _runs(seeds: tuple[int, ...]) -> dict[str, list[dict]]:
    return {scheme: run_on_ranks(_every_seed, P, scheme, seeds, backend="gloo", timeout=600)
            for scheme in ("data", "tensor", "ring")}


@pytest.fixture(scope="module")
def runs():
    return _runs(tuple(CLAIM_SEEDS))


def _data_parallel_pairs(runs, seed):
    """(what, got, want) for every data-parallel scheme on every rank against the one-process reference."""
    reference = dp.single_process_reference(seed=seed)
    for rank, run in enumerate(r[seed] for r in runs["data"]):
        for scheme in ("naive", "bucketed", "torch_ddp", "fsdp"):
            for got, want in zip(run[scheme]["params"], reference["params"], strict=True):
                yield f"{scheme}, rank {rank}, seed {seed}", got, want


def _tensor_parallel_pairs(runs, seed):
    """(what, got, want) for both tensor-parallel layers on every rank: output, input gradient, weight gradients."""
    mha, ffn = tp.tp_reference_layers(seed)
    x, grad_out = tp.tp_inputs(seed)
    for name, layer in (("attention", mha), ("ffn", ffn)):
        x_leaf = x.clone().requires_grad_(True)
        y = layer(x_leaf, is_causal=True)[0] if name == "attention" else layer(x_leaf)
        y.backward(grad_out)
        for rank, run in enumerate(r[seed][name] for r in runs["tensor"]):
            yield f"{name} output, rank {rank}, seed {seed}", run["output"], y
            yield f"{name} input gradient, rank {rank}, seed {seed}", run["grad_x"], x_leaf.grad
            if name == "attention":
                cols = tp.shard_slice(mha.d_model, rank, P)
                pairs = [(run["grads"][f"{p}.{w}"], getattr(getattr(mha, p), w).grad[cols])
                         for p in ("q_proj", "k_proj", "v_proj") for w in ("weight", "bias")]
                pairs += [(run["grads"]["out_proj.weight"], mha.out_proj.weight.grad[:, cols]),
                          (run["grads"]["out_bias"], mha.out_proj.bias.grad)]
            else:
                hidden = tp.shard_slice(ffn.linear1.out_features, rank, P)
                pairs = [(run["grads"]["linear1.weight"], ffn.linear1.weight.grad[hidden]),
                         (run["grads"]["linear1.bias"], ffn.linear1.bias.grad[hidden]),
                         (run["grads"]["linear2.weight"], ffn.linear2.weight.grad[:, hidden]),
                         (run["grads"]["bias2"], ffn.linear2.bias.grad)]
            for got, want in pairs:
                yield f"{name} weight gradient, rank {rank}, seed {seed}", got, want


def _ring_pairs(runs, seed):
    """(what, got, want) for ring attention's output and q, k, v gradients in every case (fused-kernel rule)."""
    ranks = [r[seed] for r in runs["ring"]]
    for case in ranks[0]:
        is_causal, order = case
        want = ra.sdpa_reference(seed, is_causal)
        for name in ("out", "dq", "dk", "dv"):
            got = ra.unshard_sequence([run[case][name] for run in ranks], order)
            yield f"ring {case} {name}, seed {seed}", got, want[name]


def _over_policy(got: torch.Tensor, want: torch.Tensor, kernel: str = "default") -> float:
    """The largest |got - want| divided by what the tolerance policy allows there (at most 1: within it)."""
    tol = tolerance(got.device, got.dtype, kernel)
    g, e = got.detach().double(), want.detach().double()
    return float(((g - e).abs() / (tol["atol"] + tol["rtol"] * e.abs())).max())


def distributed_record(seed: int) -> dict[str, float]:
    """Per scheme, the largest error over what the tolerance policy allows (at most 1: equal), and the
    structural claims as numbers (1.0 where they hold)."""
    runs = _runs((seed,))
    data = [r[seed] for r in runs["data"]]
    ring = [r[seed] for r in runs["ring"]]
    reference_bytes = dp.single_process_reference(seed=seed)["bytes"]
    return {
        "data parallel: worst error / policy": max(_over_policy(g, w) for _, g, w in _data_parallel_pairs(runs, seed)),
        "tensor parallel: worst error / policy": max(_over_policy(g, w) for _, g, w in _tensor_parallel_pairs(runs, seed)),
        "ring attention: worst error / policy (fused)": max(_over_policy(g, w, "fused")
                                                            for _, g, w in _ring_pairs(runs, seed)),
        "FSDP holds 1/p of the state": float(all(run["fsdp"]["bytes"] * P == run["torch_ddp"]["bytes"] == reference_bytes
                                                 for run in data)),
        "bucketing sends fewer all-reduces": float(all(run["bucketed"]["all_reduces_per_step"]
                                                       < run["naive"]["all_reduces_per_step"] for run in data)),
        "zig-zag: equal causal work on every rank": float(len({run[(True, "zigzag")]["score_entries"] for run in ring}) == 1),
    }


RECORD = {"13_distributed": distributed_record}


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_data_parallel_equals_one_process_and_fsdp_holds_one_pth(runs, seed):
    reference = dp.single_process_reference(seed=seed)
    for what, got, want in _data_parallel_pairs(runs, seed):
        assert_close(got, want, what=what)
    for run in (r[seed] for r in runs["data"]):
        assert run["fsdp"]["bytes"] * P == run["torch_ddp"]["bytes"] == reference["bytes"]
        assert run["bucketed"]["all_reduces_per_step"] < run["naive"]["all_reduces_per_step"]


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_tensor_parallel_equals_chapters_4_and_6_forward_and_backward(runs, seed):
    for what, got, want in _tensor_parallel_pairs(runs, seed):
        assert_close(got, want, what=what)
    for name in ("attention", "ffn"):
        for run in (r[seed][name] for r in runs["tensor"]):
            assert run["calls"] == {"forward": 1, "backward": 1}


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_ring_attention_equals_sdpa_and_zigzag_balances(runs, seed):
    ranks = [r[seed] for r in runs["ring"]]
    for what, got, want in _ring_pairs(runs, seed):
        assert_close(got, want, what=what, kernel="fused")
    for case in ranks[0]:
        is_causal, order = case
        assert [run[case]["score_entries"] for run in ranks] == ra.ring_work_per_rank(P, 64, order, is_causal)
    assert len({run[(True, "zigzag")]["score_entries"] for run in ranks}) == 1


# The claims ledger (python -m coursetools.claims --ledger writes claims.md; tests/test_claims_ledger.py checks it).
LEDGER = [
    Claim("test_data_parallel_equals_one_process_and_fsdp_holds_one_pth", "13_distributed",
          "p = 2: every data-parallel scheme's parameters / one process's within the policy (largest error / "
          "allowance <= 1); FSDP's bytes x p = DDP's; bucketed sends fewer all-reduces",
          lambda r: (r["data parallel: worst error / policy"] <= 1 and r["FSDP holds 1/p of the state"] == 1.0
                     and r["bucketing sends fewer all-reduces"] == 1.0),
          ("All four equal one process on the whole batch within the tolerance policy for float32 on this device",
           "The bucketed version sent fewer, larger messages.",
           "FSDP (`fully_shard`) held $1/p$ of the parameters, gradients and Adam state per rank"), 10),
    Claim("test_tensor_parallel_equals_chapters_4_and_6_forward_and_backward", "13_distributed",
          "p = 2: output, input gradient and every weight gradient / the single-device layer's within the policy",
          lambda r: r["tensor parallel: worst error / policy"] <= 1,
          ("the output, the input's gradient and every weight's gradient equal chapter 4's (and chapter 6's) "
           "single-device layer",), 10),
    Claim("test_ring_attention_equals_sdpa_and_zigzag_balances", "13_distributed",
          "p = 2: ring attention's output and q, k, v gradients / SDPA's within the policy (fused-kernel rule); "
          "zig-zag causal work equal on every rank",
          lambda r: (r["ring attention: worst error / policy (fused)"] <= 1
                     and r["zig-zag: equal causal work on every rank"] == 1.0),
          ("forward and backward equal SDPA on the whole sequence, causal included. The zig-zag order gives every "
           "rank the same causal work",), 10),
]
