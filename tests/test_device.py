import random

import numpy as np
import torch

from utils.device import get_device, seed_everything


def test_get_device_returns_an_available_device(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    device = get_device()
    assert device.type in {"cuda", "mps", "cpu"}
    torch.zeros(1, device=device)  # usable
    if not torch.cuda.is_available():
        assert device.type != "cuda"


def test_get_device_can_be_forced_to_cpu(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")
    monkeypatch.delenv("COURSE_DEVICE")
    assert get_device(allow_accelerator=False) == torch.device("cpu")


def test_seed_everything_makes_all_three_generators_repeat():
    seed_everything(123)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    seed_everything(123)
    second = (random.random(), np.random.rand(), torch.rand(1).item())
    assert first == second
    seed_everything(124)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) != first


def test_seed_everything_returns_a_seeded_generator():
    a = torch.rand(3, generator=seed_everything(7))
    b = torch.rand(3, generator=seed_everything(7))
    assert torch.equal(a, b)
