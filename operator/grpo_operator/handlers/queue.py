"""The reconcile queue: which pass runs when, apart from what a pass does (handlers/reconcile.py).

As controller-runtime's work queue and kopf's own keep their queueing out of the reconcile:

- one pass per job at a time. A trigger for a job that already has a pass running or waiting is
  folded into that job's next pass instead of queueing a pass of its own: in a burst, RayJob
  status events and retries for one job cost one pass, not one each;
- nothing the event path takes on is left for the resync. A pass that fails, or that this
  replica could not carry out because it was not leading at that moment (a lapse of the Lease
  under load), is queued again by the queue itself with a backoff that grows with each failure
  in a row. Only a replica that has never led drops triggers: on taking over it visits every job;
- a pass that read a stale job is started over from a fresh read;
- the urgency gate (handlers/urgency.py) lets work leading to a new job's RayJob go first;
- at most `maxConcurrentReconciles` passes run at once (config.py), as controller-runtime's
  MaxConcurrentReconciles bounds its workers. A pass holds its job's model, its children's manifests and the API's answers while
  it waits for the API server; with every job of a burst in flight at once, the operator's memory
  grew with the burst. A job waiting for its turn holds only its trigger, and new jobs take the
  next free pass before everything else (docs/benchmarks/operator.md has the figures).

The queue also remembers when each job last had a pass that went through, so the resync visits
only jobs nothing has brought forward for a whole period (handlers/resync.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import DEFAULT_MAX_CONCURRENT_RECONCILES
from ..k8s import NotLeaderError
from ..k8s.transport import Slots
from .reconcile import Reconciler, StaleReadError

log = logging.getLogger(__name__)

RETRY_BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Waits before a failed reconcile of a job is tried again (the last one repeats)."""
STALE_READ_ATTEMPTS = 3
"""Passes started over from a fresh read before the reconcile counts as failed."""
EVENT_TRIGGERS = ("job", "rayjob", "retry")
"""Triggers of the event path, in the order a folded pass is named after them."""

Key = tuple[str, str]


@dataclass(frozen=True)
class Trigger:
    """Why a job is due for a pass, and what the trigger saves the pass from reading.

    `body`: a just-created job as its event delivered it; `rayjob` with `owner_uid`: the RayJob a
    RayJob event delivered, and the uid of the job that owns it (Reconciler.once).
    """

    trigger: str
    owner_uid: str | None = None
    body: dict[str, Any] | None = None
    rayjob: dict[str, Any] | None = None

    def folded(self, newer: Trigger) -> Trigger:
        """One pass for both triggers: the newer event bodies, and the earlier event-path name."""
        names = [t for t in EVENT_TRIGGERS if t in (self.trigger, newer.trigger)]
        trigger = names[0] if names else self.trigger
        body = newer.body if newer.body is not None else self.body
        if self.owner_uid is not None and self.owner_uid == newer.owner_uid:
            return Trigger(trigger, newer.owner_uid, body, newer.rayjob or self.rayjob)
        # A RayJob body is used only with the uid of the job that owns it: a RayJob of an earlier
        # job of the same name must not drive this one. Folded with anything else, it is read afresh.
        return Trigger(trigger, None, body, None)


