"""Chapter 05: typical wrong answers are caught by the hidden tests and named by the visible checks."""

import nbformat
from wrong_answer_driver import PASSES_VISIBLE, RECORDS, ROOT, Wrong, check_wrong_answers

WRONG = {
    "ex05_1": [
        Wrong("pairs interleaved (the layout of section 2)", """
def sinusoidal_halves(positions, d_model, base=10000.0):
    omega = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = positions.to(torch.float64)[:, None] * omega
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(-2).to(torch.float32)
""", visible="interleaved"),
        Wrong("sines and cosines swapped", """
def sinusoidal_halves(positions, d_model, base=10000.0):
    omega = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = positions.to(torch.float64)[:, None] * omega
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1).to(torch.float32)
""", visible="swapped"),
        Wrong("exponent i / d_model instead of 2i / d_model", """
def sinusoidal_halves(positions, d_model, base=10000.0):
    omega = base ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    angles = positions.to(torch.float64)[:, None] * omega
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1).to(torch.float32)
""", visible="is not right"),
        Wrong("angles computed in float32 (wrong at large positions)", """
def sinusoidal_halves(positions, d_model, base=10000.0):
    omega = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angles = positions.to(torch.float32)[:, None] * omega
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
""", visible=PASSES_VISIBLE),
        Wrong("tensor2tensor's frequencies, 10000^(-i/(d/2 - 1)), in the paper's place (review 05-M1)", """
def sinusoidal_halves(positions, d_model, base=10000.0):
    omega = base ** (-torch.arange(d_model // 2, dtype=torch.float64) / (d_model // 2 - 1))
    angles = positions.to(torch.float64)[:, None] * omega
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1).to(torch.float32)
""", visible="is not right"),
    ],
    "ex05_2": [
        Wrong("neighbouring pairs (2i, 2i+1), as in section 5", """
def apply_rope_half(x, positions):
    return apply_rope(x, positions)
""", visible="neighbouring features"),
        Wrong("turned clockwise", """
def apply_rope_half(x, positions):
    d_k = x.size(-1); half = d_k // 2
    theta = 10000.0 ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angles = positions.to(torch.float64)[:, None] * theta
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1)
""", visible="clockwise"),
        Wrong("theta_i = 10000^(-i/d_k)", """
def apply_rope_half(x, positions):
    d_k = x.size(-1); half = d_k // 2
    theta = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / d_k)
    angles = positions.to(torch.float64)[:, None] * theta
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
""", visible="is not right"),
        Wrong("ignores the positions given (always 0 .. T-1)", """
def apply_rope_half(x, positions):
    d_k = x.size(-1); half = d_k // 2
    theta = 10000.0 ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angles = torch.arange(x.size(-2), dtype=torch.float64)[:, None] * theta
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
""", visible=PASSES_VISIBLE),
    ],
    "ex05_3": [
        Wrong("offset i - j instead of j - i", """
def relative_bias(table, t_q, t_k):
    K = (table.size(1) - 1) // 2
    i = torch.arange(t_q)[:, None]; j = torch.arange(t_k)[None, :]
    return table[:, (i - j).clamp(-K, K) + K]
""", visible="wrong sign"),
        Wrong("offsets not clipped (negative indices wrap around)", """
def relative_bias(table, t_q, t_k):
    K = (table.size(1) - 1) // 2
    i = torch.arange(t_q)[:, None]; j = torch.arange(t_k)[None, :]
    return table[:, (j - i + K) % table.size(1)]
""", visible="clip the offsets"),
        Wrong("K off by one (K = (2K + 1) // 2 - 1)", """
def relative_bias(table, t_q, t_k):
    K = table.size(1) // 2 - 1
    i = torch.arange(t_q)[:, None]; j = torch.arange(t_k)[None, :]
    return table[:, (j - i).clamp(-K, K) + K]
""", visible="the middle of the table"),
        Wrong("clipped on one side only", """
def relative_bias(table, t_q, t_k):
    K = (table.size(1) - 1) // 2
    i = torch.arange(t_q)[:, None]; j = torch.arange(t_k)[None, :]
    return table[:, (j - i).clamp(max=K) + K]
""", visible=PASSES_VISIBLE),
    ],
    "ex05_4": [
        Wrong("base itself (forgets that i stops at d/2 - 1)", """
def wavelength_ratio(d_model, base):
    return float(base)
""", visible="single pair"),
        Wrong("the longest wavelength instead of the ratio", """
def wavelength_ratio(d_model, base):
    return 2 * math.pi * base ** ((d_model - 2) / d_model)
""", visible="single pair"),
        Wrong("exponent i / d_model (factor 2 lost)", """
def wavelength_ratio(d_model, base):
    return base ** ((d_model - 2) / (2 * d_model))
""", visible="is not right"),
    ],
    "ex05_6": [
        Wrong("the broken version, unchanged", """
cached_scores = cached_scores_broken
""", visible="own key"),
        Wrong("query fixed, keys still rotated twice", """
def cached_scores(q_new, k_cache):
    t = k_cache.size(0) - 1
    q = apply_rope(q_new[None], torch.tensor([t]))
    return (q @ apply_rope(k_cache).T)[0] / math.sqrt(q_new.numel())
""", visible="own key"),
        Wrong("keys fixed, query still at position 0", """
def cached_scores(q_new, k_cache):
    q = apply_rope(q_new[None])
    return (q @ k_cache.T)[0] / math.sqrt(q_new.numel())
""", visible="own key"),
        Wrong("query rotated at t + 1 (off by one)", """
def cached_scores(q_new, k_cache):
    q = apply_rope(q_new[None], torch.tensor([k_cache.size(0)]))
    return (q @ k_cache.T)[0] / math.sqrt(q_new.numel())
""", visible="own key"),
    ],
    "ex05_5": [  # a prediction: each wrong option is recorded as the right one is, and graded hidden
        Wrong("option 'a', not the right one", """
def answer_5_5():
    return "a"
""", visible=RECORDS),
        Wrong("option 'c', not the right one", """
def answer_5_5():
    return "c"
""", visible=RECORDS),
        Wrong("option 'd', not the right one", """
def answer_5_5():
    return "d"
""", visible=RECORDS),
        Wrong("not one of the options", """
def answer_5_5():
    return "b or a"
""", visible="expected one of"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("05", WRONG)


def test_section_1_does_not_state_exercise_5_5s_answer():
    """Exercise 5.5 asks whether a stack of blocks followed by a mean over positions is invariant to a
    shuffle; section 1 teaches equivariance of one layer, and must not state that conclusion itself."""
    (path,) = sorted((ROOT / "solutions").glob("05_*.ipynb"))
    cells = nbformat.read(path, as_version=4).cells
    exercises = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and "### Exercise 5.1" in c.source)
    prose = " ".join(c.source for c in cells[:exercises] if c.cell_type == "markdown").replace("\n", " ")
    assert "whole stack of blocks" not in prose
    assert "the mean over positions, is invariant" not in prose
    assert "refuted" not in prose  # the extrapolation hypothesis is "not supported on this task", not refuted
