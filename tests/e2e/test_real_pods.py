"""The product as shipped, on the real node of the cpu pool (hack/node-up.sh): `helm install`
starts the operator as a pod of its image, which reaches the API server through the `kubernetes`
Service with the chart's ServiceAccount and runs a job; the chart's pre-delete hook runs as a pod
of the same image at uninstall.

Opt-in (marker ``real_node``): collected only with ``GRPO_REAL_NODE=1`` (``make test-real-node``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from support.cluster import Cluster
from support.life import apply_example, ray_job_id, wait_condition, writers
from support.namespaces import create_namespace, delete_namespace
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI
from support.real_node import NODE_SELECTOR, image_tag
from support.release import Helm, Release, existing

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

FIELD_MANAGER = f"grpo-e2e-{secrets.token_hex(3)}"
OPERATOR_IMAGE = "ghcr.io/grpo-operator/operator"


@pytest.fixture(scope="module")
def watched(cluster: Cluster) -> Iterator[str]:
    name = create_namespace(cluster, "real-watched")
    yield name
    delete_namespace(cluster, name)


@pytest.fixture(scope="module")
def release(cluster: Cluster, helm: Helm, watched: str, real_node: str) -> Iterator[Release]:
    namespace = create_namespace(cluster, "real-operator")
    # Pod Security `restricted` where the operator runs: the chart's pods must pass it.
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    installed = Release(helm, f"e2e-{secrets.token_hex(3)}", namespace)
    installed.install(
        {
            "image": {"tag": image_tag(), "pullPolicy": "Never"},
            "nodeSelector": NODE_SELECTOR,
            "rbac": {"clusterWide": False, "namespaces": [watched]},
            "settings": {"resyncSeconds": 5, "fieldManager": FIELD_MANAGER},
            "cleanup": {"timeoutSeconds": 90},
        }
    )
    yield installed
    installed.uninstall(check=False)
    delete_namespace(cluster, namespace)


def test_the_operator_is_a_pod_of_its_image_and_runs_a_job(
    cluster: Cluster, release: Release, watched: str, job_api: RayJobAPI, real_node: str
) -> None:
    pods = cluster.get("pods", namespace=release.namespace)["items"]
    [pod] = [
        p
        for p in pods
        if p["metadata"]["name"].startswith(release.name) and "job-name" not in p["metadata"]["labels"]
    ]
    assert pod["spec"]["nodeName"] == real_node
    [status] = pod["status"]["containerStatuses"]
    assert status["image"].endswith(f"{OPERATOR_IMAGE}:{image_tag()}")
    assert status["imageID"], status  # the container runtime ran it from an image it holds
    assert status["containerID"].startswith("containerd://")
    assert "running" in status["state"]
    assert status["ready"] is True  # the kubelet probed its /healthz over the pod network

    # The operator pod reaches the API server (the `kubernetes` Service) with the chart's
    # ServiceAccount: it creates the attempt's RayJob as its own field manager and follows it.
    job_api.configure_namespace(watched, RUNNING_FOREVER)
    job = apply_example(cluster, watched, "lora-single-gpu")
    wait_condition(cluster, watched, job, "Running", timeout=180)
    assert FIELD_MANAGER in writers(cluster, "rayjobs.ray.io", f"{job}-1", watched)
    job_api.finish(ray_job_id(cluster, watched, f"{job}-1"), "SUCCEEDED")
    wait_condition(cluster, watched, job, "Succeeded")
    logs = cluster.kubectl("logs", pod["metadata"]["name"], "--namespace", release.namespace).stdout
    assert job in logs  # its own log, as the kubelet keeps it

    # The pre-delete hook is a Job of the same image, on the same node: it empties the watched
    # namespace, then the release's objects go.
    manifest, hooks = release.manifest(), release.hooks()
    release.uninstall()
    assert cluster.get("grpojobs", namespace=watched)["items"] == []
    assert existing(cluster, manifest + hooks) == []
