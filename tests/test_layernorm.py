"""utils.layernorm (generated from chapter 07) against nn.LayerNorm and nn.RMSNorm, and its input checks."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.layernorm import (
    LayerNorm,
    NormStack,
    RMSNorm,
    init_gradient_norms,
    position_reversal_batch,
    train_norm_stack,
    transformer_lr,
)
from utils.tolerances import assert_close
from utils.transformer_blocks import EncoderBlock

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=GPU)]


def _randomise(ours: nn.Module, theirs: nn.Module) -> None:
    with torch.no_grad():
        for p_ours, p_theirs in zip(ours.parameters(), theirs.parameters()):
            p_ours.normal_()
            p_theirs.copy_(p_ours)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, normalized", [((4, 10, 64), 64), ((3, 8), 8), ((1, 1, 5), 5), ((2, 6, 32), (6, 32))])
def test_layer_norm_matches_pytorch(device, shape, normalized):
    x = (3.0 * torch.randn(*shape, generator=torch.Generator().manual_seed(0)) + 1.5).to(device)
    ours, theirs = LayerNorm(normalized).to(device), nn.LayerNorm(normalized).to(device)
    _randomise(ours, theirs)
    out = ours(x)
    assert out.device == x.device and out.shape == x.shape
    assert ours.weight.shape == theirs.weight.shape
    assert_close(out, theirs(x), what=f"LayerNorm({normalized})")


@pytest.mark.parametrize("device", DEVICES)
def test_layer_norm_without_bias_and_eps(device):
    x = torch.randn(4, 16, device=device)
    ours, theirs = LayerNorm(16, eps=1e-2, bias=False).to(device), nn.LayerNorm(16, eps=1e-2, bias=False).to(device)
    _randomise(ours, theirs)
    assert ours.bias is None
    assert_close(ours(x), theirs(x))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_accumulates_in_float32(device, dtype):
    x = (300 * torch.randn(8, 64, generator=torch.Generator().manual_seed(1))).to(device, dtype)
    for ours, theirs in ((LayerNorm(64), nn.LayerNorm(64)), (RMSNorm(64), nn.RMSNorm(64))):
        ours, theirs = ours.to(device), theirs.to(device)
        _randomise(ours, theirs)
        out = ours(x)
        assert out.dtype == dtype and torch.isfinite(out).all() and not (out == 0).all()
        assert_close(out, theirs(x), what=f"{type(ours).__name__} in {dtype}")
    # bfloat16 error against float64, no larger than PyTorch's own
    x = (3 * torch.randn(1000, 64, generator=torch.Generator().manual_seed(2)) + 1).to(device, torch.bfloat16)
    exact = F.layer_norm(x.double(), (64,))
    ours_err = (LayerNorm(64, elementwise_affine=False).to(device)(x).double() - exact).abs().max()
    torch_err = (F.layer_norm(x, (64,)).double() - exact).abs().max()
    assert ours_err <= 1.01 * torch_err


def test_layer_norm_without_affine_and_constant_input():
    bare = LayerNorm(8, elementwise_affine=False)
    assert list(bare.parameters()) == []
    assert (bare(torch.full((2, 8), 7.0)) == 0).all()


@pytest.mark.parametrize(
    "make, x, error, fragment",
    [
        (lambda: LayerNorm(8), torch.randn(3, 7), ValueError, r"end in the normalised shape \(8,\), got shape \(3, 7\)"),
        (lambda: LayerNorm(8), torch.randn(3, 1), ValueError, "normalised shape"),
        (lambda: LayerNorm((6, 32)), torch.randn(2, 5, 32), ValueError, r"\(6, 32\)"),
        (lambda: LayerNorm(8), torch.randn(8).long(), TypeError, "floating-point"),
        (lambda: RMSNorm(8), [1.0] * 8, TypeError, "torch.Tensor"),
        (lambda: RMSNorm(4), torch.randn(2, 8), ValueError, "normalised shape"),
        # the input on another device than the parameters (meta stands in for a GPU on a CPU-only machine)
        (lambda: LayerNorm(8), torch.empty(3, 8, device="meta"), ValueError, r"x is on meta but the layer's weight \(gamma\) is on cpu"),
        (lambda: RMSNorm(8), torch.empty(3, 8, device="meta"), ValueError, r"x is on meta but the layer's weight \(gamma\) is on cpu"),
    ],
)
def test_wrong_inputs_raise(make, x, error, fragment):
    with pytest.raises(error, match=fragment):
        make()(x)


@pytest.mark.parametrize("bad, error, message", [
    (0, ValueError, "normalized_shape must be an int >= 1, got 0"),
    (-3, ValueError, "normalized_shape must be an int >= 1, got -3"),
    ((), ValueError, "normalized_shape must be a positive int or a non-empty tuple"),
    ((4, 0), ValueError, "normalized_shape must be an int >= 1, got 0"),
    (2.5, TypeError, "normalized_shape must be an int, got float 2.5"),
    ("8", TypeError, "normalized_shape must be an int, got str '8'"),
    (True, TypeError, "normalized_shape must be an int, got bool True"),
    ((4, 2.0), TypeError, "normalized_shape must be an int, got float 2.0"),
])
def test_bad_normalized_shape_raises(bad, error, message):
    with pytest.raises(error, match=message):
        LayerNorm(bad)
    with pytest.raises(error, match=message):
        RMSNorm(bad)


def test_bad_eps_raises():
    with pytest.raises(ValueError, match="eps"):
        LayerNorm(8, eps=-1e-5)
    with pytest.raises(ValueError, match="eps"):
        RMSNorm(8, eps="small")


def test_layer_norm_gradcheck():
    gen = torch.Generator().manual_seed(1)
    norm = LayerNorm((2, 3)).double()
    with torch.no_grad():
        norm.weight.normal_(generator=gen)
        norm.bias.normal_(generator=gen)
    x = torch.randn(4, 2, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(norm, (x,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("eps", [None, 1e-6])
def test_rms_norm_matches_pytorch(device, eps):
    x = torch.randn(4, 7, 32, generator=torch.Generator().manual_seed(2)).to(device)
    ours, theirs = RMSNorm(32, eps=eps).to(device), nn.RMSNorm(32, eps=eps).to(device)
    _randomise(ours, theirs)
    assert_close(ours(x), theirs(x))
    two = torch.randn(3, 4, 8, device=device)
    ours2, theirs2 = RMSNorm((4, 8)).to(device), nn.RMSNorm((4, 8)).to(device)
    _randomise(ours2, theirs2)
    assert_close(ours2(two), theirs2(two))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first", [False, True])
def test_stack_uses_chapter_6_blocks(device, norm_first):
    stack = NormStack(16, 8, 32, 4, 3, norm_first).to(device)
    assert all(isinstance(b, EncoderBlock) and b.norm_first == norm_first for b in stack.blocks)
    tokens, targets = position_reversal_batch(4, 8, 16, torch.Generator().manual_seed(0), device)
    assert torch.equal(targets, tokens.flip(1)) and tokens.device.type == torch.device(device).type
    logits = stack(tokens)
    assert logits.shape == (4, 8, 16) and logits.device == tokens.device
    # Post-LN ends in a LayerNorm inside the last block; Pre-LN adds a final one.
    assert isinstance(stack.final_norm, LayerNorm) == norm_first
    assert math.isfinite(logits.sum().item())
    with pytest.raises(ValueError, match="max_len"):
        stack(torch.zeros(2, 9, dtype=torch.long, device=device))
    with pytest.raises(ValueError, match="torch.long"):
        stack(tokens.float())


def test_transformer_lr_is_the_papers_schedule():
    peak = transformer_lr(4000, 512)
    assert math.isclose(peak, 512**-0.5 * 4000**-0.5)
    assert math.isclose(transformer_lr(1, 512), 512**-0.5 * 4000**-1.5)  # linear from step 1
    assert math.isclose(transformer_lr(2000, 512), peak / 2) and math.isclose(transformer_lr(16000, 512), peak / 2)
    assert max(transformer_lr(s, 512) for s in range(1, 20000, 7)) <= peak
    for bad in (0, -1):
        with pytest.raises(ValueError, match=f"step must be an int >= 1, got {bad}"):
            transformer_lr(bad, 512)
    with pytest.raises(TypeError, match="step must be an int, got float 1.5"):
        transformer_lr(1.5, 512)
    with pytest.raises(ValueError, match="warmup must be an int >= 1, got 0"):
        transformer_lr(10, 512, 0)
    with pytest.raises(TypeError, match="d_model must be an int, got bool True"):
        transformer_lr(10, True)


def test_train_norm_stack_records_and_validates():
    h = train_norm_stack(2, True, 1e-2, warmup=3, steps=5, schedule="paper", probe_steps=2)
    assert len(h["loss"]) == len(h["grad_first"]) == 5 and len(h["spread"]) == 2 and len(h["test_accuracy"]) == 1
    assert all(0.0 <= s <= 1.0 for s in h["spread"])
    with pytest.raises(ValueError, match="schedule"):
        train_norm_stack(2, True, 1e-2, schedule="cosine", steps=1)
    with pytest.raises(ValueError, match="warmup must be an int >= 1, got 0"):
        train_norm_stack(2, True, 1e-2, warmup=0, schedule="paper", steps=1)
    with pytest.raises(TypeError, match="warmup must be an int, got float 2.0"):
        train_norm_stack(2, True, 1e-2, warmup=2.0, steps=1)
    with pytest.raises(ValueError, match="lr"):
        train_norm_stack(2, True, 0.0, steps=1)


def test_init_gradient_norms_shape():
    g = init_gradient_norms(3, False, seed=0, d_model=16, inits=1, batch=4)
    assert g.shape == (3,) and (g > 0).all()


def test_report_cases_where_the_library_is_closer_to_float64_than_nn_layernorm():
    """Issue 26's mismatches 5-7: where the library and nn.LayerNorm differ, the library is the one nearer the
    float64 result (it accumulates in float32 and subtracts the mean before squaring)."""
    # LayerNorm(1): the output is the bias whatever x is, so dx is exactly 0; nn.LayerNorm leaves rounding noise.
    x = torch.randn(7, 1, generator=torch.Generator().manual_seed(0), requires_grad=True)
    LayerNorm(1)(x).sum().backward()
    assert torch.equal(x.grad, torch.zeros_like(x))
    # float16 input near 6e4 (close to float16's largest value): the gain's gradient against float64.
    x = (100 * torch.randn(4, 64, generator=torch.Generator().manual_seed(1)) + 6e4).half()
    errors = {}
    for name, layer in (("ours", LayerNorm(64).half()), ("torch", nn.LayerNorm(64).half()), ("f64", LayerNorm(64).double())):
        xi = (x.double() if name == "f64" else x).clone().requires_grad_(True)
        layer(xi).pow(2).sum().backward()
        errors[name] = layer.weight.grad.double()
    ours_err = (errors["ours"] - errors["f64"]).abs().max()
    torch_err = (errors["torch"] - errors["f64"]).abs().max()
    assert ours_err <= torch_err, (ours_err, torch_err)
    # bfloat16 input near 1e6 (mismatch 6; library audit: no test pinned it): output and input gradient.
    x = (100 * torch.randn(4, 64, generator=torch.Generator().manual_seed(0)) + 1e6).bfloat16()
    results = {}
    for name, layer in (("ours", LayerNorm(64).bfloat16()), ("torch", nn.LayerNorm(64).bfloat16()),
                        ("f64", nn.LayerNorm(64).double())):
        xi = (x.double() if name == "f64" else x).clone().requires_grad_(True)
        y = layer(xi)
        y.sum().backward()
        results[name] = (y.double(), xi.grad.double())
    for i, what in enumerate(("y", "dx")):
        ours_err = (results["ours"][i] - results["f64"][i]).abs().max()
        torch_err = (results["torch"][i] - results["f64"][i]).abs().max()
        assert ours_err <= torch_err, (what, ours_err, torch_err)
