"""Chapter 03: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import PASSES_VISIBLE, Wrong, check_wrong_answers

WRONG = {
    "ex03_1": [
        Wrong("outer product without the diagonal", """
def softmax_jacobian(p):
    return -p.unsqueeze(-1) * p.unsqueeze(-2)
"""),
        Wrong("sign of the outer product flipped", """
def softmax_jacobian(p):
    return torch.diag_embed(p) + p.unsqueeze(-1) * p.unsqueeze(-2)
"""),
        Wrong("diagonal only (treats outputs as independent)", """
def softmax_jacobian(p):
    return torch.diag_embed(p * (1 - p))
"""),
        Wrong("only works for one vector (no batch dimensions)", """
def softmax_jacobian(p):
    return torch.diag(p) - torch.outer(p, p)
""", visible=PASSES_VISIBLE),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("03", WRONG)
