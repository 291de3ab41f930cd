"""Why an attempt's pods do not run, in their own words, and the start deadline."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.lifecycle import plan
from grpo_operator.startup import Trouble, grace_ends, trouble
from support.operator_inputs import minimal_body

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
OWNERS = frozenset({"demo-1", "demo-1-abcde"})


def _pod(name: str, phase: str = "Pending", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase, **status}}


def _event(about: str, why: str, message: str, at: str = "2026-11-29T11:59:00Z") -> dict[str, Any]:
    return {"involvedObject": {"name": about}, "reason": why, "message": message, "lastTimestamp": at}


UNSCHEDULABLE = {
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/6 nodes are available: 6 Insufficient nvidia.com/gpu.",
            "lastTransitionTime": "2026-11-29T11:58:00Z",
        }
    ]
}


def test_an_unschedulable_pod_says_why_from_its_condition() -> None:
    found = trouble([_pod("demo-1-head", **UNSCHEDULABLE)], [], OWNERS, NOW)
    assert found == Trouble(
        "Unschedulable",
        "demo-1-head is unschedulable: 0/6 nodes are available: 6 Insufficient nvidia.com/gpu.",
    )


def test_a_pod_the_scheduler_is_still_retrying_is_not_a_reason_yet() -> None:
    """On a normal start the head is tried before the worker it must follow is placed."""
    young = {"conditions": [{**UNSCHEDULABLE["conditions"][0], "lastTransitionTime": "2026-11-29T11:59:50Z"}]}
    assert trouble([_pod("demo-1-head", **young)], [], OWNERS, NOW) is None


def test_an_image_that_does_not_pull_is_named_with_the_container() -> None:
    waiting = {
        "state": {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x:1"'}}
    }
    pods = [_pod("demo-1-worker", containerStatuses=[{"name": "ray-worker", **waiting}])]
    found = trouble(pods, [], OWNERS, NOW)
    assert found == Trouble(
        "ImagePullBackOff",
        'demo-1-worker container ray-worker: ImagePullBackOff: Back-off pulling image "x:1"',
    )


def test_a_volume_that_does_not_mount_comes_from_the_kubelets_event() -> None:
    pods = [_pod("demo-1-head")]
    events = [
        _event(
            "demo-1-head",
            "FailedMount",
            'MountVolume.SetUp failed for volume "spec": configmap "x" not found',
        )
    ]
    assert trouble(pods, events, OWNERS, NOW) == Trouble(
        "FailedMount", 'demo-1-head: MountVolume.SetUp failed for volume "spec": configmap "x" not found'
    )


def test_a_pod_that_pod_security_refuses_is_read_from_kuberays_event() -> None:
    message = 'pods "demo-1-head" is forbidden: violates PodSecurity "restricted:latest": seccompProfile'
    found = trouble([], [_event("demo-1-abcde", "FailedToCreateHeadPod", message)], OWNERS, NOW)
    assert found == Trouble("PodSecurity", f"demo-1-abcde: {message}")


def test_events_that_no_longer_hold_are_not_reasons() -> None:
    running = [_pod("demo-1-head", phase="Running")]
    events = [
        _event("demo-1-head", "FailedMount", "was not there for a second"),
        _event("demo-1-abcde", "FailedToCreateHeadPod", 'serviceaccount "demo-trainer" not found'),
        _event("someone-else", "FailedMount", "not ours"),
    ]
    assert trouble(running, events, OWNERS, NOW) is None


def _starting(rayjob_made: str, **run_policy: Any) -> tuple[GRPOJob, dict[str, Any]]:
    body = minimal_body()
    body["spec"]["runPolicy"] = run_policy
    body["status"] = {
        "phase": "Pending",
        "attempt": 1,
        "rayJobName": "demo-1",
        "startTime": rayjob_made,
        "conditions": [],
    }
    rayjob = {
        "metadata": {"name": "demo-1", "creationTimestamp": rayjob_made},
        "spec": {},
        "status": {"jobDeploymentStatus": "Initializing", "startTime": rayjob_made},
    }
    return GRPOJob.model_validate(body), rayjob


def test_a_starting_attempt_carries_the_pods_reason_and_one_warning() -> None:
    job, rayjob = _starting("2026-11-29T11:55:00Z")
    why = Trouble("Unschedulable", "demo-1-head is unschedulable: 0/6 nodes are available")
    result = plan(job, rayjob, [], NOW, trouble=why)
    running = next(c for c in result.status["conditions"] if c["type"] == "Running")
    assert (running["status"], running["reason"]) == ("False", "Unschedulable")
    assert (
        running["message"]
        == "attempt 1 has not started: demo-1-head is unschedulable: 0/6 nodes are available"
    )
    assert ("Warning", "Unschedulable", running["message"]) in result.events
    assert result.status["phase"] == "Pending"
    body = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["status"] = result.status
    again = plan(GRPOJob.model_validate(body), rayjob, [], NOW, trouble=why)
    assert [e for e in again.events if e[0] == "Warning"] == [], "one Warning per reason"


def test_an_attempt_that_never_starts_fails_at_the_start_deadline_with_the_reason() -> None:
    job, rayjob = _starting("2026-11-29T11:00:00Z", startDeadlineSeconds=1800)
    why = Trouble("ImagePullBackOff", "demo-1-head container ray-head: ImagePullBackOff")
    result = plan(job, rayjob, [], NOW, trouble=why)
    assert result.status["phase"] == "Failed"
    failed = next(c for c in result.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "StartDeadlineExceeded"
    assert (
        "not started within runPolicy.startDeadlineSeconds=1800: demo-1-head container ray-head"
        in failed["message"]
    )
    assert result.status["failedAttempts"][0]["retryable"] is False


def test_within_the_start_deadline_nothing_fails() -> None:
    job, rayjob = _starting("2026-11-29T11:40:00Z", startDeadlineSeconds=1800)
    assert plan(job, rayjob, [], NOW).status["phase"] == "Pending"


def test_the_schedulers_grace_ends_when_the_first_pod_still_in_it_leaves_it() -> None:
    young = {"conditions": [{**UNSCHEDULABLE["conditions"][0], "lastTransitionTime": "2026-11-29T11:59:50Z"}]}
    pods = [_pod("demo-1-head", **young), _pod("demo-1-worker", **UNSCHEDULABLE)]
    # The worker (two minutes unschedulable) is a reason already; the head becomes one in 10 s.
    assert grace_ends(pods, NOW) == datetime(2026, 11, 29, 12, 0, 10, tzinfo=UTC)
    assert grace_ends([_pod("demo-1-worker", **UNSCHEDULABLE)], NOW) is None
    assert grace_ends([_pod("demo-1-head", "Running")], NOW) is None
