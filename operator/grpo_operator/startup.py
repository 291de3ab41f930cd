"""Why an attempt's Ray cluster has not started, in the pods' own words.

While KubeRay brings a cluster up, the RayJob says only "Initializing". What keeps it there is
written elsewhere: in the pods' status (the scheduler's `PodScheduled=False, Unschedulable`, a
container waiting in `ImagePullBackOff` or `CreateContainerConfigError`) and in Warning Events (the
kubelet's `FailedMount`, KubeRay's `FailedToCreateHeadPod` when Pod Security refuses the pod).
`trouble` reads both into one reason and message for the job's `Running` condition and a Warning
Event; the lifecycle fails the attempt with it at `runPolicy.startDeadlineSeconds`. Pure: the
reconciler lists the attempt's pods and the namespace's Warning Events.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .api.timestamps import parse_rfc3339
from .api.v1alpha1.status import cut, reason

WAITING_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "CrashLoopBackOff",
        "RunContainerError",
    }
)
"""Container waiting reasons that will not pass by themselves (ContainerCreating and
PodInitializing do)."""
EVENT_REASONS = frozenset(
    {
        "FailedMount",
        "FailedAttachVolume",
        "FailedCreatePodSandBox",
        "FailedToCreateHeadPod",
        "FailedToCreateWorkerPod",
        "FailedCreate",
        "Failed",
        "BackOff",
    }
)
"""Warning Events that say why a pod is not running, or was never made. (The scheduler's own
verdict is read from the pod's PodScheduled condition, which, unlike an Event, is current.)"""
MESSAGE_LIMIT = 600
SCHEDULING_GRACE_S = 20.0
"""An unschedulable pod younger than this is the scheduler's to retry, not a reason: a head that
must follow its worker onto one node is tried before the worker is placed, on every normal start."""


@dataclass(frozen=True)
class Trouble:
    reason: str
    """One CamelCase word: Unschedulable, ImagePullBackOff, FailedMount, PodSecurity..."""
    message: str


def trouble(
    pods: list[dict[str, Any]], events: list[dict[str, Any]], owners: frozenset[str], now: datetime
) -> Trouble | None:
    """What keeps the attempt's pods from running, most telling first; None when nothing does.

    `pods`: the attempt's pods; `events`: Warning Events of the namespace (those about these pods,
    or about `owners` — the attempt's RayJob and RayCluster — are read)."""
    found: list[Trouble] = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        found += _pod_trouble(pod, now)
    # Events outlive what they tell: only those about pods that still do not run count, and the
    # RayJob's and RayCluster's (a pod KubeRay could not make) only while no pod exists at all.
    names = {p["metadata"]["name"] for p in pods if (p.get("status") or {}).get("phase") != "Running"}
    if not pods:
        names |= set(owners)
    seen: set[tuple[str, str]] = set()
    for event in sorted(
        events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""), reverse=True
    ):
        about = (event.get("involvedObject") or {}).get("name", "")
        why = str(event.get("reason") or "")
        if about not in names or why not in EVENT_REASONS or (about, why) in seen:
            continue
        seen.add((about, why))
        message = " ".join(str(event.get("message") or "").split())
        if "violates PodSecurity" in message:
            why = "PodSecurity"
        found.append(Trouble(reason(why), f"{about}: {message}"))
    if not found:
        return None
    first = found[0]
    more = [t.message for t in found[1:3] if t.message != first.message]
    message = "; ".join([first.message, *more])
    return Trouble(first.reason, cut(message, MESSAGE_LIMIT))


def grace_ends(pods: list[dict[str, Any]], now: datetime) -> datetime | None:
    """When the first of the pods that the scheduler is still within its grace for (unschedulable
    for less than SCHEDULING_GRACE_S) leaves it; None when none is. The verdict can change then
    with nothing else moving, so the next look is due by that time (handlers/startup_checks.py)."""
    ends = [
        since + timedelta(seconds=SCHEDULING_GRACE_S)
        for pod in pods
        for cond in (pod.get("status") or {}).get("conditions") or []
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False"
        for since in [parse_rfc3339(cond.get("lastTransitionTime"))]
        if since is not None and (now - since).total_seconds() < SCHEDULING_GRACE_S
    ]
    return min(ends, default=None)


def _pod_trouble(pod: dict[str, Any], now: datetime) -> list[Trouble]:
    name = pod["metadata"]["name"]
    status = pod.get("status") or {}
    out: list[Trouble] = []
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            since = parse_rfc3339(cond.get("lastTransitionTime"))
            if since is not None and (now - since).total_seconds() < SCHEDULING_GRACE_S:
                continue
            why = str(cond.get("reason") or "Unschedulable")
            out.append(
                Trouble(reason(why), f"{name} is {why.lower()}: {cond.get('message') or 'no node fits'}")
            )
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        why = str(waiting.get("reason") or "")
        if why in WAITING_REASONS:
            detail = " ".join(str(waiting.get("message") or "").split())
            out.append(
                Trouble(
                    why, f"{name} container {container.get('name')}: {why}{': ' + detail if detail else ''}"
                )
            )
    return out
