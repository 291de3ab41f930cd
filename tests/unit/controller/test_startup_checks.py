"""When a starting job's pods are looked at, and the Warning Events shared by a namespace
(handlers/startup_checks.py).

tests/integration/test_reads_per_job.py counts the same on the real API server: the pods and
Events LISTs per job per period of a namespace full of waiting jobs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from grpo_operator.handlers.startup_checks import StartupChecks, WarningEvents
from grpo_operator.startup import Trouble
from support.clock import ManualClock

PERIOD = 60.0
LONGEST = 5 * PERIOD
JOB = ("team-a", "geo3k")
ATTEMPT = ("uid-1", 1)
STILL = {"jobDeploymentStatus": "Initializing", "startTime": "2026-12-01T10:00:00Z"}
WHY = Trouble("Unschedulable", "geo3k-1-head is unschedulable: 0/6 nodes are available")


def _passes(checks: StartupChecks, periods: int, *, start: float = 0.0, **due: Any) -> list[int]:
    """A pass every period (the resync's visits to a quiet job); the periods in which it looked."""
    looked = []
    for period in range(periods + 1):
        now = start + period * PERIOD
        if checks.due(JOB, ATTEMPT, STILL, now, **due):
            checks.checked(JOB, ATTEMPT, STILL, now, WHY, first=PERIOD, longest=LONGEST)
            looked.append(period)
    return looked


def test_a_job_whose_rayjob_stands_still_is_looked_at_ever_less_often() -> None:
    checks = StartupChecks()
    looked = _passes(checks, 30)
    # One period, then two, four, and every five at most: 8 looks in 30 periods, not 31.
    assert looked == [0, 1, 3, 7, 12, 17, 22, 27]
    # In between, a pass reuses the last verdict: the condition keeps saying why the job waits.
    assert checks.last(JOB) == WHY


def test_the_rayjob_moving_makes_a_look_due_at_once_and_starts_the_spacing_over() -> None:
    checks = StartupChecks()
    _passes(checks, 12)  # looked at in period 12, the next not before 17
    moved = {**STILL, "rayClusterStatus": {"readyWorkerReplicas": 1}}
    now = 13 * PERIOD
    assert not checks.due(JOB, ATTEMPT, STILL, now)
    assert checks.due(JOB, ATTEMPT, moved, now)
    checks.checked(JOB, ATTEMPT, moved, now, None, first=PERIOD, longest=LONGEST)
    assert not checks.due(JOB, ATTEMPT, moved, now + PERIOD - 1)
    assert checks.due(JOB, ATTEMPT, moved, now + PERIOD)
    assert checks.last(JOB) is None


def test_a_new_attempt_or_a_new_job_of_the_same_name_is_looked_at_at_once() -> None:
    checks = StartupChecks()
    _passes(checks, 3)
    now = 4 * PERIOD
    assert not checks.due(JOB, ATTEMPT, STILL, now)
    assert checks.due(JOB, ("uid-1", 2), STILL, now)
    assert checks.due(JOB, ("uid-2", 1), STILL, now)


def test_the_start_deadline_passing_makes_one_more_look_due() -> None:
    checks = StartupChecks()
    _passes(checks, 12)  # looked at in period 12, the next not before 17
    deadline = 13.5 * PERIOD
    assert not checks.due(JOB, ATTEMPT, STILL, 13 * PERIOD, deadline=deadline)
    assert checks.due(JOB, ATTEMPT, STILL, 14 * PERIOD, deadline=deadline)
    checks.checked(JOB, ATTEMPT, STILL, 14 * PERIOD, WHY, first=PERIOD, longest=LONGEST)
    # Once: after the look that saw the deadline passed, the spacing goes on.
    assert not checks.due(JOB, ATTEMPT, STILL, 15 * PERIOD, deadline=deadline)


def test_a_pod_leaving_the_schedulers_grace_makes_a_look_due_by_then() -> None:
    checks = StartupChecks()
    checks.checked(JOB, ATTEMPT, STILL, 0.0, None, first=PERIOD, longest=LONGEST, by=20.0)
    assert not checks.due(JOB, ATTEMPT, STILL, 19.0)
    assert checks.due(JOB, ATTEMPT, STILL, 20.0)


def test_a_job_that_stops_starting_is_forgotten() -> None:
    checks = StartupChecks()
    _passes(checks, 1)
    assert len(checks) == 1
    checks.forget(JOB)
    assert len(checks) == 0
    assert checks.last(JOB) is None
    assert checks.due(JOB, ATTEMPT, STILL, 2 * PERIOD)


class Lists:
    """A stand-in for the Events LIST: counts the lists, and can hold them or fail them."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.fail: Exception | None = None

    async def __call__(self, namespace: str) -> list[dict[str, Any]]:
        self.asked.append(namespace)
        await self.hold.wait()
        if self.fail is not None:
            raise self.fail
        return [{"reason": "FailedMount", "n": len(self.asked)}]


async def test_every_pass_of_a_namespace_shares_one_list_while_it_is_young() -> None:
    clock, lists = ManualClock(), Lists()
    events = WarningEvents(lists, max_age=5.0, clock=clock)
    lists.hold.clear()
    # 200 jobs' passes ask at once: one list, which every one of them gets.
    waiting = [asyncio.create_task(events.of("team-a")) for _ in range(200)]
    await asyncio.sleep(0)
    lists.hold.set()
    got = await asyncio.gather(*waiting)
    assert lists.asked == ["team-a"]
    assert all(g == [{"reason": "FailedMount", "n": 1}] for g in got)
    clock.now += 4.9
    assert (await events.of("team-a"))[0]["n"] == 1
    assert lists.asked == ["team-a"]
    # Older than max_age: listed again. Another namespace has a list of its own.
    clock.now += 0.1
    assert (await events.of("team-a"))[0]["n"] == 2
    assert (await events.of("team-b"))[0]["n"] == 3
    assert lists.asked == ["team-a", "team-a", "team-b"]


async def test_a_failed_list_fails_its_waiters_and_the_next_ask_lists_again() -> None:
    lists = Lists()
    events = WarningEvents(lists, max_age=5.0, clock=ManualClock())
    lists.fail = RuntimeError("the API server is away")
    lists.hold.clear()
    waiting = [asyncio.create_task(events.of("team-a")) for _ in range(3)]
    await asyncio.sleep(0)
    lists.hold.set()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    assert lists.asked == ["team-a"]
    lists.fail = None
    assert (await events.of("team-a"))[0]["n"] == 2


async def test_one_pass_cancelled_does_not_cancel_the_list_the_others_wait_for() -> None:
    lists = Lists()
    events = WarningEvents(lists, max_age=5.0, clock=ManualClock())
    lists.hold.clear()
    first = asyncio.create_task(events.of("team-a"))
    second = asyncio.create_task(events.of("team-a"))
    await asyncio.sleep(0)
    first.cancel()
    lists.hold.set()
    assert (await second)[0]["n"] == 1
    with pytest.raises(asyncio.CancelledError):
        await first
    assert lists.asked == ["team-a"]


async def test_a_namespace_no_job_asks_about_any_more_is_dropped() -> None:
    clock, lists = ManualClock(), Lists()
    events = WarningEvents(lists, max_age=5.0, clock=clock)
    await events.of("team-a")
    clock.now += 45.0
    await events.of("team-b")
    assert events.namespaces() == {"team-a", "team-b"}
    clock.now += 6.0  # team-a's list now ten times max_age old, team-b's listed again
    await events.of("team-b")
    assert events.namespaces() == {"team-b"}
    assert lists.asked == ["team-a", "team-b", "team-b"]
