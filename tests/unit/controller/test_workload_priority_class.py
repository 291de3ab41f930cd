"""A Kueue `workloadPriorityClass` that does not exist fails the job naming the field, as a missing
`priorityClassName` does (issue 58: before, it was copied into the RayJob's label unchecked and
the job read Queued for ever, Kueue unable to admit its Workload). Looked up before the first
attempt; not judged when the operator cannot tell (no RBAC, or Kueue not installed).
"""

from __future__ import annotations

from typing import Any

import pytest
from grpo_operator.api.problem import Problem
from grpo_operator.config import Settings
from grpo_operator.handlers.reconcile import Reconciler
from grpo_operator.metrics import Metrics
from grpo_operator.validation import validate
from support.operator_inputs import job_from, minimal_body

QUEUED = {"resources.queueName": "training", "resources.workloadPriorityClass": "research-high"}
MISSING = Problem(
    "spec.resources.workloadPriorityClass", "no Kueue WorkloadPriorityClass 'research-high' in the cluster"
)


@pytest.mark.parametrize(("exists", "problems"), [(False, [MISSING]), (True, []), (None, [])])
def test_a_missing_class_is_a_problem_and_an_unknown_one_is_not(
    exists: bool | None, problems: list[Problem]
) -> None:
    job = job_from(minimal_body(), **QUEUED)
    assert validate(job, Settings(), workload_priority_class_exists=exists) == problems


class _Api:
    """Just what a first pass of a job that names nothing asks of the API server."""

    def __init__(self, body: dict[str, Any], exists: bool | None) -> None:
        self.body = body
        self.exists = exists
        self.asked: list[str] = []
        self.created: list[str] = []
        self.events: list[tuple[str, str, str]] = []

    async def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        return self.body

    async def workload_priority_class_exists(self, name: str) -> bool | None:
        self.asked.append(name)
        return self.exists

    async def read(self, manifest: dict[str, Any]) -> dict[str, Any] | None:
        return None

    async def create(self, manifest: dict[str, Any], *, first: bool = False) -> None:
        self.created.append(manifest["kind"])

    async def patch_job_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None = None
    ) -> dict[str, Any]:
        self.body = {**self.body, "status": {**(self.body.get("status") or {}), **status}}
        return self.body

    async def post_event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    async def warning_events(self, namespace: str) -> list[dict[str, Any]]:
        return []  # the reconciler binds it at construction


def _queued_body() -> dict[str, Any]:
    body = minimal_body()
    body["spec"]["resources"] |= {"queueName": "training", "workloadPriorityClass": "research-high"}
    return body


async def test_the_reconcile_fails_a_job_whose_class_is_missing_before_making_anything() -> None:
    api = _Api(_queued_body(), exists=False)
    reconciler = Reconciler(api, Settings(), Metrics())  # type: ignore[arg-type]
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "invalid"
    assert api.asked == ["research-high"]
    assert api.created == []
    assert api.body["status"]["phase"] == "Failed"
    [failed] = api.body["status"]["conditions"]
    assert (failed["reason"], failed["message"]) == ("InvalidSpec", str(MISSING))
    assert api.events == [("Warning", "InvalidSpec", str(MISSING))]


async def test_without_kueue_the_class_is_not_judged_and_the_job_starts() -> None:
    api = _Api(_queued_body(), exists=None)
    reconciler = Reconciler(api, Settings(), Metrics())  # type: ignore[arg-type]
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "ok"
    assert "RayJob" in api.created
