"""utils.positional (generated from solutions/05): encodings, shift matrix, RoPE, ALiBi; CPU and CUDA."""

from __future__ import annotations

import math

import pytest
import torch

from utils.multihead import MultiHeadAttention
from utils.positional import (
    LearnedPositionalEncoding,
    PositionProbe,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    recent_digit_batch,
    shift_matrix,
    sinusoidal_encoding,
)

DEVICES = [torch.device("cpu")] + (
    [torch.device("cuda")] if torch.cuda.is_available() else []
)


def test_sinusoidal_formula_and_norm() -> None:
    pe = sinusoidal_encoding(50, 16, dtype=torch.float64)
    pos, i = 7, 3
    omega = 10000 ** (-2 * i / 16)
    assert math.isclose(pe[pos, 2 * i].item(), math.sin(pos * omega), abs_tol=1e-12)
    assert math.isclose(pe[pos, 2 * i + 1].item(), math.cos(pos * omega), abs_tol=1e-12)
    assert torch.allclose(pe.norm(dim=-1), torch.full((50,), math.sqrt(8.0), dtype=torch.float64))


@pytest.mark.parametrize("k", [1, 4, 33, -9])
def test_shift_matrix(k: int) -> None:
    pe = sinusoidal_encoding(300, 32, dtype=torch.float64)
    m_k = shift_matrix(k, 32)
    lo = max(0, -k)
    assert (pe[lo + k : 250 + k] - pe[lo:250] @ m_k.T).abs().max() < 1e-10
    assert torch.allclose(m_k @ m_k.T, torch.eye(32, dtype=torch.float64))


def _rope_relative(device: torch.device) -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 16, generator=gen, dtype=torch.float64).to(device)
    k = torch.randn(1, 16, generator=gen, dtype=torch.float64).to(device)
    positions = torch.arange(100, device=device)
    scores = apply_rope(q.expand(100, -1), positions) @ apply_rope(k.expand(100, -1), positions).T
    for offset in (-10, 0, 3, 40):
        diagonal = torch.diagonal(scores, offset)
        assert (diagonal.max() - diagonal.min()).item() < 1e-9
    x = torch.randn(2, 3, 10, 8, device=device)
    rotated = apply_rope(x)
    assert rotated.device == x.device and rotated.dtype == x.dtype
    assert torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-5)  # rotations keep length
    assert torch.equal(rotated[..., 0, :], x[..., 0, :])  # position 0: no rotation


def test_rope_cpu() -> None:
    _rope_relative(torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_rope_cuda() -> None:
    _rope_relative(torch.device("cuda"))


def test_alibi() -> None:
    slopes = alibi_slopes(8)
    assert torch.allclose(slopes, torch.tensor([2.0 ** (-(h + 1)) for h in range(8)]))
    bias = alibi_bias(8, 5, 5)
    assert bias.shape == (8, 5, 5)
    assert bias[0, 4, 1].item() == pytest.approx(-0.5 * 3)
    assert (torch.diagonal(bias, dim1=-2, dim2=-1) == 0).all()


def test_learned_table_has_no_vector_past_max_len() -> None:
    learned = LearnedPositionalEncoding(8, 4)
    assert learned(torch.zeros(2, 8, 4)).shape == (2, 8, 4)
    with pytest.raises(IndexError):
        learned(torch.zeros(2, 9, 4))


def test_permutation_equivariance_without_positions() -> None:
    torch.manual_seed(0)
    layer = MultiHeadAttention(16, 2).eval()
    x = torch.randn(1, 6, 16)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    with torch.no_grad():
        assert torch.allclose(layer(x[:, perm])[0], layer(x)[0][:, perm], atol=1e-6)


@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("encoding", ["sinusoidal", "learned", "rope", "alibi"])
def test_probe_runs_on_device(encoding: str, device: torch.device) -> None:
    tokens, targets = recent_digit_batch(4, 24, torch.Generator().manual_seed(0), device=device)
    model = PositionProbe(encoding).to(device)
    logits = model(tokens)
    assert logits.shape == (4, 24, 12) and logits.device.type == device.type
    assert targets.device.type == device.type
