"""checkpoint-N folders shared by every attempt: resume from the newest complete one, prune old."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpo_trainer.engines.trl.checkpoints import (
    latest_checkpoint,
    list_checkpoints,
    prune_checkpoints,
    remove_incomplete,
    resolve_resume,
)


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
    assert resolve_resume(tmp_path, "latest") is None


def test_resume_modes(tmp_path: Path) -> None:
    make(tmp_path, 4)
    assert resolve_resume(tmp_path, "none") is None
    chosen = resolve_resume(tmp_path, str(tmp_path / "checkpoint-4"))
    assert chosen is not None
    assert chosen.step == 4
    with pytest.raises(ValueError, match="not a complete"):
        resolve_resume(tmp_path, str(tmp_path / "checkpoint-5"))


def test_prune_keeps_the_newest_across_attempts(tmp_path: Path) -> None:
    for step in (20, 40, 60, 80):
        make(tmp_path, step)
    in_progress = make(tmp_path, 100, complete=False)
    removed = prune_checkpoints(tmp_path, keep=2)
    assert sorted(p.name for p in removed) == ["checkpoint-20", "checkpoint-40"]
    assert [c.step for c in list_checkpoints(tmp_path)] == [60, 80, 100]
    assert in_progress.is_dir()


def test_incomplete_folders_are_removed_before_a_run(tmp_path: Path) -> None:
    make(tmp_path, 2)
    make(tmp_path, 4, complete=False)
    assert [p.name for p in remove_incomplete(tmp_path)] == ["checkpoint-4"]
    assert [c.step for c in list_checkpoints(tmp_path)] == [2]


def test_keep_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep"):
        prune_checkpoints(tmp_path, keep=0)
