"""Shared fixtures for the tests in this folder (paths live in course_paths.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from course_paths import ROOT


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="module")
def one_thread():
    """One CPU thread for a whole test module (``pytest.mark.usefixtures("one_thread")``): the models are
    tiny, so one thread is faster, and two OpenMP threads stall badly on a loaded machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
