"""utils.flash_attention (generated from chapter 11): the fused Triton kernels against
torch.nn.functional.scaled_dot_product_attention, their input checks, and the counting helpers.

Without a GPU the kernels run in Triton's interpreter on CPU tensors (small sizes); on a CUDA machine
they are compiled and the same tests run on the GPU. Without Triton, the kernel tests are skipped and
the fallback (a clear error, the chapter's cells skipping) is tested instead.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from machine_load import scaled

from utils import flash_attention as fa
from utils.tolerances import assert_close

pytestmark = pytest.mark.usefixtures("one_thread")

needs_triton = pytest.mark.skipif(not fa.TRITON_AVAILABLE, reason="Triton is not installed")
DEVICE = torch.device("cpu") if fa.INTERPRETED or not fa.TRITON_AVAILABLE else torch.device("cuda")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _inputs(shape, dtype=torch.float32, seed=0):
    *lead, n_q, n_k, d, d_v = shape
    gen = torch.Generator().manual_seed(seed)
    sizes = [(*lead, n_q, d), (*lead, n_k, d), (*lead, n_k, d_v), (*lead, n_q, d_v)]
    return [torch.randn(*s, generator=gen).to(device=DEVICE, dtype=dtype) for s in sizes]


def _compare(shape, dtype=torch.float32, is_causal=False, scale=None, seed=0, blocks=None, prepare=None):
    """Output and gradients of flash_attention vs SDPA, each within the tolerance policy; max |error|."""
    q, k, v, grad_out = _inputs(shape, dtype, seed)
    results = []
    for fn in (lambda a, b, c: fa.flash_attention(a, b, c, is_causal=is_causal, scale=scale, blocks=blocks),
               lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=is_causal, scale=scale)):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        args = prepare(*leaves) if prepare else leaves
        out = fn(*args)
        results.append([out, *torch.autograd.grad(out, leaves, grad_out)])
    errors = []
    for name, ours, ref in zip(("output", "dq", "dk", "dv"), *results):
        assert ours.shape == ref.shape and ours.dtype == ref.dtype and ours.device == ref.device, name
        errors.append(assert_close(ours, ref, what=f"{name} {shape} {dtype} causal={is_causal}", kernel="fused"))
    return max(errors)


CASES = [  # (..., N_q, N_k, d, d_v)
    (2, 3, 37, 53, 16, 8),  # ragged tiles, N_q != N_k, d_v != d, d_v < 16 (padded)
    (1, 2, 64, 64, 32, 32),  # whole tiles only
    (1, 1, 5, 5, 4, 4),  # shorter than one tile, tiny head
    (1, 2, 70, 33, 24, 40),  # more queries than keys (causal: the last queries see every key)
    (1, 1, 33, 90, 128, 128),  # widest head, more keys than queries
]


@needs_triton
@pytest.mark.parametrize("shape", CASES, ids=str)
@pytest.mark.parametrize("is_causal", [False, True])
def test_float32_matches_sdpa_outputs_and_gradients(shape, is_causal):
    assert _compare(shape, torch.float32, is_causal) < 1e-5


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape,is_causal", [((1, 2, 65, 65, 32, 32), True), ((1, 2, 50, 47, 80, 80), False)],
                         ids=str)
def test_half_precision_matches_sdpa_within_the_policy(dtype, shape, is_causal):
    _compare(shape, dtype, is_causal)  # asserts within utils.tolerances for the dtype


@needs_triton
@pytest.mark.parametrize("seed", range(5))
def test_holds_on_five_seeds(seed):
    assert _compare((1, 2, 45, 45, 16, 16), torch.float32, True, seed=seed) < 1e-5


@needs_triton
@pytest.mark.parametrize("blocks", [
    {"forward": (16, 64), "dkdv": (64, 16), "dq": (16, 16)},  # tiles taller than wide and the reverse
    {"forward": (64, 16), "dkdv": (16, 64), "dq": (64, 32)},
], ids=["narrow", "wide"])
def test_any_tile_shape_gives_the_same_result(blocks):
    for is_causal in (False, True):
        assert _compare((1, 1, 83, 83, 16, 16), torch.float32, is_causal, blocks=blocks) < 1e-5


@needs_triton
def test_custom_scale_and_other_leading_shapes():
    assert _compare((2, 33, 40, 16, 16), scale=0.3) < 1e-5  # 3-D input (G, N, d)
    assert _compare((20, 20, 16, 16), is_causal=True) < 1e-5  # 2-D input (N, d)
    assert _compare((2, 1, 2, 19, 19, 16, 16), is_causal=True) < 1e-5  # 5-D input


@needs_triton
def test_non_contiguous_inputs():
    # (B, N, h, d) viewed as (B, h, N, d): what splitting heads produces
    def prepare(q, k, v):
        return [t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v)]

    assert _compare((2, 3, 29, 29, 16, 16), is_causal=True, prepare=prepare) < 1e-5


@needs_triton
def test_no_keys_gives_zeros_like_sdpa_and_no_queries_gives_an_empty_output():
    q = torch.randn(2, 3, 4, 8, device=DEVICE, requires_grad=True)
    k = torch.randn(2, 3, 0, 8, device=DEVICE, requires_grad=True)
    v = torch.randn(2, 3, 0, 5, device=DEVICE, requires_grad=True)
    out = fa.flash_attention(q, k, v)
    assert out.shape == (2, 3, 4, 5) and torch.equal(out, F.scaled_dot_product_attention(q, k, v))
    out.sum().backward()
    assert torch.equal(q.grad, torch.zeros_like(q))
    empty = fa.flash_attention(q[..., :0, :], k, v)
    assert empty.shape == (2, 3, 0, 5)
    no_batch = fa.flash_attention(*(torch.randn(0, 3, 4, 8, device=DEVICE) for _ in range(3)))
    assert no_batch.shape == (0, 3, 4, 8)


@needs_triton
def test_one_training_step_is_four_launches_and_bitwise_reproducible():
    q, k, v, grad_out = _inputs((1, 2, 50, 50, 16, 16), seed=3)
    grads = []
    for _ in range(2):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        with fa.count_launches() as launches:
            grads.append(torch.autograd.grad(fa.flash_attention(*leaves, is_causal=True), leaves, grad_out))
        assert dict(launches) == {"forward": 1, "delta": 1, "dkdv": 1, "dq": 1}
    assert all(torch.equal(a, b) for a, b in zip(*grads))


@needs_triton
def test_forward_saves_each_rows_maximum_and_normaliser():
    q, k, v, _ = _inputs((2, 41, 30, 16, 16))
    out, row_max, row_sum = fa.flash_attention_forward(q, k, v, scale=0.25, is_causal=False)
    t = q @ k.transpose(-2, -1) * (0.25 * fa.LOG2E)  # (G, N_q, N_k): the scores in base-2 units
    assert row_max.dtype == row_sum.dtype == torch.float32
    assert_close(row_max, t.amax(-1), what="mu: each row's largest score, base 2")
    assert_close(row_sum, torch.exp2(t - row_max[..., None]).sum(-1), what="l: each row's normaliser")
    lse = (row_max + row_sum.log2()) * 0.6931471805599453  # L = ln 2 (mu + log2 l)
    assert_close(lse, torch.logsumexp(q @ k.transpose(-2, -1) * 0.25, dim=-1), what="log-sum-exp")


def _errors_against_float64(fn, shape, is_causal, seed, multiplier):
    """Max |error| of fn's float32 output, dq, dk, dv against float64 SDPA, with q and k times multiplier;
    and one rounding of the largest score carried through P to dV: eps · max|t| · max_j Σ_i P_ij |dO_i|."""
    q, k, v, grad_out = (t.double() for t in _inputs(shape, torch.float32, seed))
    q, k = q * multiplier, k * multiplier
    exact = []
    for dtype, f in ((torch.float64, F.scaled_dot_product_attention), (torch.float32, fn)):
        leaves = [t.to(dtype).requires_grad_(True) for t in (q, k, v)]
        out = f(*leaves, is_causal=is_causal)
        exact.append([out, *torch.autograd.grad(out, leaves, grad_out.to(dtype))])
    scores = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5  # (..., N_q, N_k)
    if is_causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool, device=DEVICE).triu(1),
                                    float("-inf"))
    weights = scores.softmax(-1)
    one_rounding = (torch.finfo(torch.float32).eps * scores.nan_to_num(0, 0, 0).abs().max() * fa.LOG2E
                    * (weights.transpose(-2, -1) @ grad_out.abs()).max()).item()
    return [(ours.double() - ref).abs().max().item() for ours, ref in zip(exact[1], exact[0])], one_rounding


LARGE = (1, 2, 20, 30, 16, 16)  # q, k ~ 30·N(0, 1), d = 16: scores ~±1e3


@needs_triton
@pytest.mark.skipif(not fa.INTERPRETED, reason="the interpreter's products: equal tiles round alike")
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("is_causal", [False, True])
def test_gradients_at_large_logits_are_as_accurate_as_sdpa(is_causal, seed):
    # P = 2^(t - L log2 e) is exact at a row's maximum only if the backward pass recomputes t bit for bit as
    # the forward pass did. The dK, dV kernel once computed K Qᵀ instead of Q Kᵀ: one rounding apart, its
    # dV was 20-200 times less accurate than float32 SDPA's (seed 0: 1.6e-3 against 6.9e-5).
    ours, _ = _errors_against_float64(fa.flash_attention, LARGE, is_causal, seed, 30.0)
    sdpa, _ = _errors_against_float64(F.scaled_dot_product_attention, LARGE, is_causal, seed, 30.0)
    for name, e_ours, e_sdpa in zip(("output", "dq", "dk", "dv"), ours, sdpa):
        assert e_ours <= 10 * e_sdpa + 1e-7, f"{name}: {e_ours:.3g} against float64, SDPA float32 {e_sdpa:.3g}"


@needs_triton
@pytest.mark.skipif(not fa.INTERPRETED, reason="the interpreter's products: equal tiles round alike")
@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("is_causal", [False, True])
def test_dv_at_large_logits_is_within_twice_sdpas_error_on_ten_seeds(is_causal, seed):
    # Library review M3. The backward once recomputed P = 2^(t - L log2 e) from the saved natural log-sum-exp
    # L ~ 1e3: one float32 rounded at that size (steps of 6e-5), then converted to base 2 (two more roundings).
    # P was off by up to ~1e-4 relative and dV's error was 3.0x and 4.9x SDPA's on seeds 7 and 9 (and 33x on
    # causal seed 12). With mu and l saved apart, t - mu is exact: dV's error was at most 1.0x SDPA's on
    # seeds 0-9 (so 2x leaves room), and on seeds 10-19, checked once, also at most 1.0x.
    ours, _ = _errors_against_float64(fa.flash_attention, LARGE, is_causal, seed, 30.0)
    sdpa, _ = _errors_against_float64(F.scaled_dot_product_attention, LARGE, is_causal, seed, 30.0)
    assert ours[3] <= 2 * sdpa[3], f"dv: {ours[3]:.3g} against float64, SDPA float32 {sdpa[3]:.3g}"


@needs_triton
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("is_causal", [False, True])
def test_dv_at_large_logits_costs_at_most_one_rounding_of_the_scores_when_tiles_differ(is_causal, seed):
    # Tiles that differ between the passes round Q Kᵀ differently (under the interpreter; measured: 0.01-0.5
    # of this bound on 12 cases), as the chapter says: the price of recomputing P instead of storing it.
    blocks = {"forward": (64, 16), "dkdv": (16, 64), "dq": (64, 32)}
    ours, bound = _errors_against_float64(lambda *a, **kw: fa.flash_attention(*a, **kw, blocks=blocks),
                                          LARGE, is_causal, seed, 30.0)
    default, _ = _errors_against_float64(fa.flash_attention, LARGE, is_causal, seed, 30.0)
    assert max(ours[3], default[3]) <= bound, f"dv {ours[3]:.3g} (default tiles {default[3]:.3g}) > {bound:.3g}"


def _error(exc_type, match, *args, **kwargs):
    with pytest.raises(exc_type, match=match):
        fa.flash_attention(*args, **kwargs)


@needs_triton
def test_input_errors_name_the_argument_what_it_got_and_what_it_needs():
    q = torch.randn(1, 2, 8, 16, device=DEVICE)
    _error(TypeError, "k must be a torch.Tensor, got list", q, [[1.0]], q)
    _error(ValueError, r"v must have shape \(\.\.\., N, d\) with at least 2 axes, got \(16,\)", q, q, torch.randn(16, device=DEVICE))
    _error(TypeError, "q must be float32, float16 or bfloat16, got torch.float64", q.double(), q.double(), q.double())
    _error(TypeError, "q must be a floating-point tensor, got dtype torch.int64", q.long(), q, q)
    _error(TypeError, "q, k and v must have one dtype", q, q.half(), q)
    _error(ValueError, r"head\) dimension must be 1..128, got 129", *(torch.randn(1, 8, 129, device=DEVICE),) * 3)
    _error(ValueError, r"head\) dimension must be 1..128, got 0", *(torch.randn(1, 8, 0, device=DEVICE),) * 3)
    _error(ValueError, "same leading", q, torch.randn(2, 2, 8, 16, device=DEVICE), torch.randn(2, 2, 8, 16, device=DEVICE))
    _error(ValueError, "q and k must have the same width d", q, torch.randn(1, 2, 8, 32, device=DEVICE), q)
    _error(ValueError, r"k and v must have the same length N_k, got k \(1, 2, 8, 16\) and v \(1, 2, 7, 16\)", q, q,
           torch.randn(1, 2, 7, 16, device=DEVICE))
    _error(TypeError, "is_causal must be True or False, got 1", q, q, q, is_causal=1)
    _error(ValueError, "scale must be a finite number", q, q, q, scale=float("nan"))
    _error(ValueError, "scale must be a finite number", q, q, q, scale="0.1")
    _error(ValueError, re.escape("blocks['forward']'s BLOCK_M must be a power of two, got 24"), q, q, q,
           blocks={"forward": (24, 32)})
    _error(ValueError, re.escape("blocks['dq']'s BLOCK_M must be an int >= 16, got 8"), q, q, q, blocks={"dq": (8, 16)})
    _error(TypeError, re.escape("blocks['dq']'s BLOCK_N must be an int, got float 16.0"), q, q, q,
           blocks={"dq": (16, 16.0)})
    _error(ValueError, "powers of two >= 16", q, q, q, blocks={"dq": [16, 16]})
    _error(ValueError, "keys among", q, q, q, blocks={"backward": (16, 16)})
    _error(TypeError, "autotune must be a bool", q, q, q, autotune="yes")


@pytest.mark.skipif(not fa.TRITON_AVAILABLE or fa.INTERPRETED, reason="needs compiled Triton (a CUDA device)")
def test_compiled_kernels_refuse_cpu_tensors():
    q = torch.randn(1, 8, 16)
    _error(ValueError, "compiled Triton kernels need CUDA tensors", q, q, q)


def test_counting_launches_and_bytes_on_the_meta_device():
    q = torch.empty(2, 3, 64, 16, device="meta")
    counted = fa.count_kernels(lambda: torch.softmax(q @ q.transpose(-2, -1), dim=-1))
    # the transpose is a view (no launch); the product and the softmax are one launch each
    assert counted["launches"] == 2 and set(counted["by_op"]) == {"bmm", "_softmax"}
    # bmm reads 2 x (6, 64, 16) and writes (6, 64, 64); softmax reads and writes (6, 64, 64); float32
    assert counted["bytes"] == 4 * (2 * 6 * 64 * 16 + 3 * 6 * 64 * 64)
    out_buffer = torch.empty(6, 64, 64, device="meta")
    counted = fa.count_kernels(lambda: torch.bmm(q.reshape(6, 64, 16), q.reshape(6, 16, 64), out=out_buffer))
    assert counted["bytes"] == 4 * (2 * 6 * 64 * 16 + 6 * 64 * 64)  # an out= buffer is written, not read


def test_flop_convention_is_flashattentions():
    assert fa.sdpa_flops(32, 8192, 8192, 64, is_causal=False) == 4 * 32 * 8192**2 * 64
    assert fa.sdpa_flops(32, 8192, 8192, 64, is_causal=True, backward=True) == 3.5 * 2 * 32 * 8192**2 * 64


def test_fused_traffic_follows_the_schedule():
    n, d, e = 4096, 64, 2
    blocks = {"forward": (128, 64), "dkdv": (32, 128), "dq": (128, 32)}
    full = fa.fused_attention_traffic(n, n, d, d, 1, e, is_causal=False, blocks=blocks)
    # forward, no mask: Q read and O written once, mu and l written once, K and V read once per query block
    assert full["forward"] == n * 2 * d * e + n * 8 + (n // 128) * n * 2 * d * e
    assert full["delta"] == n * (2 * d * e + 4)
    causal = fa.fused_attention_traffic(n, n, d, d, 8, e, is_causal=True, blocks=blocks)
    groups_scale = fa.fused_attention_traffic(n, n, d, d, 1, e, is_causal=True, blocks=blocks)
    assert all(causal[name] == 8 * groups_scale[name] for name in causal)
    for name in ("forward", "dkdv", "dq"):  # causal skipping reads about half of the other side
        assert 0.45 < groups_scale[name] / full[name] < 0.6


def test_status_line_says_how_kernels_run():
    status = fa.triton_status()
    if not fa.TRITON_AVAILABLE:
        assert "not installed" in status
    elif fa.INTERPRETED:
        assert "interpreter" in status
    else:
        assert "compiled" in status


def _run_without_triton(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python where ``import triton`` fails, as on a machine without it."""
    shim = "import sys; sys.modules['triton'] = None; sys.modules['triton.language'] = None\n"
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-c", shim + textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=scaled(300))


