"""The reporter and a planned stop: the save's time and the yield record reach status.checkpoint."""

from __future__ import annotations

import json
import time
from pathlib import Path

from grpo_operator.api.contract import YieldRecord, checkpoint_events_file
from grpo_operator.api.v1alpha1.status import GRPOJobStatus
from grpo_trainer.progress import TrainingState
from grpo_trainer.reporter import Reporter
from grpo_trainer.stopping import AttemptFiles
from support.trainer_inputs import FakeAPI


def _reporter(api: FakeAPI, metrics: Path) -> Reporter:
    return Reporter(
        api,
        TrainingState(total_steps=10, attempt=2),
        metrics,
        Path(checkpoint_events_file(str(metrics))),
        poll_interval=0.01,
        min_interval=0,
        not_before=time.time() - 1,
    )


def test_a_yield_record_and_a_timed_save_reach_the_status(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics" / "attempt-2.jsonl"
    metrics.parent.mkdir(parents=True)
    api = FakeAPI()
    reporter = _reporter(api, metrics)
    event = {
        "step": 6,
        "path": "/grpo/checkpoints/j/checkpoints/checkpoint-6",
        "savedAt": "2026-11-29T12:00:00Z",
    }
    Path(checkpoint_events_file(str(metrics))).write_text(json.dumps({**event, "saveSeconds": 2.25}) + "\n")
    now = time.time()
    AttemptFiles(metrics).write_yield(
        YieldRecord(step=6, steps_lost=0, requested_at=now - 5, saved_at=now, save_seconds=2.25)
    )
    assert reporter.poll()
    assert reporter.publish(now=1e12)
    checkpoint = api.patches[-1]["status"]["checkpoint"]
    assert checkpoint["saveSeconds"] == 2.25
    assert checkpoint["lastStop"]["attempt"] == 2
    assert checkpoint["lastStop"]["step"] == 6
    assert checkpoint["lastStop"]["stepsLost"] == 0
    assert checkpoint["lastStop"]["reason"] == "SavedOnStop"
    assert checkpoint["lastStop"]["savedAt"]
    GRPOJobStatus.model_validate(api.patches[-1]["status"])  # within the schema
    assert not reporter.poll(), "the same record is reported once"


def test_an_earlier_runs_yield_record_is_not_this_ones(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics" / "attempt-2.jsonl"
    files = AttemptFiles(metrics)
    files.write_yield(YieldRecord(step=3, steps_lost=0, requested_at=1.0, saved_at=2.0))
    old = time.time() - 3600
    import os

    os.utime(files.yield_record, (old, old))
    api = FakeAPI()
    reporter = _reporter(api, metrics)
    reporter.poll()
    reporter.publish(now=1e12)
    assert "lastStop" not in (api.patches[-1]["status"].get("checkpoint") or {})
