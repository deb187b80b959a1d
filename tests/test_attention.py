"""utils.attention (generated from chapter 03) against torch.nn.functional.scaled_dot_product_attention."""

import pytest
import torch
import torch.nn.functional as F

from utils.attention import causal_mask, padding_mask, scaled_dot_product_attention, stable_softmax
from utils.saturation import (
    attention_gradients,
    dot_product_variance,
    gradient_ratios,
    softmax_logit_gradients,
)
from utils.tolerances import assert_close

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _inputs(device, dtype, B=2, H=3, T_q=6, T_k=8, d_k=16, d_v=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T_q, d_k, generator=gen, dtype=dtype)  # (B, h, T_q, d_k)
    k = torch.randn(B, H, T_k, d_k, generator=gen, dtype=dtype)  # (B, h, T_k, d_k)
    v = torch.randn(B, H, T_k, d_v, generator=gen, dtype=dtype)  # (B, h, T_k, d_v)
    return q.to(device), k.to(device), v.to(device)


def _cases(device, T_q, T_k, B):
    pad = padding_mask(torch.tensor([T_k, T_k // 2], device=device)[:B], T_k)[:, None]  # (B, 1, 1, T_k)
    rand = torch.rand(T_q, T_k, generator=torch.Generator().manual_seed(3)).to(device) > 0.3
    return {
        "none": ({}, {}),
        "padding": ({"mask": pad}, {"attn_mask": pad}),
        "random bool": ({"mask": rand}, {"attn_mask": rand}),
        "causal": ({"is_causal": True}, {"is_causal": True}),
        "scale": ({"scale": 0.25}, {"scale": 0.25}),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 3, 6, 8), (1, 1, 5, 5), (2, 2, 9, 3)])
def test_matches_pytorch_sdpa(device, dtype, shape):
    B, H, T_q, T_k = shape
    q, k, v = _inputs(device, dtype, B, H, T_q, T_k)
    for name, (ours_kw, torch_kw) in _cases(device, T_q, T_k, B).items():
        ours, weights = scaled_dot_product_attention(q, k, v, **ours_kw)
        ref = F.scaled_dot_product_attention(q, k, v, **torch_kw)
        assert ours.device == q.device and ours.dtype == q.dtype, name
        assert_close(ours, ref, what=f"ours vs SDPA, {name}", kernel="fused")
        assert weights.shape == (B, H, T_q, T_k)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_match_pytorch_sdpa(device):
    q, k, v = _inputs(device, torch.float64)
    grads = []
    for fn in (
        lambda a, b, c: scaled_dot_product_attention(a, b, c, is_causal=True)[0],
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
    ):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        fn(*leaves).pow(2).sum().backward()
        grads.append([t.grad for t in leaves])
    for ours, ref in zip(*grads):
        assert torch.allclose(ours, ref, atol=1e-10)


def test_fully_masked_row_gives_zeros_like_pytorch():
    q, k, v = _inputs("cpu", torch.float32, T_q=3, T_k=5)
    allowed = torch.ones(3, 5, dtype=torch.bool)
    allowed[1] = False
    ours, weights = scaled_dot_product_attention(q, k, v, mask=allowed)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    assert not ours.isnan().any() and (weights[..., 1, :] == 0).all()
    assert_close(ours, ref, what="fully-masked row", kernel="fused")


def test_stable_softmax_survives_huge_scores_and_matches_torch():
    scores = torch.tensor([[1000.0, 1001.0, 999.0], [-1e4, 0.0, 1e4]])
    assert torch.allclose(stable_softmax(scores), torch.softmax(scores, -1))
    assert torch.allclose(stable_softmax(scores).sum(-1), torch.ones(2))


def test_masks_have_documented_shapes_and_meaning():
    m = causal_mask(3, 4)
    assert m.dtype == torch.bool and m.shape == (3, 4)
    assert m.tolist() == [[True, False, False, False], [True, True, False, False], [True, True, True, False]]
    p = padding_mask(torch.tensor([2, 4]), 4)
    assert p.shape == (2, 1, 4)
    assert p[0, 0].tolist() == [True, True, False, False] and p[1, 0].all()


@pytest.mark.parametrize("device", DEVICES)
def test_no_keys_gives_zeros_like_sdpa(device):
    q = torch.randn(2, 3, 4, device=device)
    k, v = torch.randn(2, 0, 4, device=device), torch.randn(2, 0, 5, device=device)
    ours, weights = scaled_dot_product_attention(q, k, v)
    ref = F.scaled_dot_product_attention(q, k, v)
    assert ours.shape == ref.shape == (2, 3, 5) and weights.shape == (2, 3, 0)
    assert (ours == 0).all() and (ref == 0).all()


@pytest.mark.parametrize("t_q, t_k", [(1, 6), (3, 6), (6, 6), (0, 4)])
def test_bottom_right_causal_mask_matches_causal_lower_right(t_q, t_k):
    from torch.nn.attention.bias import causal_lower_right

    expected = causal_lower_right(t_q, t_k)._materialize() if t_q else torch.ones(0, t_k, dtype=torch.bool)
    assert torch.equal(causal_mask(t_q, t_k, align="bottom_right"), expected)
    if t_q:
        q, k, v = _inputs("cpu", torch.float64, T_q=t_q, T_k=t_k)
        ours, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(t_q, t_k, align="bottom_right"))
        assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(t_q, t_k)),
                     what="bottom-right causal")


