"""Fixtures for the TRL engine's tests: one tiny offline Qwen3-VL folder per session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from grpo_trainer.testing.colour_task import WORDS
    from grpo_trainer.testing.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny") / "model", words=WORDS, blind=True)
