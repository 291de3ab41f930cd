"""Fixtures for the trainer's unit tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _offline_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a model hub: sources come from the caches the tests build."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
