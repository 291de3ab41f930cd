"""Leader election's timing rules, with the clock in the test's hands.

The Lease store here keeps client-go's optimistic concurrency (a PUT with an old resourceVersion
gets 409); tests/integration/test_replicas.py runs the same code against the real API server.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from grpo_operator.k8s import ApiError, Leader, LeaseTerms
from support.clock import ManualClock

TERMS = dict(name="grpo-operator", namespace="ops", duration=15.0, renew_deadline=10.0, retry=2.0)


class LeaseStore:
    """The API server's part: one Lease, with resourceVersion compare-and-swap."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.down = False
        self.queued_behind: list[str] = []
        """Requests sent without going ahead of the reconciles' queue."""

    async def request(
        self, method: str, path: str, *, body=None, guarded=True, missing_ok=False, first=False
    ):
        if not first:
            self.queued_behind.append(method)
        if self.down:
            raise TimeoutError("the API server does not answer")
        if method == "GET":
            if self.lease is None:
                if missing_ok:
                    return None
                raise ApiError(404, "NotFound", "no lease")
            return copy.deepcopy(self.lease)
        if method == "POST":
            if self.lease is not None:
                raise ApiError(409, "AlreadyExists", "lease exists")
        elif (
            method == "PUT"
            and body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]
        ):
            raise ApiError(409, "Conflict", "the object has been modified")
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    @property
    def holder(self) -> str | None:
        return (self.lease or {}).get("spec", {}).get("holderIdentity")


def _leader(store: LeaseStore, clock: ManualClock, identity: str) -> Leader:
    return Leader(store, LeaseTerms(identity=identity, **TERMS), clock=clock)  # type: ignore[arg-type]


async def test_the_first_candidate_takes_a_free_lease() -> None:
    store, clock = LeaseStore(), ManualClock()
    a = _leader(store, clock, "a")
    assert not a.leading
    assert await a._try()
    assert a.leading
    assert store.holder == "a"


async def test_a_renewed_lease_keeps_others_waiting_however_long() -> None:
    store, clock = LeaseStore(), ManualClock()
    a, b = _leader(store, clock, "a"), _leader(store, clock, "b")
    await a._try()
    for _ in range(20):
        clock.now += 2.0
        assert await a._try()
        assert not await b._try()
    assert store.holder == "a"
    assert not b.leading


async def test_acquiring_and_renewing_go_ahead_of_the_reconciles_requests() -> None:
    # In a burst, a renewal queued behind hundreds of reconciles' requests would outlast the renew
    # deadline: the leader would lapse mid-burst and drop work.
    store, clock = LeaseStore(), ManualClock()
    a = _leader(store, clock, "a")
    await a._try()
    clock.now += 2.0
    await a._try()
    assert store.lease is not None
    assert not store.queued_behind


async def test_a_lease_not_renewed_for_its_duration_is_taken_over() -> None:
    store, clock = LeaseStore(), ManualClock()
    a, b = _leader(store, clock, "a"), _leader(store, clock, "b")
    await a._try()
    assert not await b._try()  # b starts watching the record now
    clock.now += 14.9
    assert not await b._try()
    clock.now += 0.2
    assert await b._try()
    assert store.holder == "b"
    assert store.lease["spec"]["leaseTransitions"] == 1


async def test_a_leader_that_cannot_renew_stops_before_anyone_may_start() -> None:
    store, clock = LeaseStore(), ManualClock()
    a, b = _leader(store, clock, "a"), _leader(store, clock, "b")
    await a._try()
    await b._try()
    store.down = True
    clock.now += 9.9
    assert not await a._try()
    assert a.leading, "still within its renew deadline"
    clock.now += 0.2
    assert not a.leading, "past its renew deadline: it must stop writing"
    store.down = False
    clock.now += 4.0  # still inside the lease duration as b measures it
    assert not await b._try()
    assert not a.leading, "a gap, never an overlap"
    assert not b.leading


async def test_a_replica_waking_from_a_pause_is_not_leader_and_cannot_win_back() -> None:
    store, clock = LeaseStore(), ManualClock()
    a, b = _leader(store, clock, "a"), _leader(store, clock, "b")
    await a._try()
    await b._try()
    clock.now += 60  # a is paused (SIGSTOP, a long GC, a cut network) for a minute
    assert await b._try()
    assert not a.leading
    assert not await a._try(), "b renewed it a moment ago"
    assert store.holder == "b"


async def test_two_candidates_for_an_expired_lease_cannot_both_win() -> None:
    store, clock = LeaseStore(), ManualClock()
    a, b, c = (_leader(store, clock, n) for n in "abc")
    await a._try()
    await b._try()
    await c._try()
    clock.now += 20
    stale = copy.deepcopy(store.lease)
    assert await b._try()
    # c decided from the same expired record b saw; its swap is refused.
    original = store.request

    async def answer_with_stale(method, path, **kwargs):
        if method == "GET":
            return copy.deepcopy(stale)
        return await original(method, path, **kwargs)

    store.request = answer_with_stale  # type: ignore[method-assign]
    assert not await c._try()
    assert store.holder == "b"


async def test_a_clean_stop_hands_the_lease_over_at_once() -> None:
    store, clock = LeaseStore(), ManualClock()
    a, b = _leader(store, clock, "a"), _leader(store, clock, "b")
    await a._try()
    await b._try()
    await a.release()
    assert not a.leading
    assert store.holder is None
    assert await b._try()


def test_the_durations_must_leave_a_gap() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaseTerms(name="l", namespace="n", identity="a", duration=10, renew_deadline=10, retry=2)


async def test_a_long_takeover_does_not_hold_up_the_renewals() -> None:
    import asyncio

    store, clock = LeaseStore(), ManualClock()
    renewals: list[str] = []
    original = store.request

    async def counting(method, path, **kwargs):
        if method == "PUT":
            renewals.append(kwargs["body"]["spec"]["renewTime"])
        return await original(method, path, **kwargs)

    store.request = counting  # type: ignore[method-assign]

    async def tick(seconds: float) -> None:
        clock.now += seconds
        if len(renewals) >= 5:
            store.down = True  # enough renewals seen: let the lease go, so run() returns
        await asyncio.sleep(0)

    leader = Leader(store, LeaseTerms(identity="a", **TERMS), clock=clock, sleep=tick)  # type: ignore[arg-type]
    forever = asyncio.Event()
    lost = asyncio.Event()

    async def take_over() -> None:
        await forever.wait()  # a takeover pass over thousands of jobs

    async def lose() -> None:
        lost.set()

    await asyncio.wait_for(leader.run(take_over, lose), timeout=10)
    assert len(renewals) >= 5, "the Lease was renewed while the takeover pass ran"
    assert lost.is_set()
