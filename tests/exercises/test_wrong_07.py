"""Chapter 07: typical wrong answers are caught by the hidden tests and named by the visible checks."""

from wrong_answer_driver import PASSES_VISIBLE, RECORDS, Wrong, check_wrong_answers

WRONG = {
    "ex07_1": [
        Wrong("unbiased variance (divide by d - 1)", """
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * gamma + beta
""", visible="biased variance"),
        Wrong("eps outside the square root", """
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / (torch.sqrt(x.var(-1, unbiased=False, keepdim=True)) + eps) * gamma + beta
""", visible="eps belongs inside the square root"),
        Wrong("statistics over the batch axis", """
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(0, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(0, unbiased=False, keepdim=True) + eps) * gamma + beta
""", visible="batch axis"),
        Wrong("beta forgotten", """
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * gamma
""", visible="beta is missing"),
        Wrong("one-pass variance E[x^2] - E[x]^2 (cancels in float32 off-centre: NaN at 3000)", """
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mean**2
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
""", visible="cancels catastrophically"),
        Wrong("one-pass variance clamped at 0 (no NaN, still wrong off-centre)", """
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x * x).mean(-1, keepdim=True) - mean**2).clamp_min(0)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
""", visible="cancels catastrophically"),
        Wrong("divides by the standard deviation of torch.std (unbiased), no eps", """
def layer_norm(x, gamma, beta, eps=1e-5):
    return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True) * gamma + beta
""", visible="biased variance"),
    ],
    "ex07_2": [
        Wrong("the division by s forgotten", """
def layer_norm_backward(grad_y, x, gamma, eps=1e-5):
    d = x.size(-1)
    s = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / s
    g = grad_y * gamma
    grad_x = g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True)
    return grad_x, (grad_y * x_hat).reshape(-1, d).sum(0), grad_y.reshape(-1, d).sum(0)
""", visible="divide by s"),
        Wrong("the x_hat term dropped (only the mean removed)", """
def layer_norm_backward(grad_y, x, gamma, eps=1e-5):
    d = x.size(-1)
    s = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / s
    g = grad_y * gamma
    return (g - g.mean(-1, keepdim=True)) / s, (grad_y * x_hat).reshape(-1, d).sum(0), grad_y.reshape(-1, d).sum(0)
""", visible="orthogonal to x - mean"),
        Wrong("gamma left out of g", """
def layer_norm_backward(grad_y, x, gamma, eps=1e-5):
    d = x.size(-1)
    s = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / s
    g = grad_y
    grad_x = (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True)) / s
    return grad_x, (grad_y * x_hat).reshape(-1, d).sum(0), grad_y.reshape(-1, d).sum(0)
""", visible="grad_x[0, 0]"),
        Wrong("grad_gamma without x_hat", """
def layer_norm_backward(grad_y, x, gamma, eps=1e-5):
    d = x.size(-1)
    s = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / s
    g = grad_y * gamma
    grad_x = (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True)) / s
    return grad_x, grad_y.reshape(-1, d).sum(0), grad_y.reshape(-1, d).sum(0)
""", visible="grad_gamma[0]"),
        Wrong("parameter gradients summed over the last axis only (2-D inputs pass)", """
def layer_norm_backward(grad_y, x, gamma, eps=1e-5):
    s = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / s
    g = grad_y * gamma
    grad_x = (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True)) / s
    return grad_x, (grad_y * x_hat).sum(0), grad_y.sum(0)
""", visible=PASSES_VISIBLE),
    ],
    "ex07_3": [
        Wrong("normalises rows (that is LayerNorm)", """
def batch_norm_train(x, eps=1e-5):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
""", visible="you normalised each row"),
        Wrong("unbiased variance", """
def batch_norm_train(x, eps=1e-5):
    return (x - x.mean(0, keepdim=True)) / torch.sqrt(x.var(0, keepdim=True) + eps)
""", visible="biased variance"),
        Wrong("eps outside the square root", """
def batch_norm_train(x, eps=1e-5):
    return (x - x.mean(0, keepdim=True)) / (torch.sqrt(x.var(0, unbiased=False, keepdim=True)) + eps)
""", visible=PASSES_VISIBLE),
        Wrong("mean over the whole tensor", """
def batch_norm_train(x, eps=1e-5):
    return (x - x.mean()) / torch.sqrt(x.var(0, unbiased=False, keepdim=True) + eps)
""", visible="each column must have mean 0"),
    ],
    "ex07_6": [
        Wrong("the bug itself: squares in float16", """
def rms_norm_half(x, gamma, eps=1e-6):
    rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x / rms * gamma
""", visible="overflow float16"),
        Wrong("computes in float32 but returns float32", """
def rms_norm_half(x, gamma, eps=1e-6):
    h = x.float()
    return h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()
""", visible="return the input's dtype"),
        Wrong("upcasts after squaring (too late)", """
def rms_norm_half(x, gamma, eps=1e-6):
    ms = x.pow(2).float().mean(-1, keepdim=True)
    return (x.float() / torch.sqrt(ms + eps) * gamma.float()).to(x.dtype)
""", visible="overflow float16"),
        Wrong("clamps the input to stay in range", """
def rms_norm_half(x, gamma, eps=1e-6):
    x = x.clamp(-250, 250)
    rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x / rms * gamma
""", visible=None),
    ],
    "ex07_5": [  # a prediction: each wrong option is recorded as the right one is, and graded hidden
        Wrong("option 'a', not the right one", """
def answer_7_5():
    return "a"
""", visible=RECORDS),
        Wrong("option 'b', not the right one", """
def answer_7_5():
    return "b"
""", visible=RECORDS),
        Wrong("option 'c', not the right one", """
def answer_7_5():
    return "c"
""", visible=RECORDS),
        Wrong("not one of the options", """
def answer_7_5():
    return "d or a"
""", visible="expected one of"),
    ],
}


def test_wrong_answers_are_caught():
    check_wrong_answers("07", WRONG)