def test_bottom_right_is_what_a_key_value_cache_needs():
    q, k, v = _inputs("cpu", torch.float64, T_q=7, T_k=7)
    full, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    last, _ = scaled_dot_product_attention(q[..., -2:, :], k, v, mask=causal_mask(2, 7, align="bottom_right"))
    assert torch.allclose(last, full[..., -2:, :])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(mask=torch.ones(6, 8, dtype=torch.long)), TypeError, "integer 0/1 mask is ambiguous"),
        (dict(mask=torch.zeros(6, 8, dtype=torch.float64)), TypeError, r"float mask must have the dtype of q \(torch.float32\)"),
        (dict(mask=torch.ones(5, 2, 3, 6, 8, dtype=torch.bool)), ValueError, "without adding or growing dimensions"),
        (dict(mask=torch.ones(6, 7, dtype=torch.bool)), ValueError, r"mask of shape \(6, 7\) must broadcast"),
        (dict(mask=[[True]]), TypeError, "mask must be a tensor"),
        (dict(scale=float("nan")), ValueError, "scale must be a finite number"),
    ],
)
def test_ambiguous_masks_and_bad_arguments_are_refused(kwargs, error, message):
    q, k, v = _inputs("cpu", torch.float32)
    with pytest.raises(error, match=message):
        scaled_dot_product_attention(q, k, v, **kwargs)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(2, 5, 3), torch.randn(2, 5, 2)),
         ValueError, "must share d_k, got 4 and 3"),
        (lambda: scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 6, 2)),
         ValueError, "same number of keys T_k, got 5 and 6"),
        (lambda: scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(2, 5, 4).double(), torch.randn(2, 5, 2)),
         TypeError, "share one dtype"),
        (lambda: scaled_dot_product_attention(torch.ones(3, 4, dtype=torch.long), torch.randn(5, 4), torch.randn(5, 2)),
         TypeError, "q must be a floating-point tensor"),
        (lambda: scaled_dot_product_attention(torch.randn(4), torch.randn(5, 4), torch.randn(5, 2)),
         ValueError, "q must have shape"),
        (lambda: stable_softmax(torch.randn(3, 4), torch.ones(3, 4)), TypeError, "allowed must be a boolean tensor"),
        (lambda: causal_mask(-1, 3), ValueError, "t_q must be an int >= 0"),
        (lambda: causal_mask(2, 3, align="top"), ValueError, "align must be"),
        (lambda: padding_mask(torch.tensor([2.0]), 4), TypeError, "lengths must be a 1-D integer tensor"),
        (lambda: padding_mask(torch.tensor([5]), 4), ValueError, r"lengths must lie in \[0, t_k=4\]"),
        (lambda: scaled_dot_product_attention(torch.randn(3, 4), torch.randn(5, 4, device="meta"), torch.randn(5, 2, device="meta")),
         ValueError, r"one device, got q on cpu, k on meta and v on meta"),
        (lambda: scaled_dot_product_attention(torch.randn(3, 4), torch.randn(5, 4), torch.randn(5, 2),
                                              mask=torch.ones(3, 5, dtype=torch.bool, device="meta")),
         ValueError, "mask is on meta but q, k and v are on cpu"),
        (lambda: scaled_dot_product_attention(torch.randn(3, 4), torch.randn(5, 4), torch.randn(5, 2), is_causal="no"),
         TypeError, "is_causal must be True or False, got 'no'"),
        (lambda: scaled_dot_product_attention(torch.randn(3, 4), torch.randn(5, 4), torch.randn(5, 2), is_causal=1),
         TypeError, "is_causal must be True or False, got 1"),
        (lambda: scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(3, 5, 4), torch.randn(3, 5, 2)),
         ValueError, r"batch dimensions of q \(2,\), k \(3,\) and v \(3,\)"),
        (lambda: stable_softmax(torch.randn(3, 4), torch.ones(3, 5, dtype=torch.bool)),
         ValueError, r"allowed of shape \(3, 5\) must broadcast to the scores' shape \(3, 4\)"),
        (lambda: stable_softmax(torch.randn(3, 4), torch.ones(3, 4, dtype=torch.bool, device="meta")),
         ValueError, "allowed is on meta but scores are on cpu"),
        (lambda: attention_gradients(0, True), ValueError, "d_k must be an int >= 1, got 0"),
        (lambda: attention_gradients(8.0, True), TypeError, "d_k must be an int, got float 8.0"),
        (lambda: dot_product_variance(8, samples=1), ValueError, "samples must be an int >= 2, got 1"),
        (lambda: causal_mask(2.0, 3), TypeError, "t_q must be an int, got float 2.0"),
        (lambda: padding_mask(torch.tensor([2]), True), TypeError, "t_k must be an int, got bool True"),
    ],
)
def test_invalid_input_gives_a_clear_error(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_saturation_helpers_shapes_and_the_widget_view():
    result = attention_gradients(32, True, n_keys=8, trials=10)
    assert result["weights"].shape == (10, 8)
    assert all(result[name].shape == (10,) for name in ("scores", "query", "keys"))
    weights, grads = softmax_logit_gradients(32, True, n_keys=8, trials=10)
    assert torch.equal(weights, result["weights"]) and torch.equal(grads, result["scores"])
    ratios = gradient_ratios(seed=0, dims=[8])
    assert set(ratios) == {"scores", "query", "keys"} and set(ratios["query"]) == {8}


def test_float16_logits_beyond_its_range_stay_finite_like_sdpa():
    # q·k · scale = 7e4 > 6.5e4, the largest float16: formed in float16 it is inf and the softmax NaN
    q = torch.tensor([[7.0]], dtype=torch.float16)
    k = v = torch.tensor([[1.0], [2.0]], dtype=torch.float16)
    out, weights = scaled_dot_product_attention(q, k, v, scale=1e4)
    reference = F.scaled_dot_product_attention(q, k, v, scale=1e4)
    assert out.dtype == weights.dtype == torch.float16
    assert torch.equal(out, reference) and out.item() == 2.0
    assert torch.equal(weights, torch.tensor([[0.0, 1.0]], dtype=torch.float16))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scale", [-1.5, 1.5, None])
def test_half_precision_is_as_accurate_as_sdpa_against_float64(dtype, scale):
    """Output and gradients of half-precision inputs against float64 on the same rounded inputs: within the
    course's tolerance, and no more than twice SDPA's own error plus one rounding of the input dtype."""
    gen = torch.Generator().manual_seed(11)
    base = [torch.randn(2, 3, 7, 16, generator=gen) * 2 for _ in range(3)]
    upstream = torch.randn(2, 3, 7, 16, generator=gen).double()
    rounded = [t.to(dtype) for t in base]

    def run(fn, cast):
        leaves = [t.to(cast).detach().requires_grad_(True) for t in rounded]
        out = fn(*leaves)
        (out.double() * upstream).sum().backward()
        return [out.double()] + [t.grad.double() for t in leaves]

    exact = run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=scale), torch.float64)
    ours = run(lambda q, k, v: scaled_dot_product_attention(q, k, v, scale=scale)[0], dtype)
    theirs = run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=scale), dtype)
    eps = torch.finfo(dtype).eps
    for name, o, t, e in zip(["out", "dq", "dk", "dv"], ours, theirs, exact):
        assert_close(o.to(dtype), e.to(dtype), what=f"ours vs float64, {name}, {dtype}, scale={scale}")
        ours_error, sdpa_error = (o - e).abs().max().item(), (t - e).abs().max().item()
        assert ours_error <= 2 * sdpa_error + eps * e.abs().max().item(), (name, ours_error, sdpa_error)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_row_with_plus_inf_is_nan_as_in_torch_softmax(dtype):
    scores = torch.tensor([[float("inf"), 0.0, 1.0], [0.0, 1.0, 2.0]], dtype=dtype)
    ours, expected = stable_softmax(scores), torch.softmax(scores, dim=-1)
    assert torch.equal(ours.isnan(), expected.isnan()) and ours[0].isnan().all()
    assert torch.allclose(ours[1], expected[1])
    # a +inf score that is masked out does not matter
    allowed = torch.tensor([[False, True, True], [True, True, True]])
    masked = stable_softmax(scores, allowed)
    assert not masked.isnan().any() and torch.allclose(masked[0], torch.softmax(scores[0, 1:], dim=-1).new_tensor(
        [0.0, *torch.softmax(scores[0, 1:], dim=-1).tolist()]))


def test_a_nan_in_a_masked_out_key_does_not_leak_unlike_sdpa():
    """Issue 26's mismatch 12: a key that the boolean mask excludes holds NaN. The library fills masked scores with
    -inf (masked_fill), so the NaN never reaches a weight; PyTorch's SDPA adds -inf to the NaN score and returns
    NaN in every row. This difference is deliberate: the masked key is not attended to."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, generator=g) for _ in range(3))
    k[:, -1] = float("nan")
    allowed = torch.tensor([True, True, True, False])  # (T_k,): the last key is masked out
    out, weights = scaled_dot_product_attention(q, k, v, mask=allowed)
    assert torch.isfinite(out).all() and (weights[..., -1] == 0).all()
    ref = F.scaled_dot_product_attention(q[:, :, :], k[:, :, :], v, attn_mask=allowed)
    assert torch.isnan(ref).any()  # PyTorch's behaviour, which the docstring contrasts with
    assert_close(out, F.scaled_dot_product_attention(q, k[:, :-1], v[:, :-1]), what="NaN key masked vs key removed")
