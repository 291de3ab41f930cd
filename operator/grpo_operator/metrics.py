"""Prometheus metrics: the operator's own work, its process, and one set of gauges per live job.

Label cardinality is bounded by what exists: the per-job gauges carry `namespace` and `name`
and are kept for exactly the GRPOJobs the operator watches — a job's series appear with its first
watch event and go with its deletion. Handler metrics carry handler names and outcomes only; the
API request counter carries verbs, resource kinds and status codes, never object names.

The per-job values come from the job objects the watch already delivers (the trainer's progress
and metrics in their status), recorded as they arrive and turned into samples at scrape time, so
a scrape costs no API call and the trainer's reports need no reconcile to show.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .api.v1alpha1.status import current_eta_seconds, latest_response_length

PHASES = ("Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed")
JOB_LABELS = ["namespace", "name"]

# (metric, help, where in status: a path, or a function of it) for the numeric per-job gauges.
_JOB_GAUGES = (
    ("grpo_job_attempt", "The job's current attempt (1 + retries so far)", ("attempt",)),
    ("grpo_job_step", "The newest training step the trainer reported", ("progress", "step")),
    ("grpo_job_total_steps", "Training steps the run will take", ("progress", "totalSteps")),
    ("grpo_job_reward", "Mean reward of the newest step", ("metrics", "reward")),
    ("grpo_job_validation_score", "The newest validation score", ("metrics", "valScore")),
    (
        "grpo_job_response_length",
        "Mean response length of the newest step, in tokens",
        latest_response_length,
    ),
    ("grpo_job_entropy", "Mean token entropy of the newest step", ("metrics", "entropy")),
    ("grpo_job_kl", "KL divergence from the reference policy at the newest step", ("metrics", "kl")),
    ("grpo_job_step_seconds", "Duration of the newest step", ("metrics", "stepSeconds")),
    (
        "grpo_job_startup_seconds",
        "The reporting attempt's start-up: from its trainer's start until its first step began",
        ("progress", "startupSeconds"),
    ),
    (
        "grpo_job_tokens_per_second_per_device",
        "Training throughput of the newest step, tokens per second per device",
        ("metrics", "tokensPerSecondPerDevice"),
    ),
)


@dataclass(frozen=True)
class JobView:
    """What the metrics show of one job: its status as last seen."""

    phase: str | None
    status: dict[str, Any]

    def value(self, path: tuple[str, ...] | Callable[[dict[str, Any]], Any]) -> float | None:
        """The number at `path` in the status, or what a function of the status reads."""
        node: Any = self.status
        if callable(path):
            node = path(node)
        for key in () if callable(path) else path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, bool) or not isinstance(node, int | float) or not math.isfinite(node):
            return None
        return float(node)

    @property
    def healthy(self) -> bool | None:
        for condition in self.status.get("conditions") or []:
            status: object = condition.get("status")
            if condition.get("type") == "Healthy" and status in ("True", "False"):
                return status == "True"
        return None


class _PhaseCollector(Collector):
    """Counts jobs by phase from the operator's last view of each job, at scrape time."""

    def __init__(self, phases: dict[tuple[str, str], str]) -> None:
        self._phases = phases

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("grpo_jobs", "GRPOJobs by phase, as last reconciled", labels=["phase"])
        counts = dict.fromkeys(PHASES, 0)
        for phase in self._phases.values():
            counts[phase] = counts.get(phase, 0) + 1
        for phase, count in counts.items():
            family.add_metric([phase], count)
        yield family


class _JobCollector(Collector):
    """One set of gauges per watched job."""

    def __init__(self, jobs: dict[tuple[str, str], JobView]) -> None:
        self._jobs = jobs

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = dict(self._jobs)  # the watch may add one while a scrape runs
        phase = GaugeMetricFamily(
            "grpo_job_phase", "1 for the job's current phase, 0 for the others", labels=[*JOB_LABELS, "phase"]
        )
        healthy = GaugeMetricFamily(
            "grpo_job_healthy", "1 while the Healthy condition is True, 0 when False", labels=JOB_LABELS
        )
        for (namespace, name), view in sorted(jobs.items()):
            for candidate in PHASES:
                phase.add_metric([namespace, name, candidate], 1.0 if view.phase == candidate else 0.0)
            if view.healthy is not None:
                healthy.add_metric([namespace, name], 1.0 if view.healthy else 0.0)
        info = GaugeMetricFamily(
            "grpo_job_ray_cluster_info",
            "1 for the job's current Ray cluster and its in-cluster dashboard address (for links)",
            labels=[*JOB_LABELS, "ray_cluster", "dashboard_url"],
        )
        for (namespace, name), view in sorted(jobs.items()):
            cluster, url = view.status.get("rayClusterName"), view.status.get("dashboardURL")
            if cluster:
                info.add_metric([namespace, name, str(cluster), str(url or "")], 1.0)
        yield phase
        yield healthy
        yield info
        for metric, help_, path in _JOB_GAUGES:
            family = GaugeMetricFamily(metric, help_, labels=JOB_LABELS)
            for (namespace, name), view in sorted(jobs.items()):
                value = view.value(path)
                if value is not None:
                    family.add_metric([namespace, name], value)
            yield family
        eta = GaugeMetricFamily(
            "grpo_job_eta_seconds",
            "Seconds the trainer expects the run still to take, at the recent pace (while it trains)",
            labels=JOB_LABELS,
        )
        for (namespace, name), view in sorted(jobs.items()):
            seconds = current_eta_seconds(view.status)
            if seconds is not None:
                eta.add_metric([namespace, name], float(seconds))
        yield eta


