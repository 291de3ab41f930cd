"""The lifecycle state machine, one RayJob state at a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from grpo_operator.api.problem import Problem
from grpo_operator.api.timestamps import parse_rfc3339, rfc3339
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.api.v1alpha1.status import GRPOJobStatus, diff, readable, reason
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.config import Settings
from grpo_operator.health import CLOCK_SKEW, HEALTHY_MESSAGE
from grpo_operator.lifecycle import (
    children_created,
    children_waiting,
    fail,
    holds_cluster,
    observe_rayjob,
    plan,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from support.operator_inputs import minimal_body

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def _job(status: dict[str, Any] | None = None, **run_policy: Any) -> GRPOJob:
    body = minimal_body()
    if run_policy:
        body["spec"]["runPolicy"] = run_policy
    if status:
        body["status"] = status
    return GRPOJob.model_validate(body)


def _rayjob(deployment: str = "", job_status: str = "", message: str = "", **extra: Any) -> dict[str, Any]:
    status = {"jobDeploymentStatus": deployment, "jobStatus": job_status, "message": message, **extra}
    return {"metadata": {"name": "demo-1"}, "spec": {}, "status": status}


def _conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def _running_status(attempt: int = 1) -> dict[str, Any]:
    return {
        "phase": "Running",
        "attempt": attempt,
        "rayJobName": f"demo-{attempt}",
        "rayClusterName": f"demo-{attempt}-abcde",
        "startTime": "2026-11-29T11:00:00Z",
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "ChildrenCreated",
                "lastTransitionTime": "2026-11-29T11:00:00Z",
            },
            {
                "type": "Running",
                "status": "True",
                "reason": "RayJobRunning",
                "lastTransitionTime": "2026-11-29T11:00:05Z",
            },
        ],
    }


def test_new_job_names_attempt_one_and_creates_it() -> None:
    result = plan(_job(), None, [], NOW)
    assert result.create_attempt == 1
    assert result.status["phase"] == "Pending"
    assert result.status["attempt"] == 1
    assert result.status["startTime"] == "2026-11-29T12:00:00Z"
    # Not Created yet: the condition, the RayJob's name and the Event wait for it to exist.
    assert "rayJobName" not in result.status
    assert _conditions(result.status) == {}
    assert result.events == []
    assert result.on_created == [("Normal", "Created", "created Ray job demo-1")]


def test_created_is_set_once_the_children_exist() -> None:
    pending = plan(_job(), None, [], NOW).status
    patch = children_created(_job(), pending, NOW)
    assert patch is not None
    created = next(c for c in patch["conditions"] if c["type"] == "Created")
    assert (created["status"], created["reason"]) == ("True", "ChildrenCreated")
    assert "demo-1" in created["message"]
    assert patch["rayJobName"] == "demo-1"
    assert children_created(_job(), {**pending, **patch}, NOW) is None, "written once, not every reconcile"


def test_children_that_must_wait_say_why_once() -> None:
    pending = plan(_job(), None, [], NOW).status
    patch = children_waiting(_job(), pending, NOW, "WaitingForPreviousJob", "RayJob demo-1 is being deleted")
    assert patch is not None
    assert _conditions(patch) == {"Created": "False"}
    assert (
        children_waiting(
            _job(), {**pending, **patch}, NOW, "WaitingForPreviousJob", "RayJob demo-1 is being deleted"
        )
        is None
    )


def test_invalid_job_fails_without_children() -> None:
    result = plan(_job(), None, [Problem("spec.rollout.tensorParallelSize", "must divide 8")], NOW)
    assert result.create_attempt is None
    assert result.status["phase"] == "Failed"
    failed = next(c for c in result.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "InvalidSpec"
    assert failed["message"] == "spec.rollout.tensorParallelSize: must divide 8"
    assert result.events[0][0] == "Warning"


@pytest.mark.parametrize(
    ("rayjob", "phase"),
    [
        (_rayjob("Initializing"), "Pending"),
        (_rayjob("Running", "PENDING"), "Pending"),
        (_rayjob("Running", "RUNNING"), "Running"),
        (_rayjob("Complete", "SUCCEEDED"), "Succeeded"),
        (_rayjob("Suspended"), "Pending"),
    ],
)
def test_rayjob_states_map_to_phases(rayjob: dict[str, Any], phase: str) -> None:
    status = {
        "phase": "Pending",
        "attempt": 1,
        "rayJobName": "demo-1",
        "startTime": "2026-11-29T11:00:00Z",
        "conditions": [],
    }
    assert plan(_job(status), rayjob, [], NOW).status["phase"] == phase


def test_running_sets_condition_and_copies_cluster_names() -> None:
    status = {
        "phase": "Pending",
        "attempt": 1,
        "rayJobName": "demo-1",
        "startTime": "2026-11-29T11:00:00Z",
        "conditions": [],
    }
    rayjob = _rayjob(
        "Running", "RUNNING", rayClusterName="demo-1-x7k2p", dashboardURL="demo-1-x7k2p-head-svc:8265"
    )
    result = plan(_job(status), rayjob, [], NOW)
    assert result.status["rayClusterName"] == "demo-1-x7k2p"
    assert result.status["dashboardURL"] == "demo-1-x7k2p-head-svc:8265"
    assert _conditions(result.status) == {"Running": "True"}
    assert result.create_attempt is None


def test_success_is_terminal_and_keeps_only_the_conditions_of_the_end() -> None:
    result = plan(_job(_running_status()), _rayjob("Complete", "SUCCEEDED"), [], NOW)
    assert result.status["phase"] == "Succeeded"
    # Created and Running described the attempt on its way: the phase and Succeeded say the rest.
    assert _conditions(result.status) == {"Succeeded": "True"}
    assert result.status["completionTime"] == "2026-11-29T12:00:00Z"
    again = plan(_job(result.status), None, [], NOW + timedelta(hours=1))
    assert again.status == result.status
    assert again.create_attempt is None
    assert again.events == []


def test_retryable_failure_starts_the_next_attempt() -> None:
    message = "Job entrypoint command failed with exit code 75, last available logs: NCCL timeout"
    result = plan(_job(_running_status(), backoffLimit=2), _rayjob("Failed", "FAILED", message), [], NOW)
    assert result.create_attempt == 2
    assert result.status["phase"] == "Restarting"
    assert result.status["attempt"] == 2
    assert "rayJobName" not in result.status  # until demo-2 exists (children_created)
    assert "rayClusterName" not in result.status
    assert _conditions(result.status)["Restarting"] == "True"
    assert _conditions(result.status)["Running"] == "False"
    assert result.status["failedAttempts"] == [
        {
            "attempt": 1,
            "reason": "TrainerCrashed",
            "message": result.status["failedAttempts"][0]["message"],
            "retryable": True,
            # Where `kubectl grpo logs demo --attempt 1` reads from once the Ray cluster is gone.
            "logFile": "/grpo/checkpoints/demo-00000000/metrics/attempt-1.log",
        }
    ]
    assert "resuming from the latest checkpoint" in result.events[0][2]


def test_restarting_stays_until_the_new_attempt_runs() -> None:
    first = plan(
        _job(_running_status(), backoffLimit=2), _rayjob("Failed", "FAILED", "exit code 137"), [], NOW
    )
    starting = plan(_job(first.status, backoffLimit=2), _rayjob("Initializing"), [], NOW)
    assert starting.status["phase"] == "Restarting"
    running = plan(_job(starting.status, backoffLimit=2), _rayjob("Running", "RUNNING"), [], NOW)
    assert running.status["phase"] == "Running"
    assert _conditions(running.status)["Restarting"] == "False"


def test_configuration_error_fails_at_once() -> None:
    message = "Job entrypoint command failed with exit code 3"
    result = plan(_job(_running_status(), backoffLimit=5), _rayjob("Failed", "FAILED", message), [], NOW)
    assert result.create_attempt is None
    assert result.status["phase"] == "Failed"
    failed = next(c for c in result.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "TrainerFailed"
    assert "configuration error" in failed["message"]


def _failed(*attempts: int) -> list[dict[str, Any]]:
    return [{"attempt": a, "reason": "TrainerCrashed", "retryable": True} for a in attempts]


def test_backoff_limit_ends_retries() -> None:
    result = plan(
        _job({**_running_status(attempt=3), "failedAttempts": _failed(1, 2)}, backoffLimit=2),
        _rayjob("Failed", "FAILED", "exit code 137"),
        [],
        NOW,
    )
    assert result.status["phase"] == "Failed"
    failed = next(c for c in result.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert "backoffLimit=2" in failed["message"]


def test_deleted_rayjob_is_a_retryable_loss() -> None:
    result = plan(_job(_running_status(), backoffLimit=1), None, [], NOW)
    assert result.create_attempt == 2
    assert result.status["failedAttempts"][0]["reason"] == "RayJobDeleted"


def test_missing_rayjob_before_it_started_is_created_again() -> None:
    status = {
        "phase": "Pending",
        "attempt": 1,
        "rayJobName": "demo-1",
        "startTime": "2026-11-29T11:00:00Z",
        "conditions": [],
    }
    result = plan(_job(status), None, [], NOW)
    assert result.create_attempt == 1
    assert result.status["attempt"] == 1


def test_suspend_tears_down_and_resume_starts_a_new_attempt() -> None:
    suspended = plan(_job(_running_status(), suspend=True), _rayjob("Running", "RUNNING"), [], NOW)
    assert suspended.delete_rayjob == "demo-1"
    assert suspended.status["phase"] == "Suspended"
    assert _conditions(suspended.status)["Suspended"] == "True"
    idle = plan(_job(suspended.status, suspend=True), None, [], NOW)
    assert idle.delete_rayjob is None
    assert idle.events == []
    resumed = plan(_job(suspended.status, suspend=False), None, [], NOW)
    assert resumed.create_attempt == 2
    assert resumed.status["phase"] == "Pending"
    assert _conditions(resumed.status)["Suspended"] == "False"


def test_the_eta_shows_only_while_the_current_attempt_trains() -> None:
    """status.eta: the current attempt's estimate while Running; gone when suspended, after a
    resume until the new attempt reports, and once the job has ended."""

    def with_progress(status: dict[str, Any], attempt: int, seconds: int) -> dict[str, Any]:
        return {**status, "progress": {"step": 10, "etaSeconds": seconds, "attempt": attempt}}

    running = plan(_job(with_progress(_running_status(), 1, 5400)), _rayjob("Running", "RUNNING"), [], NOW)
    assert running.status["eta"] == "1h30m"
    again = plan(_job(with_progress(running.status, 1, 600)), _rayjob("Running", "RUNNING"), [], NOW)
    assert again.status["eta"] == "10m"  # the trainer's newer estimate, recomputed each step

    suspended = plan(
        _job(with_progress(again.status, 1, 600), suspend=True), _rayjob("Running", "RUNNING"), [], NOW
    )
    assert suspended.status["phase"] == "Suspended"
    assert "eta" not in suspended.status
    assert diff(again.status, suspended.status)["eta"] is None  # the patch removes it
    resumed = plan(_job(with_progress(suspended.status, 1, 600)), None, [], NOW)
    assert "eta" not in resumed.status
    attempt_2 = {**resumed.status, "rayClusterName": "demo-2-abcde"}
    stale = plan(_job(with_progress(attempt_2, 1, 600)), _rayjob("Running", "RUNNING"), [], NOW)
    assert stale.status["phase"] == "Running"
    assert "eta" not in stale.status, "attempt 1's estimate is not attempt 2's"
    fresh = plan(_job(with_progress(attempt_2, 2, 300)), _rayjob("Running", "RUNNING"), [], NOW)
    assert fresh.status["eta"] == "5m"

    done = plan(_job(with_progress(fresh.status, 2, 300)), _rayjob("Complete", "SUCCEEDED"), [], NOW)
    assert done.status["phase"] == "Succeeded"
    assert "eta" not in done.status
    failed = plan(
        _job(with_progress(fresh.status, 2, 300)),
        _rayjob("Failed", "FAILED", "Job entrypoint command failed with exit code 3."),
        [],
        NOW,
    )
    assert failed.status["phase"] == "Failed"
    assert "eta" not in failed.status


def test_deadline_fails_the_job_and_deletes_the_cluster() -> None:
    result = plan(_job(_running_status(), activeDeadlineSeconds=600), _rayjob("Running", "RUNNING"), [], NOW)
    assert result.status["phase"] == "Failed"
    assert result.delete_rayjob == "demo-1"
    failed = next(c for c in result.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert "ran 3600 s, over runPolicy.activeDeadlineSeconds=600" in failed["message"]


def test_condition_times_move_only_on_a_flip() -> None:
    status = _running_status()
    result = plan(_job(status), _rayjob("Running", "RUNNING"), [], NOW)
    running = next(c for c in result.status["conditions"] if c["type"] == "Running")
    assert running["lastTransitionTime"] == "2026-11-29T11:00:05Z"
    assert result.events == []


def test_validation_failure_of_the_rayjob_is_not_retried() -> None:
    outcome = observe_rayjob(_rayjob("ValidationFailed", "", "invalid RayJob spec"))
    assert outcome.state == "failed"
    assert not outcome.retryable


def test_diff_writes_only_changes_and_deletes_dropped_fields() -> None:
    current = {"phase": "Running", "rayClusterName": "a", "attempt": 1}
    wanted = {"phase": "Restarting", "attempt": 2}
    assert diff(current, wanted) == {"phase": "Restarting", "attempt": 2, "rayClusterName": None}
    assert diff(wanted, wanted) == {}


def test_the_trainers_failure_line_names_the_reason() -> None:
    message = (
        "Job entrypoint command failed with exit code 75, last available logs (truncated to 20,000 chars):\n"
        "step 12 ...\n"
        'GRPO_FAILURE {"reason": "OutOfMemory", "retryable": true, "exitCode": 75, "message": "CUDA out of memory on rank 3"}\n'
    )
    result = plan(_job(_running_status(), backoffLimit=1), _rayjob("Failed", "FAILED", message), [], NOW)
    assert result.create_attempt == 2
    assert result.status["failedAttempts"][0]["reason"] == "OutOfMemory"
    assert "CUDA out of memory on rank 3" in result.status["failedAttempts"][0]["message"]


def _crash(signature: str, size: int) -> str:
    return (
        "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n"
        'GRPO_FAILURE {"reason": "EngineCrashed", "retryable": true, "exitCode": 1, "message": '
        f'"RuntimeError: split_with_sizes expects split_sizes to sum exactly to {size} in update_actor", '
        f'"signature": "{signature}"}}\n'
    )


def test_a_crash_that_repeats_in_the_next_attempt_is_not_retried_again() -> None:
    first = plan(
        _job(_running_status(), backoffLimit=3),
        _rayjob("Failed", "FAILED", _crash("a1b2c3d4e5f6", 1278)),
        [],
        NOW,
    )
    assert first.create_attempt == 2
    assert first.status["failedAttempts"][0]["signature"] == "a1b2c3d4e5f6"
    running = {**first.status, "phase": "Running"}
    second = plan(
        _job(running, backoffLimit=3), _rayjob("Failed", "FAILED", _crash("a1b2c3d4e5f6", 1301)), [], NOW
    )
    assert second.create_attempt is None
    assert second.status["phase"] == "Failed"
    failed = next(c for c in second.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "RepeatedFailure"
    assert "attempt 2 failed as attempt 1 did" in failed["message"]
    assert "split_with_sizes expects split_sizes to sum exactly to 1301 in update_actor" in failed["message"]
    assert [f["attempt"] for f in second.status["failedAttempts"]] == [1, 2]


def test_a_different_crash_in_the_next_attempt_is_retried() -> None:
    first = plan(
        _job(_running_status(), backoffLimit=3),
        _rayjob("Failed", "FAILED", _crash("a1b2c3d4e5f6", 1)),
        [],
        NOW,
    )
    second = plan(
        _job({**first.status, "phase": "Running"}, backoffLimit=3),
        _rayjob("Failed", "FAILED", _crash("0123456789ab", 1)),
        [],
        NOW,
    )
    assert second.create_attempt == 3
    assert second.status["phase"] == "Restarting"


def test_a_signature_that_is_not_one_is_ignored() -> None:
    result = plan(
        _job(_running_status(), backoffLimit=3), _rayjob("Failed", "FAILED", _crash("not hex!", 1)), [], NOW
    )
    assert "signature" not in result.status["failedAttempts"][0]


def test_suspend_and_resume_cycles_do_not_use_the_retry_budget() -> None:
    # Attempts 1-4 each ended in a suspension; attempt 5 is the first to fail.
    result = plan(
        _job(_running_status(attempt=5), backoffLimit=1),
        _rayjob("Failed", "FAILED", "exit code 137"),
        [],
        NOW,
    )
    assert result.create_attempt == 6
    assert result.status["phase"] == "Restarting"
    assert "retry 1 of 1" in result.events[0][2]
    # A second failure uses up backoffLimit=1.
    again = plan(_job(result.status, backoffLimit=1), _rayjob("Failed", "FAILED", "exit code 137"), [], NOW)
    assert again.status["phase"] == "Failed"
    assert next(c for c in again.status["conditions"] if c["type"] == "Failed")["reason"] == (
        "BackoffLimitExceeded"
    )


def test_a_long_failure_reason_from_the_trainer_fits_the_schema() -> None:
    told = "Out of memory on rank 3 " * 40
    message = (
        "Job entrypoint command failed with exit code 4, last available logs:\n"
        f'GRPO_FAILURE {{"reason": "{told}", "retryable": false, "exitCode": 4, "message": "{"x" * 5000}"}}'
    )
    result = plan(_job(_running_status()), _rayjob("Failed", "FAILED", message), [], NOW)
    assert result.status["phase"] == "Failed"
    failed = next(c for c in result.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"].startswith("OutOfMemoryOnRank3")
    assert len(failed["reason"]) == 128
    GRPOJobStatus.model_validate(result.status)  # the schema's bounds: what the API server enforces


@pytest.mark.parametrize(
    ("given_reason", "expected"),
    [
        ("OutOfMemory", "OutOfMemory"),
        ("out of memory", "OutOfMemory"),
        ("collective-timeout: rank 3", "CollectiveTimeoutRank3"),
        ("3rd try", "RdTry"),
        ("", "Failed"),
        ("!!!", "Failed"),
        ("Über", "Ber"),
    ],
)
def test_reasons_are_squeezed_into_the_condition_reason_pattern(given_reason: str, expected: str) -> None:
    assert reason(given_reason) == expected


TEXT = st.text(max_size=6000)


@settings(max_examples=150, deadline=None)
@given(
    ray_reason=TEXT,
    ray_message=TEXT,
    told_reason=TEXT,
    told_message=TEXT,
    cluster=st.text(max_size=400),
    deployment=st.sampled_from(["", "Initializing", "Running", "Complete", "Failed", "ValidationFailed"]),
    job_status=st.sampled_from(["", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"]),
    with_line=st.booleans(),
    attempt=st.integers(1, 101),
)
def test_whatever_kuberay_and_the_trainer_say_the_status_fits_the_schema(
    ray_reason: str,
    ray_message: str,
    told_reason: str,
    told_message: str,
    cluster: str,
    deployment: str,
    job_status: str,
    with_line: bool,
    attempt: int,
) -> None:
    import json

    message = ray_message
    if with_line:
        payload = {"reason": told_reason, "retryable": True, "exitCode": 75, "message": told_message}
        message += "\nGRPO_FAILURE " + json.dumps(payload)
    rayjob = _rayjob(
        deployment, job_status, message, reason=ray_reason, rayClusterName=cluster, dashboardURL=cluster
    )
    status = {**_running_status(attempt), "failedAttempts": _failed(*range(1, attempt))[-100:]}
    result = plan(_job(status, backoffLimit=100), rayjob, [], NOW)
    GRPOJobStatus.model_validate(result.status)
    for _, why, _ in result.events:
        assert len(why) <= 128


def test_a_finished_job_still_takes_down_a_cluster_left_running() -> None:
    # The deadline failed the job and the delete of its RayJob was lost: the next look deletes it.
    failed = plan(_job(_running_status(), activeDeadlineSeconds=600), _rayjob("Running", "RUNNING"), [], NOW)
    assert failed.delete_rayjob == "demo-1"
    again = plan(_job(failed.status, activeDeadlineSeconds=600), _rayjob("Running", "RUNNING"), [], NOW)
    assert again.status == failed.status
    assert again.delete_rayjob == "demo-1"
    assert again.events == []


@pytest.mark.parametrize(
    ("rayjob", "holds"),
    [
        (None, False),
        (_rayjob("Running", "RUNNING"), True),
        (_rayjob("Initializing"), True),
        (_rayjob("Suspended"), True),
        (_rayjob("Complete", "SUCCEEDED"), False),
        (_rayjob("Failed", "FAILED"), False),
        (_rayjob("Running", "FAILED"), False),
        (_rayjob("ValidationFailed"), False),
    ],
)
def test_which_rayjobs_still_hold_a_cluster(rayjob: dict[str, Any] | None, holds: bool) -> None:
    assert holds_cluster(rayjob) is holds
    status = {**_running_status(), "phase": "Failed"}
    assert plan(_job(status), rayjob, [], NOW).delete_rayjob == ("demo-1" if holds else None)


def test_a_rayjob_being_deleted_is_not_deleted_again() -> None:
    rayjob = _rayjob("Running", "RUNNING")
    rayjob["metadata"]["deletionTimestamp"] = "2026-11-29T11:59:00Z"
    status = {**_running_status(), "phase": "Failed"}
    assert plan(_job(status), rayjob, [], NOW).delete_rayjob is None


def test_a_spec_made_invalid_while_running_fails_and_stops_the_cluster() -> None:
    problems = [Problem("spec.algorithm.miniBatchSize", "must divide")]
    result = plan(_job(_running_status()), _rayjob("Running", "RUNNING"), problems, NOW)
    assert result.status["phase"] == "Failed"
    assert result.delete_rayjob == "demo-1"


def test_a_rejected_child_fails_the_job_and_stops_its_cluster() -> None:
    message = 'RayJob "demo-1" is invalid: metadata.labels: Invalid value: "my queue"'
    result = fail(_job(), _running_status(), _rayjob("Initializing"), "ChildRejected", message, NOW)
    assert result.status["phase"] == "Failed"
    assert _conditions(result.status) == {"Failed": "True"}  # Created=False would only repeat it
    failed = next(c for c in result.status["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], failed["message"]) == ("ChildRejected", message)
    assert result.delete_rayjob == "demo-1"
    assert result.events == [("Warning", "ChildRejected", message)]
    # Once failed, it stays failed with the first reason.
    assert fail(_job(), result.status, None, "Other", "x", NOW).status == result.status


FAILED_FOR_GOOD = "Job entrypoint command failed with exit code 3, last available logs: ConfigError"
RETRYABLE_FAILURE = "Job entrypoint command failed with exit code 75, last available logs: NCCL timeout"


def test_the_cluster_of_the_attempt_that_failed_the_job_is_kept_for_debugging() -> None:
    job = _job(_running_status(), failedClusterRetentionSeconds=3600)
    result = plan(job, _rayjob("Failed", "FAILED", FAILED_FOR_GOOD), [], NOW)
    assert result.status["phase"] == "Failed"
    assert result.delete_rayjob is None, "KubeRay's TTL (the retention) removes it later"
    assert build_rayjob(job, Settings(), 1)["spec"]["ttlSecondsAfterFinished"] == 3600


def test_a_retried_attempts_cluster_goes_at_once_so_the_next_gets_its_devices() -> None:
    job = _job(_running_status(), failedClusterRetentionSeconds=3600, backoffLimit=2)
    result = plan(job, _rayjob("Failed", "FAILED", RETRYABLE_FAILURE), [], NOW)
    assert (result.create_attempt, result.delete_rayjob) == (2, "demo-1")


def test_without_retention_a_retry_leaves_cleanup_to_kuberay() -> None:
    result = plan(
        _job(_running_status(), backoffLimit=2), _rayjob("Failed", "FAILED", RETRYABLE_FAILURE), [], NOW
    )
    assert (result.create_attempt, result.delete_rayjob) == (2, None)


@pytest.mark.parametrize("deployment", ["Running", "Retrying"])
def test_a_retry_deletes_an_attempt_kuberay_has_not_finished_so_it_holds_no_quota(deployment: str) -> None:
    """With a submitter (K8sJobMode, SidecarMode) KubeRay writes the Ray job's FAILED before it
    finishes the RayJob, which waits for the submitter to exit. Until then Kueue keeps the dead
    attempt's Workload admitted (its quota held) and KubeRay its cluster: the retry deletes it."""
    rayjob = _rayjob(deployment, "FAILED", RETRYABLE_FAILURE)
    result = plan(_job(_running_status(), backoffLimit=2), rayjob, [], NOW)
    assert (result.status["phase"], result.create_attempt, result.delete_rayjob) == (
        "Restarting",
        2,
        "demo-1",
    )
    # The next pass plans from attempt 2 (its RayJob not made yet) and deletes nothing more.
    again = plan(_job(result.status, backoffLimit=2), None, [], NOW)
    assert (again.create_attempt, again.delete_rayjob) == (2, None)


