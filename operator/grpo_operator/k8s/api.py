"""The REST verbs: server-side apply under one field manager, and the few reads, patches and
creates the reconciler needs. Everything the operator sends to Kubernetes goes through `Api`.

Credentials come from `credentials.py`, the proxy and the in-flight limit from `transport.py`;
requests go over aiohttp, the HTTP client kopf already runs on. In a burst of new
jobs the operator shares the CPU with the API server, and on the burst benchmark a request cost
the operator about 0.45 ms of CPU over aiohttp against 1.3 ms through lightkube's client
(docs/benchmarks/operator.md).
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable
from typing import Any

import aiohttp

from ..api.timestamps import rfc3339
from ..api.v1alpha1 import GROUP, KIND, PLURAL, VERSION
from .credentials import Credentials
from .transport import (
    MAX_IN_FLIGHT,
    RETRY_STATUSES,
    TIMEOUT_SECONDS,
    RetryPolicy,
    Slots,
    retry_after_seconds,
)

log = logging.getLogger(__name__)

# (apiVersion, kind) -> plural, for every kind the operator writes. All are namespaced.
_PLURALS: dict[tuple[str, str], str] = {
    (f"{GROUP}/{VERSION}", KIND): PLURAL,
    ("ray.io/v1", "RayJob"): "rayjobs",
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "PersistentVolumeClaim"): "persistentvolumeclaims",
    ("v1", "Secret"): "secrets",
    ("v1", "ServiceAccount"): "serviceaccounts",
    ("v1", "Event"): "events",
    ("rbac.authorization.k8s.io/v1", "Role"): "roles",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rolebindings",
    ("networking.k8s.io/v1", "NetworkPolicy"): "networkpolicies",
}


def collection_path(api_version: str, kind: str, namespace: str) -> str:
    """`/api/v1/namespaces/ns/configmaps`, `/apis/ray.io/v1/namespaces/ns/rayjobs`, ..."""
    prefix = "/api" if "/" not in api_version else "/apis"
    return f"{prefix}/{api_version}/namespaces/{namespace}/{_PLURALS[(api_version, kind)]}"


def _object_path(manifest: dict[str, Any]) -> str:
    meta = manifest["metadata"]
    return f"{collection_path(manifest['apiVersion'], manifest['kind'], meta['namespace'])}/{meta['name']}"


_VERBS = {"POST": "create", "PUT": "update", "DELETE": "delete"}
APPLY_PATCH = "application/apply-patch+yaml"


def request_kind(method: str, path: str, content_type: str = "application/json") -> tuple[str, str]:
    """(verb, resource) of a request as the API server counts it: `get`/`list`, `create`,
    `apply`/`patch`, `update`, `delete`; `configmaps`, `grpojobs/status`, ...

    Bounded labels for the operator's request counter: object names and namespaces are dropped.
    """
    parts = path.split("?", 1)[0].strip("/").split("/")
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] if rest else ""
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    if method == "GET":
        return ("get" if len(rest) >= 2 else "list"), resource
    if method == "PATCH":
        return ("apply" if content_type == APPLY_PATCH else "patch"), resource
    return _VERBS.get(method, method.lower()), resource


_JOBS = (f"{GROUP}/{VERSION}", KIND)
_RAYJOBS = ("ray.io/v1", "RayJob")
KUBERAY_STOP_FINALIZER = "ray.io/rayjob-finalizer"
"""KubeRay's finalizer on a RayJob: it stops the Ray job (Ray's 3-second SIGTERM, then SIGKILL)
before the RayJob goes."""
STOP_RELEASE_TRIES = 3
"""Releases of KubeRay's finalizer before a delete that saves first deletes the RayJob as it is."""


KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
"""Kueue's API versions that serve WorkloadPriorityClass, newest first (Kueue 0.15 serves both)."""


