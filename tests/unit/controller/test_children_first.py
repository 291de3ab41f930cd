"""A job's status and Events say a RayJob was created only once it exists (issue 58).

The reconcile builds every child of an attempt first (pure), then creates them, and only then
writes `Created`, `rayJobName` and the Normal `Created` Event. A child that cannot be built fails
the job `InvalidSpec` naming the field, with no status or Event that claims it, and the next pass
leaves the failed job be (before: `created Ray job demo-1` and `rayJobName` were written first,
and every later pass failed on the same build).

The API is a stand-in that keeps the job's body and records, in order, what the pass does with
it: status writes, creates and applies, Events.
"""

from __future__ import annotations

from typing import Any

import pytest
from grpo_operator.api.problem import ProblemError
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children import attempt
from grpo_operator.children.attempt import UNBUILDABLE_FIELD, build_children
from grpo_operator.config import AcceleratorProfile, Settings
from grpo_operator.handlers.reconcile import Reconciler
from grpo_operator.metrics import Metrics
from support.operator_inputs import minimal_body


class _Api:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, Any]] = []

    async def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        return self.body

    async def get_rayjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(("RayJob", name))

    async def read(self, manifest: dict[str, Any]) -> dict[str, Any] | None:
        return self.objects.get((manifest["kind"], manifest["metadata"]["name"]))

    async def create(self, manifest: dict[str, Any], *, first: bool = False) -> None:
        self.objects[(manifest["kind"], manifest["metadata"]["name"])] = manifest
        self.calls.append(("create", manifest["kind"]))

    async def apply(self, manifest: dict[str, Any], *, first: bool = False) -> None:
        self.calls.append(("apply", manifest["kind"]))

    async def patch_job_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None = None
    ) -> dict[str, Any]:
        self.calls.append(("status", status))
        merged = {**(self.body.get("status") or {}), **status}
        self.body = {**self.body, "status": {k: v for k, v in merged.items() if v is not None}}
        return self.body

    async def post_event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.calls.append(("event", (type_, reason, message)))

    async def warning_events(self, namespace: str) -> list[dict[str, Any]]:
        return []

    async def attempt_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return []

    def of(self, what: str) -> list[Any]:
        return [value for kind, value in self.calls if kind == what]


def _unbuildable_settings() -> Settings:
    """An accelerator profile whose memory per device is no whole number of bytes at 8 devices:
    a RayJob of a job that leaves memoryPerNode unset cannot be built (the settings' pattern
    admits "0.3", like any fraction)."""
    settings = Settings()
    nvidia = settings.profiles["nvidia"].model_dump()
    return settings.model_copy(
        update={
            "profiles": {
                **settings.profiles,
                "nvidia": AcceleratorProfile(**{**nvidia, "memory_per_device": "0.3"}),
            }
        }
    )


async def test_a_job_whose_rayjob_cannot_be_built_fails_naming_the_field_and_claims_nothing() -> None:
    api = _Api(minimal_body())
    reconciler = Reconciler(api, _unbuildable_settings(), Metrics())  # type: ignore[arg-type]
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "invalid"
    [status] = api.of("status")
    assert status["phase"] == "Failed"
    [failed] = status["conditions"]
    assert (failed["type"], failed["reason"]) == ("Failed", "InvalidSpec")
    assert failed["message"].startswith("spec.resources.memoryPerNode: ")
    assert "rayJobName" not in status
    assert api.of("create") == []
    assert api.of("event") == [("Warning", "InvalidSpec", failed["message"])]
    # The next pass: failed for good, nothing written, created or posted again.
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "terminal"
    assert len(api.calls) == 2


async def test_the_created_status_and_event_follow_the_rayjob() -> None:
    api = _Api(minimal_body())
    reconciler = Reconciler(api, Settings(), Metrics())  # type: ignore[arg-type]
    assert await reconciler.once("team-a", "demo", None, None, None, None) == "ok"
    first_write = api.calls[0]
    assert first_write[0] == "status"
    assert first_write[1]["attempt"] == 1
    assert "rayJobName" not in first_write[1]
    rayjob_created = api.calls.index(("create", "RayJob"))
    named = next(i for i, (kind, value) in enumerate(api.calls) if kind == "status" and "rayJobName" in value)
    told = api.calls.index(("event", ("Normal", "Created", "created Ray job demo-1")))
    assert rayjob_created < named < told
    assert api.body["status"]["rayJobName"] == "demo-1"
    created = next(c for c in api.body["status"]["conditions"] if c["type"] == "Created")
    assert (created["status"], created["reason"]) == ("True", "ChildrenCreated")


def test_a_builder_that_breaks_is_a_problem_naming_the_child_not_an_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The general guard: a builder's unforeseen exception (here injected: no admissible spec is
    known to cause one) becomes the job's problem instead of a reconcile that fails for ever."""

    def broken(*_: Any) -> dict[str, Any]:
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(attempt, "build_network_policy", broken)
    with pytest.raises(ProblemError) as raised:
        build_children(GRPOJob.model_validate(minimal_body()), Settings(), 1)
    assert raised.value.problem.field == UNBUILDABLE_FIELD
    assert raised.value.problem.message == (
        "the operator cannot build the NetworkPolicy from this spec: OverflowError: int too large to convert to float"
    )