def test_a_job_failed_for_good_keeps_its_attempt_for_kuberay_to_finish() -> None:
    """Not retried: nothing waits for the quota, and KubeRay finishes the RayJob once the
    submitter exits (the cluster stays only for failedClusterRetentionSeconds)."""
    result = plan(_job(_running_status()), _rayjob("Running", "FAILED", FAILED_FOR_GOOD), [], NOW)
    assert (result.status["phase"], result.create_attempt, result.delete_rayjob) == ("Failed", None, None)


@pytest.mark.parametrize(("ttl", "deleted"), [(None, "demo-1"), (7200, None)])
def test_a_successful_cluster_is_not_kept_for_the_failure_retention(
    ttl: int | None, deleted: str | None
) -> None:
    policy = {"failedClusterRetentionSeconds": 3600, **({"ttlSecondsAfterFinished": ttl} if ttl else {})}
    result = plan(_job(_running_status(), **policy), _rayjob("Complete", "SUCCEEDED"), [], NOW)
    assert result.status["phase"] == "Succeeded"
    assert result.delete_rayjob == deleted


# --- the Healthy condition ------------------------------------------------------------------------


def _training(
    trainer: dict[str, Any] | None = None,
    last_step_at: str = "2026-11-29T11:58:00Z",
    step_seconds: float = 120.0,
    **health: Any,
) -> GRPOJob:
    status = {
        **_running_status(),
        "conditions": [
            {
                "type": "Running",
                "status": "True",
                "reason": "RayJobRunning",
                "message": "",
                "lastTransitionTime": "2026-11-29T10:00:00Z",
            }
        ],
        "progress": {"step": 41, "lastStepAt": last_step_at},
        "metrics": {"stepSeconds": step_seconds},
    }
    if trainer is not None:
        status["health"] = {"attempt": 1, **trainer}
    job = _job(status)
    if health:
        body = job.model_dump(by_alias=True, exclude_none=True, mode="json")
        body["spec"]["health"] = health
        job = GRPOJob.model_validate(body)
    return job


