"""utils.scratch_attention (generated from chapter 09): pure-Python lists, NumPy and tensors against
PyTorch, and their input checks."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from utils.attention import scaled_dot_product_attention
from utils.scratch_attention import (
    attention_lists,
    attention_numpy,
    attention_torch,
    matmul,
    scratch_agreement,
    softmax_numpy,
    softmax_rows,
    transpose,
)
from utils.tolerances import assert_close, tolerance

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _arrays(t_q=5, t_k=7, d_k=6, d_v=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((t_q, d_k)), rng.standard_normal((t_k, d_k)), rng.standard_normal((t_k, d_v))


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a), dtype=torch.float64)


def test_transpose_and_matmul_match_numpy():
    a, b, _ = _arrays()
    assert transpose(a.tolist()) == a.T.tolist()
    assert transpose([]) == []
    assert_close(_t(matmul(a.tolist(), b.T.tolist())), _t(a @ b.T), what="matmul")
    with pytest.raises(ValueError, match="inner dimensions"):
        matmul([[1.0, 2.0]], [[1.0, 2.0]])


def test_softmaxes_are_stable_and_agree():
    rows = [[1000.0, 1001.0, 999.0], [-1e4, 0.0, 1e4], [0.0, 0.0, 0.0]]
    ours = _t(softmax_rows(rows))
    assert_close(ours, torch.softmax(_t(rows), -1), what="softmax_rows")
    assert_close(_t(softmax_numpy(np.array(rows))), ours, what="softmax_numpy")


def test_softmax_rows_masked_entries_and_fully_masked_rows():
    inf = float("inf")
    out = softmax_rows([[-inf, 0.0, 0.0], [-inf, -inf, -inf]])
    assert out[0] == [0.0, 0.5, 0.5] and out[1] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("sizes", [(5, 7, 6, 3), (1, 1, 1, 1), (4, 4, 16, 8)])
def test_lists_numpy_tensors_and_torch_agree(sizes):
    q, k, v = _arrays(*sizes)
    ref = F.scaled_dot_product_attention(_t(q), _t(k), _t(v))
    out_l, w_l = attention_lists(q.tolist(), k.tolist(), v.tolist())
    out_n, w_n = attention_numpy(q, k, v)
    out_t, w_t = attention_torch(_t(q), _t(k), _t(v))
    for name, out in (("lists", _t(out_l)), ("NumPy", _t(out_n)), ("tensors", out_t)):
        assert_close(out, ref, what=name)
    assert_close(_t(w_l), _t(w_n), what="weights lists vs NumPy")
    assert_close(w_t, _t(w_n), what="weights tensors vs NumPy")
    out_s, _ = attention_lists(q.tolist(), k.tolist(), v.tolist(), scale=0.3)
    assert_close(_t(out_s), F.scaled_dot_product_attention(_t(q), _t(k), _t(v), scale=0.3), what="scale 0.3")


def test_numpy_and_tensor_versions_broadcast_over_heads():
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((2, 3, 6, 2))
    ref = F.scaled_dot_product_attention(_t(q), _t(k), _t(v))
    out, weights = attention_numpy(q, k, v)
    assert out.shape == (2, 3, 4, 2) and weights.shape == (2, 3, 4, 6)
    assert_close(_t(out), ref, what="NumPy, batched")
    assert_close(attention_torch(_t(q), _t(k), _t(v))[0], ref, what="tensors, batched")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tensor_version_keeps_device_and_dtype_and_is_differentiable(device, dtype):
    q, k, v = (_t(a).to(device=device, dtype=dtype).requires_grad_() for a in _arrays(6, 6, 16, 8, seed=3))
    out, weights = attention_torch(q, k, v)
    assert out.device.type == device and out.dtype == dtype and weights.shape == (6, 6)
    assert_close(out, F.scaled_dot_product_attention(q, k, v), what=f"attention_torch {device} {dtype}", kernel="fused")
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


@pytest.mark.parametrize("device", DEVICES)
def test_lists_agree_with_float32_course_attention_on_device(device):
    q, k, v = _arrays(6, 6, 16, 8, seed=3)
    out_l, _ = attention_lists(q.tolist(), k.tolist(), v.tolist())
    ours, _ = scaled_dot_product_attention(*(torch.from_numpy(a).float().to(device) for a in (q, k, v)))
    assert_close(ours, _t(out_l).float(), what="chapter 3 float32 vs lists")


def test_scratch_agreement_claim_for_seed_0():
    differences = scratch_agreement(0)
    assert all(d <= tolerance("cpu", torch.float64)["atol"] for d in differences.values())
    with pytest.raises(TypeError, match="seed"):
        scratch_agreement("0")


# --- input checks (issue 17: clear errors instead of IndexError, silent truncation or max() of nothing) ---


def test_transpose_refuses_ragged_rows_instead_of_dropping_elements():
    with pytest.raises(ValueError, match="different lengths"):
        transpose([[1.0, 2.0], [3.0]])
    with pytest.raises(ValueError, match="different lengths"):
        transpose([[1.0], [2.0, 3.0]])


@pytest.mark.parametrize(
    "a,b,match",
    [
        ([[1.0]], [], "b must be a non-empty list"),
        ([], [[1.0]], "a must be a non-empty list"),
        ([[1.0, 2.0]], [[1.0], [2.0, 3.0]], "different lengths"),
        ([[1.0], [2.0, 3.0]], [[1.0]], "different lengths"),
        ([[]], [[1.0]], "length 0"),
        ([1.0, 2.0], [[1.0]], "list of rows"),
    ],
)
def test_matmul_refuses_what_is_not_a_matrix(a, b, match):
    with pytest.raises(ValueError, match=match):
        matmul(a, b)


def test_attention_lists_refuses_no_keys_and_mismatched_shapes():
    q, k, v = (a.tolist() for a in _arrays())
    with pytest.raises(ValueError, match="T_k = 0"):
        attention_lists(q, [], [])
    with pytest.raises(ValueError, match="same width d_k"):
        attention_lists(q, [row[:-1] for row in k], v)
    with pytest.raises(ValueError, match="same number of rows"):
        attention_lists(q, k, v[:-1])
    with pytest.raises(ValueError, match="non-empty list"):
        attention_lists([], k, v)


def test_attention_torch_refuses_mixed_dtypes_and_devices_naming_each():
    """Issue 26: a float64 key with float32 queries gave matmul's "expected both ... same dtype" traceback."""
    q, k, v = (_t(a) for a in _arrays())
    with pytest.raises(TypeError, match=r"share one dtype and device, got q: torch.float64 on cpu, "
                                        r"k: torch.float32 on cpu, v: torch.float64 on cpu"):
        attention_torch(q, k.float(), v)
    with pytest.raises(TypeError, match=r"v: torch.float64 on meta"):
        attention_torch(q, k, v.to("meta"))


