"""Chapter 12: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import PASSES_VISIBLE, RECORDS, Wrong, check_wrong_answers

WRONG = {
    "ex12_1": [
        Wrong("peak read off the slope of the ramp", """
def schedule_peak(d_model, warmup):
    return d_model**-0.5 * warmup**-1.5
def warmup_for_peak(d_model, peak_lr):
    return (d_model**0.5 * peak_lr) ** (-2 / 3)
""", visible="is not right"),
        Wrong("forgot the warm-up factor", """
def schedule_peak(d_model, warmup):
    return d_model**-0.5
def warmup_for_peak(d_model, peak_lr):
    return 1.0 / (d_model * peak_lr**2)
""", visible="inverses"),
        Wrong("inverse without the square", """
def schedule_peak(d_model, warmup):
    return d_model**-0.5 * warmup**-0.5
def warmup_for_peak(d_model, peak_lr):
    return 1.0 / (d_model * peak_lr)
""", visible="inverses"),
        Wrong("d_model^-1 instead of d_model^-1/2", """
def schedule_peak(d_model, warmup):
    return 1.0 / (d_model * warmup**0.5)
def warmup_for_peak(d_model, peak_lr):
    return 1.0 / (d_model * peak_lr) ** 2
""", visible="2 times lower"),
    ],
    "ex12_2": [
        Wrong("padding rows counted", """
def smoothed_cross_entropy(logits, target, epsilon, ignore_index=0):
    log_p = logits.log_softmax(-1)
    q = torch.full_like(log_p, epsilon / logits.size(-1))
    q[torch.arange(len(target)), target] += 1 - epsilon
    return -(q * log_p).sum(-1).mean()
""", visible="counts the padding rows"),
        Wrong("the Annotated Transformer's convention: epsilon / (K - 2), nothing on padding", """
def smoothed_cross_entropy(logits, target, epsilon, ignore_index=0):
    log_p = logits.log_softmax(-1)
    q = torch.full_like(log_p, epsilon / (logits.size(-1) - 2))
    q[:, ignore_index] = 0.0
    q[torch.arange(len(target)), target] = 1 - epsilon
    keep = target != ignore_index
    return -(q * log_p).sum(-1)[keep].mean()
""", visible="Annotated Transformer"),
        Wrong("epsilon spread over the K - 1 wrong classes only", """
def smoothed_cross_entropy(logits, target, epsilon, ignore_index=0):
    log_p = logits.log_softmax(-1)
    q = torch.full_like(log_p, epsilon / (logits.size(-1) - 1))
    q[torch.arange(len(target)), target] = 1 - epsilon
    keep = target != ignore_index
    return -(q * log_p).sum(-1)[keep].mean()
""", visible="smoothed_cross_entropy(epsilon=0.2)"),
        Wrong("the correct class keeps weight 1 (q does not sum to 1)", """
def smoothed_cross_entropy(logits, target, epsilon, ignore_index=0):
    log_p = logits.log_softmax(-1)
    q = torch.full_like(log_p, epsilon / logits.size(-1))
    q[torch.arange(len(target)), target] += 1.0
    keep = target != ignore_index
    return -(q * log_p).sum(-1)[keep].mean()
""", visible="smoothed_cross_entropy(epsilon=0.2)"),
        Wrong("probabilities instead of log-probabilities", """
def smoothed_cross_entropy(logits, target, epsilon, ignore_index=0):
    p = logits.softmax(-1)
    q = torch.full_like(p, epsilon / logits.size(-1))
    q[torch.arange(len(target)), target] += 1 - epsilon
    keep = target != ignore_index
    return -(q * p).sum(-1)[keep].mean()
""", visible="epsilon = 0"),
        Wrong("divides by all rows, padding included", """
def smoothed_cross_entropy(logits, target, epsilon, ignore_index=0):
    log_p = logits.log_softmax(-1)
    q = torch.full_like(log_p, epsilon / logits.size(-1))
    q[torch.arange(len(target)), target] += 1 - epsilon
    keep = target != ignore_index
    return -(q * log_p).sum(-1)[keep].sum() / len(target)
