"""Chapter 01: typical wrong answers are caught by the hidden tests and named by the visible checks."""

import nbformat
from wrong_answer_driver import PASSES_VISIBLE, RECORDS, ROOT, Wrong, _grade_id, check_wrong_answers

WRONG = {
    "ex01_1": [
        Wrong("scales the columns of W_hh instead of its rows", """
def rnn_step_jacobian(h_t, W_hh):
    return W_hh * (1 - h_t**2).unsqueeze(-2)
""", visible="row i must be 0"),
        Wrong("applies tanh again to the new state", """
def rnn_step_jacobian(h_t, W_hh):
    return (1 - torch.tanh(h_t) ** 2).unsqueeze(-1) * W_hh
""", visible="use h_t itself"),
        Wrong("transposes W_hh", """
def rnn_step_jacobian(h_t, W_hh):
    return (1 - h_t**2).unsqueeze(-1) * W_hh.T
""", visible="must equal W_hh"),
        Wrong("forgets W_hh (only the tanh factor)", """
def rnn_step_jacobian(h_t, W_hh):
    return torch.diag_embed(1 - h_t**2)
""", visible="must equal W_hh"),
        Wrong("works for one vector only", """
def rnn_step_jacobian(h_t, W_hh):
    return torch.diag(1 - h_t**2) @ W_hh
"""),
        Wrong("the Jacobian in float64 for a float32 state", """
def rnn_step_jacobian(h_t, W_hh):
    return ((1 - h_t**2).unsqueeze(-1) * W_hh).double()
""", visible="the grader refuses any other dtype"),
    ],
    "ex01_2": [
        Wrong("multiplies the factors in the wrong order", """
def bptt_jacobian(states, W_hh, t):
    result = torch.eye(states.size(1), dtype=states.dtype)
    for s in range(t + 1, states.size(0)):
        result = result @ rnn_step_jacobian(states[s], W_hh)
    return result
""", visible="order of the product"),
        Wrong("uses the previous state h_{s-1} in factor s", """
def bptt_jacobian(states, W_hh, t):
    result = torch.eye(states.size(1), dtype=states.dtype)
    for s in range(t + 1, states.size(0)):
        result = rnn_step_jacobian(states[s - 1], W_hh) @ result
    return result
""", visible="is not right"),
        Wrong("forgets the tanh factors (a power of W_hh)", """
def bptt_jacobian(states, W_hh, t):
    return torch.linalg.matrix_power(W_hh, states.size(0) - 1 - t)
""", visible="is not right"),
        Wrong("one factor too many (starts at s = t)", """
def bptt_jacobian(states, W_hh, t):
    result = torch.eye(states.size(1), dtype=states.dtype)
    for s in range(max(t, 1), states.size(0)):
        result = rnn_step_jacobian(states[s], W_hh) @ result
    return result
""", visible="identity"),
        Wrong("transposed factors (the gradient's convention)", """
def bptt_jacobian(states, W_hh, t):
    result = torch.eye(states.size(1), dtype=states.dtype)
    for s in range(t + 1, states.size(0)):
        result = rnn_step_jacobian(states[s], W_hh).T @ result
    return result
""", visible="is not right"),
    ],
    "ex01_3": [
        Wrong("ceil of the quotient (wrong when it is a whole number)", """
def smallest_distance(sigma, r):
    return math.ceil(math.log(r) / math.log(sigma))
""", visible=PASSES_VISIBLE),
        Wrong("floor of the quotient (one step short)", """
def smallest_distance(sigma, r):
    return math.floor(math.log(r) / math.log(sigma))
""", visible="is not right"),
        Wrong("the quotient upside down", """
def smallest_distance(sigma, r):
    return math.floor(math.log(sigma) / math.log(r)) + 1
""", visible="is not right"),
        Wrong("floor + 1 of the float quotient (just below a whole number for 0.9 and 0.81)", """
def smallest_distance(sigma, r):
    return math.floor(math.log(r) / math.log(sigma)) + 1
""", visible=PASSES_VISIBLE),
        Wrong("a loop on floating-point powers (0.7**2 < 0.49 in floats)", """
def smallest_distance(sigma, r):
    k = 1
    while not sigma**k < r:
        k += 1
    return k
""", visible=PASSES_VISIBLE),
        Wrong("the right k, returned as a float (66.0, not 66)", """
def smallest_distance(sigma, r):
    quotient = math.log(r) / math.log(sigma)
    nearest = round(quotient)
    return float(nearest + 1 if abs(quotient - nearest) < 1e-9 else math.floor(quotient) + 1)
""", visible="expected a whole number"),
        Wrong("returns the real-valued quotient", """
def smallest_distance(sigma, r):
    return math.log(r) / math.log(sigma)
""", visible="expected a whole number"),
    ],
    "ex01_4": [
        Wrong("trusts the bound", """
def answer_1_4():
    return "c"
""", visible=RECORDS),
        Wrong("more energy, more gradient", """
def answer_1_4():
    return "a"
""", visible=RECORDS),
        Wrong("not one of the options", """
def answer_1_4():
    return "smaller"
""", visible="expected one of"),
    ],
    "ex01_5": [
        Wrong("clips each tensor by its own norm", """
def clip_gradients(grads, max_norm):
    return [g * min(1.0, max_norm / (g.norm().item() + 1e-6)) for g in grads]
""", visible="same factor"),
        Wrong("rescales even below the limit", """
def clip_gradients(grads, max_norm):
    total = torch.sqrt(sum((g**2).sum() for g in grads))
    return [g * (max_norm / (total + 1e-6)) for g in grads]
""", visible="must come back unchanged"),
        Wrong("adds the norms instead of taking the global norm", """
def clip_gradients(grads, max_norm):
    total = sum(g.norm() for g in grads)
    scale = min(1.0, float(max_norm / (total + 1e-6)))
    return [g * scale for g in grads]
""", visible="differ"),
        Wrong("returns the input tensors themselves below the limit (aliases, not copies)", """
def clip_gradients(grads, max_norm):
    total = torch.sqrt(sum((g**2).sum() for g in grads))
    scale = max_norm / (total + 1e-6)
    if scale >= 1:
        return list(grads)
    return [g * scale for g in grads]
""", visible="returned the input tensors themselves"),
        Wrong("modifies the gradients in place", """
def clip_gradients(grads, max_norm):
    total = torch.sqrt(sum((g**2).sum() for g in grads))
    scale = min(1.0, float(max_norm / (total + 1e-6)))
    return [g.mul_(scale) for g in grads]
""", visible="modified its input"),
    ],
    "ex01_6": [
        Wrong("measures at T = 100 whatever T it is given", """
def growth_threshold(T=50):
    for rho in RHO_GRID:
        n = gradient_norms(100, rho, seed=0)
        if n[0] > n[-1]:
            return rho
""", visible="is not the smallest"),
        Wrong("returns the last rho at which the gradient still shrinks", """
def growth_threshold(T=50):
    previous = None
    for rho in RHO_GRID:
        n = gradient_norms(T, rho, seed=0)
        if n[0] > n[-1]:
            return previous
        previous = rho
""", visible="is not the smallest"),
        Wrong("compares with the bound instead of with h_T", """
def growth_threshold(T=50):
    for rho in RHO_GRID:
        n = gradient_norms(T, rho, seed=0)
        if n[0] > rho ** (T - 1):
            return rho
"""),
        Wrong("the value for T = 50 found by trial, no loop", """
def growth_threshold(T=50):
    return 1.15
""", visible="measure at the T you are given"),
        Wrong("a step function fitted to the lengths the checks use, no loop", """
def growth_threshold(T=50):
    return 1.15 if T <= 50 else (1.2 if T < 80 else 1.25)
""", visible=PASSES_VISIBLE),
        Wrong("a value off the grid", """
def growth_threshold(T=50):
    return 1.13
""", visible="expected a value of RHO_GRID"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("01", WRONG)


def test_learners_check_of_exercise_1_6_does_not_contain_the_measurement_loop():
    """The visible check of 1.6 compares the learner's loop with digests; it must not run the measurement
    itself (gradient_norms and the criterion), which is the loop the exercise asks the learner to write."""
    (path,) = sorted((ROOT / "chapters").glob("01_*.ipynb"))
    (cell,) = [c for c in nbformat.read(path, as_version=4).cells if _grade_id(c) == "ex01_6_check"]
    assert "gradient_norms" not in cell.source
    assert "norms_rho" not in cell.source
