"""utils.rnn (generated from chapter 01) against torch.nn.RNN, plus the chapter's exact claims."""

import pytest
import torch
import torch.nn as nn

from utils.rnn import (
    RNN,
    RNNCell,
    attention_layer,
    bptt_regimes,
    build_recall_model,
    first_token_task,
    gradient_norms,
    graph_depth,
    train_classifier,
)
from utils.tolerances import assert_close

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _check_matches_nn_rnn(device: str, dtype: torch.dtype, bias: bool = True) -> None:
    torch.manual_seed(0)
    reference = nn.RNN(7, 12, batch_first=True, bias=bias).to(device, dtype)
    ours = RNN.from_torch(reference)
    x = torch.randn(3, 20, 7, device=device, dtype=dtype)  # (B, N, d_x)
    h0 = torch.randn(1, 3, 12, device=device, dtype=dtype)  # (layers, B, d_h)
    with torch.no_grad():
        for init in (None, h0):
            ref_states, ref_last = reference(x, init)
            states, last = ours(x, None if init is None else init[0])
            assert states.device == x.device and states.dtype == dtype
            assert_close(states, ref_states, what="states vs nn.RNN", kernel="cudnn")
            assert_close(last, ref_last[0], what="last state vs nn.RNN", kernel="cudnn")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_rnn_matches_nn_rnn_cpu(dtype, bias):
    _check_matches_nn_rnn("cpu", dtype, bias)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rnn_matches_nn_rnn_gpu(dtype):
    _check_matches_nn_rnn("cuda", dtype)


@pytest.mark.parametrize(
    "config, argument",
    [
        (dict(nonlinearity="relu"), "nonlinearity"),
        (dict(num_layers=2), "num_layers"),
        (dict(bidirectional=True), "bidirectional"),
        (dict(batch_first=False), "batch_first"),
    ],
)
def test_from_torch_refuses_what_it_does_not_compute(config, argument):
    options = {"batch_first": True, **config}
    with pytest.raises(ValueError, match=rf"reference\.{argument} must be .*, got"):
        RNN.from_torch(nn.RNN(3, 5, **options))


def test_from_torch_refuses_other_recurrent_modules():
    with pytest.raises(TypeError, match="reference must be an nn.RNN, got LSTM"):
        RNN.from_torch(nn.LSTM(3, 5, batch_first=True))


def test_from_torch_without_bias_copies_a_zero_bias():
    ours = RNN.from_torch(nn.RNN(3, 5, batch_first=True, bias=False))
    assert torch.equal(ours.cell.b.detach(), torch.zeros(5))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: RNNCell(0, 4), "d_x must be an int >= 1, got 0"),
        (lambda: RNN(3, 4)(torch.randn(2, 5)), r"x must be a tensor of shape \(B, N, d_x\)"),
        (lambda: RNN(3, 4)(torch.randn(2, 5, 6)), r"x_t must have shape \(B, d_x=3\), got \(2, 6\)"),
        (lambda: RNN(3, 4)(torch.randn(2, 0, 3)), "at least one time step"),
        (lambda: RNN(3, 4)(torch.randn(2, 5, 3), torch.zeros(3, 4)), r"h_prev must have shape \(B=2, d_h=4\)"),
        (lambda: gradient_norms(0, 1.0), "length must be an int >= 1, got 0"),
        (lambda: gradient_norms(10, -1.0), "rho must be a finite number > 0"),
        (lambda: gradient_norms(10, 1.0, input_scale=float("nan")), "input_scale must be"),
        (lambda: first_token_task(4, 5, vocab=1), "vocab must be an int >= 2"),
        (lambda: attention_layer(torch.randn(1, 3, 4), torch.randn(4, 4)), r"w_qkv \(d, 3d\)"),
        (lambda: graph_depth(torch.randn(3)), "has no grad_fn"),
        (lambda: build_recall_model("GRU", 8), "name must be one of"),
    ],
)
def test_invalid_input_gives_a_clear_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: RNN(3, 4)(torch.randn(2, 5, 3, dtype=torch.float64)),
         r"x must have the weights' dtype and device \(torch.float32 on cpu\), got torch.float64 on cpu"),
        (lambda: RNN(3, 4)(torch.ones(2, 5, 3, dtype=torch.int64)), r"x must have .* got torch.int64 on cpu"),
        (lambda: RNN(3, 4)(torch.empty(2, 5, 3, device="meta")), r"x must have .* got torch.float32 on meta"),
        (lambda: RNN(3, 4)(torch.randn(2, 5, 3), torch.zeros(2, 4, dtype=torch.float64)),
         r"h_prev must have .* got torch.float64"),
        (lambda: RNNCell(3, 4)(torch.randn(2, 3).half(), torch.zeros(2, 4)), r"x_t must have .* got torch.float16"),
    ],
)
def test_input_unlike_the_weights_names_the_argument_dtype_and_device(make, message):
    """Issue 26: float64, int64 or meta input gave PyTorch's matmul traceback; now the argument is named."""
    with pytest.raises(TypeError, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: RNNCell(3, 2.5), "d_h must be an int, got float 2.5"),
        (lambda: RNN(True, 4), "d_x must be an int, got bool True"),
        (lambda: first_token_task(4.0, 5), "batch must be an int, got float 4.0"),
    ],
)
def test_a_size_that_is_not_an_int_is_a_type_error(make, message):
    """Issue 26: chapter 1 checks its sizes with the course's one check, utils.validate.int_at_least."""
    with pytest.raises(TypeError, match=message):
        make()


def test_bptt_regimes_returns_plain_numbers_and_the_bound_holds():
    regimes = bptt_regimes(seed=3, length=30)
    assert set(regimes) == {"worst_over_bound", "rate_below", "ratio_at_one", "ratio_above", "rho_growth_100"}
    assert all(isinstance(v, float) for v in regimes.values())
    assert regimes["worst_over_bound"] <= 1 + 1e-9


def test_train_classifier_records_the_history():
    model = build_recall_model("attention", 4)
    gen = torch.Generator().manual_seed(0)
    eval_data = first_token_task(16, 4, generator=torch.Generator().manual_seed(1))
    history = train_classifier(model, lambda: first_token_task(8, 4, generator=gen), 10, eval_data, eval_every=5)
    assert history["step"] == [0, 5, 10] and len(history["accuracy"]) == 3


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
