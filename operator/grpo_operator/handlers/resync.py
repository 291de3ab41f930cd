"""The safety net: reconcile every unfinished job that nothing else has brought forward for a
period, and jobs with deadlines often.

Events drive the normal path, and the queue (handlers/queue.py) queues again whatever the event
path could not finish; this loop catches what no event announces (a deadline passing, a missed
watch event, an operator that was down while a RayJob changed, a child deleted by hand, a
trainer that stopped reporting). Finished jobs whose Ray cluster is still up are visited as
often as deadlines, until it is gone.

It is a rolling pass, not a sweep: every few seconds it visits the unfinished jobs whose last
pass is a period old. A job a RayJob event brought forward a moment ago is not visited again,
so in a burst the resync adds no work, and with a thousand quiet jobs their visits spread over
the period instead of arriving all at once. Once a period it lists the jobs, to find those no
event ever brought to this process.

What a visit costs does not grow with how long a job waits: a Pending job whose RayJob status
moved within the period (KubeRay bringing its cluster up) is not visited, for up to
CHILDREN_CHECK_PERIODS periods; a visit plans from what the watches last delivered instead of
reading the job and its RayJob again (handlers/watched.py); the children are read again only
every CHILDREN_CHECK_PERIODS periods (reconcile.py); and a starting job's pods are looked at ever
less often while its RayJob stands still, from Warning Events listed once per namespace for all
its jobs (handlers/startup_checks.py).
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..config import Settings
from ..lifecycle import TERMINAL
from .queue import JobQueue
from .reconcile import CHILDREN_CHECK_PERIODS

log = logging.getLogger(__name__)
TICK_SECONDS = 5.0
PARALLEL_RECONCILES = 16


async def resync_once(queue: JobQueue, settings: Settings, *, full: bool, everything: bool = False) -> int:
    """Reconcile the jobs that are due; returns how many.

    Due: unfinished jobs quiet for a period (from memory, plus those a list shows when `full`),
    jobs with a deadline and finished jobs still holding a Ray cluster. `everything` (taking the
    Lease over): every job the list shows, finished ones too, with every child looked for again.
    """
    reconciler = queue.reconciler
    known = reconciler.unfinished
    if full or everything:
        jobs = await reconciler.api.list_jobs(settings.namespaces)
        known = known | {
            (job["metadata"]["namespace"], job["metadata"]["name"])
            for job in jobs
            if everything or (job.get("status") or {}).get("phase") not in TERMINAL
        }
    if everything:
        reconciler.forget_children()
        quiet = known
    else:
        period = settings.resync_seconds
        quiet = {
            key
            for key in known
            if queue.quiet_for(key) >= period
            and (
                not reconciler.watched.cluster_coming_up(key, period)
                or queue.quiet_for(key) >= period * CHILDREN_CHECK_PERIODS
            )
        }
    often = reconciler.due_often - quiet
    gate = asyncio.Semaphore(PARALLEL_RECONCILES)

    async def one(namespace: str, name: str, trigger: str) -> None:
        async with gate:
            try:
                await queue.reconcile(namespace, name, trigger=trigger)
            except Exception:  # one bad job must not stop the others' safety net
                log.exception("resync of %s/%s failed", namespace, name)

    quiet_trigger = "takeover" if everything else "resync"
    await asyncio.gather(
        *(one(ns, name, quiet_trigger) for ns, name in sorted(quiet)),
        *(one(ns, name, "deadline") for ns, name in sorted(often)),
    )
    return len(quiet) + len(often)


async def resync_forever(queue: JobQueue, settings: Settings) -> None:
    last_list = time.monotonic()
    while True:
        await asyncio.sleep(min(TICK_SECONDS, settings.resync_seconds))
        if not queue.leading():
            continue
        full = time.monotonic() - last_list >= settings.resync_seconds
        if full:
            last_list = time.monotonic()
        try:
            await resync_once(queue, settings, full=full)
        except Exception:  # the API may be briefly away; try again next tick
            log.exception("resync pass failed")
