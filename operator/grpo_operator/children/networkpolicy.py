"""The job's NetworkPolicy: a closed Ray cluster.

Ray 2.46 (the trainer images' Ray) has no authentication: its head serves the job-submission API
and the GCS on every address, and whoever reaches them can run code in the trainer pods, which
hold the job's secrets, its token and the checkpoint volume. So only the job's own pods (every
attempt's head, workers and, in K8sJobMode, submitter) reach its pods at all, and the Ray clients
named in the settings (KubeRay, the operator) reach the head's dashboard port, where the job API
is. The metrics scrapers named in the settings (Prometheus) reach every Ray pod's metrics port,
which serves numbers only. Egress stays open: the trainer downloads models and data.
NetworkPolicies add up, so an admin opens more with a policy of their own.
"""

from __future__ import annotations

from typing import Any

from ..api.v1alpha1 import GRPOJob
from ..config import Settings
from .meta import JOB_LABEL, network_policy_name, object_meta

DASHBOARD_PORT = 8265
"""Ray's dashboard, which serves the job API (KubeRay's HTTPMode submission and status polling)."""


def build_network_policy(job: GRPOJob, settings: Settings) -> dict[str, Any] | None:
    """None when the settings turn per-job policies off."""
    if not settings.network_policy:
        return None
    ingress: list[dict[str, Any]] = [{"from": [{"podSelector": {"matchLabels": {JOB_LABEL: job.name}}}]}]
    if settings.ray_clients:
        ingress.append(
            {
                "from": [dict(peer) for peer in settings.ray_clients],
                "ports": [{"protocol": "TCP", "port": DASHBOARD_PORT}],
            }
        )
    if settings.metrics_scrapers:
        ingress.append(
            {
                "from": [dict(peer) for peer in settings.metrics_scrapers],
                "ports": [{"protocol": "TCP", "port": settings.ray_metrics_port}],
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(job, network_policy_name(job.name), "network"),
        "spec": {
            "podSelector": {"matchLabels": {JOB_LABEL: job.name}},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }
