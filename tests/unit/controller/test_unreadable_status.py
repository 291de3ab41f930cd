"""A status part of which another version wrote (an older trainer's shapes) is read without it:
one Warning each time what is left out changes, never a failing reconcile.

The API is a stand-in that records Events: the pass's one call here is posting them
(`Reconciler._readable`); which fields are left out is `status.readable`'s, tested with the
lifecycle in test_lifecycle.py.
"""

from __future__ import annotations

from typing import Any

from grpo_operator.config import Settings
from grpo_operator.handlers.reconcile import UNREADABLE_STATUS, Reconciler
from grpo_operator.metrics import Metrics

KEY = ("team-a", "demo")


class _Events:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str]] = []

    async def post_event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.posted.append((type_, reason, message))

    async def warning_events(self, namespace: str) -> list[dict[str, Any]]:
        raise AssertionError("reading a status lists no Events")  # the reconciler only binds it


def _body(**status: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": KEY[0], "name": KEY[1]}, "status": {"phase": "Running", **status}}


async def test_what_cannot_be_read_is_left_out_with_one_warning_per_change() -> None:
    events = _Events()
    reconciler = Reconciler(events, Settings(), Metrics())  # type: ignore[arg-type]
    old = _body(history=[{"step": 1, "reward": 0.5}], progress={"step": 1})
    read = await reconciler._readable(KEY, old)
    assert read["status"] == {"phase": "Running", "progress": {"step": 1}}
    assert [(t, r) for t, r, _ in events.posted] == [("Warning", UNREADABLE_STATUS)]
    assert "status.history" in events.posted[0][2]
    # The same again (every pass of the job): no second Warning.
    await reconciler._readable(KEY, old)
    assert len(events.posted) == 1
    # Readable now (the new trainer wrote its shapes): the body as it is, nothing to say.
    new = _body(history={"steps": "1", "reward": "0.5"}, progress={"step": 1})
    assert await reconciler._readable(KEY, new) is new
    assert len(events.posted) == 1
    # Unreadable again: said again.
    await reconciler._readable(KEY, _body(outputs={"sample": {"prompt": "p"}}))
    assert len(events.posted) == 2
    assert "status.outputs.sample" in events.posted[1][2]
