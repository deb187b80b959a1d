"""utils.scratch_attention (generated from chapter 09): pure-Python lists and NumPy against PyTorch."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from utils.attention import scaled_dot_product_attention
from utils.scratch_attention import (
    attention_lists,
    attention_numpy,
    matmul,
    softmax_numpy,
    softmax_rows,
    transpose,
)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _arrays(t_q=5, t_k=7, d_k=6, d_v=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((t_q, d_k)), rng.standard_normal((t_k, d_k)), rng.standard_normal((t_k, d_v))


def test_transpose_and_matmul_match_numpy():
    a, b, _ = _arrays()
    assert transpose(a.tolist()) == a.T.tolist()
    assert transpose([]) == []
    assert np.allclose(matmul(a.tolist(), b.T.tolist()), a @ b.T, atol=1e-12)
    with pytest.raises(ValueError):
        matmul([[1.0, 2.0]], [[1.0, 2.0]])


def test_softmaxes_are_stable_and_agree():
    rows = [[1000.0, 1001.0, 999.0], [-1e4, 0.0, 1e4], [0.0, 0.0, 0.0]]
    ours = np.array(softmax_rows(rows))
    assert np.allclose(ours, torch.softmax(torch.tensor(rows, dtype=torch.float64), -1).numpy(), atol=1e-15)
    assert np.allclose(softmax_numpy(np.array(rows)), ours, atol=1e-15)


@pytest.mark.parametrize("sizes", [(5, 7, 6, 3), (1, 1, 1, 1), (4, 4, 16, 8)])
def test_lists_numpy_and_torch_agree(sizes):
    q, k, v = _arrays(*sizes)
    out_l, w_l = attention_lists(q.tolist(), k.tolist(), v.tolist())
    out_n, w_n = attention_numpy(q, k, v)
    ref = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v))).numpy()
    assert np.abs(np.array(out_l) - ref).max() < 1e-12
    assert np.abs(out_n - ref).max() < 1e-12
    assert np.abs(np.array(w_l) - w_n).max() < 1e-12
    out_s, _ = attention_lists(q.tolist(), k.tolist(), v.tolist(), scale=0.3)
    ref_s = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), scale=0.3).numpy()
    assert np.abs(np.array(out_s) - ref_s).max() < 1e-12


def test_numpy_version_broadcasts_over_heads():
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((2, 3, 6, 2))
    out, weights = attention_numpy(q, k, v)
    ref = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v))).numpy()
    assert out.shape == (2, 3, 4, 2) and weights.shape == (2, 3, 4, 6)
    assert np.abs(out - ref).max() < 1e-12


@pytest.mark.parametrize("device", DEVICES)
def test_lists_agree_with_float32_course_attention_on_device(device):
    q, k, v = _arrays(6, 6, 16, 8, seed=3)
    out_l, _ = attention_lists(q.tolist(), k.tolist(), v.tolist())
    ours, _ = scaled_dot_product_attention(*(torch.from_numpy(a).float().to(device) for a in (q, k, v)))
    assert np.abs(np.array(out_l) - ours.cpu().double().numpy()).max() < 1e-6


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_lists_agree_with_cuda_sdpa_float64():
    q, k, v = _arrays(9, 11, 32, 8, seed=4)
    out_l, _ = attention_lists(q.tolist(), k.tolist(), v.tolist())
    ref = F.scaled_dot_product_attention(*(torch.from_numpy(a).cuda() for a in (q, k, v)))
    assert np.abs(np.array(out_l) - ref.cpu().numpy()).max() < 1e-12
    assert math.isclose(float(ref.sum()), float(np.sum(out_l)), rel_tol=1e-9)
