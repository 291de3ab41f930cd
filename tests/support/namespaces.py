"""The suite's namespaces, and telling its GRPOJobs from anyone else's on a shared cluster."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

from support.cluster import REPO_ROOT, Cluster

TEST_LABEL = "grpo.dev/test"
# Every namespace this session creates carries it: what a cluster-wide release may act on.
RUN_LABEL = "grpo.dev/e2e-run"
RUN = secrets.token_hex(4)


def create_namespace(cluster: Cluster, stem: str) -> str:
    """A fresh namespace labelled as the suite's (hack/cluster-down.sh deletes what is left)."""
    name = f"e2e-{stem}-{secrets.token_hex(3)}"
    labels = {TEST_LABEL: "true", RUN_LABEL: RUN}
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    cluster.wait_for("serviceaccount", "default", name, lambda _: True, timeout=30, what="existence")
    return name


def stage_colour_claims(cluster: Cluster, namespace: str, staged: Path) -> None:
    """The colour job's model and data (grpo_trainer.testing.colour_job.stage) onto its claims
    demo-models and demo-data, with hack/stage_claims.py as `make demo` stages them."""
    from grpo_trainer.testing.colour_job import DATA_DIR, MODEL_DIR

    subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "hack" / "stage_claims.py"),
            "--namespace",
            namespace,
            f"demo-models={staged / Path(MODEL_DIR).parent}",
            f"demo-data={staged / Path(DATA_DIR).parent}",
        ],
        env=cluster.env,
        check=True,
        capture_output=True,
        timeout=120,
    )


def delete_namespace(cluster: Cluster, name: str) -> None:
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
    if cluster.job_api is not None:
        cluster.job_api.forget_namespace(name)


def foreign_grpojobs(cluster: Cluster) -> list[str]:
    """Live GRPOJobs this session did not create: a cluster-wide release would act on them, and its
    cleanup hook delete them. (Those already being deleted, or in a namespace being deleted, only
    need an operator to let go.)"""
    namespaces = cluster.get("namespaces")["items"]
    skip = {
        ns["metadata"]["name"]
        for ns in namespaces
        if ns["metadata"].get("labels", {}).get(RUN_LABEL) == RUN or ns["metadata"].get("deletionTimestamp")
    }
    items = json.loads(cluster.kubectl("get", "grpojobs", "--all-namespaces", "-o", "json").stdout)["items"]
    return sorted(
        f"{j['metadata']['namespace']}/{j['metadata']['name']}"
        for j in items
        if j["metadata"]["namespace"] not in skip and not j["metadata"].get("deletionTimestamp")
    )


def being_deleted(cluster: Cluster, namespaces: list[str] | None) -> list[str]:
    """GRPOJobs with a deletion timestamp, in ``namespaces`` or anywhere."""
    items = json.loads(cluster.kubectl("get", "grpojobs", "--all-namespaces", "-o", "json").stdout)["items"]
    return [
        f"{j['metadata']['namespace']}/{j['metadata']['name']}"
        for j in items
        if j["metadata"].get("deletionTimestamp")
        and (namespaces is None or j["metadata"]["namespace"] in namespaces)
    ]
