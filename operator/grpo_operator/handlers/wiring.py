"""Registers the operator's kopf handlers on a registry, with settings bound in (no globals)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from ..api.v1alpha1 import GROUP, KIND, PLURAL, VERSION
from ..build.meta import JOB_LABEL
from ..config import Settings
from .reconcile import Reconciler
from .resync import resync_forever

log = logging.getLogger(__name__)
# The RayJob status fields the lifecycle reads (status/derive.py).
_WATCHED_STATUS = ("jobDeploymentStatus", "jobStatus", "reason", "message", "rayClusterName", "dashboardURL")


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


def register(registry: kopf.OperatorRegistry, settings: Settings, reconciler: Reconciler) -> None:
    """Attach every handler to `registry`."""
    seen: dict[tuple[str, str], tuple[str, ...]] = {}

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        # Handler progress and diff bases in annotations under our own prefix; the status
        # subresource is a contract with users and the trainer, not kopf's scratch space.
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=GROUP, key="last-handled-configuration"
        )
        settings.posting.level = logging.WARNING
        # We name our resources explicitly; scanning would need cluster-wide CRD and namespace
        # reads that least-privilege RBAC does not grant.
        settings.scanning.disabled = True
        settings.watching.server_timeout = 300
        settings.networking.error_backoffs = [1, 2, 5, 10]

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # The pod's service account inside a cluster, otherwise $KUBECONFIG: the same sources
        # lightkube uses for our own calls, without another client library just for kopf.
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.startup(registry=registry)
    async def start_resync(memo: kopf.Memo, **_: Any) -> None:
        # One loop for the whole operator instead of a kopf timer per job: timers make kopf put a
        # finalizer on every GRPOJob, which would hold deletions hostage to the operator.
        memo["resync"] = asyncio.create_task(resync_forever(reconciler, settings))

    @kopf.on.cleanup(registry=registry)
    async def close(memo: kopf.Memo, **_: Any) -> None:
        task = memo.get("resync")
        if task is not None:
            task.cancel()
        await reconciler.api.close()

    async def reconcile(body: kopf.Body, trigger: str) -> None:
        await reconciler.reconcile(body.metadata["namespace"], body.metadata["name"], trigger=trigger)

    @kopf.on.create(GROUP, VERSION, PLURAL, id="create", registry=registry)
    async def on_create(body: kopf.Body, **_: Any) -> None:
        # A job without status is as fresh as a read would be: hand it over and save the round trip.
        await reconciler.reconcile(
            body.metadata["namespace"], body.metadata["name"], trigger="create", body=dict(body)
        )

    @kopf.on.update(
        GROUP,
        VERSION,
        PLURAL,
        id="update",
        field="spec",
        registry=registry,
    )
    async def on_update(body: kopf.Body, **_: Any) -> None:
        await reconcile(body, "update")

    @kopf.on.resume(GROUP, VERSION, PLURAL, id="resume", registry=registry)
    async def on_resume(body: kopf.Body, **_: Any) -> None:
        await reconcile(body, "resume")

    @kopf.on.event(
        "ray.io", "v1", "rayjobs", labels={JOB_LABEL: kopf.PRESENT}, id="rayjob", registry=registry
    )
    async def on_rayjob(body: kopf.Body, type: str | None, **_: Any) -> None:
        owner = _owner(body)
        if owner is None:
            return
        key = (body.metadata["namespace"], body.metadata["name"])
        rayjob: dict[str, Any] | None = None
        if type == "DELETED":
            seen.pop(key, None)
        else:
            # KubeRay rewrites its status often; only a change the lifecycle reads is worth a reconcile.
            status = dict(body.get("status") or {})
            fingerprint = tuple(str(status.get(k)) for k in _WATCHED_STATUS)
            if seen.get(key) == fingerprint:
                return
            seen[key] = fingerprint
            rayjob = {"metadata": dict(body.metadata), "spec": dict(body.spec), "status": status}
        name, uid = owner
        await reconciler.reconcile(key[0], name, trigger="rayjob", owner_uid=uid, rayjob=rayjob)
