"""Crash with a retryable error, then resume in a second process from the saved step and state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trl  # noqa: F401  (the trl-cpu extra; make install brings it, CI never skips)
from grpo_operator.api.contract import RETRYABLE
from grpo_trainer.testing.resume import CRASH_AT_STEP, PLAN


def attempt(workdir: Path, phase: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("GRPO_METRICS_FILE", None)
    return subprocess.run(
        [sys.executable, "-m", "grpo_trainer.testing.resume", str(workdir), phase],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_resume_in_a_new_process_restores_step_optimizer_and_adapter(tmp_path: Path) -> None:
    first = attempt(tmp_path, "first")
    assert first.returncode == RETRYABLE, first.stderr[-3000:]
    second = attempt(tmp_path, "second")
    assert second.returncode == 0, second.stderr[-3000:]

    report = json.loads((tmp_path / "resume-check.json").read_text())
    assert report["checkpoint_step"] == CRASH_AT_STEP
    assert report["state_global_step_at_begin"] == CRASH_AT_STEP
    assert report["scheduler_last_epoch"] == CRASH_AT_STEP
    assert report["optimizer_moments_equal"]
    assert report["optimizer_moments_abs_sum"] > 0
    assert report["adapter_weights_equal"]
    assert report["adapter_tensors_compared"] > 0
    # Steps 1-4 from the first process, 5-6 from the second; nothing repeated or skipped.
    assert report["logged_steps"] == list(range(1, PLAN.steps + 1))
    saved = [e["step"] for e in report["events"] if "savedAt" in e]
    assert saved == [2, 4, 6]
    assert report["checkpoints_left"] == ["checkpoint-4", "checkpoint-6"]  # keep=2
