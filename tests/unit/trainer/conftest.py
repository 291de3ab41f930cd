"""Fixtures for the trainer's unit tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

FAKE_VERL = Path(__file__).parent / "fake_verl"


@pytest.fixture(autouse=True)
def _offline_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a model hub: sources come from the caches the tests build."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def fake_verl(tmp_path, monkeypatch, verl_configs):
    """The stand-in verl on the path of this process and of the engine it starts, with 0.9.1's real config."""
    root = tmp_path / "site"
    shutil.copytree(FAKE_VERL, root)
    shutil.copytree(verl_configs["0.9.1"], root / "verl" / "trainer" / "config")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    return root
