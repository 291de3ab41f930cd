"""verl's per-step metric lines -> the job's status fields (pure functions)."""

from __future__ import annotations

import json

import pytest
from grpo_operator.api.v1alpha1 import GRPOJobStatus
from grpo_operator.api.v1alpha1.status import HISTORY_LIMIT, TRAINER_STATUS_FIELDS, duration, history_points
from grpo_trainer.progress import (
    TrainingState,
    downsample,
    eta_seconds,
    parse_line,
    status_patch,
    step_metrics,
    total_steps,
    validation_score,
)
from hypothesis import given
from hypothesis import strategies as st


def line(step: int, **data) -> str:
    return json.dumps({"step": step, "data": data})


def verl_step(step: int, reward: float = 0.5, seconds: float = 180.0, **extra) -> dict:
    """What verl's file logger writes for a training step (a subset of its ~100 keys)."""
    return {
        "training/global_step": step,
        "training/epoch": (step - 1) // 4,
        "critic/score/mean": reward,
        "response_length/mean": 612.5,
        "actor/entropy": 0.41,
        "actor/kl_loss": 0.0031,
        "actor/pg_loss": -0.02,
        "timing_s/step": seconds,
        "perf/throughput": 1250.0,
        **extra,
    }


def test_parse_line_accepts_only_logger_records():
    assert parse_line(line(3, a=1)) == (3, {"a": 1})
    for garbage in (
        "",
        "{",
        "[]",
        '{"step": 1}',
        '{"step": "x", "data": {}}',
        '{"step": true, "data": {}}',
        "null",
    ):
        assert parse_line(garbage) is None


def test_metric_names():
    metrics = step_metrics(verl_step(7, reward=0.62, **{"val-core/hiyouga/geometry3k/acc/mean@1": 0.48}))
    assert metrics == {
        "reward": 0.62,
        "response_length": 612.5,
        "entropy": 0.41,
        "kl": 0.0031,
        "step_seconds": 180.0,
        "tokens_per_second_per_device": 1250.0,
        "val_score": 0.48,
    }


def test_kl_in_reward_is_reported_as_kl():
    assert step_metrics({"actor/reward_kl_penalty": 0.2})["kl"] == 0.2


def test_validation_prefers_accuracy_and_averages_sources():
    assert validation_score(
        {"val-core/a/acc/mean@1": 0.4, "val-core/b/acc/mean@1": 0.6, "val-core/a/reward/mean@1": 9}
    ) == pytest.approx(0.5)
    assert validation_score({"val-core/safety/reward/mean@1": 0.7, "val-aux/x/acc/mean@1": 0.1}) == 0.7
    assert validation_score({"critic/score/mean": 1}) is None


def test_non_finite_values_are_dropped():
    assert step_metrics({"critic/score/mean": float("nan"), "actor/entropy": float("inf")}) == {}


def test_status_patch_carries_progress_metrics_history_checkpoint():
    state = TrainingState(total_steps=60, resumed_from_step=20, started_at=1000.0)
    state.add_line(20, {"val-core/hiyouga/geometry3k/acc/mean@1": 0.31})  # validation on resume
    for step in range(21, 25):
        state.add_line(step, verl_step(step, reward=0.1 * step / 10, seconds=170.0 + step))
    state.add_checkpoint(20, "/ckpt/global_step_20", "2026-11-30T07:00:00Z")

    patch = status_patch(state)
    assert set(patch) == {"status"}
    assert set(patch["status"]) <= TRAINER_STATUS_FIELDS
    status = patch["status"]
    assert status["progress"] == {
        "step": 24,
        "totalSteps": 60,
        "steps": "24/60",
        "epoch": 5,
        "percent": 40.0,
        "etaSeconds": round(36 * (191 + 192 + 193 + 194) / 4),
        "attempt": 1,
        "startupSeconds": None,  # replayed lines: no first step of this attempt read yet
    }
    assert status["metrics"]["reward"] == pytest.approx(0.24)
    assert status["metrics"]["valScore"] == 0.31
    assert status["metrics"]["tokensPerSecondPerDevice"] == 1250.0
    assert status["history"] == {
        "steps": "20 21 22 23 24",
        "reward": "_ 0.21 0.22 0.23 0.24",
        "valScore": "0.31 _ _ _ _",
        "responseLength": "_ 612.5 612.5 612.5 612.5",
    }
    assert history_points(status)[:2] == [
        {"step": 20, "valScore": 0.31},
        {"step": 21, "reward": 0.21, "responseLength": 612.5},
    ]
    assert status["checkpoint"] == {
        "latestStep": 20,
        "path": "/ckpt/global_step_20",
        "savedAt": "2026-11-30T07:00:00Z",
        "resumedFromStep": 20,
    }
    # What we send is valid for the API's own status model.
    GRPOJobStatus.model_validate(status)


