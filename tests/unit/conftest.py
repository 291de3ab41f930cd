"""Fixtures shared by the unit tiers."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpo_trainer.engines.verl.configs import fetch
from grpo_trainer.engines.verl.versions import SUPPORTED

VERL_CONFIG_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "verl-configs"


@pytest.fixture(scope="session")
def verl_configs() -> dict[str, Path]:
    """verl's own Hydra config folders for every supported release (wheels fetched once from PyPI)."""
    return {version: fetch(version, VERL_CONFIG_CACHE) for version in SUPPORTED}
