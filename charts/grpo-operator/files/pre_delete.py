"""Helm pre-delete hook: delete the release's GRPOJobs and wait until nothing of them is left.

It runs before Helm removes the operator, while the operator and KubeRay still run, so every
finalizer is removed by its owner: a GRPOJob carries none of the operator's, the garbage collector
deletes the job's RayJob, and KubeRay stops the Ray job and removes the RayJob's finalizer. GRPOJobs are deleted in the background (the
default) so the operator never sees a job that waits on its own children.

The hook succeeds when no GRPOJob and no RayJob that a GRPOJob owns is left in the watched
namespaces (a RayJob without a GRPOJob owner is not the garbage collector's to delete, nor ours). Otherwise it fails after GRPO_CLEANUP_TIMEOUT seconds with a list of what is left
and which finalizer holds it, and `helm uninstall` stops with the operator still installed.

Environment: GRPO_CLEANUP_NAMESPACES (comma-separated; empty for every namespace) and
GRPO_CLEANUP_TIMEOUT (seconds). It needs only lightkube, which the operator image carries.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

JOB_LABEL = "grpo.dev/job"
POLL_SECONDS = 3.0


@dataclass(frozen=True)
class Leftover:
    """An object that is still there, and what holds it."""

    kind: str
    namespace: str
    name: str
    finalizers: tuple[str, ...]
    deleting: bool

    def describe(self) -> str:
        state = "being deleted" if self.deleting else "not deleted yet"
        held = f", held by finalizers {', '.join(self.finalizers)}" if self.finalizers else ""
        return f"{self.kind} {self.namespace}/{self.name}: {state}{held}"


def namespaces_from(env: Mapping[str, str]) -> list[str] | None:
    """The namespaces to clean; None means every namespace."""
    names = [ns.strip() for ns in env.get("GRPO_CLEANUP_NAMESPACES", "").split(",") if ns.strip()]
    return sorted(set(names)) or None


def owned_by_a_grpojob(obj: Mapping[str, Any]) -> bool:
    """A child the garbage collector deletes once its GRPOJob is gone."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(
        o.get("kind") == "GRPOJob" and str(o.get("apiVersion", "")).startswith("grpo.dev/") for o in owners
    )


def leftover(kind: str, obj: Mapping[str, Any]) -> Leftover:
    meta = obj.get("metadata") or {}
    return Leftover(
        kind=kind,
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        finalizers=tuple(meta.get("finalizers") or ()),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def report(left: Iterable[Leftover], timeout: float) -> str:
    """What a person reads in the hook's log when it gives up."""
    lines = [f"grpo-operator cleanup: objects still present after {timeout:.0f}s:"]
    lines += [f"  {item.describe()}" for item in left]
    lines += [
        "GRPOJobs are released by the operator: check that its pod is running and read its log.",
        "RayJobs are released by KubeRay (finalizer ray.io/rayjob-finalizer): check that the KubeRay",
        "operator is running. Only when it is gone for good, remove the finalizer by hand:",
        '  kubectl patch rayjob <name> -n <namespace> --type=merge -p \'{"metadata":{"finalizers":null}}\'',
        "Then run `helm uninstall` again (or with --no-hooks once nothing is left).",
    ]
    return "\n".join(lines)


def main() -> int:
    """Delete, then wait. Exercised by the end-to-end tests against a real cluster."""
    from lightkube import Client
    from lightkube.core.exceptions import ApiError
    from lightkube.generic_resource import create_namespaced_resource

    grpojobs = create_namespaced_resource("grpo.dev", "v1alpha1", "GRPOJob", "grpojobs")
    rayjobs = create_namespaced_resource("ray.io", "v1", "RayJob", "rayjobs")
    scopes = namespaces_from(os.environ) or ["*"]
    timeout = float(os.environ.get("GRPO_CLEANUP_TIMEOUT", "240"))
    client = Client()

    def listed(resource: Any, kind: str, **selector: Any) -> list[Leftover]:
        found: list[Leftover] = []
        for namespace in scopes:
            try:
                objects = [o.to_dict() for o in client.list(resource, namespace=namespace, **selector)]
                found += [leftover(kind, o) for o in objects if kind == "GRPOJob" or owned_by_a_grpojob(o)]
            except ApiError as error:
                if getattr(error.status, "code", None) != 404:  # 404: that CRD is not installed
                    raise
        return found

    jobs = listed(grpojobs, "GRPOJob")
    where = "every namespace" if scopes == ["*"] else ", ".join(scopes)
    print(f"grpo-operator cleanup: deleting {len(jobs)} GRPOJob(s) in {where}", flush=True)
    for job in jobs:
        if not job.deleting:
            try:
                client.delete(grpojobs, job.name, namespace=job.namespace)
            except ApiError as error:
                if getattr(error.status, "code", None) != 404:
                    raise
            print(f"  deleted GRPOJob {job.namespace}/{job.name}", flush=True)

    deadline = time.monotonic() + timeout
    left: list[Leftover] = jobs
    while True:
        try:
            left = listed(grpojobs, "GRPOJob") + listed(rayjobs, "RayJob", labels={JOB_LABEL: None})
        except ApiError as error:  # a restarting API server is no reason to give up early
            print(f"grpo-operator cleanup: listing failed, retrying: {error}", flush=True)
        else:
            if not left:
                print("grpo-operator cleanup: no GRPOJob or RayJob left", flush=True)
                return 0
        if time.monotonic() >= deadline:
            print(report(left, timeout), file=sys.stderr, flush=True)
            return 1
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    sys.exit(main())
