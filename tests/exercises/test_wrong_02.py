"""Chapter 02: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import PASSES_VISIBLE, RECORDS, Wrong, check_wrong_answers

WRONG = {
    "ex02_1": [
        Wrong("right values, but a helper tensor made on the CPU whatever the input's device", """
def effective_items(weights):
    safe = torch.where(weights > 0, weights, torch.ones(weights.shape, dtype=weights.dtype))
    return torch.exp(-(weights * torch.log(safe)).sum(dim=-1))
""", visible=PASSES_VISIBLE),
        Wrong("0 · ln 0 left as NaN", """
def effective_items(weights):
    return torch.exp(-(weights * weights.log()).sum(dim=-1))
""", visible="gave NaN"),
        Wrong("the entropy without the exponential", """
def effective_items(weights):
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))
    return -(weights * safe.log()).sum(dim=-1)
""", visible="must give 4"),
        Wrong("sums over the wrong axis", """
def effective_items(weights):
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))
    return torch.exp(-(weights * safe.log()).sum(dim=0))
""", visible="last axis"),
        Wrong("NaN of 0 · ln 0 replaced after the sum (any row with a zero gives 1)", """
def effective_items(weights):
    return torch.exp(-(weights * torch.log(weights)).sum(-1).nan_to_num(0.0))
""", visible="must give 2"),
        Wrong("a different measure (inverse participation ratio 1/Σw²)", """
def effective_items(weights):
    return 1 / (weights**2).sum(dim=-1)
""", visible="is not right"),
    ],
    "ex02_2": [
        Wrong("forgets that n - 1 keys share the rest", """
def tau_for_top_weight(p, n):
    return 1 / math.log(p / (1 - p))
""", visible="is not right"),
        Wrong("inverts the temperature", """
def tau_for_top_weight(p, n):
    return math.log(p * (n - 1) / (1 - p))
""", visible="is not right"),
        Wrong("logarithm to base 10", """
def tau_for_top_weight(p, n):
    return 1 / math.log10(p * (n - 1) / (1 - p))
""", visible="is not right"),
    ],
    "ex02_3": [
        Wrong("a token always scores itself highest", """
def answer_2_3():
    return "a"
""", visible=RECORDS),
        Wrong("the weights are symmetric too", """
def answer_2_3():
    return "c"
""", visible=RECORDS),
        Wrong("every token looks at itself most", """
def answer_2_3():
    return "d"
""", visible=RECORDS),
        Wrong("two letters at once", """
def answer_2_3():
    return "b and c"
""", visible="expected one of"),
    ],
    "ex02_4": [
        Wrong("softmax over the queries", """
def additive_attention(queries, keys, values, W_q, W_k, w):
    hidden = torch.tanh((queries @ W_q.T).unsqueeze(-2) + (keys @ W_k.T).unsqueeze(-3))
    weights = torch.softmax(hidden @ w, dim=-2)
    return weights @ values, weights
""", visible="sum to 1"),
        Wrong("no tanh (a linear score)", """
def additive_attention(queries, keys, values, W_q, W_k, w):
    hidden = (queries @ W_q.T).unsqueeze(-2) + (keys @ W_k.T).unsqueeze(-3)
    weights = torch.softmax(hidden @ w, dim=-1)
    return weights @ values, weights
""", visible="without the tanh"),
        Wrong("blends the keys instead of the values", """
def additive_attention(queries, keys, values, W_q, W_k, w):
    hidden = torch.tanh((queries @ W_q.T).unsqueeze(-2) + (keys @ W_k.T).unsqueeze(-3))
    weights = torch.softmax(hidden @ w, dim=-1)
    return weights @ keys, weights
""", visible="blend of the values"),
        Wrong("a dot-product score instead of the additive one", """
def additive_attention(queries, keys, values, W_q, W_k, w):
    weights = torch.softmax((queries @ W_q.T) @ (keys @ W_k.T).transpose(-2, -1), dim=-1)
    return weights @ values, weights
"""),
    ],
    "ex02_5": [
        Wrong("fixes the axis but keeps K Qᵀ", """
def attend(X, W_Q, W_K, W_V):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    weights = torch.softmax(K @ Q.T / math.sqrt(Q.size(-1)), dim=-1)
    return weights @ V, weights
""", visible="Q Kᵀ, not K Qᵀ"),
        Wrong("fixes the scores but keeps the softmax over dim 0", """
def attend(X, W_Q, W_K, W_V):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    weights = torch.softmax(Q @ K.T / math.sqrt(Q.size(-1)), dim=0)
    return weights @ V, weights
""", visible="do not sum to 1"),
        Wrong("divides by d_k instead of its square root", """
def attend(X, W_Q, W_K, W_V):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    weights = torch.softmax(Q @ K.T / Q.size(-1), dim=-1)
    return weights @ V, weights
"""),
        Wrong("scales by the square root of the number of tokens", """
def attend(X, W_Q, W_K, W_V):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    weights = torch.softmax(Q @ K.T / math.sqrt(X.size(0)), dim=-1)
    return weights @ V, weights
""", visible="number of tokens"),
        Wrong("blends the keys (V = X W_K)", """
def attend(X, W_Q, W_K, W_V):
    Q, K = X @ W_Q, X @ W_K
    weights = torch.softmax(Q @ K.T / math.sqrt(Q.size(-1)), dim=-1)
    return weights @ K, weights
""", visible="the values are X W_V"),
        Wrong("transposes the weights in the output", """
def attend(X, W_Q, W_K, W_V):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    weights = torch.softmax(Q @ K.T / math.sqrt(Q.size(-1)), dim=-1)
    return weights.T @ V, weights
""", visible="transposed weights"),
    ],
    "ex02_6": [
        Wrong("counts only the best key", """
def answer_2_6():
    return 1
""", visible=RECORDS),
        Wrong("counts every key with a positive score", """
def answer_2_6():
    return 5
""", visible=RECORDS),
        Wrong("counts the three keys with a tag in common", """
def answer_2_6():
    return 3
""", visible=RECORDS),
        Wrong("no answer yet", """
def answer_2_6():
    return None
""", visible="expected a number"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("02", WRONG)