def test_a_retried_attempt_rewinds_progress_and_overwrites_history():
    state = TrainingState(total_steps=60)
    for step in range(1, 28):
        state.add_line(step, verl_step(step, reward=0.1))
    for step in range(21, 23):  # attempt 2 resumed from the checkpoint at 20
        state.add_line(step, verl_step(step, reward=0.9))
    assert state.step == 22
    assert state.history[21]["reward"] == 0.9
    assert state.history[27]["reward"] == 0.1


def test_the_start_up_is_dated_by_this_attempts_first_step_alone():
    """From the trainer's start until this attempt's first step began: the first live line, read at
    `at`, less that step's own duration. An earlier attempt's replayed lines date nothing, a later
    step does not move it, and until the first step the patch clears it (null), so a retry never
    shows the attempt before it's."""
    state = TrainingState(total_steps=60, attempt=2, started_at=1000.0)
    for step in range(1, 21):  # attempt 1's lines, replayed for the history
        state.add_line(step, verl_step(step))
    assert state.startup_seconds is None
    waiting = status_patch(state)["status"]["progress"]
    assert "startupSeconds" in waiting
    assert waiting["startupSeconds"] is None
    state.add_line(21, verl_step(21, seconds=116.4), live=True, at=1000.0 + 309.8)
    assert state.startup_seconds == 193  # 309.8 - 116.4, rounded
    state.add_line(22, verl_step(22, seconds=90.0), live=True, at=1000.0 + 400.0)
    assert state.startup_seconds == 193
    assert status_patch(state)["status"]["progress"]["startupSeconds"] == 193
    # Trained to the end: the pace goes, the start-up stays.
    state.total_steps = 22
    assert status_patch(state)["status"]["progress"]["startupSeconds"] == 193


def test_a_start_up_without_a_step_duration_or_a_start_is_read_as_best_it_can_be():
    no_duration = TrainingState(started_at=50.0)
    no_duration.add_line(1, {"critic/score/mean": 0.5}, live=True, at=80.4)
    assert no_duration.startup_seconds == 30  # the step's end: the best bound there is
    clock_skew = TrainingState(started_at=50.0)
    clock_skew.add_line(1, verl_step(1, seconds=40.0), live=True, at=80.0)
    assert clock_skew.startup_seconds == 0  # never negative
    no_start = TrainingState()
    no_start.add_line(1, verl_step(1), live=True, at=80.0)
    assert no_start.startup_seconds is None
    # Not known here (`grpo-train report` by hand): the running attempt's own reporter's value stays.
    assert "startupSeconds" not in status_patch(no_start)["status"]["progress"]


def test_no_total_without_data_rows():
    state = TrainingState()
    state.add_line(3, verl_step(3))
    progress = status_patch(state)["status"]["progress"]
    assert progress["steps"] == "3"
    assert "percent" not in progress
    assert progress["etaSeconds"] is None  # null: no ETA, and none left from an earlier patch


