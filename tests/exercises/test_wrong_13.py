"""Chapter 13: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import RECORDS, Wrong, check_wrong_answers

WRONG = {
    "ex13_1": [
        Wrong("outputs averaged", """
def merge_attention_blocks(out_a, lse_a, out_b, lse_b):
    return (out_a + out_b) / 2, torch.logaddexp(lse_a, lse_b)
""", visible="outputs were averaged"),
        Wrong("lse kept as the larger of the two", """
def merge_attention_blocks(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    out = torch.exp(lse_a - lse) * out_a + torch.exp(lse_b - lse) * out_b
    return out, torch.maximum(lse_a, lse_b)
""", visible="larger of the two log-sum-exps"),
        Wrong("exponentiates lse itself: overflows", """
def merge_attention_blocks(out_a, lse_a, out_b, lse_b):
    w_a, w_b = torch.exp(lse_a), torch.exp(lse_b)
    return (w_a * out_a + w_b * out_b) / (w_a + w_b), torch.log(w_a + w_b)
""", visible="overflowed"),
        Wrong("no special case for two empty blocks", """
def merge_attention_blocks(out_a, lse_a, out_b, lse_b):
    m = torch.maximum(lse_a, lse_b)
    w_a, w_b = torch.exp(lse_a - m), torch.exp(lse_b - m)
    return (w_a * out_a + w_b * out_b) / (w_a + w_b), m + torch.log(w_a + w_b)
""", visible="NaN"),
        Wrong("both-empty case guarded, one empty block gives NaN (sigmoid form)", """
def merge_attention_blocks(out_a, lse_a, out_b, lse_b):
    both = torch.isneginf(lse_a) & torch.isneginf(lse_b)
    d = torch.where(both, torch.zeros_like(lse_a), lse_a - lse_b)
    w = torch.sigmoid(d)
    lse = torch.where(both, lse_a, lse_b + torch.nn.functional.softplus(d))
    return w * out_a + (1 - w) * out_b, lse
""", visible="gave NaN (a causal ring"),
        Wrong("float64 output for float32 input", """
def merge_attention_blocks(out_a, lse_a, out_b, lse_b):
    lse = torch.maximum(lse_a, lse_b)
    shift = torch.where(lse == float("-inf"), torch.zeros(lse.shape, dtype=torch.float64), lse)
    weight_a, weight_b = torch.exp(lse_a - shift), torch.exp(lse_b - shift)
    total = weight_a + weight_b
    out = (weight_a * out_a + weight_b * out_b) / torch.where(total > 0, total, torch.ones_like(total))
    return out, shift + torch.log(total)
""", visible="keep the inputs' dtype"),
    ],
    "ex13_2": [
        Wrong("one all-reduce per parameter", """
def make_bucket_hook(bucket, all_reduce, world_size):
    def hook(param):
        all_reduce(param.grad)
        param.grad /= world_size
    return hook
""", visible="flatten each bucket"),
        Wrong("sum, not average", """
def make_bucket_hook(bucket, all_reduce, world_size):
    state = {"n": 0}
    def hook(param):
        state["n"] += 1
        if state["n"] < len(bucket):
            return
        state["n"] = 0
        flat = torch.cat([p.grad.reshape(-1) for p in bucket])
        all_reduce(flat)
        offset = 0
        for p in bucket:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    return hook
""", visible="divide by world_size"),
        Wrong("the count of arrivals is never reset", """
def make_bucket_hook(bucket, all_reduce, world_size):
    state = {"n": 0}
    def hook(param):
        state["n"] += 1
        if state["n"] != len(bucket):
            return
        flat = torch.cat([p.grad.reshape(-1) for p in bucket])
        all_reduce(flat)
        flat /= world_size
        offset = 0
        for p in bucket:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    return hook
""", visible="reset your count"),
        Wrong("averages a flat copy and never writes it back", """
def make_bucket_hook(bucket, all_reduce, world_size):
    state = {"n": 0}
    def hook(param):
        state["n"] += 1
        if state["n"] < len(bucket):
            return
        state["n"] = 0
        flat = torch.cat([p.grad.reshape(-1) for p in bucket])
        all_reduce(flat)
        flat /= world_size
    return hook
""", visible="copy the averaged values back"),
        Wrong("assumes the bucket's last parameter arrives last", """
def make_bucket_hook(bucket, all_reduce, world_size):
    def hook(param):
        if param is not bucket[-1]:
            return
        flat = torch.cat([p.grad.reshape(-1) for p in bucket])
        all_reduce(flat)
        flat /= world_size
        offset = 0
        for p in bucket:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    return hook
""", visible="not in the bucket's"),
        Wrong("'no gradient is None' taken for 'all have arrived'", """
def make_bucket_hook(bucket, all_reduce, world_size):
    def hook(param):
        if any(p.grad is None for p in bucket):
            return
        flat = torch.cat([p.grad.reshape(-1) for p in bucket])
        all_reduce(flat)
        flat /= world_size
        offset = 0
        for p in bucket:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    return hook
""", visible="set_to_none=False"),
        Wrong("divided by the bucket's length", """
def make_bucket_hook(bucket, all_reduce, world_size):
    state = {"n": 0}
    def hook(param):
        state["n"] += 1
        if state["n"] < len(bucket):
            return
        state["n"] = 0
        flat = torch.cat([p.grad.reshape(-1) for p in bucket])
        all_reduce(flat)
        flat /= len(bucket)
        offset = 0
        for p in bucket:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    return hook
""", visible="bucket's length"),
    ],
    "ex13_3": [
        Wrong("bias added before the all-reduce", """
def row_parallel_output(heads, weight, bias, all_reduce):
    return all_reduce(heads @ weight.T + bias)
""", visible="counts p times"),
        Wrong("no all-reduce: this rank's share only", """
def row_parallel_output(heads, weight, bias, all_reduce):
    return heads @ weight.T + bias
""", visible="exactly once"),
        Wrong("treats the functional all-reduce as in place", """
def row_parallel_output(heads, weight, bias, all_reduce):
    partial = heads @ weight.T
    all_reduce(partial)
    return partial + bias
""", visible="does not change its argument"),
        Wrong("hard-coded 2 ranks: half the bias on each", """
def row_parallel_output(heads, weight, bias, all_reduce):
    return all_reduce(heads @ weight.T + bias / 2)
""", visible="assume 2 ranks"),
    ],
    "ex13_4": [
        Wrong("the ring's traffic, not the ratio", """
def hub_over_ring(p):
    return 4 * (p - 1) / p
""", visible="is not right"),
        Wrong("a ring rank taken to send the whole gradient once", """
def hub_over_ring(p):
    return float(p - 1)
""", visible="is not right"),
        Wrong("p instead of p / 2 (counted the ring one way only)", """
def hub_over_ring(p):
    return float(p)
""", visible="is not right"),
        Wrong("integer division: right at p = 8 only by luck", """
def hub_over_ring(p):
    return p // 2
""", visible="hub_over_ring(7)"),
    ],
    "ex13_5": [
        Wrong("not divided by the ranks", """
def answer_13_5():
    return 120.0
""", visible=RECORDS),
        Wrong("bytes, not gigabytes", """
def answer_13_5():
    return 1.875e9
""", visible=RECORDS),
        Wrong("4 bytes per parameter (parameters only)", """
def answer_13_5():
    return 0.46875
""", visible=RECORDS),
        Wrong("no answer yet", """
def answer_13_5():
    return None
""", visible="expected a number"),
    ],
    "ex13_6": [
        Wrong("the colleague's bug left in", """
def block_kind(query_chunk, key_chunk, is_causal):
    if not is_causal or key_chunk <= query_chunk:
        return "full"
    return "diagonal" if key_chunk == query_chunk + 1 else "skip"
""", visible="computed in full"),
        Wrong("the diagonal chunk skipped", """
def block_kind(query_chunk, key_chunk, is_causal):
    if not is_causal or key_chunk < query_chunk:
        return "full"
    return "skip"
""", visible="is skipped"),
        Wrong("the causal flag ignored", """
def block_kind(query_chunk, key_chunk, is_causal):
    if key_chunk < query_chunk:
        return "full"
    return "diagonal" if key_chunk == query_chunk else "skip"
""", visible="without the causal mask"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("13", WRONG)
