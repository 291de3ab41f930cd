"""The real node of the cpu pool (hack/node-up.sh): a kubelet with containerd on this host,
joined to the local control plane. Pods scheduled onto it run as containers of the images the
local engine built (images/build.sh), under the namespace's Pod Security level.

Opt-in: these tests are collected only with ``GRPO_REAL_NODE=1`` (``make test-real-node``), since
the first start imports the 6 GB CPU trainer image into the node's containerd (minutes); the
``real_node`` fixture (tests/conftest.py) starts the node (idempotent, seconds when it runs)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.cluster import Cluster
from support.real_node import NODE, image_tag

pytestmark = pytest.mark.real_node

TRAINER_IMAGE = "ghcr.io/grpo-operator/trainer-cpu"
# What the restricted Pod Security level asks of every container (and what the chart's and the
# operator's pods set): a numeric non-root user, no privilege escalation, no capabilities, the
# runtime's default seccomp profile. The read-only root is the pods' own hardening on top.
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
}


def _restricted(namespace: str, cluster: Cluster) -> None:
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")


def _pod(
    name: str, image: str, command: list[str], *, security: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "restartPolicy": "Never",
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "command": command,
                    "securityContext": security or RESTRICTED,
                }
            ],
        },
    }


def _ended(cluster: Cluster, name: str, namespace: str, timeout: float = 180) -> dict[str, Any]:
    """The pod once its phase is final (the container's termination is reported a moment before)."""
    return cluster.wait_for(
        "pod",
        name,
        namespace,
        lambda p: p.get("status", {}).get("phase") in ("Succeeded", "Failed"),
        timeout=timeout,
        what="Succeeded or Failed",
    )


def _terminated(pod: dict[str, Any]) -> dict[str, Any] | None:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return statuses[0]["state"].get("terminated") if statuses else None


def test_the_node_is_a_ready_kubelet_of_the_cpu_pool(cluster: Cluster, real_node: str) -> None:
    node = cluster.get("node", real_node)
    assert node["metadata"]["labels"]["grpo.dev/pool"] == "cpu"
    assert "kwok.x-k8s.io/node" not in node["metadata"].get("annotations", {})
    info = node["status"]["nodeInfo"]
    assert info["containerRuntimeVersion"].startswith("containerd://")
    assert info["kubeletVersion"].startswith("v1.")
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
    assert ready == "True"


def test_a_pod_of_the_cpu_trainer_image_runs_to_completion(
    cluster: Cluster, namespace: str, real_node: str
) -> None:
    _restricted(namespace, cluster)
    image = f"{TRAINER_IMAGE}:{image_tag()}"
    # The trainer's own code in the image: its CLI and the contract it shares with the operator.
    probe = "import grpo_trainer.cli, grpo_operator.api.contract as c; print('exit codes', c.CONFIG_ERROR)"
    cluster.apply(_pod("trainer", image, ["python", "-c", probe]), namespace)
    pod = _ended(cluster, "trainer", namespace, 180)
    terminated = _terminated(pod)
    assert terminated is not None
    assert terminated["exitCode"] == 0, terminated
    assert pod["status"]["phase"] == "Succeeded"
    assert terminated["containerID"].startswith("containerd://")
    status = pod["status"]["containerStatuses"][0]
    assert status["image"].endswith(image)
    assert pod["spec"]["nodeName"] == real_node
    # The kubelet serves the container's log to the API server (its client certificate).
    assert cluster.kubectl("logs", "trainer", "--namespace", namespace).stdout.strip() == "exit codes 3"


def test_a_failing_container_reports_its_exit_code(cluster: Cluster, namespace: str, real_node: str) -> None:
    _restricted(namespace, cluster)
    cluster.apply(_pod("fails", f"{TRAINER_IMAGE}:{image_tag()}", ["sh", "-c", "exit 75"]), namespace)
    pod = _ended(cluster, "fails", namespace, 120)
    assert _terminated(pod)["exitCode"] == 75  # type: ignore[index]
    assert pod["status"]["phase"] == "Failed"


def test_restricted_pod_security_is_enforced_for_real_pods(
    cluster: Cluster, namespace: str, real_node: str
) -> None:
    _restricted(namespace, cluster)
    # A container that keeps a capability is refused at admission, before any node sees it ...
    refused = cluster.kubectl(
        "apply",
        "--namespace",
        namespace,
        "-f",
        "-",
        check=False,
        input=json.dumps(
            _pod(
                "loose",
                f"{TRAINER_IMAGE}:{image_tag()}",
                ["true"],
                security={"allowPrivilegeEscalation": False},
            )
        ),
    )
    assert refused.returncode != 0
    assert "restricted" in refused.stderr
    assert "capabilities" in refused.stderr
    # ... and the hardened one runs as the user it asked for, without capabilities, on a
    # read-only root.
    check = "id -u; grep CapEff /proc/self/status; touch /x 2>/dev/null && echo writable || echo read-only"
    cluster.apply(_pod("hardened", f"{TRAINER_IMAGE}:{image_tag()}", ["sh", "-c", check]), namespace)
    pod = _ended(cluster, "hardened", namespace, 120)
    assert _terminated(pod)["exitCode"] == 0  # type: ignore[index]
    out = cluster.kubectl("logs", "hardened", "--namespace", namespace).stdout.split("\n")
    assert out[0] == "1000"
    assert out[1].split() == ["CapEff:", "0000000000000000"]
    assert out[2] == "read-only"
