"""Resume, prune and world-size rules for verl checkpoints across attempts.

Which checkpoint an attempt starts from is the driver's decision (grpo_trainer/inputs.py); these
tests read it in verl's terms, after the verl engine's preflight, as a run does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grpo_operator.api.v1alpha1 import ResolvedJob
from grpo_trainer.engines.base import EngineOptions
from grpo_trainer.engines.verl.checkpoints import (
    TRACKER,
    check_world,
    prune,
    record_world,
    saved_steps,
    tracked_step,
    verl_resume,
    world_size_of,
)
from grpo_trainer.engines.verl.engine import VerlEngine
from grpo_trainer.engines.verl.overrides import Resume
from grpo_trainer.failures import ConfigError
from grpo_trainer.inputs import decide_resume as driver_decision
from support.trainer_inputs import example_job

ENGINE = VerlEngine(EngineOptions())


def decide_resume(job: ResolvedJob, attempt: int, dry_run: bool = False) -> Resume:
    """The driver's decision in verl's terms; a run's preflight first (a plan, `dry_run`, only
    checks the device count and moves nothing)."""
    resume = driver_decision(job, attempt, ENGINE)
    if dry_run:
        if resume.checkpoint is not None:
            check_world(job, Path(resume.checkpoint.path))
    else:
        ENGINE.preflight(job, resume)
    return verl_resume(resume)


def save(
    checkpoint_dir: Path, step: int, world: int | None = 8, track: bool = True, shards: bool = False
) -> Path:
    """What verl leaves after a save: actor shards + fsdp_config.json, then the tracker."""
    actor = checkpoint_dir / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True, exist_ok=True)
    if world is not None and not shards:
        (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world}))
    if world is not None and shards:
        for rank in range(world):
            (actor / f"model_world_size_{world}_rank_{rank}.pt").write_bytes(b"")
    if track:
        (checkpoint_dir / TRACKER).write_text(str(step))
    return actor.parent


@pytest.fixture
def job(tmp_path):
    return example_job("geo3k-ascend-910b", tmp_path)  # 8 devices, keep 3


@pytest.fixture
def ckpt(job):
    return Path(job.paths.checkpoint_dir)


def test_prune_keeps_the_newest_across_attempts(ckpt):
    for step in (20, 40, 60, 80, 100):  # attempts 1 and 2 together
        save(ckpt, step)
    assert prune(ckpt, keep=3) == [20, 40]
    assert saved_steps(ckpt) == [60, 80, 100]


def test_prune_never_deletes_the_tracked_checkpoint(ckpt):
    for step in (20, 40, 60):
        save(ckpt, step)
    save(ckpt, 80, track=False)  # a save in progress: newer, not tracked yet
    (ckpt / TRACKER).write_text("40")
    assert prune(ckpt, keep=1) == [20, 60]
    assert saved_steps(ckpt) == [40, 80]


def test_prune_ignores_foreign_folders(ckpt):
    save(ckpt, 20)
    (ckpt / "notes").mkdir()
    (ckpt / "global_step_x").mkdir()
    assert prune(ckpt, keep=1) == []
    assert (ckpt / "notes").is_dir()


def test_tracker_pointing_at_a_missing_folder_is_no_checkpoint(ckpt):
    ckpt.mkdir(parents=True)
    (ckpt / TRACKER).write_text("40")
    assert tracked_step(ckpt) is None


def test_latest_resumes_from_the_tracker(job, ckpt):
    save(ckpt, 20)
    save(ckpt, 40)
    resume = decide_resume(job, attempt=1)
    assert (resume.mode, resume.from_step) == ("auto", 40)


def test_fresh_job_starts_in_auto_mode(job):
    resume = decide_resume(job, attempt=1)
    assert (resume.mode, resume.from_step) == ("auto", None)


def test_resume_refuses_another_world_size(tmp_path, ckpt):
    save(ckpt, 40, world=16)
    job = example_job("geo3k-ascend-910b", tmp_path)
    with pytest.raises(ConfigError) as error:
        decide_resume(job, attempt=2)
    message = str(error.value)
    assert "written by 16 devices and this job has 8 (1 node(s) x 8)" in message
    assert "checkpoint.resume: none" in message


def test_world_size_from_shard_names_and_from_our_record(job, ckpt):
    step_dir = save(ckpt, 20, world=4, shards=True)
    assert world_size_of(step_dir) == 4
    bare = save(ckpt, 40, world=None)
    assert world_size_of(bare) is None
    record_world(job)
    assert world_size_of(bare) == 8


def test_none_starts_over_and_keeps_the_old_run_aside(tmp_path, ckpt):
    save(ckpt, 60)
    job = example_job("geo3k-ascend-910b", tmp_path, checkpoint={"resume": "none"})
    assert decide_resume(job, attempt=1, dry_run=True).mode == "disable"
    assert saved_steps(ckpt) == [60]  # a dry run moves nothing
    assert decide_resume(job, attempt=1).mode == "disable"
    assert saved_steps(ckpt) == []
    archived = list(ckpt.parent.glob("checkpoints-archived-*"))
    assert len(archived) == 1
    assert (archived[0] / "global_step_60").is_dir()


def test_a_retry_resumes_even_when_the_first_start_asked_for_none(tmp_path):
    job = example_job("geo3k-ascend-910b", tmp_path, checkpoint={"resume": "none"})
    save(Path(job.paths.checkpoint_dir), 20)
    resume = decide_resume(job, attempt=2)
    assert (resume.mode, resume.from_step) == ("auto", 20)


def test_resume_from_a_given_checkpoint(tmp_path):
    other = save(tmp_path / "other-job" / "checkpoints", 140)
    job = example_job("geo3k-ascend-910b", tmp_path, checkpoint={"resume": str(other)})
    resume = decide_resume(job, attempt=1)
    assert (resume.mode, resume.path, resume.from_step) == ("resume_path", str(other), 140)


def test_resume_from_a_path_that_is_not_a_checkpoint(tmp_path):
    job = example_job("geo3k-ascend-910b", tmp_path, checkpoint={"resume": str(tmp_path / "nope")})
    with pytest.raises(ConfigError, match="global_step_N"):
        decide_resume(job, attempt=1)
