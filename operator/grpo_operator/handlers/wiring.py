"""Registers the operator's kopf handlers on a registry, with settings bound in (no globals).

Every handler is an event handler feeding one level-triggered reconcile (handlers/queue.py, then
handlers/reconcile.py):
the lifecycle is derived from what exists, not from which kopf callback fired. kopf therefore
keeps no state of its own on our objects — no progress or diff-base annotations, no finalizer —
so a job never waits on the operator to be deleted, and the operator needs no write access to
GRPOJobs beyond their status.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Mapping
from typing import Any

import kopf

from ..api.v1alpha1 import GROUP, KIND, PLURAL, VERSION
from ..api.v1alpha1.status import duration
from ..children.meta import JOB_LABEL
from ..config import Settings
from ..k8s import Leader, proxy_for
from ..rayjob_status import fingerprint
from .queue import JobQueue
from .resync import resync_forever, resync_once

log = logging.getLogger(__name__)
LOST_LEADERSHIP_EXIT = 1


class _NoDiffBase(kopf.DiffBaseStorage):
    """kopf's diff base, switched off.

    kopf deep-copies every object on every watch event to diff it against the last handled
    state; only change handlers (on.create/update/field) read that diff, and we register none.
    In a burst of new jobs that copy was 7% of the operator's CPU.
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> Any:
        return {}

    def fetch(self, *, body: kopf.Body) -> None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: Any) -> None:
        return None


def _owner(body: kopf.Body) -> tuple[str, str] | None:
    """The GRPOJob (name, uid) that controls a RayJob, if one does."""
    for ref in body.metadata.get("ownerReferences", []) or []:
        if (
            ref.get("kind") == KIND
            and ref.get("apiVersion", "").startswith(f"{GROUP}/")
            and ref.get("controller")
        ):
            return ref["name"], ref["uid"]
    return None


def with_proxy(
    info: kopf.ConnectionInfo | None, environ: Mapping[str, str] = os.environ
) -> kopf.ConnectionInfo | None:
    """kopf's connection with the proxy our own API calls use (k8s.proxy_for).

    kopf ignores the proxy variables unless told to trust the environment, and then it cannot
    read CIDR entries in `no_proxy`; its watches and our writes must reach the same server the same way.
    """
    if info is None:
        return None
    return dataclasses.replace(info, proxy_url=proxy_for(info.server, environ))


class SeenEvents:
    """Last seen, per object, of what makes an event worth a reconcile.

    Events that change nothing we read (our own status writes, the trainer's progress reports,
    KubeRay's heartbeats) are dropped here instead of costing API round trips.
    """

    def __init__(self) -> None:
        self._jobs: dict[tuple[str, str], tuple[str, ...]] = {}
        self._rayjobs: dict[tuple[str, str], tuple[str, ...]] = {}

    def job_changed(self, key: tuple[str, str], body: Mapping[str, Any]) -> bool:
        """A new uid, a spec change (generation), a deletion starting, the trainer's health
        verdict flipping (the Healthy condition follows it), or its estimate of the time left
        changing as `status.eta` shows it (a minute at a time, or a new attempt's first)."""
        meta = body["metadata"]
        status = body.get("status") or {}
        health = status.get("health") or {}
        progress = status.get("progress") or {}
        eta = progress.get("etaSeconds")
        wanted = (
            str(meta.get("uid")),
            str(meta.get("generation")),
            str(bool(meta.get("deletionTimestamp"))),
            f"{health.get('attempt')}:{health.get('healthy')}",
            f"{progress.get('attempt')}:{duration(eta) if isinstance(eta, int) else None}",
        )
        return _changed(self._jobs, key, wanted)

    def rayjob_changed(self, key: tuple[str, str], status: Mapping[str, Any]) -> bool:
        return _changed(self._rayjobs, key, fingerprint(dict(status)))

    def job_deleted(self, key: tuple[str, str]) -> None:
        self._jobs.pop(key, None)

    def rayjob_deleted(self, key: tuple[str, str]) -> None:
        self._rayjobs.pop(key, None)


def _changed(
    seen: dict[tuple[str, str], tuple[str, ...]], key: tuple[str, str], now: tuple[str, ...]
) -> bool:
    if seen.get(key) == now:
        return False
    seen[key] = now
    return True