def _healthy(result: Any) -> dict[str, Any]:
    return next(c for c in result.status["conditions"] if c["type"] == "Healthy")


def test_the_trainers_sick_verdict_becomes_a_false_condition_and_a_warning() -> None:
    job = _training(
        {"healthy": False, "reason": "NonFiniteLoss", "message": "actor/pg_loss is nan at step 41"}
    )
    result = plan(job, _rayjob("Running", "RUNNING"), [], NOW)
    condition = _healthy(result)
    assert (condition["status"], condition["reason"]) == ("False", "NonFiniteLoss")
    assert ("Warning", "NonFiniteLoss", "actor/pg_loss is nan at step 41") in result.events
    again = plan(
        _job(
            {
                **result.status,
                **{k: v for k, v in job.status.to_wire().items() if k in ("progress", "metrics", "health")},
            }
        ),
        _rayjob("Running", "RUNNING"),
        [],
        NOW,
    )
    assert again.events == [], "one Event when it turns, not one per reconcile"


def test_a_recovered_run_turns_healthy_again_with_a_normal_event() -> None:
    sick = plan(
        _training({"healthy": False, "reason": "EntropyCollapse", "message": "low"}),
        _rayjob("Running", "RUNNING"),
        [],
        NOW,
    )
    # As the trainer writes a recovery: no verdict at all; the operator words the condition.
    job = _training({"healthy": False, "reason": "EntropyCollapse", "message": "low"})
    body = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    del body["status"]["health"]
    body["status"]["conditions"] = sick.status["conditions"]
    result = plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW)
    assert _healthy(result)["status"] == "True"
    assert _healthy(result)["message"] == HEALTHY_MESSAGE
    assert ("Normal", "Recovered", HEALTHY_MESSAGE) in result.events
    # A later step changes nothing in the condition (no status write per step).
    body["status"]["progress"]["step"] += 1
    again = plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW)
    assert _healthy(again) == _healthy(result)
    # An older trainer's healthy verdict reads the same.
    body["status"]["health"] = {"attempt": 1, "healthy": True, "step": 50}
    old = plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW)
    assert _healthy(old) == _healthy(result)


