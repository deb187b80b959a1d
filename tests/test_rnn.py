"""utils.rnn (generated from chapter 01) against torch.nn.RNN, plus the chapter's exact claims."""

import pytest
import torch
import torch.nn as nn

from utils.rnn import RNN, attention_layer, first_token_task, gradient_norms, graph_depth

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _check_matches_nn_rnn(device: str, dtype: torch.dtype, tol: float) -> None:
    torch.manual_seed(0)
    reference = nn.RNN(7, 12, batch_first=True).to(device, dtype)
    ours = RNN.from_torch(reference)
    x = torch.randn(3, 20, 7, device=device, dtype=dtype)  # (B, N, d_x)
    h0 = torch.randn(1, 3, 12, device=device, dtype=dtype)  # (layers, B, d_h)
    with torch.no_grad():
        for init in (None, h0):
            ref_states, ref_last = reference(x, init)
            states, last = ours(x, None if init is None else init[0])
            assert states.device == x.device and states.dtype == dtype
            assert (states - ref_states).abs().max().item() < tol
            assert (last - ref_last[0]).abs().max().item() < tol


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.float64, 1e-12)])
def test_rnn_matches_nn_rnn_cpu(dtype, tol):
    _check_matches_nn_rnn("cpu", dtype, tol)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_rnn_matches_nn_rnn_gpu(dtype, tol):
    _check_matches_nn_rnn("cuda", dtype, tol)


def test_gradients_match_nn_rnn():
    torch.manual_seed(1)
    reference = nn.RNN(5, 8, batch_first=True).double()
    ours = RNN.from_torch(reference)
    x = torch.randn(2, 15, 5, dtype=torch.float64)  # (B, N, d_x)
    reference(x)[0].pow(2).sum().backward()
    ours(x)[0].pow(2).sum().backward()
    assert torch.allclose(ours.cell.W_hh.grad, reference.weight_hh_l0.grad, atol=1e-10)
    assert torch.allclose(ours.cell.W_xh.grad, reference.weight_ih_l0.grad, atol=1e-10)
    assert torch.allclose(ours.cell.b.grad, reference.bias_ih_l0.grad, atol=1e-10)


def test_graph_depth_linear_for_rnn_constant_for_attention():
    torch.manual_seed(2)
    rnn = RNN(4, 4)
    w_qkv = torch.randn(4, 12)
    depths = {}
    for n in (5, 10, 20):
        x = torch.randn(1, n, 4, requires_grad=True)  # (B, N, d)
        depths[n] = (graph_depth(rnn(x)[1]), graph_depth(attention_layer(x, w_qkv)))
    assert depths[20][0] - depths[10][0] == 2 * (depths[10][0] - depths[5][0]) > 0
    assert depths[5][1] == depths[10][1] == depths[20][1]


def test_gradient_norms_respect_the_bound():
    for rho in (0.7, 1.0, 1.3, 2.0):
        norms = gradient_norms(40, rho)
        steps = torch.arange(1, 41, dtype=torch.float64)
        assert norms.shape == (40,)
        assert abs(norms[-1].item() - 1.0) < 1e-12
        assert (norms <= rho ** (40 - steps) * (1 + 1e-9)).all()


def test_first_token_task():
    tokens, labels = first_token_task(16, 10, vocab=5, generator=torch.Generator().manual_seed(0))
    assert tokens.shape == (16, 10) and labels.shape == (16,)
    assert torch.equal(labels, tokens[:, 0]) and tokens.min() >= 0 and tokens.max() < 5
