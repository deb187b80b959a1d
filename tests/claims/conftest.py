"""The claims' experiments train on one thread (their helpers set it, as utils.device.one_thread does); this
puts the worker's thread count back after each test, so that a claims test never slows the tests after it."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _restore_thread_count():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
