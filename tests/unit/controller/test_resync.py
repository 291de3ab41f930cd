"""Which quiet jobs the rolling resync visits (handlers/resync.py): those nothing brought forward
for a period, except Pending ones while their RayJob's status moves, and never fewer than one
visit per CHILDREN_CHECK_PERIODS periods.

The pass is a stand-in (tests/unit/controller/test_queue.py's); tests/integration/
test_reads_per_job.py runs the real one and counts its reads against the API server.
"""

from __future__ import annotations

from grpo_operator.config import Settings
from grpo_operator.handlers.queue import JobQueue
from grpo_operator.handlers.reconcile import CHILDREN_CHECK_PERIODS
from grpo_operator.handlers.resync import resync_once
from grpo_operator.handlers.watched import Watched
from support.clock import ManualClock

from .test_queue import Passes

PERIOD = 60.0
MOVING = ("team-a", "moving")
STILL = ("team-a", "still")


class Reconciler(Passes):
    """The stand-in pass, with what the resync reads of a reconciler."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.unfinished = {MOVING, STILL}
        self.due_often: set[tuple[str, str]] = set()
        self.watched = Watched(clock)


async def _visited(queue: JobQueue, reconciler: Reconciler) -> set[tuple[str, str]]:
    before = len(reconciler.calls)
    await resync_once(queue, Settings(resync_seconds=PERIOD), full=False)
    return {c["key"] for c in reconciler.calls[before:]}


async def test_a_job_whose_rayjob_moves_is_not_visited_until_children_are_due() -> None:
    clock = ManualClock()
    reconciler = Reconciler(clock)
    queue = JobQueue(reconciler, clock=clock)  # type: ignore[arg-type]
    for key in (MOVING, STILL):
        await queue.reconcile(*key, trigger="job")
        reconciler.watched.saw_job(key, {"metadata": {"name": key[1]}, "status": {"phase": "Pending"}})
    rayjob = {"metadata": {"name": "moving-1"}, "spec": {}, "status": {}}
    for period in range(1, CHILDREN_CHECK_PERIODS + 1):
        # KubeRay writes the moving job's RayJob status within every period; nothing else happens.
        clock.now += PERIOD / 2
        rayjob = {**rayjob, "status": {"rayClusterStatus": {"readyWorkerReplicas": period}}}
        reconciler.watched.saw_rayjob(("team-a", "moving-1"), rayjob, MOVING)
        clock.now += PERIOD / 2
        visited = await _visited(queue, reconciler)
        if period < CHILDREN_CHECK_PERIODS:
            assert visited == {STILL}, period
        else:
            # As long without a pass as children may go unread: visited, moving or not.
            assert visited == {MOVING, STILL}, period
    assert all(c["watched"] for c in reconciler.calls if c["trigger"] == "resync")
