"""What the operator's two watches last delivered: each GRPOJob's newest body, each RayJob's
status, and when a job's RayJob status last moved.

The resync (handlers/resync.py) visits quiet jobs as a safety net; like controller-runtime's
periodic resync from its informer cache, such a visit plans from these bodies instead of reading
the job and its RayJob again from the API server. That is safe because every status write is
preconditioned on the resourceVersion the plan was made from (reconcile.py): a body older than
the job's newest is refused on write and the pass starts over from a fresh read. A visit to a
Pending job whose RayJob status moved within the period is not needed at all: KubeRay is
bringing its cluster up, and the watch brings its next change. (A Running job is visited all the
same: its stall check, health.py, runs on the clock.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

Key = tuple[str, str]

UNREAD_METADATA = ("managedFields",)
"""Metadata no pass reads, dropped from every kept body: the server-side apply bookkeeping is as
large as the object's spec (a field set per manager), and with 1,000 jobs it was most of what the
operator kept (docs/benchmarks/operator.md)."""
UNREAD_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
"""`kubectl apply`'s copy of the manifest as applied: the whole spec again, as a string."""


def slim_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of `metadata` without what no pass reads (the kept bodies' largest part)."""
    kept = {key: value for key, value in (metadata or {}).items() if key not in UNREAD_METADATA}
    annotations = kept.get("annotations")
    if annotations and any(name in annotations for name in UNREAD_ANNOTATIONS):
        kept["annotations"] = {k: v for k, v in annotations.items() if k not in UNREAD_ANNOTATIONS}
    return kept


class Watched:
    """The newest GRPOJob and RayJob bodies seen on the watches, by (namespace, name)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._jobs: dict[Key, dict[str, Any]] = {}
        self._rayjobs: dict[Key, dict[str, Any]] = {}
        self._moved: dict[Key, float] = {}
        """Per GRPOJob: when a watch event last showed its RayJob's status changed."""

    def saw_job(self, key: Key, body: Mapping[str, Any]) -> None:
        self._jobs[key] = {**body, "metadata": slim_metadata(body.get("metadata"))}

    def saw_rayjob(self, key: Key, body: Mapping[str, Any], job: Key) -> None:
        """A RayJob event (`key` the RayJob's, `job` its GRPOJob's). Only what the reconcile reads of
        a RayJob is kept (its metadata, `spec.suspend` and status), not its cluster's spec."""
        status = dict(body.get("status") or {})
        previous = self._rayjobs.get(key)
        if previous is None or previous["status"] != status:
            self._moved[job] = self._clock()
        spec = body.get("spec") or {}
        self._rayjobs[key] = {
            "metadata": slim_metadata(body.get("metadata")),
            "spec": {"suspend": spec.get("suspend")},
            "status": status,
        }

    def job_gone(self, key: Key) -> None:
        self._jobs.pop(key, None)
        self._moved.pop(key, None)

    def rayjob_gone(self, key: Key) -> None:
        self._rayjobs.pop(key, None)

    def job(self, key: Key) -> dict[str, Any] | None:
        """The job's newest body from its watch; a copy whose metadata a pass may move on."""
        body = self._jobs.get(key)
        return None if body is None else {**body, "metadata": dict(body.get("metadata") or {})}

    def rayjob(self, key: Key) -> dict[str, Any] | None:
        return self._rayjobs.get(key)

    def moved_for(self, job: Key) -> float:
        """Seconds since the job's RayJob status last moved (infinite when never seen)."""
        moved = self._moved.get(job)
        return float("inf") if moved is None else self._clock() - moved

    def cluster_coming_up(self, job: Key, within: float) -> bool:
        """The job is Pending (as its newest body says) and its RayJob's status moved within
        `within` seconds: KubeRay is at work on its cluster."""
        body = self._jobs.get(job)
        phase = ((body or {}).get("status") or {}).get("phase")
        return body is not None and phase in (None, "Pending") and self.moved_for(job) < within
