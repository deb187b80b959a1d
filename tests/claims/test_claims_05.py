"""Chapter 05's claims on five seeds: what each positional scheme does past the trained length.

The experiment is `utils.positional.extrapolation_experiment` (exported from solutions/05), the function the
notebook runs for seed 0; each test asserts the chapter's claims for one seed.
"""

from __future__ import annotations

import pytest

from utils.device import get_device
from utils.positional import ENCODINGS, extrapolation_experiment

pytestmark = [pytest.mark.claims, pytest.mark.usefixtures("one_thread")]
L_TRAIN = 24


@pytest.mark.parametrize("seed", range(5))
def test_extrapolation_claims(seed: int) -> None:
    results = extrapolation_experiment(seed, train_length=L_TRAIN, device=get_device())["summary"]
    base_acc = {name: results[name][L_TRAIN][0] for name in ENCODINGS}
    acc_4l = {name: results[name][4 * L_TRAIN] for name in results}
    print(f"seed {seed}: at L {({k: round(v, 3) for k, v in base_acc.items()})}; at 4L "
          f"{({k: None if v is None else tuple(round(x, 3) for x in v) for k, v in acc_4l.items()})}")
    assert min(base_acc.values()) >= 0.95  # every scheme solves the task at the trained length
    assert results["learned"][2 * L_TRAIN] is None and results["learned"][4 * L_TRAIN] is None
    for name in ["sinusoidal", "rope"]:
        assert acc_4l[name][0] < base_acc[name] - 0.15, name  # degrades past the trained length
        assert acc_4l[name][1] >= 0.95 and acc_4l[name][2] < acc_4l[name][1] - 0.15, name  # only at t >= L
    assert acc_4l["alibi"][0] > base_acc["alibi"] - 0.04  # ALiBi holds up
    assert acc_4l["rope + interpolation"][0] > acc_4l["rope"][0] + 0.15  # interpolation rescues RoPE
    assert acc_4l["rope + interpolation"][1] < acc_4l["rope"][1]  # ... at a small cost at t < L
