"""Chapter 11's kernels through Triton's compiler front end for NVIDIA GPUs, without a GPU (utils.triton_ir).

The interpreter (TRITON_INTERPRET=1) runs any Python inside @triton.jit; the front end accepts only Triton.
These tests are what the CPU can say about the compiled path: every kernel of the chapter becomes Triton IR
for compute capability 8.0 (A100) and 9.0 (H100, H200), in each dtype, and reads no memory without a mask.
"""

import pytest

from utils import flash_attention as fa

pytestmark = pytest.mark.skipif(not fa.TRITON_AVAILABLE, reason="Triton is not installed (Linux wheels only)")

from utils.triton_ir import TritonCompileError, triton_ir_for_cuda, unmasked_loads  # noqa: E402

POINTERS = {"_flash_forward_kernel": ("Q", "K", "V", "O", "*ROW_MAX", "*ROW_SUM"),
            "_flash_delta_kernel": ("O", "DO", "*DELTA"),
            "_flash_dkdv_kernel": ("Q", "K", "V", "DO", "*ROW_MAX", "*ROW_SUM", "*DELTA", "DK", "DV_OUT"),
            "_flash_dq_kernel": ("Q", "K", "V", "DO", "*ROW_MAX", "*ROW_SUM", "*DELTA", "DQ")}
SCALARS = {"_flash_forward_kernel": {"n_q": "i32", "n_k": "i32", "qk_scale": "fp32"},
           "_flash_delta_kernel": {"n_q": "i32"},
           "_flash_dkdv_kernel": {"n_q": "i32", "n_k": "i32", "qk_scale": "fp32", "sm_scale": "fp32"},
           "_flash_dq_kernel": {"n_q": "i32", "n_k": "i32", "qk_scale": "fp32", "sm_scale": "fp32"}}
TILES = {"_flash_forward_kernel": "forward", "_flash_delta_kernel": "forward", "_flash_dkdv_kernel": "dkdv",
         "_flash_dq_kernel": "dq"}


def _request(kernel: str, dtype: str, causal: bool, d: int) -> tuple[dict, dict]:
    """The signature and constants the chapter's launcher gives ``kernel`` (its first GPU tile choice)."""
    signature = {name.lstrip("*"): "*fp32" if name.startswith("*") else f"*{dtype}" for name in POINTERS[kernel]}
    signature.update(SCALARS[kernel])
    block = max(16, 1 << (d - 1).bit_length())
    block_m, block_n, _, _ = fa.GPU_CONFIGS[TILES[kernel]][0]
    if kernel == "_flash_delta_kernel":
        constants = {"DV": d, "BLOCK_DV": block, "BLOCK_M": block_m, "UPCAST": False}
    else:
        constants = {"D": d, "DV": d, "BLOCK_D": block, "BLOCK_DV": block, "BLOCK_M": block_m, "BLOCK_N": block_n,
                     "CAUSAL": causal, "PRECISION": "ieee" if dtype == "fp32" else "tf32", "UPCAST": False}
    signature.update(dict.fromkeys(constants, "constexpr"))
    return signature, constants


@pytest.mark.parametrize("dtype, causal, d, capability", [("fp32", True, 64, 80), ("bf16", False, 128, 90),
                                                          ("fp16", True, 40, 90)])
def test_every_kernel_of_the_chapter_compiles_for_a_gpu_and_masks_every_load(dtype, causal, d, capability):
    for kernel in POINTERS:
        signature, constants = _request(kernel, dtype, causal, d)
        ir = triton_ir_for_cuda(kernel, signature, constants, capability=capability)
        assert f"tt.func public @{kernel}" in ir, ir[:500]
        assert unmasked_loads(ir) == [], (kernel, unmasked_loads(ir))
        if kernel != "_flash_delta_kernel":
            assert "tt.dot" in ir, kernel


def test_the_front_end_refuses_numpy_inside_jit_and_names_the_line():
    source = """
import numpy as np


@triton.jit
def _numpy_inside(X, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Y + offs, np.exp2(tl.load(X + offs)))
"""
    with pytest.raises(TritonCompileError) as refused:
        triton_ir_for_cuda("_numpy_inside", {"X": "*fp32", "Y": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 16},
                           source=source)
    assert "np.exp2(tl.load(X + offs))" in refused.value.summary()


def test_an_unmasked_load_is_found_and_a_masked_one_is_not():
    source = """
@triton.jit
def _copy(X, Y, n, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if MASKED:
        x = tl.load(X + offs, mask=offs < n, other=0.0)
    else:
        x = tl.load(X + offs)
    tl.store(Y + offs, x, mask=offs < n)
"""
    signature = {"X": "*fp32", "Y": "*fp32", "n": "i32", "BLOCK": "constexpr", "MASKED": "constexpr"}
    unmasked = triton_ir_for_cuda("_copy", signature, {"BLOCK": 16, "MASKED": False}, source=source)
    masked = triton_ir_for_cuda("_copy", signature, {"BLOCK": 16, "MASKED": True}, source=source)
    assert len(unmasked_loads(unmasked)) == 1 and unmasked_loads(masked) == []