""", visible="epsilon = 0"),
    ],
    "ex12_3": [
        Wrong("no length penalty (raw log-probability)", """
def beam_step(log_prob, length, finished, next_log_probs, alpha, pad=0):
    k, vocab = next_log_probs.shape
    frozen = torch.full_like(next_log_probs, float("-inf"))
    frozen[:, pad] = 0.0
    cand = log_prob[:, None] + torch.where(finished[:, None], frozen, next_log_probs)
    best = cand.reshape(-1).topk(k).indices
    return best // vocab, best % vocab, cand.reshape(-1)[best]
""", visible="alpha changed nothing"),
        Wrong("finished hypotheses extended by any token", """
def beam_step(log_prob, length, finished, next_log_probs, alpha, pad=0):
    k, vocab = next_log_probs.shape
    cand = log_prob[:, None] + next_log_probs
    lengths = (length + 1)[:, None].expand(k, vocab)
    best = (cand / ((5.0 + lengths) / 6.0) ** alpha).reshape(-1).topk(k).indices
    return best // vocab, best % vocab, cand.reshape(-1)[best]
"""),
        Wrong("finished hypotheses keep growing in length", """
def beam_step(log_prob, length, finished, next_log_probs, alpha, pad=0):
    k, vocab = next_log_probs.shape
    frozen = torch.full_like(next_log_probs, float("-inf"))
    frozen[:, pad] = 0.0
    cand = log_prob[:, None] + torch.where(finished[:, None], frozen, next_log_probs)
    lengths = (length + 1)[:, None].expand(k, vocab)
    best = (cand / ((5.0 + lengths) / 6.0) ** alpha).reshape(-1).topk(k).indices
    return best // vocab, best % vocab, cand.reshape(-1)[best]
""", visible="keeps its length"),
        Wrong("length penalty from the parent's length (the new token not counted)", """
def beam_step(log_prob, length, finished, next_log_probs, alpha, pad=0):
    k, vocab = next_log_probs.shape
    frozen = torch.full_like(next_log_probs, float("-inf"))
    frozen[:, pad] = 0.0
    cand = log_prob[:, None] + torch.where(finished[:, None], frozen, next_log_probs)
    lengths = length[:, None].expand(k, vocab)
    best = (cand / ((5.0 + lengths) / 6.0) ** alpha).reshape(-1).topk(k).indices
    return best // vocab, best % vocab, cand.reshape(-1)[best]
""", visible="length + 1"),
        Wrong("finished hypotheses dropped from the beam", """
def beam_step(log_prob, length, finished, next_log_probs, alpha, pad=0):
    k, vocab = next_log_probs.shape
    cand = log_prob[:, None] + torch.where(finished[:, None], torch.full_like(next_log_probs, float("-inf")),
                                           next_log_probs)
    lengths = (length + 1)[:, None].expand(k, vocab)
    best = (cand / ((5.0 + lengths) / 6.0) ** alpha).reshape(-1).topk(k).indices
    return best // vocab, best % vocab, cand.reshape(-1)[best]
""", visible="was dropped"),
        Wrong("the best token of each beam instead of the best k overall", """
def beam_step(log_prob, length, finished, next_log_probs, alpha, pad=0):
    k, vocab = next_log_probs.shape
    frozen = torch.full_like(next_log_probs, float("-inf"))
    frozen[:, pad] = 0.0
    cand = log_prob[:, None] + torch.where(finished[:, None], frozen, next_log_probs)
    token = cand.argmax(-1)
    parent = torch.arange(k)
    new = cand[parent, token]
    order = (new / ((5.0 + length + (~finished).float()) / 6.0) ** alpha).argsort(descending=True)
    return parent[order], token[order], new[order]
""", visible=PASSES_VISIBLE),
    ],
    "ex12_4": [
        Wrong("top-left causal mask (is_causal=True)", """
def attend_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_cache, k_new], dim=-2)
    v_all = torch.cat([v_cache, v_new], dim=-2)
    return F.scaled_dot_product_attention(q_new, k_all, v_all, is_causal=True), (k_all, v_all)
