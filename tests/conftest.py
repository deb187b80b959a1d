"""Shared fixtures for the tests in this folder (paths live in course_paths.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from course_paths import ROOT


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