def test_an_earlier_attempts_verdict_is_not_this_ones() -> None:
    job = _training({"healthy": False, "reason": "NonFiniteLoss", "message": "old"})
    body = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["status"]["health"]["attempt"] = 0
    result = plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW)
    assert _healthy(result)["status"] == "True"


def test_no_step_for_several_step_times_is_a_stall() -> None:
    # NOW is 12:00; the last step was read at 11:00 and steps take 5 minutes: 12 step times of silence.
    job = _training(last_step_at="2026-11-29T11:00:00Z", step_seconds=300.0, stallMinimumSeconds=600)
    result = plan(job, _rayjob("Running", "RUNNING"), [], NOW)
    condition = _healthy(result)
    assert (condition["status"], condition["reason"]) == ("False", "Stalled")
    assert "no step reported for 60 min (since step 41" in condition["message"]
    assert result.events[-1][:2] == ("Warning", "Stalled")


def test_a_slow_validation_is_not_a_stall_within_the_minimum() -> None:
    job = _training(last_step_at="2026-11-29T11:40:00Z", step_seconds=60.0)  # 20 min quiet, 30 min allowed
    assert _healthy(plan(job, _rayjob("Running", "RUNNING"), [], NOW))["status"] == "True"


def test_no_verdict_before_this_attempt_reports_a_step() -> None:
    job = _training(last_step_at="2026-11-29T09:00:00Z")  # before this attempt started running (10:00)
    result = plan(job, _rayjob("Running", "RUNNING"), [], NOW)
    assert "Healthy" not in [c["type"] for c in result.status["conditions"]]


