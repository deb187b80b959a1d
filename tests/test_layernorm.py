"""utils.layernorm (generated from chapter 07) against nn.LayerNorm and nn.RMSNorm."""

import math

import pytest
import torch
import torch.nn as nn

from utils.layernorm import LayerNorm, NormStack, ResidualBlock, RMSNorm, reversal_batch

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=GPU)]


def _randomise(ours: nn.Module, theirs: nn.Module) -> None:
    with torch.no_grad():
        for p_ours, p_theirs in zip(ours.parameters(), theirs.parameters()):
            p_ours.normal_()
            p_theirs.copy_(p_ours)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(4, 10, 64), (3, 8), (1, 1, 5)])
def test_layer_norm_matches_pytorch(device, shape):
    d = shape[-1]
    x = (3.0 * torch.randn(*shape, generator=torch.Generator().manual_seed(0)) + 1.5).to(device)
    ours, theirs = LayerNorm(d).to(device), nn.LayerNorm(d).to(device)
    _randomise(ours, theirs)
    out = ours(x)
    assert out.device == x.device and out.shape == x.shape
    assert (out - theirs(x)).abs().max().item() < 1e-5


def test_layer_norm_without_affine_and_constant_input():
    bare = LayerNorm(8, elementwise_affine=False)
    assert list(bare.parameters()) == []
    assert (bare(torch.full((2, 8), 7.0)) == 0).all()


def test_layer_norm_gradcheck():
    gen = torch.Generator().manual_seed(1)
    norm = LayerNorm(6).double()
    with torch.no_grad():
        norm.weight.normal_(generator=gen)
        norm.bias.normal_(generator=gen)
    x = torch.randn(3, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(norm, (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_matches_pytorch(device):
    x = torch.randn(4, 7, 32, generator=torch.Generator().manual_seed(2)).to(device)
    ours, theirs = RMSNorm(32, eps=1e-6).to(device), nn.RMSNorm(32, eps=1e-6).to(device)
    _randomise(ours, theirs)
    assert (ours(x) - theirs(x)).abs().max().item() < 1e-5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first", [False, True])
def test_blocks_and_stack_shapes(device, norm_first):
    block = ResidualBlock(32, 4, 128, norm_first).to(device)
    x = torch.randn(2, 5, 32, device=device)
    assert block(x).shape == (2, 5, 32)
    stack = NormStack(16, 8, 32, 4, 3, norm_first).to(device)
    tokens, targets = reversal_batch(4, 8, 16, torch.Generator().manual_seed(0), device)
    assert torch.equal(targets, tokens.flip(1)) and tokens.device.type == torch.device(device).type
    logits = stack(tokens)
    assert logits.shape == (4, 8, 16) and logits.device == tokens.device
    # Post-LN ends in a LayerNorm inside the last block; Pre-LN adds a final one.
    assert isinstance(stack.final_norm, LayerNorm) == norm_first
    assert math.isfinite(logits.sum().item())