def configure(settings: kopf.OperatorSettings) -> None:
    """kopf's settings for this operator."""
    settings.posting.level = logging.WARNING
    # We name our resources explicitly; scanning would need cluster-wide CRD and namespace
    # reads that least-privilege RBAC does not grant.
    settings.scanning.disabled = True
    settings.persistence.diffbase_storage = _NoDiffBase()
    settings.watching.server_timeout = 300
    settings.networking.error_backoffs = [1, 2, 5, 10]


def register(
    registry: kopf.OperatorRegistry,
    settings: Settings,
    queue: JobQueue,
    leader: Leader | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Attach every handler to `registry`.

    With a `leader`, this replica reconciles only while it holds the Lease: on taking it over it
    visits every job once (what it missed while waiting), and on losing it sets `stop`, which
    ends the operator (a fresh process starts as a candidate again).
    """
    _register_life(registry, settings, queue, leader, stop)
    _register_events(registry, queue)


def _register_life(
    registry: kopf.OperatorRegistry,
    settings: Settings,
    queue: JobQueue,
    leader: Leader | None,
    stop: asyncio.Event | None,
) -> None:
    """Start-up, login and clean-up: the resync loop and the Lease run for the operator's life."""
    ours = settings  # kopf passes its own `settings` to startup handlers

    @kopf.on.startup(registry=registry)
    async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
        configure(settings)
        # One safety-net loop for the whole operator (a kopf timer per job would need a finalizer).
        memo["resync"] = asyncio.create_task(resync_forever(queue, ours))
        if leader is not None:
            memo["leader"] = asyncio.create_task(leader.run(take_over, lose))

    async def take_over() -> None:
        # Events that came while this replica waited were dropped: visit every job, finished
        # ones too (a finished job may still have a Ray cluster to take down).
        try:
            await resync_once(queue, ours, full=True, everything=True)
        except Exception:  # the resync loop catches up on what this pass could not do
            log.exception("the takeover pass failed")

    async def lose() -> None:
        if stop is not None:
            stop.set()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # The pod's service account inside a cluster, otherwise $KUBECONFIG: the same sources
        # lightkube uses for our own calls, without another client library just for kopf.
        return with_proxy(kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs))

    @kopf.on.cleanup(registry=registry)
    async def close(memo: kopf.Memo, **_: Any) -> None:
        for name in ("resync", "leader"):
            task = memo.get(name)
            if task is not None:
                task.cancel()
        if leader is not None:
            await leader.release()
        await queue.reconciler.api.close()


def _register_events(registry: kopf.OperatorRegistry, queue: JobQueue) -> None:
    """The GRPOJob and RayJob events, each worth a reconcile only when something we read changed."""
    seen = SeenEvents()
    metrics = queue.reconciler.metrics
    watched = queue.reconciler.watched

    @kopf.on.event(GROUP, VERSION, PLURAL, id="grpojob", registry=registry)
    async def on_job(body: kopf.Body, type: str | None, **_: Any) -> None:
        key = (body.metadata["namespace"], body.metadata["name"])
        if type == "DELETED":
            seen.job_deleted(key)
            watched.job_gone(key)
            metrics.forget(*key)
            return
        # Every event, the trainer's progress reports included, refreshes the job's gauges and the
        # body the resync plans from.
        metrics.observe(dict(body))
        watched.saw_job(key, body)
        if not seen.job_changed(key, body):
            return
        # A job without status is as fresh as a read would be: hand it over, save the round trip.
        await queue.reconcile(*key, trigger="job", body=dict(body))

    @kopf.on.event(
        "ray.io", "v1", "rayjobs", labels={JOB_LABEL: kopf.PRESENT}, id="rayjob", registry=registry
    )
    async def on_rayjob(body: kopf.Body, type: str | None, **_: Any) -> None:
        owner = _owner(body)
        if owner is None:
            return
        key = (body.metadata["namespace"], body.metadata["name"])
        name, uid = owner
        rayjob: dict[str, Any] | None = None
        if type == "DELETED":
            seen.rayjob_deleted(key)
            watched.rayjob_gone(key)
        else:
            # Every event, also those that change nothing the lifecycle reads: a status that moves
            # is KubeRay at work, and spares the job the resync's visit (handlers/watched.py).
            watched.saw_rayjob(key, body, (key[0], name))
            status = dict(body.get("status") or {})
            if not seen.rayjob_changed(key, status):
                return
            rayjob = {"metadata": dict(body.metadata), "spec": dict(body.spec), "status": status}
        await queue.reconcile(key[0], name, trigger="rayjob", owner_uid=uid, rayjob=rayjob)
