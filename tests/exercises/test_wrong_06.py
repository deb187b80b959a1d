"""Chapter 06: typical wrong answers are caught by the hidden tests and named by the visible checks."""

import nbformat
from wrong_answer_driver import PASSES_VISIBLE, RECORDS, ROOT, Wrong, check_wrong_answers

DECODER_HELPERS = '''
def _attend(p, n_heads, x_q, x_kv, name, mask, scale=None):
    q = split_heads(x_q @ p[f"{name}_q"], n_heads)
    k = split_heads(x_kv @ p[f"{name}_k"], n_heads)
    v = split_heads(x_kv @ p[f"{name}_v"], n_heads)
    return merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)) @ p[f"{name}_o"]
'''

WRONG = {
    "ex06_1": [
        Wrong("ReLU instead of GELU", """
def ffn(x, w1, b1, w2, b2):
    return F.relu(x @ w1 + b1) @ w2 + b2
""", visible="you used ReLU"),
        Wrong("the tanh approximation of GELU", """
def ffn(x, w1, b1, w2, b2):
    return F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2
""", visible="tanh approximation"),
        Wrong("activation after the second product", """
def ffn(x, w1, b1, w2, b2):
    return F.gelu((x @ w1 + b1) @ w2 + b2)
""", visible="add b2 after the second product"),
        Wrong("b1 added after the activation", """
def ffn(x, w1, b1, w2, b2):
    return (F.gelu(x @ w1) + b1) @ w2 + b2
""", visible="b1 is added after the activation"),
        Wrong("b1 forgotten", """
def ffn(x, w1, b1, w2, b2):
    return F.gelu(x @ w1) @ w2 + b2
""", visible="is not right"),
    ],
    "ex06_2": [
        Wrong("Phi(x) only (product rule forgotten)", """
def gelu_derivative(x):
    return 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
""", visible="Did you drop that term"),
        Wrong("the x phi(x) term with the wrong sign", """
def gelu_derivative(x):
    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    return cdf - x * torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
""", visible="flip its sign"),
        Wrong("x phi(x) only", """
def gelu_derivative(x):
    return x * torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
""", visible="Phi(0) = 1/2"),
        Wrong("density without its 1/sqrt(2 pi)", """
def gelu_derivative(x):
    return 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0))) + x * torch.exp(-0.5 * x * x)
""", visible="is not right"),
        Wrong("the derivative of the tanh approximation", """
def gelu_derivative(x):
    a = math.sqrt(2.0 / math.pi)
    u = a * (x + 0.044715 * x**3)
    t = torch.tanh(u)
    return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * a * (1 + 3 * 0.044715 * x**2)
""", visible="is not right"),
    ],
    "ex06_3": [
        Wrong("no causal mask in the self-attention", DECODER_HELPERS + """
def decoder_block(y, memory, p, memory_allowed, n_heads):
    d = y.size(-1)
    y = F.layer_norm(y + _attend(p, n_heads, y, y, "self", None), (d,), p["ln1"])
    y = F.layer_norm(y + _attend(p, n_heads, y, memory, "cross", memory_allowed[:, None, None, :]), (d,), p["ln2"])
    return F.layer_norm(y + F.relu(y @ p["w1"]) @ p["w2"], (d,), p["ln3"])
""", visible="must be causal"),
        Wrong("cross-attention made causal", DECODER_HELPERS + """
def decoder_block(y, memory, p, memory_allowed, n_heads):
    d, t_dec, t_enc = y.size(-1), y.size(1), memory.size(1)
    causal = torch.ones(t_dec, t_dec, dtype=torch.bool, device=y.device).tril()
    cross = memory_allowed[:, None, None, :] & torch.ones(t_dec, t_enc, dtype=torch.bool, device=y.device).tril()
    y = F.layer_norm(y + _attend(p, n_heads, y, y, "self", causal), (d,), p["ln1"])
    y = F.layer_norm(y + _attend(p, n_heads, y, memory, "cross", cross), (d,), p["ln2"])
    return F.layer_norm(y + F.relu(y @ p["w1"]) @ p["w2"], (d,), p["ln3"])
""", visible="must not be causal"),
        Wrong("memory mask inverted (True read as padding)", DECODER_HELPERS + """
def decoder_block(y, memory, p, memory_allowed, n_heads):
    d, t = y.size(-1), y.size(1)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    y = F.layer_norm(y + _attend(p, n_heads, y, y, "self", causal), (d,), p["ln1"])
    y = F.layer_norm(y + _attend(p, n_heads, y, memory, "cross", ~memory_allowed[:, None, None, :]), (d,), p["ln2"])
    return F.layer_norm(y + F.relu(y @ p["w1"]) @ p["w2"], (d,), p["ln3"])
""", visible="Is the memory mask the right way round?"),
        Wrong("memory mask inverted, as an additive -1e9 mask (no fully masked row)", DECODER_HELPERS + """
def decoder_block(y, memory, p, memory_allowed, n_heads):
    d, t = y.size(-1), y.size(1)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    additive = torch.zeros(memory_allowed.shape, dtype=y.dtype).masked_fill(memory_allowed, -1e9)[:, None, None, :]
    y = F.layer_norm(y + _attend(p, n_heads, y, y, "self", causal), (d,), p["ln1"])
    y = F.layer_norm(y + _attend(p, n_heads, y, memory, "cross", additive), (d,), p["ln2"])
    return F.layer_norm(y + F.relu(y @ p["w1"]) @ p["w2"], (d,), p["ln3"])
"""),
        Wrong("padding of the source ignored", DECODER_HELPERS + """
def decoder_block(y, memory, p, memory_allowed, n_heads):
    d, t = y.size(-1), y.size(1)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    y = F.layer_norm(y + _attend(p, n_heads, y, y, "self", causal), (d,), p["ln1"])
    y = F.layer_norm(y + _attend(p, n_heads, y, memory, "cross", None), (d,), p["ln2"])
    return F.layer_norm(y + F.relu(y @ p["w1"]) @ p["w2"], (d,), p["ln3"])
""", visible="must ignore positions where memory_allowed is False"),
        Wrong("Pre-LN instead of Post-LN", DECODER_HELPERS + """
def decoder_block(y, memory, p, memory_allowed, n_heads):
    d, t = y.size(-1), y.size(1)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    h = F.layer_norm(y, (d,), p["ln1"])
    y = y + _attend(p, n_heads, h, h, "self", causal)
    y = y + _attend(p, n_heads, F.layer_norm(y, (d,), p["ln2"]), memory, "cross", memory_allowed[:, None, None, :])
    return y + F.relu(F.layer_norm(y, (d,), p["ln3"]) @ p["w1"]) @ p["w2"]
""", visible="not LayerNorm'ed"),
        Wrong("one head instead of n_heads", DECODER_HELPERS + """
def decoder_block(y, memory, p, memory_allowed, n_heads):
    d, t = y.size(-1), y.size(1)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    y = F.layer_norm(y + _attend(p, 1, y, y, "self", causal), (d,), p["ln1"])
    y = F.layer_norm(y + _attend(p, 1, y, memory, "cross", memory_allowed[:, None, None, :]), (d,), p["ln2"])
    return F.layer_norm(y + F.relu(y @ p["w1"]) @ p["w2"], (d,), p["ln3"])
""", visible="vs nn.TransformerDecoderLayer"),
        Wrong("scores not scaled by 1/sqrt(d_k)", DECODER_HELPERS + """
def decoder_block(y, memory, p, memory_allowed, n_heads):
    d, t = y.size(-1), y.size(1)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    y = F.layer_norm(y + _attend(p, n_heads, y, y, "self", causal, scale=1.0), (d,), p["ln1"])
    y = F.layer_norm(y + _attend(p, n_heads, y, memory, "cross", memory_allowed[:, None, None, :], scale=1.0),
                     (d,), p["ln2"])
    return F.layer_norm(y + F.relu(y @ p["w1"]) @ p["w2"], (d,), p["ln3"])
""", visible="vs nn.TransformerDecoderLayer"),
    ],
    "ex06_4": [
        Wrong("BOS kept in the output", """
def greedy(step_logits, batch, max_len, device="cpu"):
    out = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    for _ in range(max_len):
        nxt = step_logits(out)[:, -1].argmax(-1).masked_fill(done, PAD)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == EOS
    return out[:, :max_len]
""", visible="starts with BOS"),
        Wrong("the first position's logits every step", """
def greedy(step_logits, batch, max_len, device="cpu"):
    out = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    for _ in range(max_len):
        nxt = step_logits(out)[:, 0].argmax(-1).masked_fill(done, PAD)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == EOS
    return out[:, 1:]
""", visible="newest position"),
        Wrong("keeps writing after EOS", """
def greedy(step_logits, batch, max_len, device="cpu"):
    out = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    for _ in range(max_len):
        nxt = step_logits(out)[:, -1].argmax(-1)
        out = torch.cat([out, nxt[:, None]], dim=1)
    return out[:, 1:]
""", visible="after EOS a row holds PAD"),
        Wrong("after EOS only non-EOS tokens become PAD (EOS repeated)", """
def greedy(step_logits, batch, max_len, device="cpu"):
    out = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    for _ in range(max_len):
        nxt = step_logits(out)[:, -1].argmax(-1)
        nxt = torch.where(done & (nxt != EOS), torch.full_like(nxt, PAD), nxt)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == EOS
    return out[:, 1:]
""", visible="after EOS a row holds PAD"),
        Wrong("feeds only the newest token", """
def greedy(step_logits, batch, max_len, device="cpu"):
    out = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    for _ in range(max_len):
        nxt = step_logits(out[:, -1:])[:, -1].argmax(-1).masked_fill(done, PAD)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == EOS
    return out[:, 1:]
""", visible="starting with BOS"),
        Wrong("one step too few (the loop runs max_len - 1 times)", """
def greedy(step_logits, batch, max_len, device="cpu"):
    out = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    for _ in range(max_len - 1):
        nxt = step_logits(out)[:, -1].argmax(-1).masked_fill(done, PAD)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == EOS
        if done.all():
            break
    result = out[:, 1:]
    return torch.cat([result, torch.full((batch, max_len - result.size(1)), PAD, dtype=torch.long)], dim=1)
""", visible=PASSES_VISIBLE),
    ],
    "ex06_5": [
        Wrong("the bug itself: the input is the target", """
def decoder_io(reversal):
    B = reversal.size(0)
    lengths = (reversal != PAD).sum(1)
    tgt_out = torch.cat([reversal, torch.full((B, 1), PAD)], dim=1)
    tgt_out[torch.arange(B), lengths] = EOS
    return tgt_out.clone(), tgt_out
""", visible="must start with BOS"),
        Wrong("input and target swapped", """
def decoder_io(reversal):
    B = reversal.size(0)
    lengths = (reversal != PAD).sum(1)
    tgt_in = torch.cat([reversal, torch.full((B, 1), PAD)], dim=1)
    tgt_in[torch.arange(B), lengths] = EOS
    return tgt_in, torch.cat([torch.full((B, 1), BOS), reversal], dim=1)
""", visible="must start with BOS"),
        Wrong("EOS overwrites the last letter", """
def decoder_io(reversal):
    B = reversal.size(0)
    lengths = (reversal != PAD).sum(1)
    tgt_out = torch.cat([reversal, torch.full((B, 1), PAD)], dim=1)
    tgt_out[torch.arange(B), lengths - 1] = EOS
    return torch.cat([torch.full((B, 1), BOS), reversal], dim=1), tgt_out
""", visible="right after its last letter"),
        Wrong("no EOS at all", """
def decoder_io(reversal):
    B = reversal.size(0)
    return (torch.cat([torch.full((B, 1), BOS), reversal], dim=1),
            torch.cat([reversal, torch.full((B, 1), PAD)], dim=1))
""", visible="exactly one EOS"),
        Wrong("the standard shift BOS + tgt_out[:, :-1]: EOS fed in where tgt_out is PAD (harmless, but not reversal_batch's)", """
def decoder_io(reversal):
    B = reversal.size(0)
    lengths = (reversal != PAD).sum(1)
    tgt_out = torch.cat([reversal, torch.full((B, 1), PAD)], dim=1)
    tgt_out[torch.arange(B), lengths] = EOS
    return torch.cat([torch.full((B, 1), BOS), tgt_out[:, :-1]], dim=1), tgt_out
""", visible="EOS appears only in tgt_out"),
    ],
    "ex06_6": [  # a prediction: each wrong option is recorded as the right one is, and graded hidden
        Wrong("keys before queries: (B, h, T_enc, T_q)", """
def answer_6_6():
    return "a"
""", visible=RECORDS),
        Wrong("one query, as with a key-value cache (greedy_decode has none)", """
def answer_6_6():
    return "b"
""", visible=RECORDS),
        Wrong("off by one: counts the token being chosen as an input (5 queries)", """
def answer_6_6():
    return "d"
""", visible=RECORDS),
        Wrong("the shape itself instead of its letter", """
def answer_6_6():
    return (2, 4, 4, 7)
""", visible="as a string"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("06", WRONG)


def test_the_equal_compute_comparison_is_not_stated_as_measured():
    """Section 8 did not measure scheduled sampling under an equal compute budget: it may not say how it would fare."""
    (path,) = sorted((ROOT / "solutions").glob("06_*.ipynb"))
    prose = " ".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    assert "would fall further behind" not in " ".join(prose.split())
