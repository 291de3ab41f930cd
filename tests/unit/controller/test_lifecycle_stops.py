"""Planned stops in the lifecycle: a yielded attempt costs no retry, the cause is named, and one
Normal Event says which step was saved before the stop."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from grpo_operator.api import contract
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.lifecycle import plan
from support.operator_inputs import minimal_body

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
STOP = {"attempt": 1, "step": 7, "stepsLost": 0, "saveSeconds": 3.5, "reason": "SavedOnStop"}


def _job(status: dict[str, Any], **run_policy: Any) -> GRPOJob:
    body = minimal_body()
    if run_policy:
        body["spec"]["runPolicy"] = run_policy
    body["status"] = status
    return GRPOJob.model_validate(body)


def _status(attempt: int = 1, phase: str = "Running", stop: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": phase,
        "attempt": attempt,
        "rayJobName": f"demo-{attempt}",
        "rayClusterName": f"demo-{attempt}-abcde",
        "startTime": "2026-11-29T11:00:00Z",
        "conditions": [
            {
                "type": "Running",
                "status": "True",
                "reason": "RayJobRunning",
                "lastTransitionTime": "2026-11-29T11:00:05Z",
            }
        ],
    }
    if stop is not None:
        status["checkpoint"] = {"latestStep": stop["step"], "lastStop": stop}
    return status


def _rayjob(deployment: str, job: str, message: str = "", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "demo-1"},
        "spec": spec,
        "status": {"jobDeploymentStatus": deployment, "jobStatus": job, "message": message},
    }


def _yielded_rayjob() -> dict[str, Any]:
    line = contract.Failure(contract.YIELDED, "Yielded", "saved step 7 in 3.5 s and stopped as asked").line()
    return _rayjob("Failed", "FAILED", f"Job entrypoint command failed with exit code 76, last logs: {line}")


def _saved_events(result: Any) -> list[tuple[str, str, str]]:
    return [e for e in result.events if e[1] == "SavedBeforeStop"]


def test_a_yielded_attempt_starts_the_next_without_using_a_retry() -> None:
    job = _job(_status(stop=STOP), backoffLimit=0)
    result = plan(job, _yielded_rayjob(), [], NOW, disruption="EvictionByEvictionAPI")
    assert result.create_attempt == 2, "backoffLimit 0 would have failed a failure"
    assert result.status["phase"] == "Restarting"
    assert "failedAttempts" not in result.status
    restarting = next(c for c in result.status["conditions"] if c["type"] == "Restarting")
    assert restarting["reason"] == "Yielded"
    assert "saved step 7 in 3.5 s before its pods stopped (Evicted)" in restarting["message"]
    assert _saved_events(result) == [("Normal", "SavedBeforeStop", "saved step 7 before stop (Evicted)")]


def test_suspend_tells_the_saved_step_once_and_deletes_without_krays_stop() -> None:
    first = plan(_job(_status(), suspend=True), _rayjob("Running", "RUNNING"), [], NOW)
    assert first.delete_rayjob == "demo-1"
    assert first.keep_driver
    assert _saved_events(first) == []
    reported = _job({**first.status, "checkpoint": {"lastStop": STOP}}, suspend=True)
    told = plan(reported, None, [], NOW)
    assert _saved_events(told) == [("Normal", "SavedBeforeStop", "saved step 7 before stop (Suspended)")]
    suspended = next(c for c in told.status["conditions"] if c["type"] == "Suspended")
    assert "attempt 1 saved step 7" in suspended["message"]
    again = plan(_job({**told.status, "checkpoint": {"lastStop": STOP}}, suspend=True), None, [], NOW)
    assert _saved_events(again) == []


def test_suspend_without_save_on_stop_lets_kuberay_stop_the_ray_job() -> None:
    body = minimal_body()
    body["spec"]["checkpoint"] = {"saveOnStop": {"enabled": False}}
    body["spec"]["runPolicy"] = {"suspend": True}
    body["status"] = _status()
    result = plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW)
    assert result.delete_rayjob == "demo-1"
    assert not result.keep_driver


def test_a_deadline_saves_and_says_so_on_the_failed_condition() -> None:
    over = plan(_job(_status(), activeDeadlineSeconds=600), _rayjob("Running", "RUNNING"), [], NOW)
    assert over.status["phase"] == "Failed"
    assert over.keep_driver
    reported = _job({**over.status, "checkpoint": {"lastStop": STOP}}, activeDeadlineSeconds=600)
    told = plan(reported, None, [], NOW)
    failed = next(c for c in told.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert "saved step 7" in failed["message"]
    assert _saved_events(told) == [
        ("Normal", "SavedBeforeStop", "saved step 7 before stop (DeadlineExceeded)")
    ]


def test_kueues_preemption_is_named_and_a_lost_save_counts_its_steps() -> None:
    lost = {**STOP, "step": 4, "stepsLost": 3, "saveSeconds": None, "reason": "SaveWouldNotFit"}
    preempted = _rayjob("Suspended", "", suspend=True)
    result = plan(_job(_status(stop=lost)), preempted, [], NOW)
    assert result.status["phase"] == "Pending"
    running = next(c for c in result.status["conditions"] if c["type"] == "Running")
    assert running["status"] == "False"
    assert "3 step(s) lost" in running["message"]
    [(kind, _, message)] = _saved_events(result)
    assert kind == "Normal"
    assert "(PreemptedByKueue)" in message
    assert "resumes from step 4" in message


def test_a_stop_of_an_earlier_attempt_is_not_this_ones() -> None:
    job = _job(_status(attempt=2, stop=STOP))
    result = plan(job, _rayjob("Running", "RUNNING"), [], NOW, disruption="EvictionByEvictionAPI")
    assert _saved_events(result) == []


def test_a_stop_reported_while_the_rayjob_still_runs_is_told_once_with_its_first_cause() -> None:
    """The trainer's report can come before KubeRay has seen the Ray job end: the Running
    condition says it, naming the eviction; once the attempt has yielded (its pods, which named the
    cause, gone) the Restarting condition keeps that cause, and no second Event is posted."""
    running = plan(
        _job(_status(stop=STOP)), _rayjob("Running", "RUNNING"), [], NOW, disruption="EvictionByEvictionAPI"
    )
    assert _saved_events(running) == [("Normal", "SavedBeforeStop", "saved step 7 before stop (Evicted)")]
    then = _job({**_status(stop=STOP), "conditions": running.status["conditions"]})
    yielded = plan(then, _yielded_rayjob(), [], NOW)
    assert _saved_events(yielded) == []
    restarting = next(c for c in yielded.status["conditions"] if c["type"] == "Restarting")
    assert "saved step 7 in 3.5 s before its pods stopped (Evicted)" in restarting["message"]


def test_a_stop_reported_while_the_rayjob_still_runs_starts_the_next_attempt() -> None:
    """After its head's eviction a RayJob's Ray job reads RUNNING for ever (KubeRay does not recreate
    the head of a RayJob's cluster; seen on the real node): the trainer's report of the attempt's
    planned stop is the evidence that its driver has ended, so the next attempt starts from the
    saved step, without a retry of backoffLimit, and the lingering RayJob goes."""
    job = _job(_status(stop=STOP), backoffLimit=0)
    result = plan(job, _rayjob("Running", "RUNNING"), [], NOW, disruption="EvictionByEvictionAPI")
    assert result.create_attempt == 2
    assert result.delete_rayjob == "demo-1"
    assert result.status["phase"] == "Restarting"
    assert "failedAttempts" not in result.status
    assert _saved_events(result) == [("Normal", "SavedBeforeStop", "saved step 7 before stop (Evicted)")]

    still = plan(_job(_status(attempt=1)), _rayjob("Running", "RUNNING"), [], NOW)
    assert still.create_attempt is None, "no report of a stop: the attempt trains on"