class Metrics:
    """The operator's metrics, on their own registry so tests can build several."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.phases: dict[tuple[str, str], str] = {}
        self.jobs: dict[tuple[str, str], JobView] = {}
        self.registry.register(_PhaseCollector(self.phases))
        self.registry.register(_JobCollector(self.jobs))
        # The process (memory, CPU, open files) and the interpreter, as the default registry has them.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.handler_seconds = Histogram(
            "grpo_handler_duration_seconds",
            "Time spent in one reconcile, by handler and outcome",
            ["handler", "outcome"],
            registry=self.registry,
        )
        self.create_to_rayjob_seconds = Histogram(
            "grpo_create_to_rayjob_seconds",
            "Time from a GRPOJob's creation to its first RayJob being created",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
            registry=self.registry,
        )
        # Labelled by reason only (the trainer's and KubeRay's classification: a few dozen words at
        # most), not by job: "how often do our jobs run out of memory" across the fleet.
        self.attempt_failures = Counter(
            "grpo_job_attempt_failures",
            "Failed attempts of GRPOJobs, by the reason recorded in status.failedAttempts",
            ["reason"],
            registry=self.registry,
        )
        self._failures_seen: set[tuple[str, int]] = set()
        self._identities: dict[tuple[str, str], str] = {}

        self.api_requests = Counter(
            "grpo_api_requests",
            "Requests the operator sent to the API server, by verb, resource and answer "
            "(0: no answer). kopf's own watches are not counted",
            ["verb", "resource", "code"],
            registry=self.registry,
        )
        self.rayjobs_created = Counter(
            "grpo_rayjobs_created",
            "RayJobs the operator created, by what brought their job to the reconcile that created them "
            "(job, rayjob, retry, resync, deadline, takeover): on a healthy operator, never the resync",
            ["trigger"],
            registry=self.registry,
        )
        self.requeued = Counter(
            "grpo_reconciles_requeued",
            "Reconciles the queue scheduled again by itself, by why (failed, not_leading, coalesced)",
            ["why"],
            registry=self.registry,
        )
        self.queued = Gauge(
            "grpo_reconciles_queued",
            "Jobs waiting for a reconcile, running one, or due for a retry",
            registry=self.registry,
        )

    def count_request(self, verb: str, resource: str, code: int) -> None:
        """One request the operator's API client sent (k8s.Api.observer)."""
        self.api_requests.labels(verb, resource, str(code)).inc()

    def observe(self, body: dict[str, Any]) -> None:
        """Record a job as the watch delivered it (every event: the trainer's reports included)."""
        meta = body.get("metadata") or {}
        status = dict(body.get("status") or {})
        self.jobs[(meta["namespace"], meta["name"])] = JobView(status.get("phase"), status)
        self._count_failures(meta, status)

    def _count_failures(self, meta: dict[str, Any], status: dict[str, Any]) -> None:
        """Each failed attempt counts once, when the watch first shows it (keyed by the job's uid,
        so a job re-created under the same name counts anew). After an operator restart the
        failures of the jobs still there count again, as any counter starts again then."""
        identity = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
        self._identities[(meta["namespace"], meta["name"])] = identity
        for item in status.get("failedAttempts") or []:
            if not isinstance(item, dict) or not isinstance(item.get("attempt"), int):
                continue
            key = (identity, item["attempt"])
            if key not in self._failures_seen:
                self._failures_seen.add(key)
                self.attempt_failures.labels(str(item.get("reason") or "Unknown")).inc()

    def forget(self, namespace: str, name: str) -> None:
        """The job is gone: its series go too."""
        self.phases.pop((namespace, name), None)
        self.jobs.pop((namespace, name), None)
        # Its failures stay counted; the record of which were counted goes.
        identity = self._identities.pop((namespace, name), None)
        self._failures_seen = {key for key in self._failures_seen if key[0] != identity}

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)
