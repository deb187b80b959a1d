"""Chapter 04: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import PASSES_VISIBLE, RECORDS, Wrong, check_wrong_answers

WRONG = {
    "ex04_1": [
        Wrong("reshape straight to (B, h, T, d_k), no permute", """
def split_heads_tbd(x, num_heads):
    length, batch, d_model = x.shape
    return x.reshape(batch, num_heads, length, d_model // num_heads)

def merge_heads_tbd(x):
    batch, num_heads, length, d_k = x.shape
    return x.reshape(length, batch, num_heads * d_k)
""", visible="mixes positions, sequences or heads"),
        Wrong("d_model split as (d_k, h): heads get interleaved features", """
def split_heads_tbd(x, num_heads):
    length, batch, d_model = x.shape
    return x.reshape(length, batch, d_model // num_heads, num_heads).permute(1, 3, 0, 2)

def merge_heads_tbd(x):
    batch, num_heads, length, d_k = x.shape
    return x.permute(2, 0, 3, 1).reshape(length, batch, num_heads * d_k)
""", visible="every h-th feature"),
        Wrong("merge forgets to bring T back in front", """
def split_heads_tbd(x, num_heads):
    length, batch, d_model = x.shape
    return x.reshape(length, batch, num_heads, d_model // num_heads).permute(1, 2, 0, 3)

def merge_heads_tbd(x):
    batch, num_heads, length, d_k = x.shape
    return x.transpose(1, 2).reshape(length, batch, num_heads * d_k)
""", visible="does not undo"),
        Wrong("merge concatenates in (d_k, h) order", """
def split_heads_tbd(x, num_heads):
    length, batch, d_model = x.shape
    return x.reshape(length, batch, num_heads, d_model // num_heads).permute(1, 2, 0, 3)

def merge_heads_tbd(x):
    batch, num_heads, length, d_k = x.shape
    return x.permute(2, 0, 3, 1).reshape(length, batch, num_heads * d_k)
""", visible="does not undo"),
    ],
    "ex04_2": [
        Wrong("softmax over the queries (wrong axis)", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="do not sum to 1"),
        Wrong("scaled by sqrt(d_model) instead of sqrt(d_k)", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_model)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="flatter than they should be: your scores are 0.58 times"),
        Wrong("no scaling at all", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="sharper than they should be: your scores are 2.83 times"),
        Wrong("heads cut as (d_k, h): each head gets every h-th feature", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, d_k, num_heads).permute(0, 3, 1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).permute(0, 2, 3, 1).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="head 0's weights change"),
        Wrong("heads merged without transposing back", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="bring the heads back"),
        Wrong("the padding mask is ignored", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="padding keys get weight"),
        Wrong("queries and keys swapped when unpacking", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    k, q, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="are q and k swapped"),
        Wrong("padding zeroed after the softmax, rows not renormalised", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
    if allowed is not None:
        weights = weights.masked_fill(~allowed[:, None, None, :], 0.0)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="before the softmax"),
        Wrong("no biases at all (in_proj_bias and out_proj_bias dropped)", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight), weights
""", visible="the biases?"),
        Wrong("out_proj_bias forgotten", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight), weights
""", visible="minus out_proj_bias: the biases?"),
        Wrong("padding mask inverted: True read as padding", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(allowed[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="the mask is the wrong way round"),
        Wrong("padding mask inverted, NaN rows zeroed with nan_to_num", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(allowed[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="the mask is the wrong way round"),
        Wrong("padding mask applied on the query axis", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None, :, None], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="your mask hides queries (rows), not keys"),
        Wrong("padding mask on the query axis, NaN rows zeroed with nan_to_num", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, allowed=None):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None, :, None], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", visible="your mask hides queries (rows), not keys"),
    ],
    "ex04_3": [
        Wrong("the broken version, unchanged", """
causal_heads = causal_heads_broken
""", visible="contains NaN"),
        Wrong("mask fixed; split and scale still wrong", """
def causal_heads(q, k, v, num_heads):
    batch, length, d_model = q.shape
    d_k = d_model // num_heads
    q, k, v = (t.view(batch, num_heads, length, d_k) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_model)
    hidden = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
    weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
    return (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
""", visible="mixes positions and heads"),
        Wrong("mask and split fixed; still scaled by sqrt(d_model)", """
def causal_heads(q, k, v, num_heads):
    batch, length, d_model = q.shape
    d_k = d_model // num_heads
    q, k, v = (t.view(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_model)
    hidden = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
    weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
    return (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
""", visible="check the scale"),
        Wrong("mask off by one: hides the diagonal too", """
def causal_heads(q, k, v, num_heads):
    batch, length, d_model = q.shape
    d_k = d_model // num_heads
    q, k, v = (t.view(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    hidden = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(0)
    weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
    return (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
""", visible="contains NaN"),
        Wrong("future allowed: mask the wrong way round (tril(-1))", """
def causal_heads(q, k, v, num_heads):
    batch, length, d_model = q.shape
    d_k = d_model // num_heads
    q, k, v = (t.view(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    hidden = torch.ones(length, length, dtype=torch.bool, device=q.device).tril(-1)
    weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
    return (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
""", visible="the future leaks"),
        Wrong("mask hides the diagonal too (triu(0)); the NaN row zeroed with nan_to_num", """
def causal_heads(q, k, v, num_heads):
    batch, length, d_model = q.shape
    d_k = d_model // num_heads
    q, k, v = (t.view(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    hidden = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(0)
    weights = torch.nan_to_num(torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1))
    return (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
""", visible="does your mask hide the diagonal"),
        Wrong("split, mask and scale fixed; heads merged without transposing back", """
def causal_heads(q, k, v, num_heads):
    batch, length, d_model = q.shape
    d_k = d_model // num_heads
    q, k, v = (t.view(batch, length, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    hidden = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
    weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
    return (weights @ v).reshape(batch, length, d_model)
""", visible="transpose back to (B, T, h, d_k)"),
    ],
    "ex04_4": [
        Wrong("right values, but the positions made on the CPU whatever the weights' device", """
def mean_attention_distance(weights):
    t_q, t_k = weights.shape[-2:]
    i = torch.arange(t_q, dtype=weights.dtype)[:, None]
    j = torch.arange(t_k, dtype=weights.dtype)[None, :]
    return (weights * (i - j).abs()).sum(-1).mean(dim=(0, 2))
""", visible=PASSES_VISIBLE),
        Wrong("signed distance i - j", """
def mean_attention_distance(weights):
    t_q, t_k = weights.shape[-2:]
    i = torch.arange(t_q, dtype=weights.dtype)[:, None]
    j = torch.arange(t_k, dtype=weights.dtype)[None, :]
    return (weights * (i - j)).sum(-1).mean(dim=(0, 2))
""", visible="use |i - j|"),
        Wrong("averaged over the keys instead of summed", """
def mean_attention_distance(weights):
    t_q, t_k = weights.shape[-2:]
    i = torch.arange(t_q, dtype=weights.dtype)[:, None]
    j = torch.arange(t_k, dtype=weights.dtype)[None, :]
    return (weights * (i - j).abs()).mean(-1).mean(dim=(0, 2))
""", visible="4 times too small"),
        Wrong("averaged over the heads too", """
def mean_attention_distance(weights):
    t_q, t_k = weights.shape[-2:]
    i = torch.arange(t_q, dtype=weights.dtype)[:, None]
    j = torch.arange(t_k, dtype=weights.dtype)[None, :]
    return (weights * (i - j).abs()).sum(-1).mean()
""", visible="expected shape (2,)"),
        Wrong("assumes T_k == T_q", """
def mean_attention_distance(weights):
    t_q = weights.shape[-2]
    i = torch.arange(t_q, dtype=weights.dtype)
    distance = (i[:, None] - i[None, :]).abs()
    return (weights[..., :t_q] * distance).sum(-1).mean(dim=(0, 2))
""", visible=PASSES_VISIBLE),
    ],
    "ex04_5": [
        Wrong("forgets the biases", """
def full_width_parameters(d_model, num_heads):
    return 4 * num_heads * d_model**2
""", visible="check your biases"),
        Wrong("W_O taken as d x d", """
def full_width_parameters(d_model, num_heads):
    return 3 * (num_heads * d_model**2 + num_heads * d_model) + d_model**2 + d_model
""", visible="is not right"),
        Wrong("biases of width d_model on the input projections", """
def full_width_parameters(d_model, num_heads):
    return 4 * num_heads * d_model**2 + 4 * d_model
""", visible="is not right"),
    ],
    "ex04_6": [  # a prediction: each wrong option is recorded as the right one is, and graded hidden
        Wrong("option 'a', not the right one", """
def answer_4_6():
    return "a"
""", visible=RECORDS),
        Wrong("option 'b', not the right one", """
def answer_4_6():
    return "b"
""", visible=RECORDS),
        Wrong("option 'd', not the right one", """
def answer_4_6():
    return "d"
""", visible=RECORDS),
        Wrong("not one of the options", """
def answer_4_6():
    return "c or a"
""", visible="expected one of"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("04", WRONG)
