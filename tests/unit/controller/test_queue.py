"""The reconcile queue on its own: nothing it takes on is left for the resync.

The pass itself is a stand-in here (the queue's behaviour does not depend on what a pass does);
tests/integration/test_burst.py runs the real one against the API server.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from grpo_operator.handlers.queue import JobQueue, Trigger
from grpo_operator.handlers.reconcile import StaleReadError
from grpo_operator.handlers.urgency import Urgency
from grpo_operator.k8s import NotLeaderError
from grpo_operator.metrics import Metrics

KEY = ("team-a", "geo3k")
FAST = (0.01, 0.02, 0.05)


class Passes:
    """Stands in for the Reconciler: records every pass and fails the ones it is told to."""

    def __init__(self, *failures: BaseException | None, hold: asyncio.Event | None = None) -> None:
        self.urgency = Urgency(settle=0, max_wait=0)
        self.metrics = Metrics()
        self.clock = lambda: datetime.now(UTC)
        self.calls: list[dict[str, Any]] = []
        self.failures = list(failures)
        self.hold = hold
        self.forgotten: list[tuple[str, str]] = []
        self.running = 0
        self.most_running = 0
        """The most passes that ran at once."""

    async def once(self, namespace, name, owner_uid, body, rayjob, release, *, trigger, watched=False):  # type: ignore[no-untyped-def]
        self.calls.append(
            {
                "key": (namespace, name),
                "trigger": trigger,
                "owner_uid": owner_uid,
                "body": body,
                "rayjob": rayjob,
                "watched": watched,
            }
        )
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if self.hold is not None:
                await self.hold.wait()
        finally:
            self.running -= 1
        failure = self.failures.pop(0) if self.failures else None
        if failure is not None:
            raise failure
        return "ok"

    def forget(self, key: tuple[str, str]) -> None:
        self.forgotten.append(key)

    def requeued(self, why: str) -> float:
        return self.metrics.requeued.labels(why)._value.get()


def _queue(passes: Passes, leading: Any = lambda: True) -> JobQueue:
    return JobQueue(passes, leading=leading, backoff=FAST)  # type: ignore[arg-type]


async def _settle(queue: JobQueue, seconds: float = 0.3) -> None:
    """Let the retries the queue scheduled fire (FAST backoff) and their passes finish."""
    for _ in range(int(seconds / 0.01)):
        if not (queue.queued or queue._tasks):
            return
        await asyncio.sleep(0.01)


async def test_a_failed_pass_is_tried_again_until_it_goes_through() -> None:
    passes = Passes(RuntimeError("500 from the API server"), TimeoutError("no answer"))
    queue = _queue(passes)
    await queue.reconcile(*KEY, trigger="job")
    await _settle(queue)
    assert [c["trigger"] for c in passes.calls] == ["job", "retry", "retry"]
    assert passes.requeued("failed") == 2
    assert queue.queued == 0
    assert queue.quiet_for(KEY) < 1


async def test_a_leader_that_lapses_keeps_the_work_for_when_it_leads_again() -> None:
    # A renewal answered after the renew deadline: for a moment this replica is not the leader.
    leading = iter([True, False, False, True])
    passes = Passes()
    queue = _queue(passes, leading=lambda: next(leading, True))
    await queue.reconcile(*KEY, trigger="job")  # leading: the pass runs
    await queue.reconcile("team-a", "new-job", trigger="job", body={"metadata": {}})  # lapsed
    await _settle(queue)
    assert [c["trigger"] for c in passes.calls] == ["job", "retry"]
    assert passes.requeued("not_leading") == 2  # lapsed once more when the first retry fired


async def test_a_write_refused_for_want_of_the_lease_is_tried_again() -> None:
    passes = Passes(NotLeaderError("not the leader: PATCH not sent"))
    queue = _queue(passes)
    await queue.reconcile(*KEY, trigger="rayjob")
    await _settle(queue)
    assert [c["trigger"] for c in passes.calls] == ["rayjob", "retry"]
    assert passes.requeued("not_leading") == 1


async def test_a_replica_that_never_led_drops_triggers() -> None:
    passes = Passes()
    queue = _queue(passes, leading=lambda: False)
    await queue.reconcile(*KEY, trigger="job")
    await _settle(queue)
    assert passes.calls == []
    assert queue.queued == 0  # taking the Lease over visits every job instead


async def test_triggers_during_a_pass_fold_into_one_more_pass() -> None:
    hold = asyncio.Event()
    passes = Passes(hold=hold)
    queue = _queue(passes)
    first = asyncio.create_task(queue.reconcile(*KEY, trigger="job", body={"metadata": {}}))
    await asyncio.sleep(0.01)
    rayjob = {"metadata": {"name": "geo3k-1"}, "status": {"jobStatus": "RUNNING"}}
    for _ in range(5):  # KubeRay's status writes while the first pass is still out
        await asyncio.wait_for(queue.reconcile(*KEY, trigger="rayjob", owner_uid="u1", rayjob=rayjob), 1)
    hold.set()
    await asyncio.wait_for(first, 1)
    assert [c["trigger"] for c in passes.calls] == ["job", "rayjob"]
    assert passes.calls[1]["rayjob"] is rayjob
    assert passes.calls[1]["owner_uid"] == "u1"
    assert passes.requeued("coalesced") == 5


async def test_a_stale_read_starts_over_from_a_fresh_one() -> None:
    passes = Passes(StaleReadError("409"))
    queue = _queue(passes)
    await queue.reconcile(*KEY, trigger="job", body={"metadata": {"name": "geo3k"}})
    assert [c["body"] for c in passes.calls] == [{"metadata": {"name": "geo3k"}}, None]
    assert passes.requeued("failed") == 0


async def test_the_resync_plans_from_the_watches_and_a_start_over_reads_afresh() -> None:
    passes = Passes(StaleReadError("409"))
    queue = _queue(passes)
    await queue.reconcile(*KEY, trigger="resync")
    await queue.reconcile(*KEY, trigger="job")
    assert [(c["trigger"], c["watched"]) for c in passes.calls] == [
        ("resync", True),
        ("resync", False),
        ("job", False),
    ]


async def test_a_pass_that_goes_through_cancels_the_retry_it_makes_unneeded() -> None:
    passes = Passes(RuntimeError("500"))
    queue = JobQueue(passes, backoff=(0.2,))  # type: ignore[arg-type]
    await queue.reconcile(*KEY, trigger="job")
    await queue.reconcile(*KEY, trigger="rayjob")  # an event gets there before the retry
    await asyncio.sleep(0.3)
    assert [c["trigger"] for c in passes.calls] == ["job", "rayjob"]
    assert queue.queued == 0


@pytest.mark.parametrize(
    ("earlier", "newer", "expected"),
    [
        # Two RayJob events of the same job: the newer RayJob body.
        (
            Trigger("rayjob", "u1", None, {"v": 1}),
            Trigger("rayjob", "u1", None, {"v": 2}),
            Trigger("rayjob", "u1", None, {"v": 2}),
        ),
        # A RayJob of an earlier job of the same name never drives this one: read afresh.
        (
            Trigger("rayjob", "u1", None, {"v": 1}),
            Trigger("rayjob", "u0", None, {"v": 0}),
            Trigger("rayjob", None, None, None),
        ),
        # A new job's body is kept; the pass is named for the event path, not the resync.
        (
            Trigger("resync"),
            Trigger("job", None, {"metadata": {}}, None),
            Trigger("job", None, {"metadata": {}}, None),
        ),
        (Trigger("resync"), Trigger("deadline"), Trigger("resync")),
    ],
)
def test_folding_two_triggers(earlier: Trigger, newer: Trigger, expected: Trigger) -> None:
    assert earlier.folded(newer) == expected


async def test_at_most_max_passes_run_at_once_and_every_job_gets_its_pass() -> None:
    """A burst waits as triggers, not as passes: a pass holds its job's model and manifests."""
    hold = asyncio.Event()
    passes = Passes(hold=hold)
    queue = JobQueue(passes, backoff=FAST, max_passes=4)  # type: ignore[arg-type]
    tasks = [asyncio.ensure_future(queue.reconcile("team-a", f"job-{i}", trigger="job")) for i in range(20)]
    await asyncio.sleep(0.05)
    assert len(passes.calls) == 4
    hold.set()
    await asyncio.gather(*tasks)
    assert sorted(c["key"][1] for c in passes.calls) == sorted(f"job-{i}" for i in range(20))
    assert passes.most_running == 4
    assert queue.queued == 0


