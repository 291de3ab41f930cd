"""SidecarMode with the real KubeRay: the live log's container, and why `restricted` refuses it.

The operator's RayJob in SidecarMode, applied as the operator applies it; KubeRay (running
against the local API server) injects its `ray-job-submitter` container into the head pod.
The API server's Pod Security admission is real: in a namespace enforcing `restricted` it
refuses that head pod (KubeRay 1.5 gives the container no securityContext), which is what the
settings' and the README's advice says; under `baseline` the head pod is made with it.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.children.rbac import build_trainer_rbac
from grpo_operator.config import Settings
from support.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]


def _head_pods(cluster: Cluster, namespace: str) -> list[dict]:
    pods = cluster.get("pods", namespace=namespace)["items"]
    return [p for p in pods if p["metadata"].get("labels", {}).get("ray.io/node-type") == "head"]


def test_sidecar_mode_puts_the_submitter_in_the_head_pod_and_restricted_refuses_it(
    cluster: Cluster, namespace: str
) -> None:
    cluster.install_crds()
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    manifest = yaml.safe_load((REPO / "examples" / "lora-single-gpu.yaml").read_text())
    cluster.apply({**manifest, "metadata": {"name": "sidecar", "namespace": namespace}})
    job = GRPOJob.model_validate(cluster.get("grpojob", "sidecar", namespace))
    cluster.apply(build_trainer_rbac(job))
    cluster.apply(build_rayjob(job, Settings(submission_mode="SidecarMode"), 1))

    deadline = time.monotonic() + 90
    refusal = ""
    while not refusal and time.monotonic() < deadline:
        refusal = next(
            (
                e["message"]
                for e in cluster.events(namespace)
                if e["reason"] == "FailedToCreateHeadPod" and "PodSecurity" in e.get("message", "")
            ),
            "",
        )
        time.sleep(1)
    assert 'violates PodSecurity "restricted' in refusal
    assert 'container "ray-job-submitter"' in refusal
    assert _head_pods(cluster, namespace) == []

    cluster.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline", "--overwrite"
    )
    deadline = time.monotonic() + 120
    while not _head_pods(cluster, namespace):
        assert time.monotonic() < deadline, "KubeRay made no head pod under baseline"
        time.sleep(1)
    [head] = _head_pods(cluster, namespace)
    containers = [c["name"] for c in head["spec"]["containers"]]
    assert "ray-job-submitter" in containers
    assert head["spec"]["restartPolicy"] == "Never"
