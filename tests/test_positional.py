"""utils.positional (generated from solutions/05): encodings, shift matrix, RoPE, ALiBi; CPU and CUDA; edge cases."""

from __future__ import annotations

import math

import pytest
import torch

from utils.multihead import MultiHeadAttention
from utils.positional import (
    ENCODINGS,
    LearnedPositionalEncoding,
    PositionalSelfAttention,
    PositionProbe,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    extrapolation_experiment,
    recent_digit_batch,
    rope_angles,
    rotation_2d,
    shift_matrix,
    sinusoidal_encoding,
    sinusoidal_frequencies,
)
from utils.tolerances import assert_close

DEVICES = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])


def test_sinusoidal_formula_and_norm() -> None:
    pe = sinusoidal_encoding(50, 16, dtype=torch.float64)
    pos, i = 7, 3
    omega = 10000 ** (-2 * i / 16)
    assert math.isclose(pe[pos, 2 * i].item(), math.sin(pos * omega), abs_tol=1e-12)
    assert math.isclose(pe[pos, 2 * i + 1].item(), math.cos(pos * omega), abs_tol=1e-12)
    assert torch.allclose(pe.norm(dim=-1), torch.full((50,), math.sqrt(8.0), dtype=torch.float64))
    assert sinusoidal_encoding(0, 8).shape == (0, 8)


def test_sinusoidal_angles_are_exact_at_large_positions() -> None:
    pe = sinusoidal_encoding(100_001, 64)  # float32 result, float64 angles
    omega = 10000 ** (-2 * 5 / 64)
    assert abs(pe[100_000, 10].item() - math.sin(100_000 * omega)) < 1e-6
    assert pe.dtype == torch.float32
    assert sinusoidal_encoding(3, 4, dtype=torch.bfloat16).dtype == torch.bfloat16


@pytest.mark.parametrize(
    "call, error, fragment",
    [
        (lambda: sinusoidal_encoding(10, 7), ValueError, "d_model must be even"),
        (lambda: sinusoidal_encoding(10, 0), ValueError, "d_model must be an int >= 1"),
        (lambda: sinusoidal_encoding(-1, 8), ValueError, "length must be an int >= 0"),
        (lambda: sinusoidal_encoding(10.0, 8), TypeError, "length must be an int"),
        (lambda: sinusoidal_encoding(10, 8, dtype=torch.int64), TypeError, "dtype must be a floating-point"),
        (lambda: sinusoidal_encoding(10, 8, base=0.0), ValueError, "base must be a positive number"),
        (lambda: sinusoidal_frequencies(9), ValueError, "d_model must be even"),
        (lambda: shift_matrix(1.5, 8), TypeError, "k must be an int"),
        (lambda: apply_rope(torch.randn(4, 7)), ValueError, "d_k must be even"),
        (lambda: apply_rope(torch.arange(8).reshape(2, 4)), ValueError, "floating-point tensor"),
        (lambda: apply_rope(torch.randn(8)), ValueError, "(..., T, d_k)"),
        (lambda: apply_rope(torch.randn(5, 8), torch.arange(4)), ValueError, "(T,) = (5,)"),
        (lambda: apply_rope(torch.randn(5, 8), scale=0.0), ValueError, "scale must be a positive number"),
        (lambda: rope_angles(torch.zeros(2, 3), 8), ValueError, "1-D tensor of positions"),
        (lambda: alibi_slopes(0), ValueError, "num_heads must be an int >= 1"),
        (lambda: alibi_bias(4, -1, 3), ValueError, "t_q must be an int >= 0"),
        (lambda: LearnedPositionalEncoding(0, 4), ValueError, "max_len"),
        (lambda: LearnedPositionalEncoding(8, 4)(torch.zeros(2, 3, 5)), ValueError, "d_model=4"),
        (lambda: recent_digit_batch(4, 10, 0), TypeError, "generator"),
        (lambda: recent_digit_batch(4, 0, torch.Generator()), ValueError, "length must be an int >= 1"),
        (lambda: PositionProbe("relative"), ValueError, "encoding must be one of"),
        (lambda: PositionalSelfAttention(16, 2, "none"), ValueError, "encoding must be one of"),
    ],
)
def test_errors_name_the_argument(call, error, fragment) -> None:
    with pytest.raises(error) as info:
        call()
    assert fragment in str(info.value)


@pytest.mark.parametrize("k", [1, 4, 33, -9])
def test_shift_matrix(k: int) -> None:
    pe = sinusoidal_encoding(300, 32, dtype=torch.float64)
    m_k = shift_matrix(k, 32)
    lo = max(0, -k)
    assert (pe[lo + k : 250 + k] - pe[lo:250] @ m_k.T).abs().max() < 1e-10
    assert torch.allclose(m_k @ m_k.T, torch.eye(32, dtype=torch.float64))
    omega = sinusoidal_frequencies(32)
    assert torch.allclose(m_k[4:6, 4:6], rotation_2d(-k * omega[2]))  # block i is R(-k w_i)


def test_rotation_convention_is_counter_clockwise() -> None:
    quarter = rotation_2d(torch.tensor(math.pi / 2, dtype=torch.float64))
    assert torch.allclose(quarter @ torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64))
    # apply_rope turns pair 0 of e_0 at position 1 by theta_0 = 1 rad, counter-clockwise.
    e0 = torch.zeros(1, 8, dtype=torch.float64)
    e0[0, 0] = 1.0
    turned = apply_rope(e0, torch.tensor([1]))[0]
    assert torch.allclose(turned[:2], torch.tensor([math.cos(1.0), math.sin(1.0)], dtype=torch.float64))


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
    # explicit positions: a slice of a longer sequence, as when decoding with a cache
    assert_close(apply_rope(x[..., 6:, :], torch.arange(6, 10, device=device)), rotated[..., 6:, :], what="offset positions")


