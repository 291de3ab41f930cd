"""The reporter loop with a fake API: tailing, coalescing, rate limits, API errors, checkpoints."""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path

import pytest
from grpo_operator.api.contract import checkpoint_events_file
from grpo_operator.api.v1alpha1.status import history_points
from grpo_trainer.engines.verl import checkpoints
from grpo_trainer.engines.verl.callback import StatusCheckpointCallback
from grpo_trainer.engines.verl.checkpoints import TRACKER
from grpo_trainer.progress import TrainingState
from grpo_trainer.reporter import Reporter, Tail
from support.trainer_inputs import FakeAPI


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(text)


def record(step: int, reward: float) -> str:
    return json.dumps({"step": step, "data": {"critic/score/mean": reward, "timing_s/step": 100.0}}) + "\n"


@pytest.fixture
def files(tmp_path):
    metrics = tmp_path / "metrics" / "attempt-2.jsonl"
    return metrics, Path(checkpoint_events_file(str(metrics))), tmp_path / "checkpoints"


def make(api, files, **kwargs) -> Reporter:
    metrics, events, ckpt = files
    return Reporter(
        api,
        TrainingState(total_steps=10),
        metrics,
        events,
        latest_checkpoint=lambda: checkpoints.latest(ckpt),
        poll_interval=0.01,
        **kwargs,
    )


def test_tail_handles_partial_lines_missing_files_and_truncation(tmp_path):
    path = tmp_path / "m.jsonl"
    tail = Tail(path)
    assert tail.lines() == []
    write(path, '{"a": 1}\n{"b"')
    assert tail.lines() == ['{"a": 1}']
    write(path, ": 2}\n")
    assert tail.lines() == ['{"b": 2}']
    path.write_text('{"c": 3}\n')  # verl's logger reopens with truncation
    assert tail.lines() == ['{"c": 3}']


def test_rate_limit_and_coalescing(files):
    api = FakeAPI()
    reporter = make(api, files, min_interval=5.0)
    metrics = files[0]
    write(metrics, record(1, 0.1))
    reporter.poll()
    assert reporter.publish(now=100.0)
    write(metrics, record(2, 0.2) + record(3, 0.3))
    reporter.poll()
    assert not reporter.publish(now=102.0)  # within the interval: held back
    assert reporter.publish(now=105.0)  # then both steps in one patch
    assert [p["status"]["progress"]["step"] for p in api.patches] == [1, 3]
    assert not reporter.publish(now=200.0)  # nothing new: nothing sent


def test_api_errors_lose_nothing(files):
    api = FakeAPI(failures=3)
    reporter = make(api, files, min_interval=0.0, max_backoff=8.0)
    metrics = files[0]
    now = 0.0
    for step in range(1, 6):
        write(metrics, record(step, step / 10))
        reporter.poll()
        reporter.publish(now=now)
        now += 10.0
    assert api.calls >= 4
    last = api.patches[-1]["status"]
    assert last["progress"]["step"] == 5
    assert last["metrics"]["reward"] == 0.5
    assert [p["step"] for p in history_points(last)] == [1, 2, 3, 4, 5]


def test_backoff_grows_while_the_api_is_away(files):
    api = FakeAPI(failures=100)
    reporter = make(api, files, min_interval=0.0, max_backoff=8.0)
    write(files[0], record(1, 0.1))
    reporter.poll()
    sent_at = []
    for tick in range(0, 4000):
        now = tick * 0.01
        before = api.calls
        reporter.publish(now=now)
        if api.calls > before:
            sent_at.append(now)
    gaps = [b - a for a, b in itertools.pairwise(sent_at)]
    assert gaps[0] < 0.05
    assert max(gaps) == pytest.approx(8.0, abs=0.02)


def test_checkpoint_from_the_verl_09_callback(files, monkeypatch):
    api = FakeAPI()
    pruned = []
    reporter = make(api, files, min_interval=0.0, on_checkpoint=pruned.append)
    monkeypatch.setenv("GRPO_METRICS_FILE", str(files[0]))
    StatusCheckpointCallback(config=None).on_save(
        trainer=None, global_step=40, checkpoint_dir="/c/global_step_40"
    )
    reporter.poll()
    assert reporter.publish(now=1.0)
    checkpoint = api.patches[-1]["status"]["checkpoint"]
    assert checkpoint["latestStep"] == 40
    assert checkpoint["path"] == "/c/global_step_40"
    assert pruned == [40]


def test_callback_never_raises(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_METRICS_FILE", str(tmp_path / "file-not-dir" / "m.jsonl"))
    (tmp_path / "file-not-dir").write_text("")
    StatusCheckpointCallback().on_save(global_step=1, checkpoint_dir="x")
    monkeypatch.delenv("GRPO_METRICS_FILE")
    StatusCheckpointCallback().on_save(global_step=1, checkpoint_dir="x")


def test_checkpoint_from_the_tracker_file(files):
    api = FakeAPI()
    ckpt = files[2]
    (ckpt / "global_step_20").mkdir(parents=True)
    (ckpt / TRACKER).write_text("20")
    old = time.time() - 3600
    os.utime(ckpt / TRACKER, (old, old))
    reporter = make(api, files, min_interval=0.0)
    reporter.poll()
    assert reporter.state.checkpoint is None  # written before this attempt: already reported
    (ckpt / "global_step_40").mkdir()
    (ckpt / TRACKER).write_text("40")
    reporter.poll()
    assert reporter.state.checkpoint["step"] == 40
    assert reporter.state.checkpoint["path"].endswith("global_step_40")


def test_earlier_attempts_fill_the_history(files, tmp_path):
    first = files[0].with_name("attempt-1.jsonl")
    write(first, "".join(record(s, 0.1) for s in range(1, 8)))
    api = FakeAPI()
    reporter = make(api, files, min_interval=0.0, previous_metrics=[first])
    write(files[0], record(6, 0.6))
    reporter.poll()
    reporter.publish(now=0.0)
    status = api.patches[-1]["status"]
    assert status["progress"]["step"] == 6
    assert [p["step"] for p in history_points(status)] == [1, 2, 3, 4, 5, 6, 7]
    assert history_points(status)[5]["reward"] == 0.6


def test_a_long_earlier_attempt_is_replayed_whole(files, monkeypatch):
    import grpo_trainer.reporter as reporter_module

    monkeypatch.setattr(reporter_module, "_READ_LIMIT", 256)  # force many chunks
    first = files[0].with_name("attempt-1.jsonl")
    write(first, "".join(record(s, 0.1) for s in range(1, 101)))
    reporter = make(FakeAPI(), files, previous_metrics=[first])
    assert sorted(reporter.state.history) == list(range(1, 101))


def test_thread_and_final_flush(files):
    api = FakeAPI(failures=2)
    reporter = make(api, files, min_interval=60.0)
    reporter.start()
    write(files[0], record(1, 0.1))
    time.sleep(0.1)
    write(files[0], record(2, 0.2))
    assert reporter.stop(flush_timeout=5.0)
    assert api.patches[-1]["status"]["progress"]["step"] == 2


def test_final_flush_gives_up_after_its_timeout(files):
    api = FakeAPI(failures=10**6)
    reporter = make(api, files, min_interval=0.0, max_backoff=0.05)
    write(files[0], record(1, 0.1))
    started = time.monotonic()
    assert not reporter.stop(flush_timeout=0.3)
    assert time.monotonic() - started < 2.0
