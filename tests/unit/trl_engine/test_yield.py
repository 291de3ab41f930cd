"""Save, then yield, in the TRL engine's real step loop: a stop request mid-run saves the step
in progress, stops there and exits YIELDED; the next run resumes after it, no step trained twice."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trl  # noqa: F401  (the trl-cpu extra; make install brings it, CI never skips)
from grpo_operator.api.contract import YIELDED, StopRequest, stop_request_file, yield_record_file
from grpo_trainer.engines.trl.checkpoints import latest_checkpoint
from grpo_trainer.engines.trl.metrics import read_records
from grpo_trainer.engines.trl.runner import run
from grpo_trainer.testing.learning import build_model_dir
from grpo_trainer.testing.resume import PLAN, request

STOP_AT = 3  # not a multiple of the periodic save (2): only the save on stop makes checkpoint-3


def _asker(metrics: Path, deadline_s: float) -> Any:
    from transformers import TrainerCallback

    class AskToStop(TrainerCallback):
        """What a stopping pod's preStop hook does, while step STOP_AT trains."""

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step + 1 == STOP_AT:
                now = time.time()
                Path(stop_request_file(str(metrics))).write_text(
                    StopRequest(now, now + deadline_s, "test-head").to_json()
                )

    return AskToStop()


@pytest.mark.slow
def test_a_stop_request_saves_the_step_in_progress_and_the_next_run_resumes_after_it(tmp_path: Path) -> None:
    build_model_dir(tmp_path, PLAN)
    metrics = tmp_path / "metrics.jsonl"
    first = replace(request(tmp_path, "second", {}, bf16=False), callbacks=[_asker(metrics, 600)])
    failure = run(first)
    assert failure is not None
    assert failure.code == YIELDED, failure
    assert failure.reason == "Yielded"
    assert f"saved step {STOP_AT}" in failure.message
    record = json.loads(Path(yield_record_file(str(metrics))).read_text())
    assert record["step"] == STOP_AT
    assert record["stepsLost"] == 0
    assert record["reason"] == "SavedOnStop"
    assert record["saveSeconds"] > 0
    assert record["savedAt"] >= record["requestedAt"]
    latest = latest_checkpoint(tmp_path / "checkpoints")
    assert latest is not None
    assert latest.step == STOP_AT
    assert not (tmp_path / "export").exists()
    events = read_records(str(metrics).replace(".jsonl", ".checkpoints.jsonl"))
    assert [e["step"] for e in events] == [2, STOP_AT]
    assert all(e["saveSeconds"] > 0 for e in events)

    Path(stop_request_file(str(metrics))).unlink()  # the next attempt's request is its own
    second = replace(request(tmp_path, "second", {}, bf16=False), resume=latest)
    assert run(second) is None
    steps = [r["step"] for r in read_records(metrics) if "data" in r]
    assert steps == list(range(1, PLAN.steps + 1)), "every step exactly once"


@pytest.mark.slow
def test_a_save_that_cannot_end_by_the_deadline_is_not_begun(tmp_path: Path) -> None:
    build_model_dir(tmp_path, PLAN)
    metrics = tmp_path / "metrics.jsonl"
    stopped = replace(request(tmp_path, "second", {}, bf16=False), callbacks=[_asker(metrics, -1)])
    failure = run(stopped)
    assert failure is not None
    assert failure.code == YIELDED
    record = json.loads(Path(yield_record_file(str(metrics))).read_text())
    # The periodic checkpoint of step 2 stands; step 3 is trained again by the next attempt.
    assert (record["step"], record["stepsLost"], record["reason"]) == (2, 1, "SaveWouldNotFit")
    assert record["savedAt"] is None
    latest = latest_checkpoint(tmp_path / "checkpoints")
    assert latest is not None
    assert latest.step == 2
