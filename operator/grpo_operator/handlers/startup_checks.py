"""When a starting attempt's pods are looked at, and the Warning Events that every pass shares.

While a job's Ray cluster starts, a pass over it asks why its pods do not run (startup.py): a LIST
of the attempt's pods and a LIST of the namespace's Warning Events. Asked on every pass, a burst
that waits long for its clusters pays that pair once per job per resync period (the resync visits
every job whose RayJob stands still), and the Events list reads the whole namespace, so each one
costs the API server more the more jobs share it. Two things keep that flat:

- `WarningEvents`: the namespace's Warning Events, listed at most once per `EVENTS_MAX_AGE_S` and
  shared by every pass that asks within it (passes that ask while a list is on its way wait for
  that one). A Warning is seen by a job at most that many seconds later;
- `StartupChecks`: a job's check is due at once when its attempt or its RayJob's status changed
  since the last check (KubeRay at work: pods being made, an image being pulled), and otherwise
  after one interval, then two, four..., at most `longest`. A job whose cluster stands still is
  looked at ever less often, and in between its pass reuses the last verdict, so the job's
  condition keeps saying why it waits. The check is due sooner when the verdict can change with
  nothing moving (a pod leaving the scheduler's grace, startup.grace_ends), and once more when the
  start deadline passes, so the attempt fails with what its pods say at that moment.

Nothing here survives a restart, on purpose: a new process checks every starting job on its first
pass (level-triggered).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..startup import Trouble

Key = tuple[str, str]
EVENTS_MAX_AGE_S = 5.0
"""How old a namespace's list of Warning Events may be and still serve a pass."""
_KEEP_UNUSED = 10
"""A namespace's list is dropped once this many times `max_age` old (no job there starts any more)."""


class WarningEvents:
    """The Warning Events of each namespace, listed at most once per `max_age` seconds."""

    def __init__(
        self,
        fetch: Callable[[str], Awaitable[list[dict[str, Any]]]],
        max_age: float = EVENTS_MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._max_age = max_age
        self._clock = clock
        self._lists: dict[str, tuple[float, list[dict[str, Any]]]] = {}
        self._listing: dict[str, asyncio.Future[list[dict[str, Any]]]] = {}

    async def of(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's Warning Events, as listed at most `max_age` seconds ago.

        A failed list fails every pass that waited for it, and the next ask lists again."""
        held = self._lists.get(namespace)
        if held is not None and self._clock() - held[0] < self._max_age:
            return held[1]
        listing = self._listing.get(namespace)
        if listing is None:
            listing = asyncio.ensure_future(self._list(namespace))
            # Retrieved here too: a failure that every waiter gave up on is not reported as lost.
            listing.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._listing[namespace] = listing
        # One pass cancelled (its job deleted, the operator stopping) does not cancel the others'.
        return await asyncio.shield(listing)

    async def _list(self, namespace: str) -> list[dict[str, Any]]:
        asked = self._clock()  # its age counts from the ask: what was posted after may be missing
        try:
            items = await self._fetch(namespace)
        finally:
            self._listing.pop(namespace, None)
        self._lists[namespace] = (asked, items)
        old = [ns for ns, (at, _) in self._lists.items() if asked - at >= self._max_age * _KEEP_UNUSED]
        for ns in old:
            del self._lists[ns]
        return items

    def namespaces(self) -> set[str]:
        """The namespaces whose list is held (to see that unused ones go)."""
        return set(self._lists)


@dataclass
class _Check:
    attempt: tuple[str, int]
    """The job's uid and attempt the check was for."""
    status: dict[str, Any]
    """The RayJob's status at the check."""
    at: float
    interval: float
    """How long after `at` the next check is due if nothing moves."""
    trouble: Trouble | None
    by: float | None
    """Due by then at the latest: when the verdict can change with nothing moving."""


class StartupChecks:
    """Per starting job: when its pods were last looked at, what they said, and when to look again."""

    def __init__(self) -> None:
        self._checks: dict[Key, _Check] = {}

    def due(
        self,
        key: Key,
        attempt: tuple[str, int],
        status: dict[str, Any],
        now: float,
        *,
        deadline: float | None = None,
    ) -> bool:
        """Whether a pass at `now` must look at the pods: never looked at for this `attempt` (the
        job's uid and attempt number), its RayJob's `status` moved since, the start `deadline`
        passed since, or the interval since the last check is over."""
        last = self._checks.get(key)
        if last is None or last.attempt != attempt or last.status != status:
            return True
        if deadline is not None and last.at < deadline <= now:
            return True
        return now - last.at >= last.interval or (last.by is not None and now >= last.by)

    def checked(
        self,
        key: Key,
        attempt: tuple[str, int],
        status: dict[str, Any],
        now: float,
        trouble: Trouble | None,
        *,
        first: float,
        longest: float,
        by: float | None = None,
    ) -> None:
        """A check done at `now`, with its verdict. The next one is due `first` seconds later if
        the RayJob moved since the previous check (or there was none), otherwise twice as long
        after this one as the previous one was after its own, up to `longest`; and by `by` at the
        latest (startup.grace_ends: a pod the scheduler is still retrying may become a reason)."""
        last = self._checks.get(key)
        still = last is not None and last.attempt == attempt and last.status == status
        interval = min(last.interval * 2, longest) if still and last is not None else min(first, longest)
        self._checks[key] = _Check(attempt, dict(status), now, interval, trouble, by)

    def last(self, key: Key) -> Trouble | None:
        """The verdict of the job's last check (a pass that is not due reuses it)."""
        last = self._checks.get(key)
        return None if last is None else last.trouble

    def forget(self, key: Key) -> None:
        """The job is not starting (any more): its next start is checked from scratch."""
        self._checks.pop(key, None)

    def __len__(self) -> int:
        return len(self._checks)
