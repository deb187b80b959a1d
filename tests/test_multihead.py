"""utils.multihead (generated from solutions/04): against nn.MultiheadAttention on CPU and CUDA, and its edge cases."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.multihead import (
    MultiHeadAttention,
    PairsModel,
    masks_from_torch,
    merge_heads,
    pairs_report,
    pairs_task_batch,
    split_heads,
    train_pairs_model,
)
from utils.tolerances import assert_close

DEVICES = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])


def _run_cases(device: torch.device) -> None:
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    B, T_q, T_k, d_model, h = 3, 6, 8, 32, 4
    x = torch.randn(B, T_q, d_model, generator=gen).to(device)
    memory = torch.randn(B, T_k, d_model, generator=gen).to(device)
    padding = torch.zeros(B, T_q, dtype=torch.bool, device=device)
    padding[1, 4:] = True
    causal_ignore = torch.ones(T_q, T_q, dtype=torch.bool, device=device).triu(1)
    float_mask = torch.randn(T_q, T_k, generator=gen).to(device)
    for batch_first in (True, False):
        ref = nn.MultiheadAttention(d_model, h, batch_first=batch_first).to(device).eval()
        for fused in (False, True):
            ours = MultiHeadAttention.from_torch(ref, fused_qkv=fused).eval()
            xs, mem = (x, memory) if batch_first else (x.transpose(0, 1), memory.transpose(0, 1))
            cases = [
                ((xs, xs, xs), {}, (xs,), {}),
                ((xs, xs, xs), dict(average_attn_weights=False), (xs,), dict(average_weights=False)),
                ((xs, xs, xs), dict(need_weights=False), (xs,), dict(need_weights=False)),
                ((xs, xs, xs), dict(key_padding_mask=padding), (xs,), dict(mask=masks_from_torch(padding))),
                ((xs, xs, xs), dict(key_padding_mask=padding), (xs,), dict(key_padding_mask=padding)),
                ((xs, xs, xs), dict(key_padding_mask=padding), (xs,), dict(key_padding_mask=padding, need_weights=False)),
                (
                    (xs, xs, xs),
                    dict(key_padding_mask=padding, attn_mask=causal_ignore, average_attn_weights=False),
                    (xs,),
                    dict(mask=masks_from_torch(padding, causal_ignore), average_weights=False),
                ),
                ((xs, xs, xs), dict(attn_mask=causal_ignore), (xs,), dict(is_causal=True)),
                ((xs, xs, xs), dict(attn_mask=causal_ignore, need_weights=False), (xs,), dict(is_causal=True, need_weights=False)),
                (
                    (xs, xs, xs),
                    dict(attn_mask=causal_ignore, key_padding_mask=padding, need_weights=False),
                    (xs,),
                    dict(is_causal=True, key_padding_mask=padding, need_weights=False),
                ),
                ((xs, mem, mem), dict(attn_mask=float_mask), (xs, mem, mem), dict(mask=masks_from_torch(attn_mask=float_mask))),
                ((xs, mem, mem), dict(attn_mask=float_mask, need_weights=False), (xs, mem, mem), dict(mask=float_mask, need_weights=False)),
            ]
            for ref_args, ref_kwargs, our_args, our_kwargs in cases:
                with torch.no_grad():
                    out_ref, w_ref = ref(*ref_args, **ref_kwargs)
                    out_ours, w_ours = ours(*our_args, **our_kwargs)
                assert out_ours.device == x.device
                what = f"batch_first={batch_first}, fused={fused}, {our_kwargs}"
                assert_close(out_ours, out_ref, what=what, kernel="fused")
                if our_kwargs.get("need_weights", True):
                    assert_close(w_ours, w_ref, what=what, kernel="fused")
                else:
                    assert w_ours is None


def test_matches_torch_cpu() -> None:
    _run_cases(torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_matches_torch_cuda() -> None:
    _run_cases(torch.device("cuda"))


@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_unbatched_input_matches_torch(device: torch.device) -> None:
    torch.manual_seed(1)
    ref = nn.MultiheadAttention(16, 2, batch_first=True).to(device).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    x, memory = torch.randn(5, 16, device=device), torch.randn(7, 16, device=device)
    padding = torch.tensor([False] * 5 + [True] * 2, device=device)
    with torch.no_grad():
        for need in (True, False):
            out, w = ours(x, memory, memory, key_padding_mask=padding, need_weights=need, average_weights=False)
            out_ref, w_ref = ref(x, memory, memory, key_padding_mask=padding, average_attn_weights=False)
            assert out.shape == (5, 16)
            assert_close(out, out_ref, what="unbatched", kernel="fused")
            if need:
                assert w.shape == (2, 5, 7)
                assert_close(w, w_ref, what="unbatched weights", kernel="fused")
        out, w = ours(x)
        assert out.shape == (5, 16) and w.shape == (5, 5)


def test_fully_masked_rows_are_zero_on_both_paths_and_nan_in_torch() -> None:
    torch.manual_seed(2)
    ref = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    x = torch.randn(2, 3, 8)
    padding = torch.zeros(2, 3, dtype=torch.bool)
    padding[0] = True
    with torch.no_grad():
        for need in (True, False):
            out, _ = ours(x, key_padding_mask=padding, need_weights=need)
            assert torch.equal(out[0], ours.out_proj.bias.expand(3, -1))  # zero attention output
            out_float, _ = ours(x, mask=torch.full((3, 3), float("-inf")), need_weights=need)
            assert torch.equal(out_float, ours.out_proj.bias.expand(2, 3, -1))
        # What the chapter states about PyTorch (CPU, this version): NaN for such rows.
        assert ref(x, x, x, key_padding_mask=padding)[0][0].isnan().all()
    # The gradient stays finite on both paths.
    for need in (True, False):
        x_grad = x.clone().requires_grad_()
        ours(x_grad, key_padding_mask=padding, need_weights=need)[0].sum().backward()
        assert torch.isfinite(x_grad.grad).all()


def test_dropout_in_training_returns_the_softmax_and_matches_in_eval() -> None:
    torch.manual_seed(3)
    layer = MultiHeadAttention(16, 4, dropout=0.5).train()
    x = torch.randn(2, 5, 16)
    _, weights = layer(x, average_weights=False)
    assert_close(weights.sum(-1), torch.ones(2, 4, 5), what="rows sum to 1 in training")
    out_a, out_b = layer(x)[0], layer(x)[0]
    assert not torch.allclose(out_a, out_b)  # dropout is applied to the output
    layer.eval()
    assert torch.equal(layer(x)[0], layer(x)[0])


def test_from_torch_copies_layout_dtype_and_mode() -> None:
    ref = nn.MultiheadAttention(12, 3, batch_first=False, bias=False, dropout=0.1).double().train()
    ours = MultiHeadAttention.from_torch(ref, fused_qkv=True)
    assert ours.training and not ours.batch_first and ours.dropout == 0.1
    assert ours.qkv_proj.weight.dtype == torch.float64 and ours.qkv_proj.bias is None
    x = torch.randn(4, 2, 12, dtype=torch.float64)  # (T, B, d_model)
    ref.eval()
    ours.eval()
    with torch.no_grad():
        assert_close(ours(x, x, x)[0], ref(x, x, x)[0], what="bias=False, float64, seq first")
        memory = torch.randn(6, 2, 12, dtype=torch.float64)
        assert_close(ours(x, memory, memory)[0], ref(x, memory, memory)[0], what="cross-attention, fused QKV")


def test_split_merge_round_trip_and_shapes() -> None:
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    assert torch.equal(heads[:, 1], x[..., 4:8])
    assert torch.equal(merge_heads(heads), x)
    # any number of leading axes, and non-contiguous input
    assert split_heads(torch.randn(5, 12), 4).shape == (4, 5, 3)
    assert split_heads(torch.randn(2, 3, 5, 12), 2).shape == (2, 3, 2, 5, 6)
    x_t = torch.randn(5, 2, 12).transpose(0, 1)  # (B, T, d) but not contiguous
    assert torch.equal(merge_heads(split_heads(x_t, 3)), x_t)


@pytest.mark.parametrize(
    "call, error, fragment",
    [
        (lambda: split_heads(torch.randn(2, 5, 12), 5), ValueError, "divisible by num_heads=5"),
        (lambda: split_heads(torch.randn(12), 3), ValueError, "(..., T, d_model)"),
        (lambda: split_heads(torch.randn(2, 5, 12), 0), ValueError, "num_heads must be an int >= 1, got 0"),
        (lambda: split_heads(torch.randn(2, 5, 12), 2.0), TypeError, "num_heads must be an int, got float"),
        (lambda: split_heads([[1.0]], 1), ValueError, "got list"),
        (lambda: merge_heads(torch.randn(4, 5)), ValueError, "(..., h, T, d_k)"),
        (lambda: MultiHeadAttention(30, 4), ValueError, "d_model=30 must be divisible by num_heads=4"),
        (lambda: MultiHeadAttention(7, 2), ValueError, "d_model=7 must be divisible"),
        (lambda: MultiHeadAttention(0, 1), ValueError, "d_model must be an int >= 1, got 0"),
        (lambda: MultiHeadAttention(16, True), TypeError, "num_heads must be an int, got bool"),
        (lambda: MultiHeadAttention(16, 2, dropout=1.0), ValueError, "dropout must be a probability"),
        (lambda: MultiHeadAttention(16, 2, dropout=-0.1), ValueError, "dropout must be a probability"),
        (lambda: MultiHeadAttention(16, 2, batch_first="yes"), TypeError, "batch_first must be True or False"),
        (lambda: MultiHeadAttention.from_torch(nn.Linear(4, 4)), TypeError, "needs an nn.MultiheadAttention"),
        (lambda: MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4)), ValueError, "kdim = vdim = embed_dim"),
        (lambda: MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True)), ValueError, "add_bias_kv"),
        (lambda: MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_zero_attn=True)), ValueError, "add_zero_attn"),
        (lambda: masks_from_torch(key_padding_mask=torch.zeros(2, 3)), TypeError, "key_padding_mask must be a boolean"),
        (lambda: masks_from_torch(attn_mask=torch.zeros(5, 3, 3, dtype=torch.bool), num_heads=2), ValueError, "multiple of num_heads"),
        (lambda: masks_from_torch(attn_mask=torch.zeros(3, 3, dtype=torch.long)), TypeError, "attn_mask must be a boolean"),
    ],
)
def test_construction_errors_name_the_argument(call, error, fragment) -> None:
    with pytest.raises(error) as info:
        call()
    assert fragment in str(info.value)


LAYER = MultiHeadAttention(16, 4)
X = torch.randn(2, 5, 16)


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        (dict(query=torch.randn(1, 2, 5, 16)), ValueError, "got (1, 2, 5, 16)"),  # 4-D input
        (dict(query=torch.randn(2, 5, 15)), ValueError, "d_model=16"),
        (dict(query=[[0.0] * 16]), TypeError, "query must be a torch.Tensor"),
        (dict(query=X.double()), TypeError, "module's parameters are torch.float32"),
        (dict(query=X, key=torch.randn(3, 5, 16)), ValueError, "same batch size"),
        (dict(query=X, key=torch.randn(2, 6, 16), value=torch.randn(2, 7, 16)), ValueError, "same length"),
        (dict(query=X, key=torch.randn(6, 16)), ValueError, "both be batched or both unbatched"),
        (dict(query=X, mask=torch.ones(5, 5, dtype=torch.long)), TypeError, "mask.bool()"),
        (dict(query=X, mask=torch.ones(5, 5, dtype=torch.uint8)), TypeError, "torch.uint8"),
        (dict(query=X, mask=torch.zeros(5, 5, dtype=torch.float64)), TypeError, "the query's dtype torch.float32"),
        (dict(query=X, mask=torch.ones(3, 5, 5, dtype=torch.bool)), ValueError, "does not broadcast"),
        (dict(query=X, mask=torch.ones(5, 6, dtype=torch.bool)), ValueError, "does not broadcast"),
        (dict(query=X, mask=torch.ones(1, 1, 1, 5, 5, dtype=torch.bool)), ValueError, "does not broadcast"),
        (dict(query=X, mask=[[True]]), TypeError, "mask must be a torch.Tensor"),
        (dict(query=X, key_padding_mask=torch.zeros(2, 5)), TypeError, "key_padding_mask must be a boolean"),
        (dict(query=X, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool)), ValueError, "(B, T_k) = (2, 5)"),
        (dict(query=X[0], key_padding_mask=torch.zeros(1, 5, dtype=torch.bool)), ValueError, "(T_k,) = (5,)"),
        (dict(query=X, is_causal=1), TypeError, "is_causal"),
    ],
)
def test_forward_errors_name_the_argument(kwargs, error, fragment) -> None:
    with pytest.raises(error) as info:
        LAYER(**kwargs)
    assert fragment in str(info.value)


def test_masks_broadcast_per_head_and_per_batch() -> None:
    torch.manual_seed(4)
    layer = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    per_head = torch.rand(4, 5, 5) > 0.3
    per_head[..., 0] = True  # every query may attend to something
    with torch.no_grad():
        a = layer(x, mask=per_head, average_weights=False)
        b = layer(x, mask=per_head[None].expand(2, -1, -1, -1), need_weights=False)
    assert (a[1][~per_head.expand(2, -1, -1, -1)] == 0).all()
    assert_close(b[0], a[0], what="per-head mask, fused vs teaching", kernel="fused")


def test_masks_from_torch_conventions() -> None:
    padding = torch.tensor([[False, False, True]])
    allowed = masks_from_torch(key_padding_mask=padding)
    assert allowed.shape == (1, 1, 1, 3) and allowed.tolist() == [[[[True, True, False]]]]
    assert masks_from_torch() is None
    additive = masks_from_torch(padding, torch.zeros(2, 3))
    assert torch.isinf(additive[..., 2]).all() and (additive[..., :2] == 0).all()
    per_head = masks_from_torch(attn_mask=torch.zeros(4, 2, 3, dtype=torch.bool), num_heads=2)
    assert per_head.shape == (2, 2, 2, 3) and per_head.all()


def test_fused_path_is_sdpa() -> None:
    """need_weights=False is PyTorch's kernel on the split heads, bit for bit."""
    torch.manual_seed(5)
    layer = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        q, k, v = (split_heads(t, 4) for t in layer.project_qkv(x, x, x))
        expected = layer.out_proj(merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
        assert torch.equal(layer(x, is_causal=True, need_weights=False)[0], expected)


@pytest.mark.parametrize("h", [1, 2, 4, 8, 16])
def test_parameter_count_independent_of_heads(h: int) -> None:
    d = 64
    count = sum(p.numel() for p in MultiHeadAttention(d, h).parameters())
    assert count == 4 * d * d + 4 * d == sum(p.numel() for p in nn.MultiheadAttention(d, h).parameters())


def test_pairs_task_is_well_formed() -> None:
    batch = pairs_task_batch(32, torch.Generator().manual_seed(0))
    tokens = batch["tokens"]
    assert tokens.shape == (32, 16)
    assert (torch.stack([torch.bincount(row, minlength=8) for row in tokens]) == 2).all()  # each token twice
    rows = torch.arange(32)[:, None]
    assert (tokens[rows, batch["match"]] == tokens).all() and (batch["match"] != torch.arange(16)).all()
    assert (batch["prev"][:, 1:] == tokens[:, :-1]).all() and (batch["prev"][:, 0] == -100).all()
    assert (batch["match_tag"] == batch["tags"][rows, batch["match"]]).all()
    with pytest.raises(TypeError, match="generator"):
        pairs_task_batch(4, 0)
    with pytest.raises(ValueError, match="n must be an int >= 1, got 0"):
        pairs_task_batch(0, torch.Generator())


@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_pairs_model_runs_on_device(device: torch.device) -> None:
    batch = pairs_task_batch(4, torch.Generator().manual_seed(0), device=device)
    model = PairsModel(num_heads=2).to(device)
    prev, tag, weights = model(batch["tokens"], batch["tags"])
    assert prev.shape == (4, 16, 8) and tag.shape == (4, 16, 4) and weights[0].shape == (4, 2, 16, 16)
    assert model(batch["tokens"], batch["tags"], need_weights=False)[2] == [None]
    report = pairs_report(model, batch)
    assert set(report) == {"prev_acc", "tag_acc", "on_prev", "on_match", "on_other"} and len(report["on_prev"]) == 2


def test_training_stops_when_solved_and_records_history() -> None:
    history: list = []
    train_pairs_model(2, steps=30, check_every=10, history=history)
    assert [row[0] for row in history] == [10, 20, 30]
    assert all(0.0 <= value <= 1.0 for row in history for value in row[1:])


_MHA_16_4 = MultiHeadAttention(16, 4)
_X = torch.randn(2, 5, 16)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: _MHA_16_4(torch.randn(2, 5, 12)), ValueError, r"query must have shape .*d_model=16, got \(2, 5, 12\)"),
        (lambda: _MHA_16_4(torch.randn(2, 2, 5, 16)), ValueError, r"query must have shape .*got \(2, 2, 5, 16\)"),
        (lambda: _MHA_16_4(_X.double()), TypeError, r"query is torch\.float64 .* parameters are torch\.float32"),
        (lambda: _MHA_16_4(_X, torch.randn(3, 5, 16), torch.randn(3, 5, 16)), ValueError,
         r"query, key and value must have the same batch size, got shapes \(2, 5, 16\), \(3, 5, 16\)"),
        (lambda: _MHA_16_4(_X, mask=torch.ones(5, 6, dtype=torch.bool)), ValueError,
         r"mask of shape \(5, 6\) does not broadcast to \(B, h, T_q, T_k\) = \(2, 4, 5, 5\)"),
        (lambda: _MHA_16_4(_X, mask=torch.ones(5, 5, dtype=torch.long)), TypeError, r"mask must be boolean .*torch\.int64"),
        (lambda: _MHA_16_4(_X, key_padding_mask=torch.zeros(2, 6, dtype=torch.bool)), ValueError,
         r"key_padding_mask must have shape \(B, T_k\) = \(2, 5\).*\(2, 6\)"),
        (lambda: _MHA_16_4(_X, is_causal="no"), TypeError, r"is_causal, need_weights and average_weights must be True or False"),
        (lambda: MultiHeadAttention(10, 4), ValueError, r"d_model=10 must be divisible by num_heads=4"),
    ],
    ids=["width", "rank", "dtype", "batch", "mask-shape", "mask-dtype", "padding-shape", "is_causal", "heads"],
)
def test_bad_inputs_raise_errors_that_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
