"""Chapter 13 (utils.distributed, data_parallel, tensor_parallel, ring_attention) on p = 4 processes.

Every scheme equals its single-device reference under the tolerance policy, forward and gradients; the
counted bytes and memory per rank equal the formulas; and the process helper returns results, reports a
rank's exception, stops a hung group with a clear message and leaves no process behind. Each p = 4 run is
one start of four ranks (the workers run several cases each, to keep the number of runs small).
"""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest
import torch
import torch.distributed as dist

from utils import data_parallel as dp
from utils import ring_attention as ra
from utils import tensor_parallel as tp
from utils.distributed import (
    collectives_demo,
    mismatched_collectives,
    ring_bytes,
    run_on_ranks,
    scheme_costs,
)
from utils.tolerances import assert_close, tolerance

P = 4
# A backstop, not a speed limit: the first run of a module also starts the fork server (22.5 s for the
# collectives at load average 11 on 2 cores, 19 s for the data-parallel run), near the 60 s default on a busier machine.
FIXTURE_TIMEOUT = 300


def _rank_and_sum(rank: int, world_size: int, offset: float = 0.0) -> dict:
    t = torch.tensor([float(rank) + offset])
    dist.all_reduce(t)
    return {"rank": rank, "world": world_size, "sum": t, "backend": dist.get_backend()}


def _raise_on_rank_1(rank: int, world_size: int) -> None:
    if rank == 1:
        raise ValueError("rank 1 fails on purpose")
    dist.barrier()


def _sleep(rank: int, world_size: int) -> None:
    time.sleep(600)


@pytest.fixture(scope="module")
def collectives():
    return run_on_ranks(collectives_demo, P, backend="gloo", timeout=FIXTURE_TIMEOUT)


@pytest.fixture(scope="module")
def data_parallel():
    return run_on_ranks(dp.data_parallel_worker, P, steps=3, backend="gloo", timeout=FIXTURE_TIMEOUT), dp.single_process_reference(steps=3)


@pytest.fixture(scope="module")
def tensor_parallel():
    return run_on_ranks(tp.tensor_parallel_worker, P, backend="gloo", timeout=FIXTURE_TIMEOUT)


@pytest.fixture(scope="module")
def ring():
    return run_on_ranks(ra.ring_attention_worker, P, length=64, backend="gloo", timeout=FIXTURE_TIMEOUT)


# -- the process helper ----------------------------------------------------------------------------


def test_run_on_ranks_returns_every_rank_result_in_order():
    results = run_on_ranks(_rank_and_sum, 3, offset=1.0, backend="gloo")
    assert [r["rank"] for r in results] == [0, 1, 2] and all(r["world"] == 3 for r in results)
    assert all(r["sum"].item() == 0 + 1 + 2 + 3 and r["backend"] == "gloo" for r in results)
    assert multiprocessing.active_children() == []


def test_a_rank_exception_reaches_the_caller_with_its_traceback():
    # The first rank to fail is reported: rank 1's ValueError, or rank 0's barrier error when rank 1 died first.
    with pytest.raises(RuntimeError, match=r"rank [01] of 2 raised:\nTraceback \(most recent call last\)"):
        run_on_ranks(_raise_on_rank_1, 2, timeout=30, backend="gloo")
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("fn", [mismatched_collectives, _sleep])
def test_a_hung_group_times_out_and_leaves_nothing_running(fn):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"ranks \[0, 1\] of 2 did not finish within 2 s"):
        run_on_ranks(fn, 2, timeout=2, backend="gloo")
    assert time.monotonic() - start < 30  # stopped, not waited for (600 s of sleep)
    assert multiprocessing.active_children() == []


def test_run_on_ranks_validates_its_arguments():
    with pytest.raises(TypeError, match="module-level function"):
        run_on_ranks(lambda rank, world: rank, 2)
    with pytest.raises(ValueError, match="world_size must be an int >= 1, got 0"):
        run_on_ranks(_rank_and_sum, 0, backend="gloo")
    with pytest.raises(TypeError, match="world_size must be an int, got float 2.0"):
        run_on_ranks(_rank_and_sum, 2.0, backend="gloo")
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        run_on_ranks(_rank_and_sum, 2, timeout=0, backend="gloo")
    with pytest.raises(ValueError, match="backend must be"):
        run_on_ranks(_rank_and_sum, 2, backend="mpi")