def test_without_triton_the_module_says_what_is_missing_and_the_chapter_skips_its_kernel_cells():
    """The module imports without Triton and raises a clear error; every code cell of the solutions
    notebook runs, and the kernel cells say that they skip."""
    result = _run_without_triton("""
        import torch
        import utils.flash_attention as fa
        assert not fa.TRITON_AVAILABLE and not fa.INTERPRETED
        assert "not installed" in fa.triton_status()
        try:
            fa.flash_attention(torch.zeros(1, 4, 8), torch.zeros(1, 4, 8), torch.zeros(1, 4, 8))
        except RuntimeError as exc:
            assert "needs Triton" in str(exc)
        else:
            raise AssertionError("no error without Triton")
        import json, os
        os.chdir("solutions")
        nb = json.load(open("11_attention_on_the_gpu.ipynb"))
        namespace, printed = {}, []
        import builtins, io, contextlib
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            buffer = io.StringIO()
            try:
                with contextlib.redirect_stdout(buffer):
                    exec(compile(source, cell["id"], "exec"), namespace)
            except AssertionError as exc:
                # Exercise 11.8's hidden tests run the learner's kernel, so without Triton they fail and say
                # why; only the grader runs them (where Triton is), the learner's chapter has none.
                grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                assert grade_id == "ex11_8_check" and "needs Triton" in str(exc), (cell["id"], str(exc))
                assert "Exercise 11.8: not yet. this exercise needs Triton" in buffer.getvalue(), buffer.getvalue()
            printed.append(buffer.getvalue())
        text = "".join(printed)
        assert "Triton is not installed" in text, text[-500:]
        print("ok", text.count("Triton is not installed"))
    """)
    assert result.returncode == 0 and result.stdout.startswith("ok"), (result.stdout[-1000:], result.stderr[-3000:])


@needs_triton
def test_the_fused_and_the_tiled_attention_refuse_a_bad_call_alike():
    """One check of an attention call, chapter 8's: chapter 11 adds only what its kernels need."""
    from utils.efficient_attention import tiled_attention

    q = torch.randn(1, 2, 8, 16, device=DEVICE)
    bad = [((q, [[1.0]], q), {}), ((q, q, torch.randn(16, device=DEVICE)), {}),
           ((q, torch.randn(2, 2, 8, 16, device=DEVICE), q), {}), ((q, torch.randn(1, 2, 8, 32, device=DEVICE), q), {}),
           ((q, q, torch.randn(1, 2, 7, 16, device=DEVICE)), {}), ((q, q.half(), q), {}),
           ((q, q, q), {"is_causal": 1}), ((q, q, q), {"scale": float("inf")})]
    for args, kwargs in bad:
        with pytest.raises((TypeError, ValueError)) as tiled:
            tiled_attention(*args, **kwargs)
        with pytest.raises(type(tiled.value), match=re.escape(str(tiled.value))):
            fa.flash_attention(*args, **kwargs)