def test_total_steps_matches_verl():
    assert total_steps(2101, 512, 15, None) == 60  # geo3k: 4 steps per epoch (drop_last)
    assert total_steps(2101, 512, 15, 100) == 100
    assert total_steps(None, 512, 15, None) is None


def test_eta_uses_recent_steps():
    state = TrainingState(total_steps=10)
    for step in range(1, 13):
        state.add_line(step, verl_step(min(step, 9), seconds=1000.0 if step <= 2 else 10.0))
    assert eta_seconds(state) == 10


def test_once_the_last_step_is_done_the_eta_and_the_pace_are_removed_not_zero():
    state = TrainingState(total_steps=3)
    for step in range(1, 3):
        state.add_line(step, verl_step(step, seconds=10.0), live=True, at=1796040000.0)
    training = status_patch(state)["status"]
    assert training["progress"]["lastStepAt"] == "2026-11-30T12:00:00Z"
    assert training["metrics"]["stepSeconds"] == 10.0
    state.add_line(3, verl_step(3, seconds=10.0), live=True, at=1796040010.0)
    status = status_patch(state)["status"]
    progress = status["progress"]
    assert progress["etaSeconds"] is None
    assert progress["steps"] == "3/3"
    # The export that follows is no stall: null removes what the last patch while training wrote.
    assert progress["lastStepAt"] is None
    assert (status["metrics"]["stepSeconds"], status["metrics"]["tokensPerSecondPerDevice"]) == (None, None)
    assert status["metrics"]["reward"] is not None  # the REWARD column stays
    assert "responseLength" not in status["metrics"]  # the history's last point holds it
    assert status["history"]["steps"].split()[-1] == "3"


@given(st.integers(min_value=0, max_value=5000), st.integers(min_value=2, max_value=HISTORY_LIMIT))
def test_downsample_is_bounded_ordered_and_ends_at_the_last_step(n, limit):
    history = {s: {"reward": float(s)} for s in range(n)}
    points = downsample(history, limit)
    assert len(points) == min(n, limit)
    steps = [p["step"] for p in points]
    assert steps == sorted(set(steps))
    if n:
        assert steps[-1] == n - 1
        assert points[-1] == {"step": n - 1, **history[n - 1]}, "the newest step is a point of its own"


def test_downsample_keeps_sparse_validation_points():
    history = {s: {"reward": 1.0} for s in range(1, 1001)}
    for s in range(10, 1001, 10):
        history[s]["val_score"] = s / 1000
    points = downsample(history, 50)
    vals = [p["val_score"] for p in points if "val_score" in p]
    assert len(vals) == 50
    assert vals[-1] == 1.0
    assert all(p["reward"] == 1.0 for p in points)


def test_history_in_a_patch_never_exceeds_the_schema_limit():
    state = TrainingState(total_steps=5000)
    for step in range(1, 5001):
        state.add_line(step, verl_step(step))
    status = status_patch(state)["status"]
    assert len(history_points(status)) == HISTORY_LIMIT
    GRPOJobStatus.model_validate(status)


def test_metrics_in_status_are_rounded_for_kubectl_get_and_eta_reads_as_a_duration():
    """REWARD once showed 0.8209337055862767: a printer column cannot round, so the status does."""
    state = TrainingState(total_steps=100)
    state.add_line(10, verl_step(10, reward=0.8209337055862767, seconds=540.0))
    status = status_patch(state)["status"]
    assert status["metrics"]["reward"] == 0.8209
    assert status["metrics"]["tokensPerSecondPerDevice"] == 1250.0
    assert status["progress"]["etaSeconds"] == 90 * 540
    assert duration(status["progress"]["etaSeconds"]) == "13h30m"  # what status.eta shows
    assert status["progress"]["percent"] == 10.0
    assert state.latest["reward"] == 0.8209337055862767, "only the status is rounded"


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (45, "45s"), (720, "12m"), (9000, "2h30m"), (273600, "3d4h")]
)
def test_durations_read_like_kubectl_ages(seconds, text):
    assert duration(seconds) == text