async def _one_pass_taken() -> tuple[asyncio.Event, Passes, JobQueue, asyncio.Future[None]]:
    """A queue of a single pass, taken by a job whose pass waits for `hold`."""
    hold = asyncio.Event()
    passes = Passes(hold=hold)
    queue = JobQueue(passes, backoff=FAST, max_passes=1)  # type: ignore[arg-type]
    running = asyncio.ensure_future(queue.reconcile("team-a", "running", trigger="job"))
    await asyncio.sleep(0.02)
    return hold, passes, queue, running


async def test_a_new_job_takes_the_next_free_pass_before_other_work() -> None:
    hold, passes, queue, running = await _one_pass_taken()
    follow = asyncio.ensure_future(queue.reconcile("team-a", "older", trigger="rayjob"))
    await asyncio.sleep(0.02)
    new = asyncio.ensure_future(
        queue.reconcile("team-a", "new", trigger="job", body={"metadata": {"name": "new"}})
    )
    await asyncio.sleep(0.02)
    assert passes.urgency.in_flight == 1  # the new job holds the gate while it waits for a pass
    hold.set()
    await asyncio.gather(running, follow, new)
    assert [c["key"][1] for c in passes.calls] == ["running", "new", "older"]
    assert passes.urgency.in_flight == 0


async def test_a_job_cancelled_while_waiting_for_a_pass_lets_go_of_the_gate_and_its_turn() -> None:
    hold, passes, queue, running = await _one_pass_taken()
    waiting = asyncio.ensure_future(
        queue.reconcile("team-a", "new", trigger="job", body={"metadata": {"name": "new"}})
    )
    await asyncio.sleep(0.02)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert passes.urgency.in_flight == 0
    hold.set()
    await running
    await queue.reconcile("team-a", "after", trigger="job")  # the pass is free again
    assert [c["key"][1] for c in passes.calls] == ["running", "after"]
