"""The urgency gate: RayJob creation first, everything else after a quiet moment."""

from __future__ import annotations

import asyncio

from grpo_operator.handlers.urgency import Urgency


async def test_waits_for_urgent_work_and_then_the_settle_time() -> None:
    gate = Urgency(settle=0.2, max_wait=5)
    release = gate.hold()
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiter = asyncio.create_task(gate.wait_turn())
    await asyncio.sleep(0.1)
    assert not waiter.done(), "urgent work is in flight"
    release()
    released_at = loop.time()
    await waiter
    assert loop.time() - released_at >= 0.19, "returned before the settle time had passed"
    assert loop.time() - started < 1


async def test_new_urgent_work_during_the_settle_time_restarts_the_wait() -> None:
    gate = Urgency(settle=0.2, max_wait=5)
    gate.hold()()
    waiter = asyncio.create_task(gate.wait_turn())
    await asyncio.sleep(0.1)
    second = gate.hold()
    await asyncio.sleep(0.15)
    assert not waiter.done(), "the second job's RayJob is still being created"
    second()
    await asyncio.wait_for(waiter, 1)


async def test_returns_at_once_when_nothing_was_urgent() -> None:
    gate = Urgency(settle=10, max_wait=10)
    await asyncio.wait_for(gate.wait_turn(), 0.1)


async def test_the_wait_is_bounded() -> None:
    gate = Urgency(settle=0.1, max_wait=0.2)
    gate.hold()  # never released: a steady stream of new jobs
    loop = asyncio.get_running_loop()
    started = loop.time()
    await gate.wait_turn()
    assert 0.19 <= loop.time() - started < 1


def test_release_is_idempotent() -> None:
    gate = Urgency()
    first, second = gate.hold(), gate.hold()
    first()
    first()
    assert gate.in_flight == 1
    second()
    assert gate.in_flight == 0