def test_the_rendezvous_port_is_free_and_fresh_each_run():
    assert [r["sum"].item() for r in run_on_ranks(_rank_and_sum, 2, backend="gloo")] == [1.0, 1.0]
    assert [r["sum"].item() for r in run_on_ranks(_rank_and_sum, 2, backend="gloo")] == [1.0, 1.0]  # no port left bound


# -- collectives -----------------------------------------------------------------------------------


def test_collectives_compute_what_the_table_says(collectives):
    x = torch.stack([r["x"] for r in collectives])  # (p, 2p)
    for rank, r in enumerate(collectives):
        assert torch.equal(r["all_reduce"], x.sum(0))
        assert torch.equal(r["all_gather"], x)
        assert torch.equal(r["reduce_scatter"], x.sum(0).chunk(P)[rank])
        assert torch.equal(r["broadcast"], x[0])
        assert torch.equal(r["recv_from_previous"], x[(rank - 1) % P])


def test_ring_all_reduce_equals_dist_all_reduce_and_sends_2_p_minus_1_over_p_n(collectives):
    for r in collectives:
        assert_close(r["ring_all_reduce"], r["dist_all_reduce"], what="ring all-reduce")
        assert r["ring_bytes_sent"] == ring_bytes("all_reduce", 4096 * 4, P) == 2 * (P - 1) / P * 4096 * 4


def test_ring_bytes_formulas():
    assert ring_bytes("all_reduce", 800, 4) == 1200
    assert ring_bytes("reduce_scatter", 800, 4) == ring_bytes("all_gather", 800, 4) == 600
    assert ring_bytes("all_reduce", 800, 1) == 0 and ring_bytes("broadcast", 800, 1) == 0
    with pytest.raises(ValueError, match="collective must be one of"):
        ring_bytes("all_to_all", 800, 4)


# -- data parallelism ------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["naive", "bucketed", "torch_ddp", "fsdp"])
def test_every_data_parallel_scheme_equals_one_process_on_the_whole_batch(data_parallel, scheme):
    runs, reference = data_parallel
    for rank, run in enumerate(runs):
        for got, want in zip(run[scheme]["params"], reference["params"], strict=True):
            assert_close(got, want, what=f"{scheme} rank {rank}")


def test_the_equality_can_fail():
    """The reference differs from a model trained on one rank's slice only: the comparison has teeth."""
    alone = dp.train(dp.make_mlp(0), dp.regression_batches(0, 3, 32), rank=0, world_size=P)
    reference = dp.single_process_reference(steps=3)
    with pytest.raises(AssertionError):
        for got, want in zip(dp.full_parameters(alone), reference["params"], strict=True):
            assert_close(got, want)


def test_bucketing_sends_fewer_messages_and_fsdp_holds_one_pth_of_the_state(data_parallel):
    runs, reference = data_parallel
    n_tensors = len(reference["params"])
    assert runs[0]["naive"]["all_reduces_per_step"] == n_tensors
    assert 1 < runs[0]["bucketed"]["all_reduces_per_step"] < n_tensors
    full = reference["bytes"]
    n_params = sum(t.numel() for t in reference["params"])
    assert full == 12 * n_params  # value, gradient and SGD's momentum, float32
    for run in runs:
        assert run["torch_ddp"]["bytes"] == full == scheme_costs(P, n_params, 0, 0, 1, state_bytes=12)["DDP"]["memory"]
        assert run["fsdp"]["bytes"] * P == full == scheme_costs(P, n_params, 0, 0, 1, state_bytes=12)["FSDP"]["memory"] * P


# -- tensor parallelism ----------------------------------------------------------------------------


