"""Helpers for integration tests that drive GRPOJobs through the real API server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.preflight import references

from support.cluster import Cluster
from support.examples import example_document, with_changes

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = {p.stem: p for p in sorted((REPO / "examples").glob("*.yaml"))}


def example(name: str, **spec_changes: Any) -> dict[str, Any]:
    """An example GRPOJob as a dict, with spec changes (examples.with_changes)."""
    body = example_document(name)
    return {**body, "spec": with_changes(body["spec"], spec_changes)}


def source_claims(body: dict[str, Any]) -> list[str]:
    """pvc:// claims an example reads its model and data from."""
    spec = body["spec"]
    uris = [
        spec["model"]["source"],
        *spec["dataset"].get("train", []),
        *spec["dataset"].get("validation", []),
    ]
    return sorted({u.split("/")[2] for u in uris if u.startswith("pvc://")})


def create_source_claims(cluster: Cluster, namespace: str, body: dict[str, Any]) -> None:
    """The data volumes a user would have filled before applying the job."""
    for claim in source_claims(body):
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim, "namespace": namespace},
                "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}},
            }
        )


def create_inputs(cluster: Cluster, namespace: str, body: dict[str, Any]) -> None:
    """What a user makes before applying the job: its data claims and the Secrets it names (the
    operator's preflight waits for them, as a pod would). ConfigMaps come with the example's file."""
    create_source_claims(cluster, namespace, body)
    job = GRPOJob.model_validate({**body, "metadata": {**body["metadata"], "namespace": namespace}})
    secrets: dict[str, set[str]] = {}
    for ref in references(job):
        if ref.kind == "Secret" and not ref.optional:
            secrets.setdefault(ref.name, set()).update([ref.key] if ref.key else [])
    for name, keys in sorted(secrets.items()):
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": namespace},
                "stringData": {key: "test-only" for key in sorted(keys)} or {"token": "test-only"},
            }
        )


def apply_job(cluster: Cluster, namespace: str, body: dict[str, Any]) -> str:
    """Apply a GRPOJob as a user would, its source claims and Secrets first; returns its name."""
    create_inputs(cluster, namespace, body)
    cluster.apply(body, namespace=namespace)
    return body["metadata"]["name"]


def job_pods(cluster: Cluster, namespace: str, job: str) -> list[dict[str, Any]]:
    """The Ray pods of one job (its grpo.dev/job label)."""
    pods = cluster.get("pods", namespace=namespace)["items"]
    return [p for p in pods if p["metadata"].get("labels", {}).get("grpo.dev/job") == job]


def phase_is(*phases: str):
    return lambda obj: (obj.get("status") or {}).get("phase") in phases


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == ctype), None)


# What the operator creates for a running attempt, each kind labelled grpo.dev/job=<job>.
CHILD_KINDS = (
    "rayjobs.ray.io",
    "configmaps",
    "serviceaccounts",
    "roles",
    "rolebindings",
    "persistentvolumeclaims",
    "networkpolicies",
)


def owned_children(cluster: Cluster, namespace: str, job: str) -> dict[str, list[str]]:
    """Names of every object labelled as this job's child, by kind."""
    out: dict[str, list[str]] = {}
    for kind in CHILD_KINDS:
        items = cluster.get(kind, namespace=namespace)["items"]
        names = [
            i["metadata"]["name"] for i in items if i["metadata"].get("labels", {}).get("grpo.dev/job") == job
        ]
        if names:
            out[kind] = sorted(names)
    return out
