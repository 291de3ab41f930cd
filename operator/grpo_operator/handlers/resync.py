"""The safety net: reconcile every unfinished job now and then, and jobs with deadlines often.

Events drive the normal path; this loop catches what no event announces (a deadline passing,
a missed watch event, an operator that was down while a RayJob changed, a child deleted by
hand). Finished jobs whose Ray cluster is still up are visited as often as deadlines, until it
is gone.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..config import Settings
from ..lifecycle import TERMINAL
from .queue import JobQueue

log = logging.getLogger(__name__)
DEADLINE_TICK_SECONDS = 5.0
PARALLEL_RECONCILES = 16


async def resync_once(queue: JobQueue, settings: Settings, *, full: bool, everything: bool = False) -> int:
    """Reconcile unfinished jobs: all of them when `full`, else those with a deadline.

    The deadline pass does not list: every job has been reconciled since this replica became the
    leader (the `everything` pass), so the reconciler knows which unfinished jobs carry a deadline
    and which finished ones still have a Ray cluster. Listing hundreds of jobs every few seconds
    would compete with the jobs being started.
    """
    reconciler = queue.reconciler
    if full or everything:
        jobs = await reconciler.api.list_jobs(settings.namespaces)
        unfinished = {
            (job["metadata"]["namespace"], job["metadata"]["name"])
            for job in jobs
            if everything or (job.get("status") or {}).get("phase") not in TERMINAL
        }
        due = sorted(unfinished | reconciler.draining)
        # Every child is looked for again: one deleted by hand comes back within a resync period.
        reconciler.forget_children()
    else:
        due = sorted(reconciler.due_often)
    gate = asyncio.Semaphore(PARALLEL_RECONCILES)

    async def one(namespace: str, name: str) -> None:
        async with gate:
            try:
                trigger = "takeover" if everything else "resync" if full else "deadline"
                await queue.reconcile(namespace, name, trigger=trigger)
            except Exception:  # one bad job must not stop the others' safety net
                log.exception("resync of %s/%s failed", namespace, name)

    await asyncio.gather(*(one(ns, name) for ns, name in due))
    return len(due)


async def resync_forever(queue: JobQueue, settings: Settings) -> None:
    last_full = time.monotonic()
    while True:
        await asyncio.sleep(min(DEADLINE_TICK_SECONDS, settings.resync_seconds))
        if not queue.leading():
            continue
        full = time.monotonic() - last_full >= settings.resync_seconds
        if full:
            last_full = time.monotonic()
        try:
            await resync_once(queue, settings, full=full)
        except Exception:  # the API may be briefly away; try again next tick
            log.exception("resync pass failed")
