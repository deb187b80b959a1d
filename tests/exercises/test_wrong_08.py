"""Chapter 08: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import RECORDS, Wrong, check_wrong_answers

WRONG = {
    "ex08_1": [
        Wrong("no special case for two fully masked parts", """
def merge_softmax_stats(m_a, l_a, m_b, l_b):
    m = torch.maximum(m_a, m_b)
    return m, l_a * torch.exp(m_a - m) + l_b * torch.exp(m_b - m)
""", visible="NaN"),
        Wrong("normalisers added without rescaling", """
def merge_softmax_stats(m_a, l_a, m_b, l_b):
    return torch.maximum(m_a, m_b), l_a + l_b
""", visible="rescale each to the merged maximum"),
        Wrong("rescaling factor with the sign flipped", """
def merge_softmax_stats(m_a, l_a, m_b, l_b):
    m = torch.maximum(m_a, m_b)
    shift = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    return m, l_a * torch.exp(shift - m_a) + l_b * torch.exp(shift - m_b)
""", visible="sign of the exponent"),
        Wrong("keeps the first part's maximum", """
def merge_softmax_stats(m_a, l_a, m_b, l_b):
    return m_a, l_a + l_b * torch.exp(m_b - m_a)
""", visible="largest score"),
    ],
    "ex08_2": [
        Wrong("accumulator not rescaled when the maximum grows", """
def tiled_forward(q, k, v, block):
    scale = 1.0 / math.sqrt(q.size(-1))
    m = torch.full((q.size(0), 1), float("-inf"), dtype=q.dtype)
    l = torch.zeros_like(m)
    acc = torch.zeros(q.size(0), v.size(-1), dtype=q.dtype)
    for j0 in range(0, k.size(0), block):
        s = (q @ k[j0:j0 + block].T) * scale
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        l = torch.exp(m - m_new) * l + p.sum(dim=-1, keepdim=True)
        acc = acc + p @ v[j0:j0 + block]
        m = m_new
    return acc / l
""", visible="rescale both the normaliser and the accumulator"),
        Wrong("missing 1/sqrt(d)", """
def tiled_forward(q, k, v, block):
    m = torch.full((q.size(0), 1), float("-inf"), dtype=q.dtype)
    l = torch.zeros_like(m)
    acc = torch.zeros(q.size(0), v.size(-1), dtype=q.dtype)
    for j0 in range(0, k.size(0), block):
        s = q @ k[j0:j0 + block].T
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        alpha, p = torch.exp(m - m_new), torch.exp(s - m_new)
        l = alpha * l + p.sum(dim=-1, keepdim=True)
        acc = alpha * acc + p @ v[j0:j0 + block]
        m = m_new
    return acc / l
""", visible="1/sqrt(d) scale"),
        Wrong("all the scores at once (an N_q x N_k tensor)", """
def tiled_forward(q, k, v, block):
    s = q @ k.T / math.sqrt(q.size(-1))
    p = torch.exp(s - s.amax(dim=-1, keepdim=True))
    return (p / p.sum(dim=-1, keepdim=True)) @ v
""", visible="compute one block of scores at a time"),
        Wrong("all the scores at once, in NumPy (torch never sees the N_q x N_k matrix)", """
def tiled_forward(q, k, v, block):
    import numpy as np
    s = q.numpy() @ k.numpy().T / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return torch.from_numpy((p / p.sum(axis=-1, keepdims=True)) @ v.numpy()).to(q.dtype)
""", visible="NumPy arrays count too"),
        Wrong("blocks of queries, each with whole rows of scores and a plain softmax (no online softmax)", """
def tiled_forward(q, k, v, block):
    rows = []
    for i in range(0, q.size(0), block):
        s = q[i:i + block] @ k.T / math.sqrt(q.size(-1))
        p = torch.exp(s - s.amax(dim=-1, keepdim=True))
        rows.append((p / p.sum(dim=-1, keepdim=True)) @ v)
    return torch.cat(rows)
""", visible="keep one block of keys' scores"),
        Wrong("all the scores at once, in a NumPy buffer made before the call and reused", """
import numpy as np
_BUFFER = np.ones(256 * 65536)

def tiled_forward(q, k, v, block):
    n = q.size(0) * k.size(0)
    s = (_BUFFER[:n] if n <= _BUFFER.size else np.empty(n)).reshape(q.size(0), k.size(0))
    np.matmul(q.numpy(), k.numpy().T, out=s)
    s /= math.sqrt(q.size(-1))
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return torch.from_numpy(s @ v.numpy()).to(q.dtype)
""", visible="so do buffers made before the call"),
        Wrong("no maximum subtracted: overflows on large scores", """
