"""A job the API server admitted but the models refuse (a CRD older than the operator, say): it
fails at once with the field named as the offline verdict names it, and the next pass leaves it be.

The API is a stand-in that keeps the job's body and records status writes and Events: the pass's
only calls here are reading the job, writing its status and posting the Event.
"""

from __future__ import annotations

from typing import Any

from grpo_operator.config import Settings
from grpo_operator.handlers.reconcile import Reconciler
from grpo_operator.metrics import Metrics
from support.operator_inputs import minimal_body


class _Api:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.statuses: list[dict[str, Any]] = []
        self.events: list[tuple[str, str, str]] = []

    async def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        return self.body

    async def patch_job_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None = None
    ) -> None:
        self.statuses.append(status)
        self.body = {**self.body, "status": status}

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
