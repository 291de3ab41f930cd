"""benchmarks.gpu_confirmations: the verdicts its summaries give, from what the files hold."""

from __future__ import annotations

from grpo_operator.api.contract import YIELDED

from benchmarks.gpu_confirmations import (
    PARTS,
    SAVE_KEY,
    next_part,
    save_summary,
    steps_exactly_once,
    trained_steps,
    yield_summary,
)


def _records(*steps: int, validation: tuple[int, ...] = ()) -> list[dict]:
    lines = [{"step": s, "data": {"val-core/geo3k/reward/mean@1": 0.1}} for s in validation]
    return lines + [{"step": s, "data": {"critic/score/mean": 0.5, "timing_s/step": 2.0}} for s in steps]


def test_trained_steps_leave_out_the_validation_before_training_and_validation_lines():
    assert trained_steps(_records(1, 2, validation=(0, 2))) == [1, 2]


def test_a_stop_and_a_resume_that_train_every_step_once():
    verdict = steps_exactly_once([1, 2], [3, 4], total=4, saved=2)
    assert verdict == {"ok": True, "problems": [], "attempt_1": [1, 2], "attempt_2": [3, 4]}


def test_a_step_trained_again_or_skipped_fails_the_verdict():
    again = steps_exactly_once([1, 2], [2, 3, 4], total=4, saved=1)
    assert not again["ok"]
    assert "steps trained twice: [2]" in again["problems"]
    assert "attempt 1's last step is [2], its yield record says 1" in again["problems"]
    skipped = steps_exactly_once([1, 2], [4], total=4, saved=2)
    assert skipped["problems"] == ["attempt 2 began at step [4], not 3", "steps never trained: [3]"]
    assert steps_exactly_once([1, 2], [3, 4], total=4, saved=None)["problems"] == [
        "attempt 1 wrote no yield record with a saved step"
    ]


def test_the_yield_summary_checks_the_step_it_was_in_was_saved():
    record = {"step": 2, "stepsLost": 0, "saveSeconds": 1.5, "reason": "SavedOnStop"}
    verdict = steps_exactly_once([1, 2], [3, 4], total=4, saved=2)
    good = yield_summary(record, (YIELDED, 0), requested_after=1, verdict=verdict, checkpointed=2)
    assert good["ok"]
    assert good["save_seconds"] == 1.5
    late = yield_summary(record, (YIELDED, 0), requested_after=2, verdict=verdict, checkpointed=2)
    assert not late["ok"]
    assert late["checks"]["saved_the_step_it_was_in"] is False
    crashed = yield_summary(None, (1, 0), requested_after=1, verdict=verdict, checkpointed=None)
    assert [k for k, v in crashed["checks"].items() if not v] == [
        "attempt_1_exit_yielded",
        "saved_the_step_it_was_in",
        "checkpoint_is_that_step",
        "no_step_lost",
    ]


def test_the_save_summary_reads_verls_own_save_time():
    records = [{"step": 1, "data": {SAVE_KEY: 41.25, "timing_s/step": 90.0}}]
    assert save_summary(records, 3 * 2**30) == {
        "ok": True,
        "save_seconds": [41.25],
        "checkpoint_gib": 3.0,
        "verl_default_bound_seconds": 900,
    }
    assert not save_summary([], 0)["ok"]


def test_the_plan_goes_on_where_it_stopped_most_valuable_first():
    state: dict = {}
    assert next_part(state) == PARTS[0] == "yield-verl"
    state["yield-verl"]["state"] = "done"
    assert next_part(state) == "trl-offpolicy"
    assert next_part(state, only="save-4b") == "save-4b"
    for part in PARTS:
        state.setdefault(part, {})["state"] = "done"
    assert next_part(state) is None