@pytest.mark.parametrize(
    "written",
    [
        # Every form here is one the API server admits under the schema's `date-time` (checked
        # against it in tests/integration/test_status_truth.py).
        "2026-11-29T11:00:00.123456Z",  # fractional seconds, as Go's RFC3339Nano writes them
        "2026-11-29T11:00:00.123456789Z",
        "2026-11-29T13:00:00+02:00",  # an offset instead of Z
        "2026-11-29t11:00:00z",  # RFC 3339 allows lower case
        "2026-11-29T11:00:00,5Z",  # a comma before the fraction
        "2026-11-29T11:00:00.123456789012Z",  # more digits than a microsecond
        "2026-11-29T16:45:00.1+05:45",
        "2026-11-29T11:00:00-00:00",
        "2026-11-29T10:59:60Z",  # a leap second (the API server refuses it; read all the same)
    ],
)
def test_every_rfc3339_form_of_the_last_step_is_read(written: str) -> None:
    # 11:00 in UTC whatever the form: an hour of silence at 5 min a step is a stall.
    job = _training(last_step_at=written, step_seconds=300.0, stallMinimumSeconds=600)
    condition = _healthy(plan(job, _rayjob("Running", "RUNNING"), [], NOW))
    assert (condition["status"], condition["reason"]) == ("False", "Stalled")