def _tp_reference(name):
    mha, ffn = tp.tp_reference_layers(0)
    x, grad_out = tp.tp_inputs(0)
    x = x.requires_grad_(True)
    layer = mha if name == "attention" else ffn
    y = mha(x, is_causal=True)[0] if name == "attention" else ffn(x)
    y.backward(grad_out)
    return layer, x, y


@pytest.mark.parametrize("name", ["attention", "ffn"])
def test_tensor_parallel_layer_equals_the_single_device_layer_forward_and_backward(tensor_parallel, name):
    layer, x, y = _tp_reference(name)
    for rank, run in enumerate(tensor_parallel):
        got = run[name]
        assert_close(got["output"], y, what=f"{name} output rank {rank}")
        assert_close(got["grad_x"], x.grad, what=f"{name} input gradient rank {rank}")
        if name == "attention":
            cols = tp.shard_slice(layer.d_model, rank, P)
            for proj in ("q_proj", "k_proj", "v_proj"):
                assert_close(got["grads"][f"{proj}.weight"], getattr(layer, proj).weight.grad[cols])
                assert_close(got["grads"][f"{proj}.bias"], getattr(layer, proj).bias.grad[cols])
            assert_close(got["grads"]["out_proj.weight"], layer.out_proj.weight.grad[:, cols])
            assert_close(got["grads"]["out_bias"], layer.out_proj.bias.grad)
        else:
            hidden = tp.shard_slice(layer.linear1.out_features, rank, P)
            assert_close(got["grads"]["linear1.weight"], layer.linear1.weight.grad[hidden])
            assert_close(got["grads"]["linear1.bias"], layer.linear1.bias.grad[hidden])
            assert_close(got["grads"]["linear2.weight"], layer.linear2.weight.grad[:, hidden])
            assert_close(got["grads"]["bias2"], layer.linear2.bias.grad)


