"""Property-based comparison of the course library with PyTorch's own (hypothesis).

Random shapes, masks, dtypes and devices; every result is compared with the PyTorch reference under the
tolerance policy (utils.tolerances), and gradients are compared in float64. Each test draws a few dozen
cases, so the whole file runs in well under a minute; a failure prints the smallest case hypothesis found.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from utils.attention import scaled_dot_product_attention
from utils.efficient_attention import tiled_attention
from utils.layernorm import LayerNorm, RMSNorm
from utils.multihead import MultiHeadAttention
from utils.positional import apply_rope, sinusoidal_encoding
from utils.tolerances import assert_close
from utils.transformer_blocks import DecoderBlock, EncoderBlock

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
PROFILE = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, seed: int, dtype=torch.float32, device="cpu") -> torch.Tensor:
    return torch.randn(*shape, generator=_generator(seed), dtype=torch.float64).to(device=device, dtype=dtype)


def _mask_with_an_allowed_key_per_row(shape, seed: int, device) -> torch.Tensor:
    mask = torch.rand(*shape, generator=_generator(seed)) < 0.6
    mask[..., 0] = True  # every query keeps one key: fully masked rows are tested on their own
    return mask.to(device)


shapes = st.fixed_dictionaries({
    "B": st.integers(1, 3), "H": st.integers(1, 3), "T_q": st.integers(1, 9), "T_k": st.integers(1, 9),
    "d": st.integers(1, 8), "d_v": st.integers(1, 8), "seed": st.integers(0, 10_000),
})


@PROFILE
@given(s=shapes, mask_kind=st.sampled_from(["none", "bool", "float", "causal"]),
       dtype=st.sampled_from([torch.float32, torch.float64]), device=st.sampled_from(DEVICES))
def test_attention_equals_sdpa(s, mask_kind, dtype, device):
    q = _randn(s["B"], s["H"], s["T_q"], s["d"], seed=s["seed"], dtype=dtype, device=device)
    k = _randn(s["B"], s["H"], s["T_k"], s["d"], seed=s["seed"] + 1, dtype=dtype, device=device)
    v = _randn(s["B"], s["H"], s["T_k"], s["d_v"], seed=s["seed"] + 2, dtype=dtype, device=device)
    kwargs, ours_kwargs = {}, {}
    if mask_kind == "bool":
        mask = _mask_with_an_allowed_key_per_row((s["B"], 1, s["T_q"], s["T_k"]), s["seed"], device)
        kwargs, ours_kwargs = {"attn_mask": mask}, {"mask": mask}
    elif mask_kind == "float":
        bias = _randn(s["T_q"], s["T_k"], seed=s["seed"] + 3, dtype=dtype, device=device)
        kwargs, ours_kwargs = {"attn_mask": bias}, {"mask": bias}
    elif mask_kind == "causal":
        if s["T_q"] > s["T_k"]:  # top-left causal alignment would leave rows with no key
            return
        kwargs, ours_kwargs = {"is_causal": True}, {"is_causal": True}
    ours, _ = scaled_dot_product_attention(q, k, v, **ours_kwargs)
    assert_close(ours, F.scaled_dot_product_attention(q, k, v, **kwargs), what=f"attention, {mask_kind} mask")


@PROFILE
@given(s=shapes, causal=st.booleans())
def test_attention_gradients_equal_sdpa_in_float64(s, causal):
    if causal and s["T_q"] > s["T_k"]:
        return
    tensors = [_randn(s["B"], s["H"], t, w, seed=s["seed"] + i, dtype=torch.float64).requires_grad_()
               for i, (t, w) in enumerate([(s["T_q"], s["d"]), (s["T_k"], s["d"]), (s["T_k"], s["d_v"])])]
    upstream = _randn(s["B"], s["H"], s["T_q"], s["d_v"], seed=s["seed"] + 9, dtype=torch.float64)
    ours = torch.autograd.grad(scaled_dot_product_attention(*tensors, is_causal=causal)[0], tensors, upstream)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(*tensors, is_causal=causal), tensors, upstream)
    for name, a, b in zip("qkv", ours, theirs):
        assert_close(a, b, what=f"d{name}")


@PROFILE
@given(seed=st.integers(0, 10_000), B=st.integers(1, 3), T=st.integers(1, 8), S=st.integers(1, 8),
       heads=st.sampled_from([1, 2, 4]), width=st.sampled_from([4, 8]), use_mask=st.booleans(),
       need_weights=st.booleans(), batch_first=st.booleans(), device=st.sampled_from(DEVICES))
def test_multihead_attention_equals_nn_multiheadattention(seed, B, T, S, heads, width, use_mask, need_weights,
                                                          batch_first, device):
    torch.manual_seed(seed)
    d_model = heads * width
    ref = nn.MultiheadAttention(d_model, heads, batch_first=batch_first).to(device).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    layout = (B, T, d_model) if batch_first else (T, B, d_model)
    q = _randn(*layout, seed=seed, device=device)
    kv = _randn(*((B, S, d_model) if batch_first else (S, B, d_model)), seed=seed + 1, device=device)
    allowed = _mask_with_an_allowed_key_per_row((T, S), seed, device) if use_mask else None
    with torch.no_grad():
        expected, expected_w = ref(q, kv, kv, attn_mask=None if allowed is None else ~allowed,
                                   need_weights=need_weights)
        got, got_w = ours(q, kv, kv, mask=allowed, need_weights=need_weights)
    assert_close(got, expected, what="multi-head attention output", kernel="fused")
    if need_weights:
        assert_close(got_w, expected_w, what="head-averaged weights", kernel="fused")


@PROFILE
@given(seed=st.integers(0, 10_000), B=st.integers(1, 2), T=st.integers(1, 7), S=st.integers(1, 7),
       activation=st.sampled_from(["relu", "gelu"]), norm_first=st.booleans(), device=st.sampled_from(DEVICES))
def test_blocks_equal_torch_transformer_layers(seed, B, T, S, activation, norm_first, device):
    torch.manual_seed(seed)
    d_model, heads, d_ff = 8, 2, 16
    kw = dict(dim_feedforward=d_ff, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first)
    enc_ref = nn.TransformerEncoderLayer(d_model, heads, **kw).to(device).eval()
    dec_ref = nn.TransformerDecoderLayer(d_model, heads, **kw).to(device).eval()
    enc = EncoderBlock(d_model, heads, d_ff, activation=activation, norm_first=norm_first).to(device).eval()
    dec = DecoderBlock(d_model, heads, d_ff, activation=activation, norm_first=norm_first).to(device).eval()
    enc.load_from_torch(enc_ref)
    dec.load_from_torch(dec_ref)
    x = _randn(B, S, d_model, seed=seed, device=device)
    y = _randn(B, T, d_model, seed=seed + 1, device=device)
    causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()
    with torch.no_grad():
        memory = enc(x)
        assert_close(memory, enc_ref(x), what="encoder block", kernel="fused")
        got = dec(y, memory, causal)
        expected = dec_ref(y, memory, tgt_mask=~causal)
    assert_close(got, expected, what="decoder block", kernel="fused")


@PROFILE
@given(seed=st.integers(0, 10_000), lead=st.lists(st.integers(1, 4), min_size=0, max_size=2),
       width=st.integers(2, 32), eps=st.sampled_from([1e-5, 1e-6, 1e-3]), device=st.sampled_from(DEVICES))
def test_norms_equal_torch_norms_with_float64_gradients(seed, lead, width, eps, device):
    x = _randn(*lead, width, seed=seed, dtype=torch.float64, device=device).requires_grad_()
    for ours, ref in [(LayerNorm(width, eps=eps), nn.LayerNorm(width, eps=eps)),
                      (RMSNorm(width, eps=eps), nn.RMSNorm(width, eps=eps))]:
        ours, ref = ours.to(device, torch.float64), ref.to(device, torch.float64)
        with torch.no_grad():
            gain = _randn(width, seed=seed + 5, dtype=torch.float64, device=device)
            ours.weight.copy_(gain)
            ref.weight.copy_(gain)
        got, expected = ours(x), ref(x)
        assert_close(got, expected, what=type(ours).__name__)
        upstream = _randn(*got.shape, seed=seed + 7, dtype=torch.float64, device=device)
        (g_ours,) = torch.autograd.grad(got, x, upstream)
        (g_ref,) = torch.autograd.grad(expected, x, upstream)
        assert_close(g_ours, g_ref, what=f"{type(ours).__name__} gradient")


@PROFILE
@given(half=st.integers(1, 16), p=st.integers(0, 5000), k=st.integers(0, 200), base=st.sampled_from([100.0, 10000.0]))
def test_sinusoidal_dot_products_depend_only_on_the_offset(half, p, k, base):
    """PE(p)·PE(p+k) = Σ cos(k ω_i): the same for every p (in float64)."""
    d_model = 2 * half
    pe = sinusoidal_encoding(p + k + 1, d_model, base=base, dtype=torch.float64)
    reference = sinusoidal_encoding(k + 1, d_model, base=base, dtype=torch.float64)
    assert math.isclose(float(pe[p] @ pe[p + k]), float(reference[0] @ reference[k]), abs_tol=1e-9)


@PROFILE
@given(half=st.integers(1, 8), m=st.integers(0, 300), n=st.integers(0, 300), shift=st.integers(0, 300),
       seed=st.integers(0, 10_000))
def test_rope_scores_depend_only_on_the_offset_and_keep_norms(half, m, n, shift, seed):
    d = 2 * half
    q = _randn(1, d, seed=seed, dtype=torch.float64)
    k = _randn(1, d, seed=seed + 1, dtype=torch.float64)

    def rotated(x, position):
        return apply_rope(x, torch.tensor([position]))

    score = float(rotated(q, m) @ rotated(k, n).T)
    shifted = float(rotated(q, m + shift) @ rotated(k, n + shift).T)
    assert math.isclose(score, shifted, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(float(rotated(q, m).norm()), float(q.norm()), rel_tol=1e-12)


@PROFILE
@given(seed=st.integers(0, 10_000), G=st.integers(1, 3), N_q=st.integers(1, 40), N_k=st.integers(1, 40),
       d=st.integers(1, 8), block_q=st.integers(1, 16), block_k=st.integers(1, 16), causal=st.booleans())
def test_tiled_attention_equals_sdpa_with_float64_gradients(seed, G, N_q, N_k, d, block_q, block_k, causal):
    if causal and N_q > N_k:
        return
    tensors = [_randn(G, n, d, seed=seed + i, dtype=torch.float64).requires_grad_() for i, n in enumerate([N_q, N_k, N_k])]
    got = tiled_attention(*tensors, is_causal=causal, block_q=block_q, block_k=block_k)
    expected = F.scaled_dot_product_attention(*tensors, is_causal=causal)
    assert_close(got, expected, what="tiled attention")
    upstream = _randn(*got.shape, seed=seed + 9, dtype=torch.float64)
    for name, a, b in zip("qkv", torch.autograd.grad(got, tensors, upstream), torch.autograd.grad(expected, tensors, upstream)):
        assert_close(a, b, what=f"tiled d{name}")


def test_property_suite_covers_cuda_when_present():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here: the properties ran on the CPU only")
    assert "cuda" in DEVICES


@PROFILE
@given(seed=st.integers(0, 10_000), width=st.integers(2, 64), scale=st.sampled_from([1.0, 300.0, 3000.0]),
       dtype=st.sampled_from([torch.float16, torch.bfloat16]))
def test_half_precision_norms_match_torch_even_for_large_inputs(seed, width, scale, dtype):
    """Half-precision inputs are normalised with float32 accumulation, as PyTorch does (|x| ~ 300 used to give 0)."""
    x = (_randn(3, width, seed=seed) * scale).to(dtype)
    for ours, ref in [(LayerNorm(width), nn.LayerNorm(width)), (RMSNorm(width), nn.RMSNorm(width))]:
        got, expected = ours.to(dtype)(x), ref.to(dtype)(x)
        assert got.dtype == dtype
        assert_close(got, expected, what=f"{type(ours).__name__} in {dtype}")


@PROFILE
@given(s=shapes, dtype=st.sampled_from([torch.float32, torch.float64]))
def test_fully_masked_rows_and_empty_keys_behave_like_sdpa(s, dtype):
    """A query with no allowed key gets zeros (SDPA's behaviour in this torch), and so does attention over T_k = 0."""
    q = _randn(s["B"], s["H"], s["T_q"], s["d"], seed=s["seed"], dtype=dtype)
    k = _randn(s["B"], s["H"], s["T_k"], s["d"], seed=s["seed"] + 1, dtype=dtype)
    v = _randn(s["B"], s["H"], s["T_k"], s["d_v"], seed=s["seed"] + 2, dtype=dtype)
    mask = _mask_with_an_allowed_key_per_row((s["B"], 1, s["T_q"], s["T_k"]), s["seed"], "cpu")
    mask[..., 0, :] = False  # the first query may attend to nothing
    ours, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), what="fully masked row")
    empty_k, empty_v = k[..., :0, :], v[..., :0, :]
    ours_empty, _ = scaled_dot_product_attention(q, empty_k, empty_v)
    assert_close(ours_empty, F.scaled_dot_product_attention(q, empty_k, empty_v), what="T_k = 0")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), G=st.integers(1, 2), N_q=st.integers(1, 40), N_k=st.integers(1, 40),
       d=st.sampled_from([1, 8, 16, 24]), causal=st.booleans())
def test_fused_triton_attention_equals_sdpa_with_gradients(seed, G, N_q, N_k, d, causal):
    """Chapter 11's kernels (Triton's interpreter on the CPU, compiled on CUDA), ragged sizes included."""
    flash = pytest.importorskip("utils.flash_attention")
    if not flash.TRITON_AVAILABLE:
        pytest.skip("Triton is not installed (requirements.txt installs it on Linux x86_64)")
    if causal and N_q > N_k:
        return
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tensors = [_randn(G, n, d, seed=seed + i, device=device).requires_grad_() for i, n in enumerate([N_q, N_k, N_k])]
    got = flash.flash_attention(*tensors, is_causal=causal)
    expected = F.scaled_dot_product_attention(*tensors, is_causal=causal)
    assert_close(got, expected, what="fused attention", kernel="fused")
    upstream = _randn(*got.shape, seed=seed + 9, device=device)
    for name, a, b in zip("qkv", torch.autograd.grad(got, tensors, upstream), torch.autograd.grad(expected, tensors, upstream)):
        assert_close(a, b, what=f"fused d{name}", kernel="fused")
