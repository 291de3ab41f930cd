"""Request slots: a bounded number in flight, RayJob creations ahead of the queue."""

from __future__ import annotations

import asyncio

from grpo_operator.k8s import Slots


async def test_bounded_and_first_goes_first() -> None:
    slots = Slots(1)
    await slots.acquire()
    order: list[str] = []

    async def request(name: str, first: bool) -> None:
        await slots.acquire(first=first)
        order.append(name)
        slots.release()

    waiting = [
        asyncio.create_task(request("status-a", False)),
        asyncio.create_task(request("status-b", False)),
        asyncio.create_task(request("rayjob-a", True)),
    ]
    await asyncio.sleep(0.01)
    assert order == [], "the only slot is taken"
    slots.release()
    await asyncio.gather(*waiting)
    assert order == ["rayjob-a", "status-a", "status-b"]


async def test_a_cancelled_waiter_does_not_lose_a_slot() -> None:
    slots = Slots(1)
    await slots.acquire()
    cancelled = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0.01)
    cancelled.cancel()
    await asyncio.sleep(0.01)
    slots.release()
    # The slot went back to the pool, not to the cancelled waiter: the next acquire is immediate.
    await asyncio.wait_for(slots.acquire(), 0.1)
    slots.release()
    await asyncio.wait_for(slots.acquire(), 0.1)
