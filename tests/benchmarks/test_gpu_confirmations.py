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


def test_a_failed_part_carries_the_end_of_its_output_and_a_good_one_nothing(tmp_path, monkeypatch):
    """The machine is gone by the time anyone reads a summary: a failure says why in it."""
    from benchmarks import gpu_confirmations
    from benchmarks.verl_gpu import machine
    from benchmarks.verl_gpu.attempts import Attempt

    monkeypatch.setattr(machine, "WORK", tmp_path)
    failed, good, running = Attempt("save-4b", 1), Attempt("trl-offpolicy", 1), Attempt("trl-learning", 1)
    for attempt, rc in ((failed, "75"), (good, "0"), (running, None)):
        attempt.folder.mkdir(parents=True)
        lines = [f"line {n}" for n in range(100)] + ["torch.OutOfMemoryError: CUDA out of memory"]
        (attempt.folder / "supervisor.log").write_text("\n".join(lines) + "\n")
        if rc is not None:
            (attempt.folder / "rc").write_text(rc)
    tail = gpu_confirmations.failure_tail(failed)["log_tail"]
    assert len(tail) == gpu_confirmations.FAILURE_LINES
    assert tail[-1] == "torch.OutOfMemoryError: CUDA out of memory"
    assert gpu_confirmations.failure_tail(good) == {}
    assert gpu_confirmations.failure_tail(running) == {}


def test_the_yielded_steps_checkpoint_is_its_own_folder_not_the_newest_tracker(tmp_path):
    """After attempt 2, verl's tracker names attempt 2's final save; the yielded step's checkpoint
    is its global_step folder, which only attempt 1 writes."""
    from benchmarks.gpu_confirmations import _checkpoint_folder

    checkpoints = tmp_path / "job" / "checkpoints"
    (checkpoints / "global_step_2" / "actor").mkdir(parents=True)
    (checkpoints / "global_step_3").mkdir(parents=True)
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("4")
    assert _checkpoint_folder(tmp_path, 2)
    assert not _checkpoint_folder(tmp_path, 3), "an empty folder is no checkpoint"
    assert not _checkpoint_folder(tmp_path, 1)
