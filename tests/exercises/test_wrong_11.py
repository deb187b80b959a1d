"""Chapter 11: typical wrong answers are caught by the hidden tests and named by the visible checks."""

import re

import nbformat
from wrong_answer_driver import RECORDS, ROOT, Wrong, check_wrong_answers

MERGE_HEADER = """
def merge_partials(m_a, l_a, acc_a, m_b, l_b, acc_b):
"""
TILE_STEP_HEADER = """
def tile_step(m, l, acc, s, v):
    m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
"""



def _window_cell(body: str, after: str = "") -> str:
    """Exercise 11.8's answer cell (the @triton.jit step only: the kernel is the chapter's, the launcher is in
    the check cell)
    with ``body`` as the step, and ``after`` appended to the cell."""
    (path,) = sorted((ROOT / "solutions").glob("11_*.ipynb"))
    cell = next(c for c in nbformat.read(path, as_version=4).cells
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ex11_8")
    solution = re.compile(r"    ### BEGIN SOLUTION\n.*?    ### END SOLUTION\n?", re.S)
    assert solution.search(cell.source), "ex11_8: no solution markers"
    return solution.sub(lambda _: body.strip("\n") + "\n", cell.source) + after


WINDOW_LOADS = """
    k = _load_tile(k_base, start_n, n, BLOCK_N, D, D, False)
    v = _load_tile(v_base, start_n, n, BLOCK_N, D, D, False)
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
    offs_n = start_n + tl.arange(0, BLOCK_N)
"""
WINDOW_UPDATE = """
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return acc, l_i, m_new
"""
CAUSAL = "(offs_n[None, :] <= offs_m[:, None])"
SDPA_LAUNCHER = """

def window_attention(q, k, v, window, blocks=(16, 16)):
    i = torch.arange(q.size(-2))[:, None]
    j = torch.arange(k.size(-2))[None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i) & (j >= i - window))
"""

WRONG = {
    "ex11_1": [
        Wrong("adds the partial sums without rescaling them to the common maximum", MERGE_HEADER + """
    return torch.maximum(m_a, m_b), l_a + l_b, acc_a + acc_b
""", visible="merged output"),
        Wrong("rescales l but not the accumulator", MERGE_HEADER + """
    m = torch.maximum(m_a, m_b)
    return m, torch.exp(m_a - m) * l_a + torch.exp(m_b - m) * l_b, acc_a + acc_b
""", visible="merged output"),
        Wrong("exponent of the rescaling factor with the wrong sign", MERGE_HEADER + """
    m = torch.maximum(m_a, m_b)
    alpha, beta = torch.exp(m - m_a), torch.exp(m - m_b)
    return m, alpha * l_a + beta * l_b, alpha * acc_a + beta * acc_b
""", visible="merged output"),
        Wrong("keeps the first state's maximum (right output, but exponents can be positive)", MERGE_HEADER + """
    beta = torch.exp(m_b - m_a)
    return m_a, l_a + beta * l_b, acc_a + beta * acc_b
""", visible="largest score"),
    ],
    "ex11_2": [
        Wrong("skip test off by one (a tile starting right after the last query is not skipped)", """
def tile_kind(start_m, start_n, block_m, block_n):
    if start_n > start_m + block_m:
        return "skip"
    if start_n + block_n - 1 <= start_m:
        return "full"
    return "masked"
""", visible="skip it"),
        Wrong("skips a tile as soon as its first key is after the block's first query", """
def tile_kind(start_m, start_n, block_m, block_n):
    if start_n > start_m:
        return "skip"
    if start_n + block_n - 1 <= start_m:
        return "full"
    return "masked"
""", visible="cannot be skipped"),
        Wrong("'full' only when the last key is strictly before the first query", """
def tile_kind(start_m, start_n, block_m, block_n):
    if start_n >= start_m + block_m:
        return "skip"
    if start_n + block_n - 1 < start_m:
        return "full"
    return "masked"
""", visible="no mask is needed"),
        Wrong("block_m and block_n swapped", """
def tile_kind(start_m, start_n, block_m, block_n):
    if start_n >= start_m + block_n:
        return "skip"
    if start_n + block_m - 1 <= start_m:
        return "full"
    return "masked"
""", visible="see keys 8..11"),
    ],
    "ex11_3": [
        Wrong("forgets the factor P", """
def scores_grad(p, d_out, v, out):
    delta = (d_out * out).sum(dim=-1, keepdim=True)
    return d_out @ v.transpose(-2, -1) - delta
""", visible="row sums"),
        Wrong("D as the row sum of dP, not weighted by P", """
def scores_grad(p, d_out, v, out):
    dp = d_out @ v.transpose(-2, -1)
    return p * (dp - dp.sum(dim=-1, keepdim=True))
""", visible="row sums"),
        Wrong("D summed over the query axis", """
def scores_grad(p, d_out, v, out):
    dp = d_out @ v.transpose(-2, -1)
    return p * (dp - (p * dp).sum(dim=0))
""", visible="row sums"),
        Wrong("sign flipped", """
def scores_grad(p, d_out, v, out):
    delta = (d_out * out).sum(dim=-1, keepdim=True)
    return p * (delta - d_out @ v.transpose(-2, -1))
""", visible="finite-difference"),
    ],
    "ex11_7": [
        Wrong("accumulator still not rescaled", TILE_STEP_HEADER + """
    alpha = torch.exp(m - m_new)
    p = torch.exp(s - m_new)
    l = l * alpha + p.sum(dim=-1, keepdim=True)
    acc = acc + p @ v
    return m_new, l, acc
""", visible="was the accumulator rescaled"),
        Wrong("rescaling factor still exp(m_new - m)", TILE_STEP_HEADER + """
    alpha = torch.exp(m_new - m)
    p = torch.exp(s - m_new)
    l = l * alpha + p.sum(dim=-1, keepdim=True)
    acc = acc * alpha + p @ v
    return m_new, l, acc
""", visible="overflows"),
        Wrong("weights still taken against the old maximum", TILE_STEP_HEADER + """
    alpha = torch.exp(m - m_new)
    p = torch.exp(s - m)
    l = l * alpha + p.sum(dim=-1, keepdim=True)
    acc = acc * alpha + p @ v
    return m_new, l, acc
""", visible="overflows"),
        Wrong("rescales the accumulator after adding the new tile", TILE_STEP_HEADER + """
    alpha = torch.exp(m - m_new)
    p = torch.exp(s - m_new)
    l = l * alpha + p.sum(dim=-1, keepdim=True)
    acc = (acc + p @ v) * alpha
    return m_new, l, acc
""", visible="acc / l after folding"),
    ],
    "ex11_8": [
        Wrong("window edge off by one: key i - window dropped", _window_cell(WINDOW_LOADS + f"""
    keep = {CAUSAL} & (offs_n[None, :] > offs_m[:, None] - window)
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE), visible="one key too narrow"),
        Wrong("window edge off by one: key i - window - 1 kept", _window_cell(WINDOW_LOADS + f"""
    keep = {CAUSAL} & (offs_n[None, :] >= offs_m[:, None] - window - 1)
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE), visible="one key too wide"),
        Wrong("forgets the causal part: keys after the query kept", _window_cell(WINDOW_LOADS + """
    keep = offs_n[None, :] >= offs_m[:, None] - window
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE), visible="causal part of the mask is missing"),
        Wrong("mask applied to the weights after the row maximum", _window_cell(WINDOW_LOADS + f"""
    keep = {CAUSAL} & (offs_n[None, :] >= offs_m[:, None] - window)
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.where(keep, tl.exp2(s - m_new[:, None]), 0.0)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return acc, l_i, m_new
"""), visible="before the row maximum"),
        Wrong("no guard for a row whose maximum is still -inf", _window_cell(WINDOW_LOADS + f"""
    keep = {CAUSAL} & (offs_n[None, :] >= offs_m[:, None] - window)
    s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return acc, l_i, m_new
"""), visible="2^(-inf - (-inf)) is NaN"),
        Wrong("loads K and V without a mask: reads past the last key", _window_cell("""
    rows = start_n + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, D)
    k = tl.load(k_base + rows[:, None] * D + cols[None, :])
    v = tl.load(v_base + rows[:, None] * D + cols[None, :])
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
    offs_n = start_n + tl.arange(0, BLOCK_N)
""" + f"""
    keep = {CAUSAL} & (offs_n[None, :] >= offs_m[:, None] - window)
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE), visible="loaded with a mask"),
        Wrong("natural exponential on base-2 scores", _window_cell(WINDOW_LOADS + f"""
    keep = {CAUSAL} & (offs_n[None, :] >= offs_m[:, None] - window)
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE.replace("tl.exp2", "tl.exp")), visible="tl.exp2"),
        Wrong("head size hard-coded to 16", _window_cell("""
    k = _load_tile(k_base, start_n, n, BLOCK_N, 16, 16, False)
    v = _load_tile(v_base, start_n, n, BLOCK_N, 16, 16, False)
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
    offs_n = start_n + tl.arange(0, BLOCK_N)
""" + f"""
    keep = {CAUSAL} & (offs_n[None, :] >= offs_m[:, None] - window)
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE), visible="equal reduction dimensions"),
        Wrong("key tile size hard-coded to 16 instead of BLOCK_N", _window_cell("""
    k = _load_tile(k_base, start_n, n, 16, D, D, False)
    v = _load_tile(v_base, start_n, n, 16, D, D, False)
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
    offs_n = start_n + tl.arange(0, 16)
""" + f"""
    keep = {CAUSAL} & (offs_n[None, :] >= offs_m[:, None] - window)
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE), visible="hard-coded"),
        Wrong("window measured forwards: keys i .. i + window", _window_cell(WINDOW_LOADS + """
    keep = (offs_n[None, :] >= offs_m[:, None]) & (offs_n[None, :] <= offs_m[:, None] + window)
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE), visible="the window looks ahead"),
        Wrong("leaves the step empty and replaces the launcher with SDPA in the answer cell (the check cell's "
              "own launcher runs the step)", _window_cell("""
    return acc, l_i, m_i
""", after=SDPA_LAUNCHER), visible="entries differ"),
        Wrong("loads only whole tiles: keys of a ragged last tile dropped", _window_cell(WINDOW_LOADS + f"""
    keep = {CAUSAL} & (offs_n[None, :] >= offs_m[:, None] - window) & (offs_n[None, :] < (n // BLOCK_N) * BLOCK_N)
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE), visible="N = 37"),
        # Red team (issue 25, 11-8): both ran under the interpreter and passed every numerical case.
        Wrong("the weights computed with NumPy inside @triton.jit (the interpreter's tiles are arrays)",
              _window_cell(WINDOW_LOADS + f"""
    import numpy as np
    keep = {CAUSAL} & (offs_n[None, :] >= offs_m[:, None] - window)
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE.replace("p = tl.exp2(", "p = np.exp2(")), visible="cannot compile it for a GPU"),
        Wrong("unmasked loads past the last row, their NaNs cleaned away afterwards", _window_cell("""
    rows = start_n + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, D)
    k = tl.load(k_base + rows[:, None] * D + cols[None, :])
    v = tl.load(v_base + rows[:, None] * D + cols[None, :])
    k = tl.where(k == k, k, 0.0)
    v = tl.where(v == v, v, 0.0)
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
    offs_n = start_n + tl.arange(0, BLOCK_N)
""" + f"""
    keep = {CAUSAL} & (offs_n[None, :] >= offs_m[:, None] - window) & (offs_n[None, :] < n)
    s = tl.where(keep, s, float("-inf"))
""" + WINDOW_UPDATE), visible="has no mask"),
    ],
    "ex11_4": [
        Wrong("the full 16 × 16 grid: the causal skip forgotten", """
def answer_11_4():
    return 256
""", visible=RECORDS),
        Wrong("one tile per query block", """
def answer_11_4():
    return 16
""", visible=RECORDS),
        Wrong("the forward and backward products counted together", """
def answer_11_4():
    return 272
""", visible=RECORDS),
        Wrong("a rounded value as a string", """
def answer_11_4():
    return "136"
""", visible="expected a number"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("11", WRONG)
