"""Shared paths for the CPU tests of the `tlc` package."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo() -> Path:
    """The repository root (examples/, tests/cases/, bench/)."""
    return REPO
