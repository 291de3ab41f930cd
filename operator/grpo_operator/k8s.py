"""Async access to the API server: server-side apply under one field manager, and the few reads
and patches the reconciler needs. Everything that talks to Kubernetes goes through `Api`.
"""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient, codecs
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event, PersistentVolumeClaim
from lightkube.types import CascadeType, PatchType

from .api.v1alpha1 import GROUP, KIND, PLURAL, VERSION

log = logging.getLogger(__name__)
GRPOJobResource = create_namespaced_resource(GROUP, VERSION, KIND, PLURAL)
RayJobResource = create_namespaced_resource("ray.io", "v1", "RayJob", "rayjobs")


def _is(error: ApiError, code: int) -> bool:
    return getattr(error.status, "code", None) == code


class Api:
    """The operator's view of the API server."""

    def __init__(self, client: AsyncClient, field_manager: str) -> None:
        self._client = client
        self._manager = field_manager

    @classmethod
    def from_environment(cls, field_manager: str) -> Api:
        """In-cluster credentials inside a pod, otherwise $KUBECONFIG / ~/.kube/config."""
        return cls(AsyncClient(field_manager=field_manager), field_manager)

    async def close(self) -> None:
        await self._client.close()

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj = await self._client.get(GRPOJobResource, name, namespace=namespace)
        except ApiError as error:
            if _is(error, 404):
                return None
            raise
        return obj.to_dict()

    async def list_jobs(self, namespaces: list[str]) -> list[dict[str, Any]]:
        """Every GRPOJob in the watched namespaces (all namespaces when the list is empty)."""
        out: list[dict[str, Any]] = []
        for namespace in namespaces or ["*"]:
            async for obj in self._client.list(GRPOJobResource, namespace=namespace):
                out.append(obj.to_dict())
        return out

    async def get_rayjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj = await self._client.get(RayJobResource, name, namespace=namespace)
        except ApiError as error:
            if _is(error, 404):
                return None
            raise
        return obj.to_dict()

    async def claim_access_modes(self, namespace: str, name: str) -> list[str]:
        """Access modes of an existing claim; empty when it does not exist."""
        try:
            claim = await self._client.get(PersistentVolumeClaim, name, namespace=namespace)
        except ApiError as error:
            if _is(error, 404):
                return []
            raise
        return list(claim.spec.accessModes or [])

    async def apply(self, manifest: dict[str, Any]) -> None:
        """Server-side apply: idempotent, and conflicts with other managers are ours to win."""
        await self._client.apply(codecs.from_dict(manifest), field_manager=self._manager, force=True)

    async def create_if_absent(self, manifest: dict[str, Any]) -> None:
        """For objects whose spec is immutable once bound (PersistentVolumeClaims)."""
        try:
            await self._client.create(codecs.from_dict(manifest), field_manager=self._manager)
        except ApiError as error:
            if not _is(error, 409):
                raise

    async def delete_rayjob(self, namespace: str, name: str) -> None:
        try:
            await self._client.delete(
                RayJobResource, name, namespace=namespace, cascade=CascadeType.FOREGROUND
            )
        except ApiError as error:
            if not _is(error, 404):
                raise

    async def patch_job_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A JSON merge patch of status fields; it leaves fields it does not name alone."""
        await self._client.patch(
            GRPOJobResource.Status,
            name,
            {"status": patch},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )

    async def post_event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """A core/v1 Event on `obj`. Posted by us rather than through kopf, whose poster only works
        inside its own handlers: the resync loop changes phases too. A lost Event is logged, never
        fatal to the reconcile that caused it."""
        meta = obj["metadata"]
        now = datetime.now(UTC)
        event = Event(
            metadata=ObjectMeta(generateName=f"{meta['name']}.", namespace=meta["namespace"]),
            involvedObject=ObjectReference(
                apiVersion=obj.get("apiVersion"),
                kind=obj.get("kind"),
                name=meta["name"],
                namespace=meta["namespace"],
                uid=meta.get("uid"),
            ),
            type=type_,
            reason=reason,
            message=message[:1024],
            source=EventSource(component=self._manager),
            reportingComponent=self._manager,
            reportingInstance=socket.gethostname()[:128],
            firstTimestamp=now,
            lastTimestamp=now,
            count=1,
        )
        try:
            await self._client.create(event, namespace=meta["namespace"])
        except ApiError as error:
            log.warning(
                "could not post event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], error
            )
