"""Shared fixtures: each test gets its own EXPEDITER_HOME and a clean EXPEDITER_* environment."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _isolated_home(expediter_home: Path) -> Path:
    """No test reads or writes the real user data directory."""
    return expediter_home