def test_rope_cpu() -> None:
    _rope_relative(torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_rope_cuda() -> None:
    _rope_relative(torch.device("cuda"))


def _reference_alibi_slopes(n: int) -> list[float]:
    """The rule of the ALiBi paper's reference implementation (Press et al., 2022)."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_two(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_two(closest) + _reference_alibi_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("heads", range(1, 17))
def test_alibi_slopes_follow_the_paper(heads: int) -> None:
    assert torch.allclose(alibi_slopes(heads).double(), torch.tensor(_reference_alibi_slopes(heads), dtype=torch.float64))


def test_alibi() -> None:
    slopes = alibi_slopes(8)
    assert torch.allclose(slopes, torch.tensor([2.0 ** (-(h + 1)) for h in range(8)]))
    assert alibi_slopes(6).log2().tolist() == [-2.0, -4.0, -6.0, -8.0, -1.0, -3.0]
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


def test_recent_digit_targets() -> None:
    tokens, targets = recent_digit_batch(16, 30, torch.Generator().manual_seed(0))
    for row_tokens, row_targets in zip(tokens.tolist(), targets.tolist()):
        last = None
        for token, target in zip(row_tokens, row_targets):
            last = token if token < 4 else last
            assert target == last


@pytest.mark.parametrize("encoding", ["sinusoidal", "rope", "alibi"])
def test_attention_paths_agree(encoding: str) -> None:
    torch.manual_seed(1)
    attention = PositionalSelfAttention(16, 4, encoding).eval()
    x = torch.randn(2, 9, 16)
    with torch.no_grad():
        fused, none = attention(x)
        taught, weights = attention(x, need_weights=True)
    assert none is None and weights.shape == (2, 4, 9, 9)
    assert (weights.triu(1) == 0).all()  # causal
    assert_close(fused, taught, what=f"{encoding}: fused vs explicit weights", kernel="fused")


@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_probe_runs_on_device(encoding: str, device: torch.device) -> None:
    tokens, targets = recent_digit_batch(4, 24, torch.Generator().manual_seed(0), device=device)
    model = PositionProbe(encoding).to(device)
    logits = model(tokens)
    assert logits.shape == (4, 24, 12) and logits.device.type == device.type
    assert targets.device.type == device.type


def test_causal_outputs_do_not_depend_on_later_tokens() -> None:
    torch.manual_seed(2)
    for encoding in ("sinusoidal", "rope", "alibi"):
        model = PositionProbe(encoding).eval()
        tokens, _ = recent_digit_batch(3, 40, torch.Generator().manual_seed(1))
        with torch.no_grad():
            assert_close(model(tokens[:, :20]), model(tokens)[:, :20], what=encoding)


def test_extrapolation_experiment_returns_plain_numbers() -> None:
    result = extrapolation_experiment(seed=0, train_length=8, steps=3, interpolation_lengths=(8, 16, 32))
    assert result["train_length"] == 8
    assert len(result["per_position"]["learned"]) == 8 and len(result["per_position"]["rope"]) == 32
    assert sorted(result["interpolation"]) == [8, 16, 32]
    assert result["summary"]["learned"][16] is None and len(result["summary"]["alibi"][32]) == 3
    assert all(isinstance(v, float) for v in result["per_position"]["alibi"])


def test_widget_compute_functions() -> None:
    from utils.widgets.positional import extrapolation_summary, positional_summary, rope_alibi_summary

    ratios = [positional_summary(d, 128)["off_peak_ratio"] for d in (16, 64, 256)]
    assert ratios == sorted(ratios) and 0.4 < ratios[0] < ratios[-1] < 0.5
    s = rope_alibi_summary(d_k=64, base=10000.0, train_length=24, num_heads=6)
    assert s["rope_mean"][0].item() == pytest.approx(1.0)
    assert s["alibi"].shape == (6, 97) and s["slopes"].log2().tolist() == [-2.0, -4.0, -6.0, -8.0, -1.0, -3.0]
    # pairs with L theta_i / 2 pi < 1, counted directly
    theta = 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    assert s["unseen_pairs"] == int((24 * theta < 2 * math.pi).sum())
    fake = {"train_length": 2, "per_position": {"rope": [1.0, 1.0, 0.0, 0.5], "learned": [1.0, 0.5]},
            "interpolation": {4: [1.0, 0.5, 0.5, 0.5]}}
    rope = extrapolation_summary(fake, "rope", 4)
    assert rope["all"] == 0.625 and rope["early"] == 1.0 and rope["late"] == 0.25
    assert extrapolation_summary(fake, "learned", 4)["values"] is None
    assert extrapolation_summary(fake, "rope + interpolation", 4)["late"] == 0.5


def test_alibi_bias_counts_queries_and_keys_from_position_zero():
    """Library review O3: alibi_bias(H, t_q, t_k) puts query i at position i, also when t_q < t_k; the new
    queries of a KV cache sit at the end, and the docstring's slice of the square bias gives their bias."""
    from utils.positional import alibi_bias, alibi_slopes

    slopes = alibi_slopes(2)
    assert torch.equal(alibi_bias(2, 1, 5)[:, 0], -slopes[:, None] * torch.arange(5.0))
    last_query = alibi_bias(2, 5, 5)[:, -1:]  # (H, 1, 5): query 4 against keys 0..4
    assert torch.equal(last_query[:, 0], -slopes[:, None] * torch.tensor([4.0, 3.0, 2.0, 1.0, 0.0]))
    assert not torch.equal(last_query, alibi_bias(2, 1, 5)), "the two alignments differ, as the docstring warns"
