"""benchmarks.stops: steps lost per stop and the summary the benchmark page reads."""

from __future__ import annotations

from datetime import UTC, datetime

from benchmarks.stops import SAVE_EVERY, STOP_AT, StopRun, document, paced_job, summarise, went_on_from


def test_no_stop_is_made_where_a_periodic_save_would_save_anyway():
    assert all(step % SAVE_EVERY for step in STOP_AT)


def test_steps_lost_are_the_steps_trained_after_what_the_job_went_on_from():
    assert StopRun("suspend", "off", 5, trained=6, went_on_from=3, seconds_to_gone=2.0).steps_lost == 3
    assert StopRun("suspend", "on", 5, trained=6, went_on_from=6, seconds_to_gone=9.0).steps_lost == 0


def test_where_the_job_went_on_from():
    assert went_on_from("suspend", {"checkpoint": {"resumedFromStep": 6, "latestStep": 12}}) == 6
    saved = {"checkpoint": {"latestStep": 6, "lastStop": {"step": 6, "stepsLost": 0}}}
    assert went_on_from("deadline", saved) == 6
    # Without a save on stop a deadline keeps the newest periodic checkpoint.
    assert went_on_from("deadline", {"checkpoint": {"latestStep": 3}}) == 3
    assert went_on_from("eviction", {}) == 0


def test_the_summary_per_stop_and_mode():
    runs = [
        StopRun("suspend", "on", 4, 5, 5, 8.0),
        StopRun("suspend", "on", 5, 6, 6, 12.0),
        StopRun("suspend", "off", 4, 5, 3, 3.0),
    ]
    summary = summarise(runs)
    assert summary["suspend"]["on"] == {
        "runs": 2,
        "steps_lost": [0, 0],
        "steps_lost_max": 0,
        "seconds_to_gone_median": 10.0,
        "seconds_to_gone_max": 12.0,
    }
    assert summary["suspend"]["off"]["steps_lost"] == [2]
    record = document(runs, "abc1234", {"node": "real-cpu-0"}, datetime(2026, 12, 7, tzinfo=UTC))
    assert (record["date"], record["commit"]) == ("2026-12-07", "abc1234")
    assert [r["steps_lost"] for r in record["runs"]] == [0, 0, 2]


def test_the_job_saves_on_stop_only_in_mode_on_and_its_reward_is_paced():
    for mode, enabled in (("on", True), ("off", False)):
        documents = paced_job("j", mode)
        job = next(d for d in documents if d["kind"] == "GRPOJob")
        assert job["spec"]["checkpoint"]["saveOnStop"] == {"enabled": enabled}
        assert job["spec"]["checkpoint"]["saveInterval"] == SAVE_EVERY
        reward = next(d for d in documents if d["kind"] == "ConfigMap" and "reward.py" in d.get("data", {}))
        assert "_time.sleep(" in reward["data"]["reward.py"]