@pytest.mark.parametrize("name", ["attention", "ffn"])
def test_tensor_parallel_communication_and_memory_are_counted(tensor_parallel, name):
    layer, x, _ = _tp_reference(name)
    n_bytes = x.numel() * 4
    bias = (layer.out_proj.bias if name == "attention" else layer.linear2.bias).numel()
    full = sum(p.numel() for p in layer.parameters())
    for run in tensor_parallel:
        assert run[name]["calls"] == {"forward": 1, "backward": 1}
        assert run[name]["bytes"] == {"forward": ring_bytes("all_reduce", n_bytes, P)} | {"backward": ring_bytes("all_reduce", n_bytes, P)}
        assert run[name]["weight_bytes"] == 4 * ((full - bias) // P + bias)


def test_tensor_parallel_rejects_what_it_cannot_split():
    mha, ffn = tp.tp_reference_layers(0)  # 8 heads, d_ff 64
    with pytest.raises(ValueError, match="num_heads=8 does not split evenly over 3"):
        tp.TensorParallelAttention(mha, 0, 3, tp.CommLog())
    with pytest.raises(ValueError, match="does not split evenly over 5"):
        tp.TensorParallelFeedForward(ffn, 0, 5, tp.CommLog())
    with pytest.raises(TypeError, match="fused_qkv=False"):
        tp.TensorParallelAttention(ffn, 0, 2, tp.CommLog())


# -- ring attention --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [(False, "contiguous"), (True, "contiguous"), (True, "zigzag")])
def test_ring_attention_equals_sdpa_on_the_whole_sequence_forward_and_backward(ring, case):
    want = ra.sdpa_reference(0, case[0], length=64)
    for name in ("out", "dq", "dk", "dv"):
        got = ra.unshard_sequence([run[case][name] for run in ring], case[1])
        assert_close(got, want[name], what=f"{case} {name}", kernel="fused")


def test_a_causal_ring_with_the_wrong_mask_fails_the_comparison(ring):
    want = ra.sdpa_reference(0, True, length=64)
    got = ra.unshard_sequence([run[(False, "contiguous")]["out"] for run in ring], "contiguous")
    with pytest.raises(AssertionError):
        assert_close(got, want["out"], kernel="fused")


@pytest.mark.parametrize("case", [(False, "contiguous"), (True, "contiguous"), (True, "zigzag")])
def test_ring_work_memory_and_bytes_per_rank(ring, case):
    is_causal, order = case
    work = [run[case]["score_entries"] for run in ring]
    assert work == ra.ring_work_per_rank(P, 64, order, is_causal)
    if order == "zigzag":
        assert len(set(work)) == 1
    elif is_causal:
        assert work == sorted(work) and work[-1] > 6 * work[0]
    else:
        assert work == [64 * 64 // P] * P  # N^2 / p each
    chunk = 64 // (P if order == "contiguous" else 2 * P)
    kv_bytes = 2 * 4 * 4 * 64 * 16  # K and V, (G = 4, N = 64, d = 16) float32
    for run in ring:
        assert run[case]["largest_block"] == chunk * chunk
        assert run[case]["bytes_sent"] == scheme_costs(P, 0, 0, kv_bytes, 64)["ring attention"]["sent"]
        # backward: K, V, dK, dV on p - 1 hops and dK, dV on one more; the cost table's bytes are forward only
        assert run[case]["backward_bytes_sent"] == (2 * P - 1) / P * kv_bytes
    assert "forward only" in scheme_costs(P, 0, 0, kv_bytes, 64)["ring attention"]["counted"]


def test_sequence_sharding_round_trips_and_validates():
    x = torch.arange(2 * 16 * 3, dtype=torch.float32).reshape(2, 16, 3)
    for order in ra.ORDERS:
        parts = [ra.shard_sequence(x, r, P, order) for r in range(P)]
        assert torch.equal(ra.unshard_sequence(parts, order), x)
    assert ra.chunk_layout(P, "zigzag") == [[0, 7], [1, 6], [2, 5], [3, 4]]
    with pytest.raises(ValueError, match="order must be one of"):
        ra.chunk_layout(P, "striped")
    with pytest.raises(ValueError, match="does not split into 8 equal chunks"):
        ra.shard_sequence(torch.zeros(1, 12, 2), 0, P, "zigzag")


def test_cost_formulas_against_p():
    for p in (1, 2, 4, 8):
        costs = scheme_costs(p, 1000, 400, 800, 64)
        assert costs["DDP"]["memory"] == 16_000 and costs["FSDP"]["memory"] == 16_000 / p  # Adam by default
        assert scheme_costs(p, 1000, 400, 800, 64, state_bytes=12)["FSDP"]["memory"] == 12_000 / p
        assert costs["DDP"]["sent"] == 2 * (p - 1) / p * 4000
        assert costs["FSDP"]["sent"] == pytest.approx(1.5 * costs["DDP"]["sent"])
        assert costs["tensor parallel"]["sent"] == 4 * 2 * (p - 1) / p * 400
        assert costs["ring attention"]["memory"] == 4 * 64 * 64 / p
        assert costs["ring attention"]["largest_block"] == 4 * (64 / p) ** 2


def test_the_widget_draws_the_ring_s_own_layout():
    from utils.widgets.parallel import _readout, owner_grid, ring_widget

    grid = owner_grid(P, "zigzag")
    for rank in range(P):  # each rank computes its chunks' rows up to the diagonal: equal cells
        assert int((grid == rank).sum()) == (2 * P + 1)
    assert bool((owner_grid(P, "contiguous", is_causal=False) >= 0).all())
    assert "[" + ", ".join(str(w) for w in ra.ring_work_per_rank(P, 1024, "zigzag")) + "]" in _readout(P, "zigzag", True)
    assert repr(ring_widget()).startswith("Interactive widget")


# -- the process helper's failure reports (review of chapter 13) -------------------------------------


def _unpicklable_result(rank: int, world_size: int):
    return lambda: rank  # a lambda cannot be pickled back to the caller


def _rank_1_exits(rank: int, world_size: int) -> None:
    import os

    if rank == 1:
        os._exit(3)
    dist.all_reduce(torch.zeros(1))  # rank 0 fails here too, once rank 1 is gone: rank 1 is the cause


def _mismatched_sizes(rank: int, world_size: int) -> None:
    from utils.distributed import _exchange

    _exchange(torch.zeros(4 + 4 * rank), torch.zeros(4), rank, world_size)  # rank 1 sends 8 values, rank 0 expects 4


def _report_pid_then_sleep(rank: int, world_size: int, directory: str) -> None:
    import os
    import pathlib

    pathlib.Path(directory, f"rank{rank}.pid").write_text(str(os.getpid()))
    time.sleep(600)


_HELD_BY_A_THREAD = threading.Lock()


def _take_the_lock(rank: int, world_size: int) -> bool:
    """True when this rank can take a lock that, in the caller, another thread holds."""
    taken = _HELD_BY_A_THREAD.acquire(timeout=5)
    if taken:
        _HELD_BY_A_THREAD.release()
    return taken


def test_a_lock_held_by_another_thread_of_the_caller_does_not_reach_the_ranks():
    """The CI failure of 2026-12-01: ring attention's ranks hung for 60 s in a pytest worker that had run other
    tests first. A rank forked from a process with threads inherits every lock as it was at the fork, including
    one another thread held then and will never release in the copy; a Jupyter kernel and PyTorch have such
    threads. The ranks start from a fork server without threads instead, so they find the lock free."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with _HELD_BY_A_THREAD:
            holding.set()
            release.wait(60)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        assert holding.wait(10)
        assert run_on_ranks(_take_the_lock, 2, backend="gloo", timeout=120) == [True, True]
    finally:
        release.set()
        thread.join()


def _ring_bytes_sent(rank: int, world_size: int, n: int) -> int:
    from utils.distributed import ring_all_reduce

    return ring_all_reduce(torch.ones(n))


def test_an_unpicklable_result_is_named():
    with pytest.raises(RuntimeError, match=r"rank [01] of 2 raised:(.|\n)*result cannot be sent back to the caller \(it must pickle\)"):
        run_on_ranks(_unpicklable_result, 2, timeout=30, backend="gloo")
    assert multiprocessing.active_children() == []


def test_a_rank_that_exits_is_blamed_not_the_rank_it_left_waiting():
    with pytest.raises(RuntimeError, match=r"^rank 1 exited with code 3 before returning a result \(2 ranks\)"):
        run_on_ranks(_rank_1_exits, 2, timeout=30, backend="gloo")
    assert multiprocessing.active_children() == []


def test_mismatched_sizes_name_the_aborted_rank_its_signal_and_its_stderr():
    with pytest.raises(RuntimeError, match=r"rank 0 was killed by signal SIGABRT before returning a result(.|\n)*stderr"):
        run_on_ranks(_mismatched_sizes, 2, timeout=30, backend="gloo")
    assert multiprocessing.active_children() == []


def test_the_timeout_message_does_not_assume_a_mismatched_call():
    with pytest.raises(TimeoutError, match=r"may wait for a rank that never calls it(.|\n)*or the machine is slow \(raise timeout=\.\.\.\)"):
        run_on_ranks(_sleep, 2, timeout=2, backend="gloo")


def test_ranks_die_with_their_parent(tmp_path):
    """kill -9 the process that called run_on_ranks: its ranks must not live on until the group's timeout."""
    import os
    import pathlib
    import signal
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parent
    script = (f"import sys; sys.path[:0] = [{str(root.parent)!r}, {str(root)!r}]\n"
              "from test_distributed import _report_pid_then_sleep\n"
              "from utils.distributed import run_on_ranks\n"
              f"run_on_ranks(_report_pid_then_sleep, 2, {str(tmp_path)!r}, timeout=300, backend='gloo')\n")
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("rank*.pid"))) < 2:
            assert time.monotonic() < deadline and parent.poll() is None, "the ranks never started"
            time.sleep(0.2)
        pids = [int(f.read_text()) for f in sorted(tmp_path.glob("rank*.pid"))]
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()

    def alive(pid: int) -> bool:
        try:
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        return state != "Z"  # a zombie has exited; only its parent (now init) has not collected it yet

    if not pathlib.Path("/proc").is_dir():
        pytest.skip("needs /proc (Linux) to look at the ranks")
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [pid for pid in pids if alive(pid)]
    for pid in left:  # do not leave them behind if the test fails
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"ranks {left} outlived their killed parent"


