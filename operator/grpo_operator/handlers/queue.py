"""The reconcile queue: which pass runs when, apart from what a pass does (handlers/reconcile.py).

As controller-runtime's work queue and kopf's own keep their queueing out of the reconcile: one
pass per job at a time (a per-job lock keeps two triggers for the same job from interleaving),
a failed pass tried again with a backoff that grows with each failure in a row, a pass that read a
stale job started over from a fresh read, and the urgency gate (handlers/urgency.py) that lets
work leading to a new job's RayJob go first. Standby replicas drop every trigger.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from ..k8s import NotLeaderError
from .reconcile import Reconciler, StaleReadError

log = logging.getLogger(__name__)

RETRY_BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Waits before a failed reconcile of a job is tried again (the last one repeats)."""
STALE_READ_ATTEMPTS = 3
"""Passes started over from a fresh read before the reconcile counts as failed."""


class JobQueue:
    """Every trigger's way to a reconcile pass (see the module docstring)."""

    def __init__(self, reconciler: Reconciler, leading: Callable[[], bool] = lambda: True) -> None:
        self.reconciler = reconciler
        self.leading = leading
        """Whether this replica may act (k8s/leader.py); standby replicas drop every trigger."""
        self._locks: defaultdict[tuple[str, str], asyncio.Lock] = defaultdict(asyncio.Lock)
        self._retries: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._failures: dict[tuple[str, str], int] = {}
        self._tasks: set[asyncio.Future[None]] = set()

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
        """Bring one job forward (Reconciler.once says what `owner_uid`, `body` and `rayjob` are for).

        A reconcile that fails is scheduled again with backoff.
        """
        if not self.leading():
            return  # the leader reconciles; on taking over it visits every job (wiring.take_over)
        urgency = self.reconciler.urgency
        # A job without status is new: its reconcile leads to a RayJob and goes first. Following a
        # RayJob's status and the resync pass wait their turn; a user's change to a job does not.
        new_job = body is not None and not body.get("status")
        if trigger != "job":
            await urgency.wait_turn()
        started = self.reconciler.clock()
        outcome = "error"
        key = (namespace, name)
        try:
            async with self._locks[key]:
                # Held only inside the lock, so work queued on this lock is never counted urgent.
                release = urgency.hold() if new_job else None
                try:
                    outcome = await self._fresh_pass(namespace, name, owner_uid, body, rayjob, release)
                finally:
                    if release is not None:
                        release()
            if outcome == "gone":
                self._forget(key)
        except asyncio.CancelledError:
            raise
        except NotLeaderError:
            outcome = "standby"  # lost the Lease mid-way: the new leader takes the job from here
        except Exception as error:
            log.warning(
                "reconcile of %s/%s failed: %s",
                namespace,
                name,
                error,
                extra={"job": name, "trigger": trigger},
            )
            self._retry_later(namespace, name)
        else:
            self._failures.pop(key, None)
        finally:
            elapsed = (self.reconciler.clock() - started).total_seconds()
            self.reconciler.metrics.handler_seconds.labels(trigger, outcome).observe(elapsed)

    async def _fresh_pass(
        self,
        namespace: str,
        name: str,
        owner_uid: str | None,
        body: dict[str, Any] | None,
        rayjob: dict[str, Any] | None,
        release: Callable[[], None] | None,
    ) -> str:
        """One pass, started over from a fresh read while the job it read was stale."""
        for tries in range(1, STALE_READ_ATTEMPTS + 1):
            try:
                return await self.reconciler.once(namespace, name, owner_uid, body, rayjob, release)
            except StaleReadError:
                if tries == STALE_READ_ATTEMPTS:
                    raise
                body, rayjob = None, None  # read both afresh
        raise AssertionError("unreachable")

    def _retry_later(self, namespace: str, name: str) -> None:
        """Reconcile the job again after a backoff that grows with each failure in a row."""
        key = (namespace, name)
        if key in self._retries:
            return
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = RETRY_BACKOFF_SECONDS[min(failures, len(RETRY_BACKOFF_SECONDS) - 1)]

        def fire() -> None:
            self._retries.pop(key, None)
            task = asyncio.ensure_future(self.reconcile(namespace, name, trigger="retry"))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self._retries[key] = asyncio.get_running_loop().call_later(delay, fire)

    def _forget(self, key: tuple[str, str]) -> None:
        """The job is gone: its lock, retries and what the reconciler knew of it."""
        self.reconciler.forget(key)
        self._locks.pop(key, None)
        self._failures.pop(key, None)
        handle = self._retries.pop(key, None)
        if handle is not None:
            handle.cancel()