def test_a_last_step_the_operator_cannot_read_is_a_warning_not_a_failing_reconcile() -> None:
    job = _training(last_step_at="yesterday at noon")
    result = plan(job, _rayjob("Running", "RUNNING"), [], NOW)
    condition = _healthy(result)
    assert (condition["status"], condition["reason"]) == ("Unknown", "UnreadableProgress")
    assert "status.progress.lastStepAt='yesterday at noon' is not an RFC 3339 time" in condition["message"]
    assert result.events[-1][:2] == ("Warning", "UnreadableProgress")
    assert result.status["phase"] == "Running"
    body = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["status"]["conditions"] = result.status["conditions"]
    again = plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW)
    assert again.events == [], "one Warning when it turns, not one per reconcile"
    body["status"]["progress"]["lastStepAt"] = "2026-11-29T11:59:00Z"
    fixed = plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW)
    assert _healthy(fixed)["status"] == "True"
    assert fixed.events[-1][:2] == ("Normal", "Recovered")


@pytest.mark.parametrize(
    "written",
    # Schema-valid (RFC 3339), but with no UTC time a datetime holds: before, OverflowError failed
    # every reconcile of the running job (the parser promised ValueError, the check caught that).
    ["0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59-00:01"],
)
def test_a_last_step_outside_the_datetime_range_is_a_warning_not_a_failing_reconcile(written: str) -> None:
    with pytest.raises(ValueError, match="no UTC time"):
        parse_rfc3339(written)
    result = plan(_training(last_step_at=written), _rayjob("Running", "RUNNING"), [], NOW)
    condition = _healthy(result)
    assert (condition["status"], condition["reason"]) == ("Unknown", "UnreadableProgress")
    assert result.events[-1][:2] == ("Warning", "UnreadableProgress")