def test_ring_bytes_are_exact_only_when_p_divides_n():
    sent = run_on_ranks(_ring_bytes_sent, 3, 7, backend="gloo")  # chunks of 3, 2, 2 values
    assert sent == [40, 36, 36] and sum(sent) == pytest.approx(3 * ring_bytes("all_reduce", 7 * 4, 3))
    assert run_on_ranks(_ring_bytes_sent, 3, 9, backend="gloo") == [ring_bytes("all_reduce", 9 * 4, 3)] * 3


def test_ring_bytes_validates_world_size_for_every_collective():
    for world_size in (0, -5):
        with pytest.raises(ValueError, match=f"world_size must be an int >= 1, got {world_size}"):
            ring_bytes("broadcast", 800, world_size)


def test_choose_backend_needs_one_gpu_per_rank(monkeypatch):
    from utils.distributed import choose_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    assert choose_backend(2) == "nccl" and choose_backend(4) == "gloo"


# -- measured, not counted: bytes on gloo's sockets, storages, profiled peaks (issue 28) -------------------

N_MEASURED = 65536  # float32 values per collective


@pytest.fixture(scope="module")
def measured_bytes():
    from utils.distributed import measured_collective_bytes

    return run_on_ranks(measured_collective_bytes, P, n=N_MEASURED, backend="gloo", timeout=FIXTURE_TIMEOUT)


