"""Chapter 09: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import RECORDS, Wrong, check_wrong_answers

WRONG = {
    "ex09_1": [
        Wrong("the 1/sqrt(d_k) scale forgotten", """
def masked_attention_lists(q, k, v, allowed):
    scores = matmul(q, transpose(k))
    out = []
    for i, row in enumerate(scores):
        kept = [j for j in range(len(row)) if allowed[i][j]]
        if not kept:
            out.append([0.0] * len(v[0]))
            continue
        biggest = max(row[j] for j in kept)
        exps = [math.exp(row[j] - biggest) if allowed[i][j] else 0.0 for j in range(len(row))]
        total = sum(exps)
        out.append(matmul([[e / total for e in exps]], v)[0])
    return out
""", visible="without the scale"),
        Wrong("no maximum subtracted: overflows on large scores", """
def masked_attention_lists(q, k, v, allowed):
    scale = 1.0 / math.sqrt(len(q[0]))
    out = []
    for i, row in enumerate(matmul(q, transpose(k))):
        if not any(allowed[i]):
            out.append([0.0] * len(v[0]))
            continue
        exps = [math.exp(x * scale) if allowed[i][j] else 0.0 for j, x in enumerate(row)]
        total = sum(exps)
        out.append(matmul([[e / total for e in exps]], v)[0])
    return out
""", visible="scores near 1000"),
        Wrong("a fully masked row divides by zero", """
def masked_attention_lists(q, k, v, allowed):
    scale = 1.0 / math.sqrt(len(q[0]))
    out = []
    for i, row in enumerate(matmul(q, transpose(k))):
        biggest = max([x * scale for j, x in enumerate(row) if allowed[i][j]], default=0.0)
        exps = [math.exp(x * scale - biggest) if allowed[i][j] else 0.0 for j, x in enumerate(row)]
        total = sum(exps)
        out.append(matmul([[e / total for e in exps]], v)[0])
    return out
""", visible="may attend to no key"),
        Wrong("masked scores set to 0 instead of excluded", """
def masked_attention_lists(q, k, v, allowed):
    scale = 1.0 / math.sqrt(len(q[0]))
    scores = [[x * scale if allowed[i][j] else 0.0 for j, x in enumerate(row)]
              for i, row in enumerate(matmul(q, transpose(k)))]
    return matmul(softmax_rows(scores), v)
""", visible="causal mask"),
        Wrong("maximum taken over all keys, masked ones included", """
def masked_attention_lists(q, k, v, allowed):
    scale = 1.0 / math.sqrt(len(q[0]))
    out = []
    for i, row in enumerate(matmul(q, transpose(k))):
        if not any(allowed[i]):
            out.append([0.0] * len(v[0]))
            continue
        biggest = max(x * scale for x in row)
        exps = [math.exp(x * scale - biggest) if allowed[i][j] else 0.0 for j, x in enumerate(row)]
        total = sum(exps)
        out.append(matmul([[e / total for e in exps]], v)[0])
    return out
""", visible="maximum over the allowed scores"),
    ],
    "ex09_2": [
        Wrong("one head only", "def answer_9_2():\n    return 512 * 512 * 128\n"),
        Wrong("only the QK^T product", "def answer_9_2():\n    return 12 * 512 * 512 * 64\n"),
        Wrong("rounded to three digits", "def answer_9_2():\n    return 4.03e8\n"),
    ],
    "ex09_5": [
        Wrong("uses the @ operator", """
def attention_broadcast(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)) @ v
""", visible="your code called"),
        Wrong("normalises over the queries", """
def attention_broadcast(q, k, v):
    s = (q[..., :, None, :] * k[..., None, :, :]).sum(-1) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.amax(dim=-2, keepdim=True))
    w = e / e.sum(dim=-2, keepdim=True)
    return (w[..., :, :, None] * v[..., None, :, :]).sum(-2)
""", visible="do not sum to 1"),
        Wrong("missing 1/sqrt(d_k)", """
def attention_broadcast(q, k, v):
    s = (q[..., :, None, :] * k[..., None, :, :]).sum(-1)
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    w = e / e.sum(dim=-1, keepdim=True)
    return (w[..., :, :, None] * v[..., None, :, :]).sum(-2)
""", visible="1/sqrt(d_k)"),
        Wrong("no maximum subtracted", """
def attention_broadcast(q, k, v):
    e = torch.exp((q[..., :, None, :] * k[..., None, :, :]).sum(-1) / math.sqrt(q.shape[-1]))
    w = e / e.sum(dim=-1, keepdim=True)
    return (w[..., :, :, None] * v[..., None, :, :]).sum(-2)
""", visible="overflowed"),
    ],
    "ex09_6": [
        Wrong("the colleague's code unchanged", """
def log_softmax_rows(s):
    return log_softmax_rows_given(s)
""", visible="underflows"),
        Wrong("each row's maximum, but still the log of an exp", """
def log_softmax_rows(s):
    out = []
    for row in s:
        m = max(row)
        total = sum(math.exp(x - m) for x in row)
        out.append([math.log(math.exp(x - m) / total) for x in row])
    return out
""", visible="underflows"),
        Wrong("log-sum-exp formula, but one maximum for the whole matrix", """
def log_softmax_rows(s):
    m = max(max(row) for row in s)
    out = []
    for row in s:
        log_total = math.log(sum(math.exp(x - m) for x in row))
        out.append([x - m - log_total for x in row])
    return out
""", visible="each row's own maximum"),
        Wrong("the log of softmax_rows", """
def log_softmax_rows(s):
    return [[math.log(p) for p in row] for row in softmax_rows(s)]
""", visible="underflows"),
    ],
    "ex09_3": [  # a prediction: each wrong option is recorded as the right one is, and graded hidden
        Wrong("option 'a', not the right one", """
def answer_9_3():
    return "a"
""", visible=RECORDS),
        Wrong("option 'b', not the right one", """
def answer_9_3():
    return "b"
""", visible=RECORDS),
        Wrong("option 'c', not the right one", """
def answer_9_3():
    return "c"
""", visible=RECORDS),
        Wrong("not one of the options", """
def answer_9_3():
    return "d or a"
""", visible="expected one of"),
    ],
    "ex09_4": [  # a prediction: each wrong option is recorded as the right one is, and graded hidden
        Wrong("option 'a', not the right one", """
def answer_9_4():
    return "a"
""", visible=RECORDS),
        Wrong("option 'b', not the right one", """
def answer_9_4():
    return "b"
""", visible=RECORDS),
        Wrong("option 'd', not the right one", """
def answer_9_4():
    return "d"
""", visible=RECORDS),
        Wrong("not one of the options", """
def answer_9_4():
    return "c or a"
""", visible="expected one of"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("09", WRONG)
