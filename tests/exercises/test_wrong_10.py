"""Chapter 10: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import RECORDS, Wrong, check_wrong_answers

WRONG = {
    "ex10_1": [
        Wrong("0 · log 0 evaluated as NaN", """
def attention_entropy(weights):
    return -(weights * torch.log(weights)).sum(dim=-1)
""", visible="NaN"),
        Wrong("sign dropped", """
def attention_entropy(weights):
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))
    return (weights * torch.log(safe)).sum(dim=-1)
""", visible="negative"),
        Wrong("epsilon inside the logarithm, log(w + 1e-9): not a sign error", """
def attention_entropy(weights):
    return -(weights * torch.log(weights + 1e-9)).sum(dim=-1)
""", visible="epsilon added inside the logarithm"),
        Wrong("bits instead of nats", """
def attention_entropy(weights):
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))
    return -(weights * torch.log2(safe)).sum(dim=-1)
""", visible="natural logarithm"),
        Wrong("summed over the queries", """
def attention_entropy(weights):
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))
    return -(weights * torch.log(safe)).sum(dim=-2)
""", visible="entropies"),
    ],
    "ex10_4": [
        Wrong("the previous-token block", """
def next_token_block(gamma):
    return gamma * shift_matrix(-1, 12).T
""", visible="previous token"),
        Wrong("shift matrix not transposed (rows are not columns)", """
def next_token_block(gamma):
    return gamma * shift_matrix(1, 12)
""", visible="previous token"),
        Wrong("the identity: attends to itself", """
def next_token_block(gamma):
    return gamma * torch.eye(12, dtype=torch.float64)
""", visible="itself"),
        Wrong("gamma ignored", """
def next_token_block(gamma):
    return shift_matrix(1, 12).T
""", visible="scale with gamma"),
    ],
    "ex10_5": [
        Wrong("the colleague's code unchanged", """
def retemper(weights, tau):
    return retemper_given(weights, tau)
""", visible="do not sum to 1"),
        Wrong("right axis, but 0 / 0 for a fully masked row", """
def retemper(weights, tau):
    powered = weights ** (1 / tau)
    return powered / powered.sum(dim=-1, keepdim=True)
""", visible="NaN"),
        Wrong("softmax of the weights divided by tau", """
def retemper(weights, tau):
    return torch.softmax(weights / tau, dim=-1)
""", visible="unchanged"),
        Wrong("powers without renormalising", """
def retemper(weights, tau):
    return weights ** (1 / tau)
""", visible="do not sum to 1"),
    ],
    "ex10_3": [  # a prediction: each wrong option is recorded as the right one is, and graded hidden
        Wrong("option 'b', not the right one", """
def answer_10_3():
    return "b"
""", visible=RECORDS),
        Wrong("option 'c', not the right one", """
def answer_10_3():
    return "c"
""", visible=RECORDS),
        Wrong("option 'd', not the right one", """
def answer_10_3():
    return "d"
""", visible=RECORDS),
        Wrong("not one of the options", """
def answer_10_3():
    return "a or a"
""", visible="expected one of"),
    ],
    "ex10_6": [
        Wrong("counts 'she' as scoring: a pronoun with no animate noun to find ties every key", """
def answer_10_6():
    return 3.0
""", visible=RECORDS),
        Wrong("every row of a head attends somewhere (no uniform rows)", """
def answer_10_6():
    return 0.0
""", visible=RECORDS),
        Wrong("the default sentence's count (7), not this sentence's", """
def answer_10_6():
    return 7.0
""", visible=RECORDS),
        Wrong("no answer yet", """
def answer_10_6():
    return None
""", visible="expected a number"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("10", WRONG)