def tiled_forward(q, k, v, block):
    scale = 1.0 / math.sqrt(q.size(-1))
    l = torch.zeros(q.size(0), 1, dtype=q.dtype)
    acc = torch.zeros(q.size(0), v.size(-1), dtype=q.dtype)
    for j0 in range(0, k.size(0), block):
        p = torch.exp((q @ k[j0:j0 + block].T) * scale)
        l = l + p.sum(dim=-1, keepdim=True)
        acc = acc + p @ v[j0:j0 + block]
    return acc / l
""", visible="overflowed"),
    ],
    "ex08_3": [
        Wrong("empty chunks not skipped", """
def streaming_logsumexp(chunks):
    m = torch.tensor(float("-inf"), dtype=chunks[0].dtype)
    l = torch.zeros((), dtype=chunks[0].dtype)
    for chunk in chunks:
        m_new = torch.maximum(m, chunk.max())
        shift = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - shift) + torch.exp(chunk - shift).sum()
        m = m_new
    return m + torch.log(l)
""", visible="an empty chunk"),
        Wrong("NaN when the first chunk is all -inf", """
def streaming_logsumexp(chunks):
    m = torch.tensor(float("-inf"), dtype=chunks[0].dtype)
    l = torch.zeros((), dtype=chunks[0].dtype)
    for chunk in chunks:
        if chunk.numel() == 0:
            continue
        m_new = torch.maximum(m, chunk.max())
        l = l * torch.exp(m - m_new) + torch.exp(chunk - m_new).sum()
        m = m_new
    return m + torch.log(l)
""", visible="NaN"),
        Wrong("the chunk's maximum instead of the running maximum", """
def streaming_logsumexp(chunks):
    m = torch.tensor(float("-inf"), dtype=chunks[0].dtype)
    l = torch.zeros((), dtype=chunks[0].dtype)
    for chunk in chunks:
        if chunk.numel() == 0:
            continue
        m_new = chunk.max()
        shift = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - shift) + torch.exp(chunk - shift).sum()
        m = m_new
    return m + torch.log(l)
""", visible="overflowed"),
        Wrong("the colleague's code unchanged", """
def streaming_logsumexp(chunks):
    return streaming_logsumexp_given(chunks)
""", visible="overflowed"),
    ],
    "ex08_5": [
        Wrong("negative length when attention is never cheaper", """
def attention_crossover(d, c):
    return (c - 8) * d / 4
""", visible="return 0.0"),
        Wrong("halved the quadratic term", """
def attention_crossover(d, c):
    return max(0.0, (c - 8) * d / 2)
""", visible="the LSTM of section 2"),
        Wrong("forgot the projections (the paper's count)", """
def attention_crossover(d, c):
    return c * d / 4
""", visible="the LSTM of section 2"),
        Wrong("rounded down to a whole length", """
def attention_crossover(d, c):
    return float(max(0, (c - 8) * d // 4))
""", visible="need not be a whole number"),
        Wrong("hard-coded the LSTM's answer", """
def attention_crossover(d, c):
    return 2.0 * d if c == 16 else 0.0
""", visible="positive number"),
    ],
    "ex08_7": [  # a prediction: each wrong option is recorded as the right one is, and graded hidden
        Wrong("option 'a', not the right one", """
def answer_8_7():
    return "a"
""", visible=RECORDS),
        Wrong("option 'b', not the right one", """
def answer_8_7():
    return "b"
""", visible=RECORDS),
        Wrong("option 'c', not the right one", """
def answer_8_7():
    return "c"
""", visible=RECORDS),
        Wrong("not one of the options", """
def answer_8_7():
    return "d or a"
""", visible="expected one of"),
    ],
    "ex08_6": [
        Wrong("counts the 36 tiles, not the two products in each", """
def answer_8_6():
    return 36.0
""", visible=RECORDS),
        Wrong("forgets the causal mask skips the upper tiles (8 × 8 tiles, two products each)", """
def answer_8_6():
    return 128.0
""", visible=RECORDS),
        Wrong("one product per tile of the full grid", """
def answer_8_6():
    return 64.0
""", visible=RECORDS),
        Wrong("a number written out as text", """
def answer_8_6():
    return "72"
""", visible="expected a number"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("08", WRONG)
