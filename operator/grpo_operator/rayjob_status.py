"""The KubeRay RayJob status fields the operator reads, named once.

The lifecycle (lifecycle.py) decides from these fields alone, and the RayJob watch (handlers/
wiring.py) drops events that change none of them, so the two can never drift apart: a field the
lifecycle starts reading is one the watch starts reacting to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# RayJob status key -> RayJobStatus attribute (KubeRay v1.x).
FIELDS = {
    "jobDeploymentStatus": "deployment",
    "jobStatus": "job",
    "reason": "reason",
    "message": "message",
    "rayClusterName": "cluster_name",
    "dashboardURL": "dashboard_url",
}
DEPLOYMENT_FAILED = frozenset({"Failed", "ValidationFailed"})
"""jobDeploymentStatus values that mean the attempt has ended badly."""
FINISHED_JOB = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
"""jobStatus values of a Ray job that has ended (KubeRay then tears its cluster down)."""


@dataclass(frozen=True)
class RayJobStatus:
    """What a RayJob says about its attempt."""

    deployment: str = ""
    """jobDeploymentStatus: KubeRay's view (Initializing, Running, Complete, Failed, Suspended...)."""
    job: str = ""
    """jobStatus: Ray's view of the entrypoint (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED)."""
    reason: str = ""
    message: str = ""
    """Ray's message; on a failure it carries the entrypoint's exit code and log tail."""
    cluster_name: str = ""
    dashboard_url: str = ""
    suspended: bool = False
    """spec.suspend: Kueue holds the RayJob until it admits it."""

    @classmethod
    def of(cls, rayjob: dict[str, Any]) -> RayJobStatus:
        status = rayjob.get("status") or {}
        values = {attr: str(status.get(key) or "") for key, attr in FIELDS.items()}
        return cls(**values, suspended=bool((rayjob.get("spec") or {}).get("suspend")))


def fingerprint(status: dict[str, Any]) -> tuple[str, ...]:
    """The watched fields of a RayJob's status: events that leave it unchanged need no reconcile."""
    return tuple(str(status.get(key)) for key in FIELDS)
