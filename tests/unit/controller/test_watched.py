"""What the watches last delivered (handlers/watched.py): the bodies the resync plans from, and
whether a job's RayJob is moving (which spares it the resync's visit)."""

from __future__ import annotations

from grpo_operator.handlers.watched import Watched
from support.clock import ManualClock

JOB = ("team-a", "geo3k")
RAYJOB = ("team-a", "geo3k-1")


def _rayjob(**status: str) -> dict:
    return {
        "metadata": {"name": "geo3k-1", "namespace": "team-a"},
        "spec": {"suspend": False, "rayClusterSpec": {"headGroupSpec": {"template": {}}}},
        "status": status,
    }


def test_a_rayjob_status_that_moves_is_seen_and_one_that_stands_still_is_not() -> None:
    clock = ManualClock(100.0)
    watched = Watched(clock)
    assert watched.moved_for(JOB) == float("inf")
    watched.saw_rayjob(RAYJOB, _rayjob(jobDeploymentStatus="Initializing"), JOB)
    clock.now += 30
    # The same status again (a resync of KubeRay's, a write of its spec): no movement.
    watched.saw_rayjob(RAYJOB, _rayjob(jobDeploymentStatus="Initializing"), JOB)
    assert watched.moved_for(JOB) == 30
    # A field the lifecycle does not read moving (the cluster's pods coming up) is movement.
    watched.saw_rayjob(RAYJOB, _rayjob(jobDeploymentStatus="Initializing", startTime="t1"), JOB)
    assert watched.moved_for(JOB) == 0


def test_only_a_pending_job_counts_as_its_cluster_coming_up() -> None:
    clock = ManualClock(100.0)
    watched = Watched(clock)
    watched.saw_rayjob(RAYJOB, _rayjob(jobDeploymentStatus="Initializing"), JOB)
    assert not watched.cluster_coming_up(JOB, 60)  # no body of the job seen yet
    watched.saw_job(JOB, {"metadata": {"name": "geo3k"}, "status": {"phase": "Pending"}})
    assert watched.cluster_coming_up(JOB, 60)
    clock.now += 61
    assert not watched.cluster_coming_up(JOB, 60)  # quiet for a period: worth a visit
    watched.saw_rayjob(RAYJOB, _rayjob(jobDeploymentStatus="Running", jobStatus="RUNNING"), JOB)
    watched.saw_job(JOB, {"metadata": {"name": "geo3k"}, "status": {"phase": "Running"}})
    # Running: the stall check runs on the clock, so its visits stay.
    assert not watched.cluster_coming_up(JOB, 60)


def test_only_what_the_reconcile_reads_of_a_rayjob_is_kept() -> None:
    watched = Watched()
    watched.saw_rayjob(RAYJOB, _rayjob(jobStatus="PENDING"), JOB)
    assert watched.rayjob(RAYJOB) == {
        "metadata": {"name": "geo3k-1", "namespace": "team-a"},
        "spec": {"suspend": False},
        "status": {"jobStatus": "PENDING"},
    }
    watched.rayjob_gone(RAYJOB)
    assert watched.rayjob(RAYJOB) is None


def test_a_job_body_is_handed_out_as_a_copy_a_pass_may_move_on() -> None:
    watched = Watched()
    watched.saw_job(JOB, {"metadata": {"name": "geo3k", "resourceVersion": "7"}, "status": {}})
    body = watched.job(JOB)
    assert body is not None
    body["metadata"]["resourceVersion"] = "8"
    body["status"] = {"phase": "Pending"}
    assert watched.job(JOB) == {"metadata": {"name": "geo3k", "resourceVersion": "7"}, "status": {}}
    watched.job_gone(JOB)
    assert watched.job(JOB) is None


def test_kept_bodies_leave_out_the_bookkeeping_no_pass_reads() -> None:
    """managedFields (a field set per manager, as large as the spec) and kubectl's last-applied copy
    were most of the operator's memory at 1,000 jobs; every other field of the job stays."""
    managed = [{"manager": "grpo-operator", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
    applied = {"kubectl.kubernetes.io/last-applied-configuration": '{"spec": {}}', "team": "a"}
    body = {
        "metadata": {
            "name": "geo3k",
            "resourceVersion": "7",
            "managedFields": managed,
            "annotations": applied,
        },
        "spec": {"model": {"path": "/models/x"}},
        "status": {"phase": "Pending"},
    }
    watched = Watched()
    watched.saw_job(JOB, body)
    kept = watched.job(JOB)
    assert kept == {
        "metadata": {"name": "geo3k", "resourceVersion": "7", "annotations": {"team": "a"}},
        "spec": {"model": {"path": "/models/x"}},
        "status": {"phase": "Pending"},
    }
    assert body["metadata"]["managedFields"] is managed  # the event's own body is left as it was
    assert "kubectl.kubernetes.io/last-applied-configuration" in body["metadata"]["annotations"]

    rayjob = _rayjob(jobStatus="PENDING")
    rayjob["metadata"]["managedFields"] = managed
    watched.saw_rayjob(RAYJOB, rayjob, JOB)
    assert "managedFields" not in watched.rayjob(RAYJOB)["metadata"]
