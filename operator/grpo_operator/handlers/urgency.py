"""Starting a job's Ray cluster goes before everything else the operator does.

In a burst of new jobs, the time to each job's RayJob is what users wait on, and the operator and
the API server share what CPU there is. So work that leads to a RayJob holds the gate ("urgent"),
and work that can wait a moment (following RayJob status, the resync pass, a job's ConfigMap,
volume and RBAC) waits until no urgent work has been in flight for `settle` seconds. The watch
hands new jobs over in clumps under load, with gaps of up to about a second between them, and
without that pause every gap would let deferred work flood the API server mid-burst. The wait is
bounded by `max_wait`, so a steady stream of new jobs cannot starve the rest.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

SETTLE_SECONDS = 1.0
MAX_WAIT_SECONDS = 5.0


class Urgency:
    """Counts urgent work in flight; lets everything else wait for a quiet moment."""

    def __init__(
        self,
        settle: float = SETTLE_SECONDS,
        max_wait: float = MAX_WAIT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settle = settle
        self.max_wait = max_wait
        self._clock = clock
        self._in_flight = 0
        self._last_busy = float("-inf")
        self._quiet = asyncio.Event()
        self._quiet.set()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def hold(self) -> Callable[[], None]:
        """Mark urgent work as started; call the returned function (once or more) when it is done."""
        self._in_flight += 1
        self._quiet.clear()
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._in_flight -= 1
            if not self._in_flight:
                self._last_busy = self._clock()
                self._quiet.set()

        return release

    async def wait_turn(self) -> None:
        """Return once no urgent work has been in flight for `settle` seconds, or after `max_wait`."""
        deadline = self._clock() + self.max_wait
        while (left := deadline - self._clock()) > 0:
            if self._in_flight:
                try:
                    await asyncio.wait_for(self._quiet.wait(), left)
                except TimeoutError:
                    return
                continue
            calm_in = self._last_busy + self.settle - self._clock()
            if calm_in <= 0:
                return
            await asyncio.sleep(min(calm_in, left))
