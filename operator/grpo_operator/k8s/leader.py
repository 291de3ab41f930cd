"""Leader election on a coordination.k8s.io Lease, so the chart can run several replicas safely.

Only the replica holding the Lease reconciles; the others watch and wait. The rules are client-go's:

- the holder renews every `retry` seconds, and counts itself leader only until `renew_deadline`
  seconds after the start of its last successful renewal (its own monotonic clock);
- a candidate takes the Lease over only once it has seen the Lease unchanged for `duration`
  seconds (its own monotonic clock), with an optimistic-concurrency update, so two candidates
  cannot both win;
- `renew_deadline` < `duration`: a holder that cannot renew (paused, cut off) stops counting
  itself leader before anyone else may start.

On top of that, `Api` refuses to send any write while this replica is not the leader (the
`guard`), and the reconciler's status writes carry the job's resourceVersion: a replica that wakes
from a pause with a stale view can neither send a write nor have a stale one accepted. A leader
that loses the Lease stops the operator (the Deployment starts it again as a candidate).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp

from ..api.timestamps import micro_rfc3339
from .api import Api, ApiError

log = logging.getLogger(__name__)
_LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


@dataclass(frozen=True)
class LeaseTerms:
    """Which Lease, and how long a holder keeps it."""

    name: str
    namespace: str
    identity: str
    duration: float = 15.0
    renew_deadline: float = 10.0
    retry: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry < self.renew_deadline < self.duration:
            raise ValueError(
                "leader election needs 0 < retry period < renew deadline < lease duration, got "
                f"{self.retry} / {self.renew_deadline} / {self.duration}"
            )


class Leader:
    """This replica's claim on the Lease: `leading` says whether it may write right now."""

    def __init__(
        self,
        api: Api,
        terms: LeaseTerms,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.api = api
        self.terms = terms
        self._clock = clock
        self._sleep = sleep
        self._valid_until = float("-inf")
        self._seen: tuple[Any, ...] | None = None
        self._seen_at = 0.0

    @property
    def leading(self) -> bool:
        return self._clock() < self._valid_until

    @property
    def _path(self) -> str:
        return _LEASES.format(namespace=self.terms.namespace) + f"/{self.terms.name}"

    async def run(
        self,
        on_leading: Callable[[], Coroutine[Any, Any, None]],
        on_lost: Callable[[], Awaitable[None]],
    ) -> None:
        """Wait to acquire the Lease, call `on_leading`, renew it; call `on_lost` when it is lost."""
        while not await self._try():
            await self._sleep(self.terms.retry)
        log.info("leading as %s (lease %s/%s)", self.terms.identity, self.terms.namespace, self.terms.name)
        # In a task of its own: a long takeover pass must not hold up the renewals.
        takeover = asyncio.create_task(on_leading())
        while True:
            await self._sleep(self.terms.retry)
            if not await self._try() and not self.leading:
                log.error("lost the lease %s/%s", self.terms.namespace, self.terms.name)
                takeover.cancel()
                await on_lost()
                return

    async def release(self) -> None:
        """Give the Lease up on a clean stop, so another replica takes over at once."""
        if not self.leading:
            return
        self._valid_until = float("-inf")
        try:
            # Never None here (that is `missing_ok`'s answer): a missing Lease raises ApiError.
            lease = await self.api.request("GET", self._path, guarded=False)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.terms.identity:
                return
            now = micro_rfc3339(datetime.now(UTC))
            lease["spec"].update({"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": now})
            await self.api.request("PUT", self._path, body=lease, guarded=False)
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            log.warning("could not release the lease: %s", error)

    async def _try(self) -> bool:
        """One acquire-or-renew round; True when this replica holds the Lease afterwards."""
        started = self._clock()
        terms = self.terms
        try:
            # Ahead of the reconciles' requests waiting for a slot: in a burst, a renewal queued behind
            # them would outlast the renew deadline, and a leader that lapses acts on nothing.
            lease = await self.api.request("GET", self._path, guarded=False, missing_ok=True, first=True)
            now = micro_rfc3339(datetime.now(UTC))
            if lease is None:
                await self.api.request(
                    "POST",
                    _LEASES.format(namespace=terms.namespace),
                    body={
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": terms.name, "namespace": terms.namespace},
                        "spec": {
                            "holderIdentity": terms.identity,
                            "leaseDurationSeconds": int(terms.duration),
                            "acquireTime": now,
                            "renewTime": now,
                            "leaseTransitions": 0,
                        },
                    },
                    guarded=False,
                    first=True,
                )
                self._valid_until = started + terms.renew_deadline
                return True
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            record = (holder, spec.get("renewTime"), lease["metadata"].get("resourceVersion"))
            if record != self._seen:
                self._seen, self._seen_at = record, started
            duration = float(spec.get("leaseDurationSeconds") or terms.duration)
            if holder and holder != terms.identity and started < self._seen_at + duration:
                self._valid_until = float("-inf")
                return False  # held by another replica, and renewed within its duration
            ours = holder == terms.identity
            spec.update(
                {
                    "holderIdentity": terms.identity,
                    "leaseDurationSeconds": int(terms.duration),
                    "renewTime": now,
                }
            )
            if not ours:
                spec["acquireTime"] = now
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            lease["spec"] = spec
            # The resourceVersion in the body makes this a compare-and-swap: of two candidates
            # that both saw the Lease expire, one gets 409.
            await self.api.request("PUT", self._path, body=lease, guarded=False, first=True)
            self._valid_until = started + terms.renew_deadline
            return True
        except ApiError as error:
            if error.code != 409:
                log.warning("lease %s/%s: %s", terms.namespace, terms.name, error)
            return False
        except (aiohttp.ClientError, TimeoutError) as error:
            log.warning("lease %s/%s: %s", terms.namespace, terms.name, error)
            return False
