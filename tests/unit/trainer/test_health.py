"""The trainer's health verdict: judged on this attempt's raw step metrics, NaN included."""

from __future__ import annotations

import json
import math

from grpo_trainer.progress import TrainingState, parse_line, status_patch

from .test_report import verl_step

NOW = "2026-11-30T12:00:00Z"
NOW_S = 1796040000.0  # NOW, in seconds since the epoch


def _state(**kwargs) -> TrainingState:
    return TrainingState(total_steps=100, attempt=2, entropy_floor=0.02, entropy_collapse_steps=3, **kwargs)


def _live(state: TrainingState, step: int, **extra) -> None:
    state.add_line(step, verl_step(step, **extra), live=True, at=NOW_S)


def test_a_healthy_run_writes_no_verdict_and_a_sick_one_names_its_attempt():
    state = _state()
    _live(state, 1)
    # Healthy: null, which also removes an earlier attempt's sick verdict; the Healthy condition says it.
    assert status_patch(state)["status"]["health"] is None
    assert status_patch(state)["status"]["progress"]["lastStepAt"] == NOW
    _live(state, 2, reward=math.inf)
    health = status_patch(state)["status"]["health"]
    assert (health["attempt"], health["healthy"], health["reason"], health["step"]) == (
        2,
        False,
        "NonFiniteReward",
        2,
    )


def test_a_nan_loss_as_verls_file_logger_writes_it_makes_the_run_sick_for_good():
    line = json.dumps({"step": 7, "data": verl_step(7, **{"actor/pg_loss": float("nan")})})
    assert "NaN" in line  # what Python's json (verl's file logger) writes
    state = _state()
    state.add_line(*parse_line(line), live=True, at=NOW_S)
    health = state.health
    assert (health["healthy"], health["reason"], health["step"]) == (False, "NonFiniteLoss", 7)
    assert "actor/pg_loss is nan at step 7" in health["message"]
    _live(state, 8)  # finite again: the weights are still broken
    assert state.health["reason"] == "NonFiniteLoss"
    patch = status_patch(state)["status"]
    assert "loss" not in json.dumps(patch["metrics"]), "NaN never reaches the status"


def test_an_infinite_reward_is_named_as_the_reward():
    state = _state()
    _live(state, 3, reward=math.inf)
    assert state.health["reason"] == "NonFiniteReward"


def test_entropy_collapse_needs_consecutive_low_steps_and_recovers():
    state = _state()
    for step, entropy in enumerate([0.5, 0.01, 0.015, 0.3, 0.01, 0.01], start=1):
        _live(state, step, **{"actor/entropy": entropy})
    assert state.health["healthy"] is True, "two low steps in a row are not yet a collapse"
    _live(state, 7, **{"actor/entropy": 0.02})  # at the floor counts
    assert (state.health["healthy"], state.health["reason"]) == (False, "EntropyCollapse")
    assert "entropyFloor=0.02 for 3 steps" in state.health["message"]
    _live(state, 8, **{"actor/entropy": 0.4})
    assert state.health["healthy"] is True
    # Recovered: the patch removes the collapse's verdict, which a merge patch would keep.
    assert status_patch(state)["status"]["health"] is None


def test_an_entropy_floor_of_zero_turns_the_check_off():
    state = TrainingState(entropy_floor=0.0, entropy_collapse_steps=1)
    state.add_line(1, verl_step(1, **{"actor/entropy": 0.0}), live=True, at=NOW_S)
    assert state.health["healthy"] is True


def test_an_earlier_attempts_lines_are_history_not_this_attempts_health():
    state = _state()
    state.add_line(5, verl_step(5, **{"actor/pg_loss": float("nan")}))  # replayed for the plot
    assert state.health is None
    assert state.last_step_at is None
    assert "health" not in status_patch(state)["status"]
