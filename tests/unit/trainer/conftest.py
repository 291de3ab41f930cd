"""Fixtures for the trainer's unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpo_trainer.engines.verl_configs import fetch
from grpo_trainer.engines.verl_versions import SUPPORTED

from .helpers import VERL_CONFIG_CACHE


@pytest.fixture(scope="session")
def verl_configs() -> dict[str, Path]:
    """verl's own Hydra config folders for every supported release (wheels fetched once from PyPI)."""
    return {version: fetch(version, VERL_CONFIG_CACHE) for version in SUPPORTED}


@pytest.fixture(autouse=True)
def _offline_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a model hub: sources come from the caches the tests build."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