def test_a_last_step_in_the_future_is_no_evidence_of_progress() -> None:
    """A node whose clock runs ahead kept Healthy=True while no step came: beyond CLOCK_SKEW, the
    time is read as unreadable, and the condition says so (Unknown, and a Warning)."""
    ahead = rfc3339(NOW + CLOCK_SKEW + timedelta(minutes=8))
    result = plan(_training(last_step_at=ahead), _rayjob("Running", "RUNNING"), [], NOW)
    condition = _healthy(result)
    assert (condition["status"], condition["reason"]) == ("Unknown", "UnreadableProgress")
    assert "is 10 min ahead of the operator's clock" in condition["message"]
    assert result.events[-1][:2] == ("Warning", "UnreadableProgress")


def test_a_last_step_ahead_by_a_clock_skew_is_read() -> None:
    ahead = rfc3339(NOW + CLOCK_SKEW - timedelta(seconds=1))
    condition = _healthy(plan(_training(last_step_at=ahead), _rayjob("Running", "RUNNING"), [], NOW))
    assert (condition["status"], condition["message"]) == ("True", HEALTHY_MESSAGE)


def _at_generation(job: GRPOJob, generation: int) -> GRPOJob:
    body = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["metadata"]["generation"] = generation
    return GRPOJob.model_validate(body)


@pytest.mark.parametrize(
    "status",
    [
        _running_status(),
        {
            **_running_status(),
            "phase": "Succeeded",
            "completionTime": "2026-11-29T11:30:00Z",
            "conditions": [
                {
                    "type": "Succeeded",
                    "status": "True",
                    "reason": "TrainingSucceeded",
                    "lastTransitionTime": "2026-11-29T11:30:00Z",
                }
            ],
        },
        {**_running_status(), "phase": "Suspended"},
    ],
    ids=["running", "succeeded", "suspended"],
)
def test_every_condition_follows_the_generation_it_was_judged_at(status: dict[str, Any]) -> None:
    """kubectl wait skips a condition whose observedGeneration is older than the job's generation."""
    job = _at_generation(_job(status), 4)
    if status["phase"] == "Suspended":
        job = _at_generation(_job(status, suspend=True), 4)
    result = plan(job, _rayjob("Running", "RUNNING"), [], NOW)
    assert result.status["observedGeneration"] == 4
    assert result.status["conditions"]
    assert {c["observedGeneration"] for c in result.status["conditions"]} == {4}
    created = children_created(job, result.status, NOW)
    assert created is None or {c["observedGeneration"] for c in created["conditions"]} == {4}


def _finished(phase: str = "Succeeded", completed: str = "2026-11-29T11:59:00Z") -> dict[str, Any]:
    return {
        **_running_status(),
        "phase": phase,
        "completionTime": completed,
        "dashboardURL": "demo-1-head-svc.team-a.svc.cluster.local:8265",
    }


@pytest.mark.parametrize(
    ("status", "rayjob", "run_policy", "kept"),
    [
        (_finished(), None, {}, False),  # the RayJob is gone
        (_finished(), _rayjob("Complete", "SUCCEEDED"), {}, False),  # no TTL: KubeRay deletes at once
        (_finished(), _rayjob("Complete", "SUCCEEDED"), {"ttlSecondsAfterFinished": 600}, True),
        (
            _finished(completed="2026-11-29T11:00:00Z"),
            _rayjob("Complete", "SUCCEEDED"),
            {"ttlSecondsAfterFinished": 600},
            False,
        ),
        (_finished("Failed"), _rayjob("Failed", "FAILED"), {"failedClusterRetentionSeconds": 600}, True),
        (_finished("Failed"), _rayjob("Running", "RUNNING"), {}, False),  # the operator deletes it now
    ],
    ids=["rayjob-gone", "no-ttl", "within-ttl", "after-ttl", "kept-for-debugging", "being-taken-down"],
)
def test_the_dashboard_address_goes_with_the_cluster(
    status: dict[str, Any], rayjob: dict[str, Any] | None, run_policy: dict[str, Any], kept: bool
) -> None:
    result = plan(_job(status, **run_policy), rayjob, [], NOW)
    assert ("dashboardURL" in result.status) is kept


