"""Fixtures for the TRL engine's tests: one tiny offline Qwen3-VL folder per session, and the
trainer image the runs here plan for."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from grpo_trainer.testing.colour_task import WORDS
    from grpo_trainer.testing.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny") / "model", words=WORDS, blind=True)


@pytest.fixture(autouse=True)
def _the_cpu_images_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs here plan as the CPU trainer image does, whose stack this one is (the trl-cpu extra pins
    its torch, transformers, TRL and peft): adamw_torch, no vLLM. A test that plans for another
    image names it (trainer_image.for_job, or `image=`)."""
    from grpo_trainer.trainer_image import FLAVOUR_ENV

    monkeypatch.setenv(FLAVOUR_ENV, "cpu")