@pytest.fixture(scope="module")
def memory():
    return {p: run_on_ranks(dp.memory_worker, p, backend="gloo", timeout=FIXTURE_TIMEOUT) for p in (1, P)}


@pytest.fixture(scope="module")
def ring_memory():
    return {p: run_on_ranks(ra.ring_memory_worker, p, length=256, backend="gloo", timeout=FIXTURE_TIMEOUT) for p in (1, P)}


def test_gloo_broadcast_tree_sends_each_rank_the_data_once():
    from utils.distributed import gloo_bytes

    for p in range(1, 10):
        sends = [gloo_bytes("broadcast", 1, p, rank, root=2 % p) for rank in range(p)]
        assert sum(sends) == p - 1  # every rank but the root receives it exactly once
        assert sends[2 % p] == (p - 1).bit_length()  # the root: ceil(log2 p) sends
    assert [gloo_bytes("broadcast", 8, 4, r) for r in range(4)] == [16, 8, 0, 0]
    assert gloo_bytes("reduce_scatter", 100, 4) == 2 * ring_bytes("reduce_scatter", 100, 4)
    with pytest.raises(ValueError):
        gloo_bytes("gather", 8, 4)
    with pytest.raises(ValueError, match="rank must be an int in 0..3, got 4"):
        gloo_bytes("broadcast", 8, 4, 4)
    with pytest.raises(TypeError, match="rank must be an int, got bool True"):
        gloo_bytes("broadcast", 8, 4, True)
    with pytest.raises(ValueError, match="world_size must be an int >= 1, got 0"):
        gloo_bytes("broadcast", 8, 0)


def test_measured_bytes_match_gloo_s_algorithms_not_always_the_ring_s(measured_bytes):
    from utils.distributed import COLLECTIVES, gloo_bytes

    n_bytes = 4 * N_MEASURED
    for rank, res in enumerate(measured_bytes):
        for name in COLLECTIVES:
            want = gloo_bytes(name, n_bytes, P, rank)
            assert abs(res[name] - want) <= 0.02 * n_bytes, (name, rank, res[name], want)
        # what tells gloo's algorithms from the ring formulas at p = 4: a reduce-scatter costs an all-reduce,
        # and the broadcast's root sends twice (a tree), ranks 2 and 3 nothing
        assert res["reduce_scatter"] > 1.5 * ring_bytes("reduce_scatter", n_bytes, P)
    assert measured_bytes[0]["broadcast"] > 1.9 * n_bytes and measured_bytes[3]["broadcast"] < 0.02 * n_bytes


