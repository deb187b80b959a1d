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


def test_one_thread_gives_one_model_whatever_the_thread_count():
    """A training helper under ``one_thread`` trains the same weights whether the caller runs 2 threads or 1,
    leaves the caller's thread count as it was (also after an exception), and really runs on one thread."""
    from utils.device import one_thread
    from utils.multihead import train_pairs_model

    before = torch.get_num_threads()
    weights = []
    try:
        for threads in (2, 1):
            torch.set_num_threads(threads)
            model = train_pairs_model(num_heads=2, steps=30, seed=3)
            assert torch.get_num_threads() == threads
            weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
        assert torch.equal(weights[0], weights[1])

        seen = []

        @one_thread
        def fails() -> None:
            seen.append(torch.get_num_threads())
            raise RuntimeError("inside")

        torch.set_num_threads(2)
        try:
            fails()
        except RuntimeError:
            pass
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