class ApiError(Exception):
    """A request the API server answered with an error status."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


class NotLeaderError(Exception):
    """A write this replica may not send: it does not hold the leader Lease (k8s/leader.py)."""


class Api:
    """The operator's view of the API server."""

    def __init__(
        self,
        credentials: Credentials,
        field_manager: str,
        max_in_flight: int = MAX_IN_FLIGHT,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._credentials = credentials
        self._manager = field_manager
        self._max_in_flight = max_in_flight
        self._slots = Slots(max_in_flight)
        self._session: aiohttp.ClientSession | None = None
        self.retry = retry or RetryPolicy()
        self.guard: Callable[[], bool] | None = None
        """When set, writes are sent only while it returns True (the leader check)."""
        self.observer: Callable[[str, str, int], None] | None = None
        """When set, called with (verb, resource, status code; 0 for no answer) for every try of
        every request: the operator's request counter (metrics.Metrics.count_request)."""

    @classmethod
    def from_environment(cls, field_manager: str, max_in_flight: int = MAX_IN_FLIGHT) -> Api:
        """In-cluster credentials inside a pod, otherwise $KUBECONFIG / ~/.kube/config."""
        return cls(Credentials.from_environment(), field_manager, max_in_flight)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        # Made on first use, inside the running event loop that owns it.
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    ssl=self._credentials.ssl if self._credentials.ssl is not None else True,
                    limit=self._max_in_flight,
                ),
                timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS),
            )
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        guarded: bool = True,
        missing_ok: bool = False,
        first: bool = False,
    ) -> dict[str, Any] | None:
        """A plain JSON request (the Lease's); `missing_ok`: None for a 404; `first`: ahead of the
        requests waiting for a slot."""
        try:
            return await self._request(method, path, body=body, guarded=guarded, first=first)
        except ApiError as error:
            if missing_ok and error.code == 404:
                return None
            raise

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | list[Any] | None = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
        first: bool = False,
        guarded: bool = True,
    ) -> dict[str, Any]:
        data = json.dumps(body) if body is not None else None
        kind = request_kind(method, path, content_type) if self.observer is not None else None
        refreshed = False
        retry = 0
        waited = 0.0
        while True:
            headers = {"Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = content_type
            if self._credentials.authorization:
                headers["Authorization"] = self._credentials.authorization
            # The server URL may carry a path (an API proxy's), so paths are appended, not joined.
            url = self._credentials.server.rstrip("/") + path
            retry_after: float | None = None
            failure: Exception
            # Checked before every try: a replica that lost the Lease while waiting sends nothing.
            if guarded and method != "GET" and self.guard is not None and not self.guard():
                raise NotLeaderError(f"not the leader: {method} {path} not sent")
            await self._slots.acquire(first=first)
            try:
                async with self._http().request(
                    method, url, data=data, params=params, headers=headers, proxy=self._credentials.proxy
                ) as response:
                    status, raw = response.status, await response.read()
                    retry_after = retry_after_seconds(response.headers.get("Retry-After"))
            except (aiohttp.ClientError, TimeoutError) as error:
                if kind is not None and self.observer is not None:
                    self.observer(*kind, 0)
                # No answer (refused, reset, timed out): the request may or may not have been applied.
                # Every verb here is safe to repeat: applies and merge patches are idempotent, a
                # repeated create answers 409, a repeated delete 404.
                failure = error
            else:
                if kind is not None and self.observer is not None:
                    self.observer(*kind, status)
                if status == 401 and not refreshed:
                    self._credentials.refresh()  # a rotated token: read it again, once
                    refreshed = True
                    continue
                if status < 400:
                    return json.loads(raw) if raw else {}
                failure = _error(status, raw)
                if status not in RETRY_STATUSES:
                    raise failure
            finally:
                self._slots.release()
            retry += 1
            wait = self.retry.delay(retry, retry_after)
            if retry >= self.retry.attempts or waited + wait > self.retry.budget:
                raise failure
            log.info(
                "%s %s failed (%s); retry %d in %.2f s",
                method,
                path,
                failure,
                retry,
                wait,
            )
            waited += wait
            await self.retry.sleep(wait)

    async def _get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return await self._request("GET", path)
        except ApiError as error:
            if error.code == 404:
                return None
            raise

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get_or_none(f"{collection_path(*_JOBS, namespace)}/{name}")

    async def list_jobs(self, namespaces: list[str]) -> list[dict[str, Any]]:
        """Every GRPOJob in the watched namespaces (all namespaces when the list is empty)."""
        paths = (
            [collection_path(*_JOBS, ns) for ns in namespaces]
            if namespaces
            else [f"/apis/{GROUP}/{VERSION}/{PLURAL}"]
        )
        out: list[dict[str, Any]] = []
        for path in paths:
            params = {"limit": "500"}
            while True:
                page = await self._request("GET", path, params=params)
                out.extend(page.get("items") or [])
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break
                params = {"limit": "500", "continue": token}
        return out

    async def attempt_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        """The pods matching a label selector (an attempt's: at most a few hundred)."""
        page = await self._request(
            "GET", f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": selector, "limit": "500"}
        )
        return list(page.get("items") or [])

    async def warning_events(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's newest Warning Events (what says why a pod does not start)."""
        page = await self._request(
            "GET",
            f"/api/v1/namespaces/{namespace}/events",
            params={"fieldSelector": "type=Warning", "limit": "500"},
        )
        return list(page.get("items") or [])

    async def get_rayjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get_or_none(f"{collection_path(*_RAYJOBS, namespace)}/{name}")

    async def claim_access_modes(self, namespace: str, name: str) -> list[str]:
        """Access modes of an existing claim; empty when it does not exist."""
        claim = await self._get_or_none(f"{collection_path('v1', 'PersistentVolumeClaim', namespace)}/{name}")
        return list(((claim or {}).get("spec") or {}).get("accessModes") or [])

    async def priority_class_exists(self, name: str) -> bool | None:
        """Whether a PriorityClass exists; None when the operator may not look (namespaced RBAC)."""
        try:
            found = await self._get_or_none(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
        except ApiError as error:
            if error.code == 403:
                return None
            raise
        return found is not None

    async def workload_priority_class_exists(self, name: str) -> bool | None:
        """Whether a Kueue WorkloadPriorityClass exists; None when it cannot be told.

        None when the operator may not look (namespaced RBAC), and when no version of Kueue's API
        that we know is served: Kueue is not installed, so no controller reads the job's
        priority label, and a queued RayJob waits on Kueue whatever its class; refusing the job
        for a class nobody would look up would be a failure of our own making. The served
        version is asked first (discovery, open to every caller), so the object's 404 means the
        class is missing and not that Kueue's resource is.
        """
        for version in KUEUE_VERSIONS:
            group = f"/apis/{KUEUE_GROUP}/{version}"
            if await self._get_or_none(group) is None:
                continue  # this version is not served (Kueue absent, or older or newer)
            try:
                found = await self._get_or_none(f"{group}/workloadpriorityclasses/{name}")
            except ApiError as error:
                if error.code == 403:
                    return None
                raise
            return found is not None
        return None

    async def apply(self, manifest: dict[str, Any], *, first: bool = False) -> None:
        """Server-side apply: idempotent, and conflicts with other managers are ours to win.
        `first` puts the request ahead of the others waiting for a slot."""
        await self._request(
            "PATCH",
            _object_path(manifest),
            body=manifest,
            content_type=APPLY_PATCH,
            params={"fieldManager": self._manager, "force": "true"},
            first=first,
        )

    async def create(self, manifest: dict[str, Any], *, first: bool = False) -> None:
        """Create an object; ApiError 409 when one of its name exists (whoever made it)."""
        meta = manifest["metadata"]
        await self._request(
            "POST",
            collection_path(manifest["apiVersion"], manifest["kind"], meta["namespace"]),
            body=manifest,
            params={"fieldManager": self._manager},
            first=first,
        )

    async def read(self, manifest: dict[str, Any]) -> dict[str, Any] | None:
        """The object of a manifest's kind, namespace and name as stored; None when there is none."""
        return await self._get_or_none(_object_path(manifest))

    async def delete_rayjob(self, namespace: str, name: str, *, keep_driver: bool = False) -> None:
        """Delete an attempt's RayJob and, through it, its Ray cluster.

        `keep_driver` (a planned stop that saves first): without KubeRay's stop of the Ray job.
        KubeRay answers a RayJob being deleted by stopping its Ray job, which SIGTERMs the driver
        and everything it started and SIGKILLs them 3 s later (Ray's RAY_JOB_STOP_WAIT_TIME_S),
        mid-step and mid-save. Its finalizer is released first and the RayJob deleted in the
        background, so it is gone before KubeRay looks; its Ray cluster's pods then stop through
        their preStop hook and grace period (children/rayjob.py), which let the trainer save.
        """
        path = f"{collection_path(*_RAYJOBS, namespace)}/{name}"
        try:
            if keep_driver:
                await self._delete_without_stop(path)
                return
            await self._request(
                "DELETE",
                path,
                body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"},
            )
        except ApiError as error:
            if error.code != 404:
                raise

    async def _delete_without_stop(self, path: str) -> None:
        """Release KubeRay's finalizer, then delete the version that has none. KubeRay adds its
        finalizer back to a RayJob it sees without one, so the delete names the version the
        release made (a precondition): when KubeRay got there first, the API server answers 409
        and the release is made again. The last try deletes whatever is there."""
        for tries_left in reversed(range(STOP_RELEASE_TRIES)):
            version = await self._release_stop_finalizer(path)
            options: dict[str, Any] = {
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "propagationPolicy": "Background",
            }
            if version and tries_left:
                options["preconditions"] = {"resourceVersion": version}
            try:
                await self._request("DELETE", path, body=options)
                return
            except ApiError as error:
                if error.code != 409 or not tries_left:
                    raise

    async def _release_stop_finalizer(self, path: str) -> str | None:
        """Remove KubeRay's finalizer; the RayJob's resourceVersion without it (None: it is gone)."""
        stored = await self._get_or_none(path)
        metadata = (stored or {}).get("metadata") or {}
        finalizers = metadata.get("finalizers") or []
        if KUBERAY_STOP_FINALIZER not in finalizers:
            return metadata.get("resourceVersion")
        index = finalizers.index(KUBERAY_STOP_FINALIZER)
        at = f"/metadata/finalizers/{index}"
        released = await self._request(
            "PATCH",
            path,
            body=[{"op": "test", "path": at, "value": KUBERAY_STOP_FINALIZER}, {"op": "remove", "path": at}],
            content_type="application/json-patch+json",
        )
        return (released.get("metadata") or {}).get("resourceVersion")

    async def patch_job_status(
        self, namespace: str, name: str, patch: dict[str, Any], *, resource_version: str | None = None
    ) -> dict[str, Any]:
        """A JSON merge patch of status fields; it leaves fields it does not name alone.

        With `resource_version` it applies only to that version of the job (409 otherwise): a
        status computed from an older read is never written over a newer one. Returns the job as
        stored afterwards.
        """
        body: dict[str, Any] = {"status": patch}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        return await self._request(
            "PATCH",
            f"{collection_path(*_JOBS, namespace)}/{name}/status",
            body=body,
            content_type="application/merge-patch+json",
        )

    async def post_event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """A core/v1 Event on `obj`. Posted by us rather than through kopf, whose poster only works
        inside its own handlers: the resync loop changes phases too. A lost Event is logged, never
        fatal to the reconcile that caused it."""
        meta = obj["metadata"]
        now = rfc3339()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self._manager},
            "reportingComponent": self._manager,
            "reportingInstance": socket.gethostname()[:128],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self._request("POST", collection_path("v1", "Event", meta["namespace"]), body=event)
        except ApiError as error:
            log.warning(
                "could not post event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], error
            )


def _error(code: int, raw: bytes) -> ApiError:
    """An ApiError from a response body, a metav1.Status when the API server wrote it."""
    try:
        status = json.loads(raw)
    except ValueError:
        return ApiError(code, "", raw[:500].decode(errors="replace"))
    if not isinstance(status, dict):
        return ApiError(code, "", str(status)[:500])
    return ApiError(code, str(status.get("reason") or ""), str(status.get("message") or ""))
