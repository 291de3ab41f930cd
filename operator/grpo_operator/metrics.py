"""Prometheus metrics with bounded labels: phases, handler names and outcomes, never job names."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

PHASES = ("Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed")


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


class Metrics:
    """The operator's metrics, on their own registry so tests can build several."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.phases: dict[tuple[str, str], str] = {}
        self.registry.register(_PhaseCollector(self.phases))
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

    def forget(self, namespace: str, name: str) -> None:
        self.phases.pop((namespace, name), None)

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)