def test_socket_bytes_written_sees_a_write(tmp_path):
    from utils.distributed import socket_bytes_written

    before = socket_bytes_written()
    (tmp_path / "x").write_bytes(b"0" * 10_000)
    assert socket_bytes_written() - before >= 10_000


def test_allocation_profile_sees_an_allocation_and_its_free():
    from utils.distributed import allocation_profile

    def work():
        a = torch.empty(1000, 1000)  # 4,000,000 bytes
        b = torch.empty(500, 1000)
        del a, b

    got = allocation_profile(work)
    assert got["largest"] == 4_000_000 and got["peak"] >= 6_000_000 and got["net"] == 0


def test_replay_allocations_counts_a_block_once_and_an_unseen_free_at_its_address_s_reuse():
    from utils.distributed import replay_allocations

    events = [(1, 0xA, 100), (2, 0xB, 50), (3, 0xA, 30),  # 0xA handed out again: its 100 bytes were freed unseen
              (4, 0xB, -50), (5, 0xC, -10)]  # a free of a block allocated before the profile is not subtracted
    got = replay_allocations(events)
    assert got == {"peak": 150, "largest": 100, "allocated": 180, "net": 30, "unseen_frees": 1, "unknown_frees": 0,
                   "start": 0}
    window = replay_allocations(events, start_ns=3, end_ns=4)
    assert window["start"] == 150 and window["peak"] == 150 and window["net"] == 30
    assert replay_allocations(events, start_ns=4, end_ns=5)["peak"] == 80  # what the window opens with counts
    quiet = replay_allocations([(1, 0xA, 100), (2, 0xA, -100)], start_ns=5, end_ns=6)  # nothing happens in the window
    assert quiet["start"] == quiet["peak"] == 0
    # a free of a block never seen allocated (made before the profile, or on a thread it does not follow)
    assert replay_allocations([(1, 0xD, -4096), (2, 0xE, -100)])["unknown_frees"] == 1


def test_allocation_profile_window_counts_what_was_made_before_it():
    from torch.profiler import record_function

    from utils.distributed import allocation_profile

    def work():
        kept = torch.ones(1000, 1000)  # 4,000,000 bytes made before the window and held through it
        with record_function("window"):
            extra = torch.ones(500, 1000)  # 2,000,000 bytes
            del extra
        del kept

    got = allocation_profile(work, window="window")
    assert got["start"] == 4_000_000 and got["peak"] == 6_000_000 and got["net"] == 0
    with pytest.raises(ValueError, match="window 'nowhere'"):
        allocation_profile(work, window="nowhere")


def reduce_scatter_allocations(rank: int, world_size: int, n: int = 65536) -> dict[str, int]:
    """What ``dist.reduce_scatter_tensor`` allocates on gloo for an input of ``n`` float32 values per rank."""
    from utils.distributed import allocation_profile

    x, out = torch.ones(n * world_size), torch.empty(n)
    return allocation_profile(lambda: torch.distributed.reduce_scatter_tensor(out, x))


def test_gloo_reduce_scatter_copies_its_whole_input():
    """The upper bound of chapter 13 counts gloo's working copy of each reduce-scatter's input: measured here."""
    for rank in run_on_ranks(reduce_scatter_allocations, P, backend="gloo", timeout=FIXTURE_TIMEOUT):
        assert rank["largest"] == 4 * 65536 * P and rank["peak"] >= 4 * 65536 * P