def test_a_suspended_job_has_no_dashboard() -> None:
    status = {**_running_status(), "dashboardURL": "demo-1-head-svc.team-a.svc.cluster.local:8265"}
    result = plan(_job(status, suspend=True), _rayjob("Running", "RUNNING"), [], NOW)
    assert result.status["phase"] == "Suspended"
    assert "dashboardURL" not in result.status


def _previous_version_finished_status() -> dict[str, Any]:
    """A Succeeded job's status as the previous operator and trainer left it."""
    return {
        **_running_status(),
        "phase": "Succeeded",
        "completionTime": "2026-11-29T11:30:00Z",
        "conditions": [
            *_running_status()["conditions"][:1],
            {
                "type": "Running",
                "status": "False",
                "reason": "TrainingSucceeded",
                "message": "attempt 1 finished training",
                "lastTransitionTime": "2026-11-29T11:30:00Z",
            },
            {
                "type": "Succeeded",
                "status": "True",
                "reason": "TrainingSucceeded",
                "message": "attempt 1 finished training",
                "lastTransitionTime": "2026-11-29T11:30:00Z",
            },
        ],
        "progress": {"step": 100, "steps": "100/100", "updatedAt": "2026-11-29T11:29:00Z"},
        "history": [{"step": 50, "reward": 0.5}, {"step": 100, "reward": 0.8}],
        "health": {"attempt": 1, "healthy": True, "step": 1},
        "outputs": {
            "step": 100,
            "gguf": {"model": "/e/m.gguf", "projector": "/e/p.gguf", "quantization": "q4_k_m"},
            "sample": {"prompt": "p", "response": "r", "reward": 3.0, "file": "/e/sample.json"},
        },
    }


def test_a_status_the_previous_version_wrote_is_read_and_converges() -> None:
    """What this version cannot read of the trainer's fields is left out with a line each (the
    reconcile posts them as one Warning), never a failing reconcile; the operator's own fields
    converge to this version's shape on the next pass."""
    old = _previous_version_finished_status()
    status, unread = readable(old)
    assert [line.split(":")[0] for line in unread] == [
        "status.progress.updatedAt",
        "status.history",
        "status.outputs.gguf.quantization",
    ]
    assert unread[0] == "status.progress.updatedAt: unknown field"  # in our words, as a verdict says it
    assert status["health"] == old["health"]  # an older healthy verdict still reads
    body = {**minimal_body(), "status": status}
    body["metadata"]["generation"] = 1
    job = GRPOJob.model_validate(body)
    result = plan(job, None, [], NOW)
    assert _conditions(result.status) == {"Succeeded": "True"}
    assert diff({k: old[k] for k in result.status if k in old}, result.status) == {
        "conditions": result.status["conditions"],
        "observedGeneration": 1,
    }
    assert readable(result.status) == (result.status, [])
    body["status"] = {**status, **result.status}
    assert plan(GRPOJob.model_validate(body), None, [], NOW).status == result.status


def test_an_attempt_that_trained_its_last_step_is_healthy_through_its_export() -> None:
    """The trainer leaves lastStepAt out once the last step is trained: a long export after it is
    not a stall, and a run that reported its last step in one go still gets its Healthy."""
    body = _training().model_dump(by_alias=True, exclude_none=True, mode="json")
    body["status"]["progress"] = {"step": 100, "totalSteps": 100, "attempt": 1}
    body["status"]["metrics"] = {}
    result = plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW + timedelta(days=1))
    assert _healthy(result)["status"] == "True"
    assert _healthy(result)["message"] == HEALTHY_MESSAGE
    # Another attempt's last step is not this one's.
    body["status"]["progress"]["attempt"] = 0
    assert "Healthy" not in _conditions(
        plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW).status
    )


def test_a_suspended_job_does_not_say_steps_are_arriving() -> None:
    """`kubectl grpo status` of a suspended job showed `Healthy True TrainingHealthy: training
    normally: ... steps arriving`: the verdict of the attempt that trained stays True, and says
    that no attempt is judged while none trains; a resumed attempt is judged again."""
    running = plan(_training(), _rayjob("Running", "RUNNING"), [], NOW)
    assert _healthy(running)["message"] == HEALTHY_MESSAGE
    body = _training().model_dump(by_alias=True, exclude_none=True, mode="json")
    body["status"]["conditions"] = running.status["conditions"]
    body["spec"]["runPolicy"] = {"suspend": True}
    suspended = plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW)
    condition = _healthy(suspended)
    assert suspended.status["phase"] == "Suspended"
    assert condition["status"] == "True"
    assert "steps arriving" not in condition["message"]
    assert condition["message"].startswith("suspended: no attempt is training")
    assert condition["lastTransitionTime"] == _healthy(running)["lastTransitionTime"]
    assert not [e for e in suspended.events if e[1] in ("Recovered", "TrainingHealthy")]


def test_a_sick_verdict_stays_when_the_job_is_suspended() -> None:
    sick = plan(
        _training({"healthy": False, "reason": "EntropyCollapse", "message": "low"}),
        _rayjob("Running", "RUNNING"),
        [],
        NOW,
    )
    body = _training().model_dump(by_alias=True, exclude_none=True, mode="json")
    body["status"]["conditions"] = sick.status["conditions"]
    body["spec"]["runPolicy"] = {"suspend": True}
    suspended = plan(GRPOJob.model_validate(body), _rayjob("Running", "RUNNING"), [], NOW)
    assert (_healthy(suspended)["status"], _healthy(suspended)["message"]) == ("False", "low")
