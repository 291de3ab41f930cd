"""Metric lines and checkpoint events in the files and formats the status reporter reads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from grpo_operator.api.contract import checkpoint_events_file
from grpo_trainer.engines.trl.metrics import MetricsFile, read_records, verl_metrics
from grpo_trainer.progress import parse_line, step_metrics

TRL_LOG = {
    "loss": 0.01,
    "grad_norm": 0.3,
    "learning_rate": 5e-6,
    "reward": 1.5,
    "reward_std": 0.5,
    "rewards/correctness_reward_func/mean": 1.0,
    "completions/mean_length": 812.0,
    "entropy": 0.7,
    "kl": 0.002,
    "epoch": 0.25,
    "step_time": 80.0,
    "not_a_number": "x",
    "nan": float("nan"),
}


def test_trl_logs_become_verl_names_the_reporter_understands() -> None:
    data = verl_metrics(TRL_LOG, step=7, step_seconds=81.5)
    assert data["critic/score/mean"] == 1.5
    assert data["response_length/mean"] == 812.0
    assert data["actor/entropy"] == 0.7
    assert data["actor/kl_loss"] == 0.002
    assert data["timing_s/step"] == 81.5
    assert data["training/global_step"] == 7
    assert data["training/epoch"] == 0.25
    assert data["critic/rewards/correctness_reward_func/mean"] == 1.0
    assert data["trl/step_time"] == 80.0
    assert "trl/not_a_number" not in data
    assert "trl/nan" not in data
    assert step_metrics(data) == {
        "reward": 1.5,
        "response_length": 812.0,
        "entropy": 0.7,
        "kl": 0.002,
        "step_seconds": 81.5,
    }


def test_lines_parse_as_file_logger_lines(tmp_path: Path) -> None:
    metrics = MetricsFile(tmp_path / "attempt-1.jsonl")
    metrics.step(3, {"critic/score/mean": 2.0})
    metrics.event("resumed", 2, path="/ckpt/checkpoint-2")
    lines = (tmp_path / "attempt-1.jsonl").read_text().splitlines()
    assert parse_line(lines[0]) == (3, {"critic/score/mean": 2.0})
    assert parse_line(lines[1]) is None  # run events are skipped by the reporter


def test_checkpoint_events_go_where_the_reporter_looks(tmp_path: Path) -> None:
    metrics_path = tmp_path / "attempt-2.jsonl"
    MetricsFile(metrics_path).checkpoint(60, tmp_path / "checkpoint-60")
    (event,) = read_records(checkpoint_events_file(str(metrics_path)))
    assert event["step"] == 60
    assert event["path"].endswith("checkpoint-60")
    assert event["savedAt"].endswith("Z")
    json.dumps(event)


def test_env_path_wins_over_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPO_METRICS_FILE", str(tmp_path / "from-env.jsonl"))
    assert MetricsFile.from_env(tmp_path / "fallback.jsonl").path == tmp_path / "from-env.jsonl"


def test_a_nan_loss_reaches_the_health_check_but_not_the_status() -> None:
    """The reporter must see a NaN loss to call the run sick; the status never holds it."""
    data = verl_metrics({"loss": float("nan"), "reward": 0.5}, step=3, step_seconds=None)
    assert math.isnan(data["actor/pg_loss"])
    assert "trl/loss" not in data
    written = json.loads(json.dumps({"step": 3, "data": data}))  # MetricsFile's round trip
    assert math.isnan(written["data"]["actor/pg_loss"])
    assert "loss" not in step_metrics(data)