def test_fsdp_state_measured_is_one_pth_and_its_peak_lies_between_the_derived_bounds(memory):
    """The lower bound: FSDP holds its shards of parameters, gradients and Adam's moments (16 Psi / p) plus one
    gathered layer G (the largest layer's weight and bias). The upper bound, 16 Psi / p + 7G + A: FSDP2's buffers
    (two all-gather outputs, the unsharded parameters copied out of one, gloo's all-gather buffer, the unsharded
    gradient, the one kept reduce-scatter input and gloo's copy of it) and the activations A. The profile starts before the model
    is made, so DDP's gradient buckets, kept between steps, count in what the step starts with."""
    unsharded, ddp_1 = memory[1][0]["FSDP"], memory[1][0]["DDP"]
    grads = ddp_1["parameters"]
    gathered = dp.gathered_layer_bytes()
    assert gathered == max(sum(t.numel() for t in layer.parameters()) for layer in dp.make_mlp(0, dp.MEMORY_WIDTHS)
                           if isinstance(layer, torch.nn.Linear)) * 4  # the model's own largest layer
    for rank, run in enumerate(memory[P]):
        lower, upper = dp.fsdp_peak_bounds(run["DDP"]["state"], P)
        assert lower <= run["FSDP"]["peak"] <= upper, rank
        assert run["FSDP"]["unknown_frees"] == run["DDP"]["unknown_frees"] == 0, rank
    for rank, run in enumerate(memory[P]):
        ddp, fsdp = run["DDP"], run["FSDP"]
        assert ddp["state"] == ddp_1["state"]
        assert abs(fsdp["state"] * P / ddp["state"] - 1) <= 0.01, rank
        assert fsdp["peak"] < unsharded["peak"] / 2  # falls: at p = 4 below half the unsharded peak
        assert fsdp["peak"] < ddp["peak"], rank
        assert ddp["start"] - ddp["parameters"] - ddp["adam"] >= ddp["gradients"], rank  # the buckets, kept
        assert fsdp["start"] >= fsdp["parameters"] + fsdp["adam"], rank
        assert abs(ddp["sent"] - ring_bytes("all_reduce", grads, P)) <= 0.02 * grads
        assert abs(fsdp["sent"] - 2 * ring_bytes("all_reduce", grads, P)) <= 0.02 * grads  # gloo: 2 all-gathers + 1 all-reduce
    assert unsharded["peak"] >= ddp_1["state"] + gathered


def test_ring_attention_largest_allocation_is_one_score_block_and_its_peak_falls_as_1_over_p(ring_memory):
    for p, ranks in ring_memory.items():
        for r in ranks:
            assert r["largest"] == 4 * 4 * (256 // p) ** 2
            assert r["peak"] * p <= ring_memory[1][0]["peak"]


def test_the_recorded_table_is_what_the_workers_measure(memory, ring_memory):
    import json
    from pathlib import Path

    recorded = json.loads((Path(__file__).parents[1] / "benchmarks/results/distributed.json").read_text())["worlds"]
    assert sorted(recorded, key=int) == ["1", "2", "4"]
    atol = tolerance("cpu", torch.float32)["atol"]
    for rows in recorded.values():
        assert all(row["max_error"] is None or row["max_error"] <= atol for row in rows.values())
        assert all(row["model"] and row["memory"] for row in rows.values())  # every row names its model and N
        # no row shows another's measurement: the memory-only rows carry no error, the error rows no profiled peak
        # unless measured on their own case (ring attention: one profile per mask and order)
        assert rows["DDP (PyTorch), memory"]["max_error"] is None and rows["FSDP, memory"]["max_error"] is None
        assert all("peak_bytes" not in rows[n] for n in ("DDP (hand-written)", "DDP (bucketed)", "DDP (PyTorch)", "FSDP"))
    for p in (1, P):
        assert recorded[str(p)]["FSDP, memory"]["state_bytes"] == max(r["FSDP"]["state"] for r in memory[p])
        assert recorded[str(p)]["DDP (PyTorch), memory"]["state_bytes"] == max(r["DDP"]["state"] for r in memory[p])
        assert recorded[str(p)]["ring attention (full, contiguous)"]["largest_allocation_bytes"] == ring_memory[p][0]["largest"]
        # the zig-zag row's block is its own: (N / 2p)^2 entries of G = 4 float32 heads, not the contiguous (N / p)^2
        assert recorded[str(p)]["ring attention (causal, zigzag)"]["largest_allocation_bytes"] == 4 * 4 * (256 // (2 * p)) ** 2