def test_softmax_rows_refuses_empty_rows():
    with pytest.raises(ValueError, match="length 0"):
        softmax_rows([[]])


@pytest.mark.parametrize("fn,wrap", [(attention_numpy, np.asarray), (attention_torch, _t)])
def test_array_versions_refuse_no_keys_and_mismatched_shapes(fn, wrap):
    q, k, v = (wrap(a) for a in _arrays())
    with pytest.raises(ValueError, match="T_k = 0"):
        fn(q, k[:0], v[:0])
    with pytest.raises(ValueError, match="same width d_k"):
        fn(q, k[:, :-1], v)
    with pytest.raises(ValueError, match="same length T_k"):
        fn(q, k, v[:-1])
    with pytest.raises(ValueError, match="shape"):
        fn(q[0], k, v)


def test_tensor_version_refuses_non_float_tensors():
    q, k, v = (_t(a) for a in _arrays())
    with pytest.raises(TypeError, match="floating-point"):
        attention_torch(q.long(), k, v)
    with pytest.raises(TypeError, match="floating-point"):
        attention_torch(q.numpy(), k, v)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_lists_agree_with_cuda_sdpa_float64():
    q, k, v = _arrays(9, 11, 32, 8, seed=4)
    out_l, _ = attention_lists(q.tolist(), k.tolist(), v.tolist())
    ref = F.scaled_dot_product_attention(*(torch.from_numpy(a).cuda() for a in (q, k, v)))
    assert_close(ref, _t(out_l).cuda(), what="CUDA SDPA float64 vs lists")