""", visible="bottom-right"),
        Wrong("no mask: new tokens see each other's future", """
def attend_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_cache, k_new], dim=-2)
    v_all = torch.cat([v_cache, v_new], dim=-2)
    return F.scaled_dot_product_attention(q_new, k_all, v_all), (k_all, v_all)
""", visible="bottom-right"),
        Wrong("new keys put before the cached ones", """
def attend_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_new, k_cache], dim=-2)
    v_all = torch.cat([v_new, v_cache], dim=-2)
    t_q, t_k = q_new.size(-2), k_all.size(-2)
    mask = torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)
    return F.scaled_dot_product_attention(q_new, k_all, v_all, attn_mask=mask), (k_all, v_all)
""", visible="earlier keys followed by the new ones"),
        Wrong("attends to the new tokens only (the cache is ignored)", """
def attend_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_cache, k_new], dim=-2)
    v_all = torch.cat([v_cache, v_new], dim=-2)
    return F.scaled_dot_product_attention(q_new, k_new, v_new, is_causal=True), (k_all, v_all)
""", visible="output with 1 new token"),
    ],
    "ex12_5": [
        Wrong("top-left alignment", """
def bottom_right_causal_mask(t_q, t_k, device=None):
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril()
""", visible="top-left alignment"),
        Wrong("True and False swapped", """
def bottom_right_causal_mask(t_q, t_k, device=None):
    return ~torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q)
""", visible="swapped"),
        Wrong("off by one: each query misses its own key", """
def bottom_right_causal_mask(t_q, t_k, device=None):
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q - 1)
""", visible="causal_lower_right"),
        Wrong("a float 0/1 mask (SDPA would add it to the scores)", """
def bottom_right_causal_mask(t_q, t_k, device=None):
    return torch.ones(t_q, t_k, device=device).tril(diagonal=t_k - t_q)
""", visible="boolean tensor"),
    ],
    "ex12_6": [
        Wrong("never stops at EOS", """
def greedy(next_logits, bos, eos, max_len):
    prefix = [bos]
    for _ in range(max_len):
        prefix.append(int(next_logits(prefix).argmax()))
    return prefix[1:]
""", visible="kept generating after EOS"),
        Wrong("drops EOS", """
def greedy(next_logits, bos, eos, max_len):
    prefix = [bos]
    for _ in range(max_len):
        token = int(next_logits(prefix).argmax())
        if token == eos:
            break
        prefix.append(token)
    return prefix[1:]
""", visible="EOS is missing"),
        Wrong("returns BOS too", """
def greedy(next_logits, bos, eos, max_len):
    prefix = [bos]
    for _ in range(max_len):
        token = int(next_logits(prefix).argmax())
        prefix.append(token)
        if token == eos:
            break
    return prefix
""", visible="starts with BOS"),
        Wrong("one token too many", """
def greedy(next_logits, bos, eos, max_len):
    prefix = [bos]
    for _ in range(max_len + 1):
        token = int(next_logits(prefix).argmax())
        prefix.append(token)
        if token == eos:
            break
    return prefix[1:]
""", visible="expected 4 ids"),
    ],
    "ex12_7": [
        Wrong("multi-head cache (d instead of d_k)", "def answer_12_7():\n    return 2 * 32 * 4096 * 2 * 8 * 3000 / 2**30\n"),
        Wrong("keys only (no factor 2)", "def answer_12_7():\n    return 32 * 128 * 2 * 8 * 3000 / 2**30\n"),
        Wrong("GB instead of GiB", "def answer_12_7():\n    return 2 * 32 * 128 * 2 * 8 * 3000 / 1e9\n"),
    ],
    "ex12_8": [  # a prediction: each wrong option is recorded as the right one is, and graded hidden
        Wrong("option 'b', not the right one", """
def answer_12_8():
    return "b"
""", visible=RECORDS),
        Wrong("option 'c', not the right one", """
def answer_12_8():
    return "c"
""", visible=RECORDS),
        Wrong("not one of the options", """
def answer_12_8():
    return "a or b"
""", visible="expected one of"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("12", WRONG)
