"""checkpoint-N folders shared by every attempt: resume from the newest complete one, prune old.

Which one an attempt starts from is the driver's decision (grpo_trainer/inputs.py), read here
with the TRL engine's checkpoints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from grpo_trainer.engines.base import EngineOptions
from grpo_trainer.engines.trl.checkpoints import (
    latest_checkpoint,
    prune_checkpoints,
    remove_incomplete,
)
from grpo_trainer.engines.trl.engine import TrlEngine
from grpo_trainer.failures import ConfigError
from grpo_trainer.inputs import decide_resume
from support.trainer_inputs import example_job


def folders(root: Path) -> list[str]:
    return sorted((p.name for p in root.iterdir()), key=lambda name: int(name.rpartition("-")[2]))


def trl_job(tmp_path: Path, resume: str = "latest") -> Any:
    """The single-GPU LoRA example with its checkpoint folder under `tmp_path`."""
    return example_job("lora-single-gpu", tmp_path, checkpoint={"resume": resume})


ENGINE = TrlEngine(EngineOptions())


def make(root: Path, step: int, *, complete: bool = True) -> Path:
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    if complete:
        (folder / "trainer_state.json").write_text("{}")
    return folder


def test_latest_is_the_newest_complete_by_step_not_by_name(tmp_path: Path) -> None:
    make(tmp_path, 9)
    make(tmp_path, 10)
    make(tmp_path, 12, complete=False)  # a crash during the save of step 12
    (tmp_path / "checkpoint-x").mkdir()
    latest = latest_checkpoint(tmp_path)
    assert latest is not None
    assert latest.step == 10


def test_nothing_to_resume_from(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None
    assert latest_checkpoint(tmp_path / "missing") is None
    assert decide_resume(trl_job(tmp_path), 1, ENGINE).checkpoint is None


def test_resume_modes(tmp_path: Path) -> None:
    job = trl_job(tmp_path)
    root = Path(job.paths.checkpoint_dir)
    make(root, 4)
    assert decide_resume(job, 1, ENGINE).checkpoint.step == 4
    assert decide_resume(trl_job(tmp_path, "none"), 1, ENGINE).checkpoint is None
    chosen = decide_resume(trl_job(tmp_path, str(root / "checkpoint-4")), 1, ENGINE).checkpoint
    assert chosen is not None
    assert chosen.step == 4
    with pytest.raises(ConfigError, match="not a complete"):
        decide_resume(trl_job(tmp_path, str(root / "checkpoint-5")), 1, ENGINE)


def test_prune_keeps_the_newest_across_attempts(tmp_path: Path) -> None:
    for step in (20, 40, 60, 80):
        make(tmp_path, step)
    in_progress = make(tmp_path, 100, complete=False)
    removed = prune_checkpoints(tmp_path, keep=2)
    assert sorted(p.name for p in removed) == ["checkpoint-20", "checkpoint-40"]
    assert folders(tmp_path) == ["checkpoint-60", "checkpoint-80", "checkpoint-100"]
    assert in_progress.is_dir()


def test_incomplete_folders_are_removed_before_a_run(tmp_path: Path) -> None:
    make(tmp_path, 2)
    make(tmp_path, 4, complete=False)
    assert [p.name for p in remove_incomplete(tmp_path)] == ["checkpoint-4"]
    assert folders(tmp_path) == ["checkpoint-2"]


def test_keep_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep"):
        prune_checkpoints(tmp_path, keep=0)