class JobQueue:
    """Every trigger's way to a reconcile pass (see the module docstring)."""

    def __init__(
        self,
        reconciler: Reconciler,
        leading: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        backoff: tuple[float, ...] = RETRY_BACKOFF_SECONDS,
        max_passes: int = DEFAULT_MAX_CONCURRENT_RECONCILES,
    ) -> None:
        self.reconciler = reconciler
        self.leading = leading
        """Whether this replica may act (k8s/leader.py); a replica that never led drops every trigger."""
        self._clock = clock
        self._backoff = backoff
        self._has_led = False
        self._next: dict[Key, Trigger] = {}
        """Per job with a pass running or waiting: what its next pass is for."""
        self._active: set[Key] = set()
        self._retries: dict[Key, asyncio.TimerHandle] = {}
        self._failures: dict[Key, int] = {}
        self._last_ok: dict[Key, float] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        self._passes = Slots(max_passes)

    @property
    def queued(self) -> int:
        """Jobs with a pass running, waiting or due for a retry."""
        return len(self._active | self._retries.keys())

    def quiet_for(self, key: Key) -> float:
        """Seconds since the job's last pass that went through (infinite when it never had one)."""
        last = self._last_ok.get(key)
        return float("inf") if last is None else self._clock() - last

    async def reconcile(
        self,
        namespace: str,
        name: str,
        *,
        trigger: str,
        owner_uid: str | None = None,
        body: dict[str, Any] | None = None,
        rayjob: dict[str, Any] | None = None,
    ) -> None:
        """Bring one job forward (Trigger says what `owner_uid`, `body` and `rayjob` are for).

        Returns when the job's passes are done, or at once when the trigger was folded into the
        pass of another trigger for the same job. A pass that fails is scheduled again with backoff.
        """
        key = (namespace, name)
        if not self.leading():
            if self._has_led:
                # A lapse (a renewal that came late): this replica leads again or exits, and
                # either way the work must not wait for the resync.
                self._retry_later(key, "not_leading")
            return  # a standby replica: on taking over it visits every job (wiring.take_over)
        self._has_led = True
        wanted = Trigger(trigger, owner_uid, body, rayjob)
        if key in self._active:
            self._next[key] = self._next[key].folded(wanted) if key in self._next else wanted
            self.reconciler.metrics.requeued.labels("coalesced").inc()
            return
        self._active.add(key)
        self._next[key] = wanted
        self._gauge()
        try:
            while key in self._next:
                await self._one(key)
        finally:
            self._active.discard(key)
            self._next.pop(key, None)
            self._gauge()

    async def _one(self, key: Key) -> None:
        """The next pass of one job, with every trigger folded into it so far."""
        urgency = self.reconciler.urgency
        pending = self._next[key]
        # A job without status is new: its reconcile leads to a RayJob and goes first, also while
        # it waits for a free pass (other work keeps waiting its turn meanwhile).
        new = pending.body is not None and not pending.body.get("status")
        release = urgency.hold() if new else None
        try:
            # Following a RayJob's status and the resync wait their turn behind new jobs' RayJobs;
            # a user's change to a job does not. Triggers that arrive meanwhile join this pass.
            if pending.trigger != "job":
                await urgency.wait_turn()
            await self._passes.acquire(first=new)
        except BaseException:
            if release is not None:
                release()
            raise
        try:
            await self._pass(key, release)
        finally:
            self._passes.release()

    async def _pass(self, key: Key, release: Callable[[], None] | None) -> None:
        wanted = self._next.pop(key)
        started = self.reconciler.clock()
        outcome = "error"
        try:
            outcome = await self._fresh_pass(key, wanted, release)
        except asyncio.CancelledError:
            raise
        except NotLeaderError:
            outcome = "standby"  # lost the Lease mid-way: a lapse comes back, a loss ends the process
            self._retry_later(key, "not_leading")
        except Exception as error:
            log.warning(
                "reconcile of %s/%s failed: %s",
                *key,
                error,
                extra={"job": key[1], "trigger": wanted.trigger},
            )
            self._retry_later(key, "failed")
        else:
            if outcome == "gone":
                self._forget(key)
            else:
                self._succeeded(key)
        finally:
            if release is not None:
                release()
            elapsed = (self.reconciler.clock() - started).total_seconds()
            self.reconciler.metrics.handler_seconds.labels(wanted.trigger, outcome).observe(elapsed)

    async def _fresh_pass(self, key: Key, wanted: Trigger, release: Callable[[], None] | None) -> str:
        """One pass, started over from a fresh read while the job it read was stale."""
        body, rayjob = wanted.body, wanted.rayjob
        # The resync's visit plans from what the watches delivered; a start-over reads afresh.
        watched = wanted.trigger == "resync"
        for tries in range(1, STALE_READ_ATTEMPTS + 1):
            try:
                return await self.reconciler.once(
                    *key, wanted.owner_uid, body, rayjob, release, trigger=wanted.trigger, watched=watched
                )
            except StaleReadError:
                if tries == STALE_READ_ATTEMPTS:
                    raise
                body, rayjob, watched = None, None, False  # read both afresh
        raise AssertionError("unreachable")

    def _succeeded(self, key: Key) -> None:
        self._failures.pop(key, None)
        self._last_ok[key] = self._clock()
        handle = self._retries.pop(key, None)
        if handle is not None:
            handle.cancel()  # this pass did what the retry was for
            self._gauge()

    def _retry_later(self, key: Key, why: str) -> None:
        """Reconcile the job again after a backoff that grows with each failure in a row."""
        if key in self._retries:
            return
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = self._backoff[min(failures, len(self._backoff) - 1)]
        self.reconciler.metrics.requeued.labels(why).inc()

        def fire() -> None:
            self._retries.pop(key, None)
            task = asyncio.ensure_future(self.reconcile(*key, trigger="retry"))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self._retries[key] = asyncio.get_running_loop().call_later(delay, fire)
        self._gauge()

    def _forget(self, key: Key) -> None:
        """The job is gone: its retries and what the reconciler knew of it."""
        self.reconciler.forget(key)
        self._failures.pop(key, None)
        self._last_ok.pop(key, None)
        handle = self._retries.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _gauge(self) -> None:
        self.reconciler.metrics.queued.set(self.queued)
