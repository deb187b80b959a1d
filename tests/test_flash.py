"""utils.efficient_attention (generated from chapter 08): the tiled, online-softmax attention against
torch.nn.functional.scaled_dot_product_attention, its memory, and the FLOP formulas."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from utils.efficient_attention import (
    attention_flops,
    layer_costs,
    online_softmax,
    peak_bytes,
    restricted_attention_flops,
    rnn_flops,
    tiled_attention,
)

TOL = 1e-5  # float32, outputs and gradients


@pytest.fixture(autouse=True)
def one_thread():
    """One CPU thread: two OpenMP threads on a busy machine can stall badly (see DESIGN.md)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _inputs(device, shape, dtype=torch.float32, seed=0):
    B, H, n_q, n_k, d, d_v = shape
    gen = torch.Generator().manual_seed(seed)
    sizes = [(B, H, n_q, d), (B, H, n_k, d), (B, H, n_k, d_v), (B, H, n_q, d_v)]
    return [torch.randn(*s, generator=gen, dtype=dtype).to(device) for s in sizes]


def _compare(device, shape, is_causal, block_q, block_k, scale=None, dtype=torch.float32):
    q, k, v, grad_out = _inputs(device, shape, dtype)
    results = []
    for fn in (
        lambda a, b, c: tiled_attention(
            a, b, c, is_causal=is_causal, scale=scale, block_q=block_q, block_k=block_k
        ),
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=is_causal, scale=scale),
    ):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        out = fn(*leaves)
        results.append([out, *torch.autograd.grad(out, leaves, grad_out)])
    for ours, ref in zip(*results):
        assert ours.device == ref.device and ours.dtype == ref.dtype and ours.shape == ref.shape
    return max((ours - ref).abs().max().item() for ours, ref in zip(*results))


CASES = [
    ((2, 3, 37, 53, 16, 8), 8, 16),  # ragged tiles, N_q != N_k, d_v != d
    ((1, 2, 300, 300, 64, 64), 64, 128),
    ((1, 1, 5, 5, 4, 4), 2, 3),
    ((1, 4, 256, 256, 32, 32), 512, 512),  # a single tile
    ((2, 2, 64, 64, 8, 8), 1, 1),  # one score per tile
]


@pytest.mark.parametrize("shape,block_q,block_k", CASES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_matches_sdpa_outputs_and_gradients_cpu(shape, block_q, block_k, is_causal):
    assert _compare("cpu", shape, is_causal, block_q, block_k) < TOL


def test_custom_scale_and_float64():
    assert _compare("cpu", (2, 2, 33, 40, 16, 16), False, 8, 8, scale=0.3) < TOL
    assert _compare("cpu", (1, 2, 50, 50, 16, 16), True, 16, 8, dtype=torch.float64) < 1e-12


def test_three_dimensional_inputs_and_gradcheck():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 9, 4, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda a, b, c: tiled_attention(a, b, c, block_q=4, block_k=3), (q, k, v))
    assert torch.autograd.gradcheck(
        lambda a, b, c: tiled_attention(a, b, c, is_causal=True, block_q=2, block_k=5), (q, k, v)
    )


def test_online_softmax_equals_softmax_for_huge_scores():
    scores = torch.randn(5, 300, generator=torch.Generator().manual_seed(2)) * 50
    for block in (1, 7, 300, 1000):
        assert torch.allclose(online_softmax(scores, block), torch.softmax(scores, -1), atol=1e-6)


def test_training_memory_is_linear_and_small():
    def training_peak(fn, n):
        q, k, v = (torch.randn(1, 1, n, 64, requires_grad=True) for _ in range(3))
        return peak_bytes(lambda: fn(q, k, v).sum().backward())

    def naive(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1) @ v

    tiled_1k, tiled_2k = training_peak(tiled_attention, 1024), training_peak(tiled_attention, 2048)
    naive_2k = training_peak(naive, 2048)
    sdpa_2k = training_peak(F.scaled_dot_product_attention, 2048)
    assert tiled_2k < 2 * tiled_1k  # linear (plus constant tiles), not quadratic
    assert tiled_2k < 0.15 * naive_2k and tiled_2k < 3 * sdpa_2k


def test_peak_bytes_is_exact_for_naive_forward():
    n, d = 512, 64
    q, k, v = (torch.randn(1, 1, n, d) for _ in range(3))

    def naive(q, k, v):
        scores = q @ k.transpose(-2, -1) / 8.0  # (1, 1, n, n), alive until the function returns
        return torch.softmax(scores, -1) @ v

    # scores and weights (two n×n tensors) and the (n, d) output, 4 bytes each
    assert peak_bytes(lambda: naive(q, k, v)) == 4 * (2 * n * n + n * d)


def test_flop_formulas_match_pytorch_counter():
    n, d = 32, 16
    x = torch.randn(n, 1, d)
    with FlopCounterMode(display=False) as counter:
        nn.RNN(d, d, bias=False)(x)
    assert counter.get_total_flops() == rnn_flops(n, d)
    costs = layer_costs(n, d, k=3, r=4)
    assert costs["self-attention"]["flops"] == attention_flops(n, d) == 8 * n * d * d + 4 * n * n * d
    assert costs["restricted r=4"]["flops"] == restricted_attention_flops(n, d, 4)
    assert costs["conv k=3"]["path"] == math.ceil((n - 1) / 2) and costs["RNN"]["sequential"] == n
    # attention and LSTM cost the same at n = 2d
    assert layer_costs(2 * d, d)["self-attention"]["flops"] == layer_costs(2 * d, d)["LSTM"]["flops"]


def test_widget_summary_is_pure_and_consistent():
    from utils.widgets.complexity import complexity_summary

    summary = complexity_summary(1024, 512)
    assert summary["crossover_n"] == 1024 and summary["attention_over_lstm"] == 1.0
    assert (
        complexity_summary(64, 512)["attention_over_lstm"]
        < 1
        < complexity_summary(4096, 512)["attention_over_lstm"]
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("is_causal", [False, True])
def test_matches_sdpa_on_cuda(is_causal):
    # TF32 matmuls would loosen float32 agreement; the comparison is in strict float32.
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for shape, block_q, block_k in CASES:
            assert _compare("cuda", shape, is_causal, block_q, block_k) < TOL
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
