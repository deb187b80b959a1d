"""Chapter 11: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import Wrong, check_wrong_answers

MERGE_HEADER = """
def merge_partials(m_a, l_a, acc_a, m_b, l_b, acc_b):
"""
TILE_STEP_HEADER = """
def tile_step(m, l, acc, s, v):
    m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
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
}


def test_wrong_answers_are_caught():
    check_wrong_answers("11", WRONG)
