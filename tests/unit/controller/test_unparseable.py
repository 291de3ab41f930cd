"""A job the API server admitted but the models refuse (a CRD older than the operator, say): it
fails at once with the field named as the offline verdict names it, its running attempt's RayJob is
deleted (until it is gone, whatever pass it takes), and the next pass leaves it be.

The API is a stand-in that keeps the job's body and its RayJobs and records status writes, Events
and deletes: the pass's only calls here are reading the job and its current RayJob, writing its
status, posting the Event and deleting the RayJob.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from grpo_operator.config import Settings
from grpo_operator.handlers.reconcile import Reconciler
from grpo_operator.k8s import ApiError
from grpo_operator.metrics import Metrics
from support.operator_inputs import METADATA, minimal_body


def _rayjob(name: str, uid: str) -> dict[str, Any]:
    owner = {"apiVersion": "grpo.dev/v1alpha1", "kind": "GRPOJob", "name": "demo", "uid": uid}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": "team-a", "ownerReferences": [{**owner, "controller": True}]},
        "status": {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running"},
    }


class _Api:
    def __init__(self, body: dict[str, Any], rayjobs: Sequence[dict[str, Any]] = ()) -> None:
        self.body = body
        self.rayjobs = {r["metadata"]["name"]: r for r in rayjobs}
        self.statuses: list[dict[str, Any]] = []
        self.events: list[tuple[str, str, str]] = []
        self.deletes: list[str] = []
        self.failing_deletes = 0

    async def get_rayjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.rayjobs.get(name)

    async def delete_rayjob(self, namespace: str, name: str) -> None:
        self.deletes.append(name)
        if self.failing_deletes:
            self.failing_deletes -= 1
            raise ApiError(503, "ServiceUnavailable", "the API server is restarting")
        self.rayjobs.pop(name, None)

    async def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        return self.body

    async def patch_job_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None = None
    ) -> None:
        self.statuses.append(status)
        self.body = {**self.body, "status": {**(self.body.get("status") or {}), **status}}  # a merge patch

    async def post_event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    async def warning_events(self, namespace: str) -> list[dict[str, Any]]:
        raise AssertionError("an unparseable job lists no Events")  # the reconciler only binds it


async def test_a_job_the_models_refuse_fails_once_naming_the_field_in_our_words() -> None:
    body = minimal_body()
    body["spec"]["algorithm"]["learningRate"] = -1
    body["spec"]["env"] = [{"value": "1"}]
    api = _Api(body)
    reconciler = Reconciler(api, Settings(), Metrics())  # type: ignore[arg-type]
    meta = body["metadata"]
    assert await reconciler.once(meta["namespace"], meta["name"], None, None, None, None) == "invalid"
    [status] = api.statuses
    assert status["phase"] == "Failed"
    [condition] = status["conditions"]
    assert (condition["type"], condition["reason"]) == ("Failed", "InvalidSpec")
    expected = "spec.algorithm.learningRate: must be greater than 0, found -1; spec.env[0].name: required"
    assert condition["message"] == expected
    assert api.events == [("Warning", "InvalidSpec", expected)]
    # The next pass (the status write's own event, a resync): failed for good, nothing written again.
    assert await reconciler.once(meta["namespace"], meta["name"], None, None, None, None) == "terminal"
    assert len(api.statuses) == 1
    assert len(api.events) == 1


def _running(attempt: int) -> dict[str, Any]:
    body = minimal_body()
    body["spec"]["image"] = ""  # refused by this version's models, admitted by an older CRD
    body["status"] = {"phase": "Running", "attempt": attempt}
    return body


async def test_a_running_job_the_models_refuse_has_its_attempt_stopped_once() -> None:
    api = _Api(_running(2), [_rayjob("demo-1", METADATA["uid"]), _rayjob("demo-2", METADATA["uid"])])
    reconciler = Reconciler(api, Settings(), Metrics())  # type: ignore[arg-type]
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "invalid"
    assert (
        api.statuses[0]["conditions"][0]["message"] == "spec.image: must have at least 1 character, found 0"
    )
    assert api.deletes == ["demo-2"]  # the current attempt's only: the first has finished long since
    assert ("team-a", "demo") in reconciler.draining
    # The next pass: the cluster is gone, nothing is deleted or written again, nothing left to drain.
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "terminal"
    assert api.deletes == ["demo-2"]
    assert len(api.statuses) == 1
    assert ("team-a", "demo") not in reconciler.draining
    assert ("team-a", "demo") not in reconciler.unfinished
    assert reconciler.metrics.phases[("team-a", "demo")] == "Failed"  # the jobs-by-phase gauge


async def test_a_failed_delete_is_sent_again_by_the_next_pass() -> None:
    api = _Api(_running(1), [_rayjob("demo-1", METADATA["uid"])])
    api.failing_deletes = 1
    reconciler = Reconciler(api, Settings(), Metrics())  # type: ignore[arg-type]
    with pytest.raises(ApiError):
        await reconciler.once("team-a", "demo", None, None, None, None)
    assert len(api.statuses) == 1  # failed before the delete was tried
    assert ("team-a", "demo") in reconciler.draining  # so the frequent pass comes back
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "terminal"
    assert api.deletes == ["demo-1", "demo-1"]
    assert "demo-1" not in api.rayjobs
    # The pass after that finds it gone: done draining.
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "terminal"
    assert api.deletes == ["demo-1", "demo-1"]
    assert ("team-a", "demo") not in reconciler.draining


async def test_another_jobs_rayjob_of_the_same_name_is_left_alone() -> None:
    api = _Api(_running(1), [_rayjob("demo-1", "00000000-0000-0000-0000-0000000000ff")])
    reconciler = Reconciler(api, Settings(), Metrics())  # type: ignore[arg-type]
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "invalid"
    assert api.deletes == []
    assert ("team-a", "demo") not in reconciler.draining


async def test_a_finished_job_the_models_refuse_keeps_its_end() -> None:
    body = _running(1)
    body["status"] = {"phase": "Succeeded", "attempt": 1}
    finished = _rayjob("demo-1", METADATA["uid"])
    finished["status"] = {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"}
    api = _Api(body, [finished])
    reconciler = Reconciler(api, Settings(), Metrics())  # type: ignore[arg-type]
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "terminal"
    assert (api.statuses, api.events, api.deletes) == ([], [], [])
    assert reconciler.metrics.phases[("team-a", "demo")] == "Succeeded"
