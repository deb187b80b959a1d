"""Chapter 03: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import PASSES_VISIBLE, RECORDS, Wrong, check_wrong_answers

WRONG = {
    "ex03_1": [
        Wrong("no shift by the row maximum (overflows)", """
def masked_softmax_lse(scores, allowed=None):
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    exps = torch.exp(scores)
    total = exps.sum(-1, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total)), torch.log(total).squeeze(-1)
""", visible="overflow"),
        Wrong("softmax over the wrong axis", """
def masked_softmax_lse(scores, allowed=None):
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    m = scores.amax(dim=-2, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    exps = torch.exp(scores - m)
    total = exps.sum(-2, keepdim=True)
    w = exps / torch.where(total > 0, total, torch.ones_like(total))
    full = scores.amax(-1, keepdim=True)
    full = torch.where(torch.isfinite(full), full, torch.zeros_like(full))
    return w, (full + torch.log(torch.exp(scores - full).sum(-1, keepdim=True))).squeeze(-1)
""", visible="do not sum to 1"),
        Wrong("the mask inverted (True read as ignore)", """
def masked_softmax_lse(scores, allowed=None):
    if allowed is not None:
        scores = scores.masked_fill(allowed, float("-inf"))
    m = scores.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    exps = torch.exp(scores - m)
    total = exps.sum(-1, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total)), (m + torch.log(total)).squeeze(-1)
""", visible="masked positions get weight"),
        Wrong("a fully-masked row becomes NaN", """
def masked_softmax_lse(scores, allowed=None):
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    m = scores.amax(-1, keepdim=True)
    exps = torch.exp(scores - m)
    total = exps.sum(-1, keepdim=True)
    return exps / total, (m + torch.log(total)).squeeze(-1)
""", visible="NaN appeared"),
        Wrong("lse without adding the maximum back", """
def masked_softmax_lse(scores, allowed=None):
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    m = scores.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    exps = torch.exp(scores - m)
    total = exps.sum(-1, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total)), torch.log(total).squeeze(-1)
""", visible="weights and lse disagree"),
        Wrong("row maximum taken before masking (a large masked score underflows the row)", """
def masked_softmax_lse(scores, allowed=None):
    m = scores.amax(-1, keepdim=True)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    exps = torch.exp(scores - m)
    total = exps.sum(-1, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total)), (m + torch.log(total)).squeeze(-1)
""", visible="mask first, then the maximum"),
        Wrong("lse over every entry, masked ones included", """
def masked_softmax_lse(scores, allowed=None):
    full = scores
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    m = scores.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    exps = torch.exp(scores - m)
    total = exps.sum(-1, keepdim=True)
    fm = full.amax(-1, keepdim=True)
    lse = (fm + torch.log(torch.exp(full - fm).sum(-1, keepdim=True))).squeeze(-1)
    return exps / torch.where(total > 0, total, torch.ones_like(total)), lse
"""),
    ],
    "ex03_2": [
        Wrong("right values, but torch.eye made on the CPU whatever p's device", """
def softmax_jacobian(p):
    return torch.eye(p.size(-1), dtype=p.dtype) * p.unsqueeze(-1) - p.unsqueeze(-1) * p.unsqueeze(-2)
""", visible=PASSES_VISIBLE),
        Wrong("outer product without the diagonal", """
def softmax_jacobian(p):
    return -p.unsqueeze(-1) * p.unsqueeze(-2)
""", visible="sum to 0"),
        Wrong("sign of the outer product flipped", """
def softmax_jacobian(p):
    return torch.diag_embed(p) + p.unsqueeze(-1) * p.unsqueeze(-2)
""", visible="sum to 0"),
        Wrong("diagonal only (treats outputs as independent)", """
def softmax_jacobian(p):
    return torch.diag_embed(p * (1 - p))
""", visible="sum to 0"),
        Wrong("only works for one vector (no batch dimensions)", """
def softmax_jacobian(p):
    return torch.diag(p) - torch.outer(p, p)
"""),
        Wrong("J in float64 for a float32 p", """
def softmax_jacobian(p):
    return (torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)).double()
""", visible="the grader refuses any other dtype"),
    ],
    "ex03_3": [
        Wrong("the variance instead of the standard deviation", """
def scaled_score_std(sigma_q, sigma_k, d_k):
    return sigma_q**2 * sigma_k**2
""", visible="is not right"),
        Wrong("forgets the scaling", """
def scaled_score_std(sigma_q, sigma_k, d_k):
    return sigma_q * sigma_k * math.sqrt(d_k)
""", visible="is not right"),
        Wrong("divides by sqrt(d_k) once too often", """
def scaled_score_std(sigma_q, sigma_k, d_k):
    return sigma_q * sigma_k / math.sqrt(d_k)
""", visible="is not right"),
    ],
    "ex03_4": [
        Wrong("fixes the cache but keeps is_causal=True", """
def incremental_attention(q, k, v):
    outputs = []
    for t in range(q.size(-2)):
        out, _ = scaled_dot_product_attention(q[..., t:t + 1, :], k[..., :t + 1, :], v[..., :t + 1, :], is_causal=True)
        outputs.append(out)
    return torch.cat(outputs, dim=-2)
""", visible="top-left corner"),
        Wrong("drops is_causal but keeps the cache without the current position", """
def incremental_attention(q, k, v):
    outputs = []
    for t in range(q.size(-2)):
        out, _ = scaled_dot_product_attention(q[..., t:t + 1, :], k[..., :t, :], v[..., :t, :])
        outputs.append(out)
    return torch.cat(outputs, dim=-2)
""", visible="current one included"),
        Wrong("uses the whole sequence as the cache (sees the future)", """
def incremental_attention(q, k, v):
    outputs = []
    for t in range(q.size(-2)):
        out, _ = scaled_dot_product_attention(q[..., t:t + 1, :], k, v)
        outputs.append(out)
    return torch.cat(outputs, dim=-2)
""", visible="differ"),
    ],
    "ex03_5": [  # a prediction: each wrong option is recorded as the right one is, and graded hidden
        Wrong("underestimates saturation: below 10%", """
def answer_3_5():
    return "a"
""", visible=RECORDS),
        Wrong("10% to 50%", """
def answer_3_5():
    return "b"
""", visible=RECORDS),
        Wrong("overestimates saturation: above 90%", """
def answer_3_5():
    return "d"
""", visible=RECORDS),
        Wrong("a percentage instead of a letter", """
def answer_3_5():
    return "75%"
""", visible="expected one of"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("03", WRONG)
