"""The real node of the cpu pool (hack/node-up.sh): a kubelet with containerd on this host,
joined to the local control plane. Pods scheduled onto it run as containers of the images the
local engine built (images/build.sh), under the namespace's Pod Security level.

Opt-in: these tests are collected only with ``GRPO_REAL_NODE=1`` (``make test-real-node``), since
the first start ships the 6 GB CPU trainer image to the node (through its registry: minutes); the
``real_node`` fixture (tests/conftest.py) starts the node (idempotent, seconds when it runs)."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from typing import Any

import pytest
from support.cluster import REPO_ROOT, Cluster
from support.hack_env import lib_variable
from support.real_node import NODE, TAINT_KEY, TOLERATIONS, image_tag

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
            "tolerations": TOLERATIONS,
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
    # Tainted, so only the pods meant for it (which tolerate it) run containers there.
    taints = {(t["key"], t["effect"]) for t in node["spec"].get("taints", [])}
    assert (TAINT_KEY, "NoSchedule") in taints, taints


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


def _registry(path: str, accept: str = "") -> urllib.request.Request:
    port = lib_variable("NODE_REGISTRY_PORT")
    return urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Accept": accept} if accept else {}
    )


def test_the_node_pulls_the_images_from_its_registry(cluster: Cluster, real_node: str) -> None:
    """hack/node-up.sh pushes the built images to the node's registry and the node's containerd
    pulls them from there by the names users write (ghcr.io/grpo-operator/...): each layer moves
    once, so a code change ships the package's small layer and not the whole environment."""
    with urllib.request.urlopen(_registry("/v2/_catalog")) as answer:
        catalog = json.load(answer)["repositories"]
    assert {"grpo-operator/operator", "grpo-operator/trainer-cpu"} <= set(catalog)
    manifest = "application/vnd.docker.distribution.manifest.v2+json"
    with urllib.request.urlopen(
        _registry(f"/v2/grpo-operator/trainer-cpu/manifests/{image_tag()}", manifest)
    ) as answer:
        pushed = answer.headers["Docker-Content-Digest"]
    listed = subprocess.run(
        ["bash", "-c", ". hack/lib.sh && . hack/cluster-lib.sh && . hack/node-lib.sh && ctr images ls"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    node_digest = {line.split()[0]: line.split()[2] for line in listed[1:] if line.strip()}
    assert node_digest[f"{TRAINER_IMAGE}:{image_tag()}"] == pushed
    # The trainer image is its dependencies' layer with the package's small one on top.
    with urllib.request.urlopen(
        _registry(f"/v2/grpo-operator/trainer-cpu/manifests/{image_tag()}", manifest)
    ) as answer:
        layers = [layer["size"] for layer in json.load(answer)["layers"]]
    assert max(layers) > 500 * 2**20
    assert layers[-1] < 20 * 2**20, f"the last layer (the package) is {layers[-1]} bytes: {layers}"


def test_a_pod_whose_image_the_registry_lacks_waits_with_the_pull_error(
    cluster: Cluster, namespace: str, real_node: str
) -> None:
    """The kubelet's own pull failure, as a job's pods would meet a wrong image tag: the
    container waits with ErrImagePull / ImagePullBackOff and a message that names the image."""
    _restricted(namespace, cluster)
    missing = f"{TRAINER_IMAGE}:no-such-tag"
    cluster.apply(_pod("missing", missing, ["true"]), namespace)

    def waiting(pod: dict[str, Any]) -> bool:
        statuses = pod.get("status", {}).get("containerStatuses") or []
        reason = (statuses[0]["state"].get("waiting") or {}).get("reason") if statuses else None
        return reason in ("ErrImagePull", "ImagePullBackOff")

    pod = cluster.wait_for("pod", "missing", namespace, waiting, timeout=120, what="a pull error")
    state = pod["status"]["containerStatuses"][0]["state"]["waiting"]
    if state["reason"] == "ErrImagePull":
        assert missing in state["message"]
    assert pod["status"]["phase"] == "Pending"


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


def test_pods_resolve_cluster_names_and_reach_the_api_server(
    cluster: Cluster, namespace: str, real_node: str
) -> None:
    _restricted(namespace, cluster)
    # CoreDNS answers for Services; the `kubernetes` Service's address reaches the API server,
    # which answers the pod's own ServiceAccount token (401 would mean it did not).
    probe = (
        "import json, socket, ssl, urllib.request as u\n"
        "print(socket.gethostbyname('kubernetes.default.svc.cluster.local'))\n"
        "sa = '/var/run/secrets/kubernetes.io/serviceaccount/'\n"
        "context = ssl.create_default_context(cafile=sa + 'ca.crt')\n"
        "request = u.Request('https://kubernetes.default.svc/version',"
        " headers={'Authorization': 'Bearer ' + open(sa + 'token').read()})\n"
        "print(json.load(u.urlopen(request, context=context))['major'])\n"
    )
    cluster.apply(_pod("dns", f"{TRAINER_IMAGE}:{image_tag()}", ["python", "-c", probe]), namespace)
    pod = _ended(cluster, "dns", namespace, 120)
    out = cluster.kubectl("logs", "dns", "--namespace", namespace).stdout.split()
    assert pod["status"]["phase"] == "Succeeded", out
    assert out == ["10.96.0.1", "1"]


def test_a_rayjob_runs_in_a_head_pod_of_the_trainer_image(
    cluster: Cluster, namespace: str, real_node: str
) -> None:
    """KubeRay (on the host) submits through the fake job API's pod backend, which forwards to the
    head pod's own dashboard: the entrypoint runs in the container, and the RayJob succeeds."""
    _restricted(namespace, cluster)
    cluster.kubectl("label", "namespace", namespace, "grpo.dev/ray-backend=pod")
    head = {
        "nodeSelector": {"kubernetes.io/hostname": real_node},
        "tolerations": TOLERATIONS,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "ray-head",
                "image": f"{TRAINER_IMAGE}:{image_tag()}",
                # Ray's dashboard modules get 30 s to start, too little on a loaded 2-core machine.
                "env": [{"name": "RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT", "value": "180"}],
                "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
                "securityContext": RESTRICTED,
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
            }
        ],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    cluster.apply(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "probe"},
            "spec": {
                "submissionMode": "HTTPMode",
                "entrypoint": "python -c \"import grpo_trainer, socket; print('ran in', socket.gethostname())\"",
                "rayClusterSpec": {
                    "rayVersion": "2.46.0",
                    "headGroupSpec": {
                        "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "1"},
                        "template": {"spec": head},
                    },
                },
            },
        },
        namespace,
    )
    pods: dict[str, dict[str, Any]] = {}

    def ended(job: dict[str, Any]) -> bool:
        for pod in cluster.get("pods", namespace=namespace)["items"]:
            pods[pod["metadata"]["name"]] = pod
        return (job.get("status") or {}).get("jobStatus") in ("SUCCEEDED", "FAILED")

    job = cluster.wait_for(
        "rayjobs.ray.io", "probe", namespace, ended, timeout=420, what="a final job status"
    )
    assert job["status"]["jobStatus"] == "SUCCEEDED", job["status"]
    [pod] = [p for p in pods.values() if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
    assert pod["spec"]["nodeName"] == real_node
    [status] = pod["status"]["containerStatuses"]
    assert status["image"].endswith(f"{TRAINER_IMAGE}:{image_tag()}")
    assert status["containerID"].startswith("containerd://")
    # KubeRay's calls reached the head pod, not a script.
    forwarded = [r for r in cluster.job_api.requests() if r.get("namespace") == namespace]  # type: ignore[union-attr]
    assert forwarded
    assert all(r.get("backend") == "pod" for r in forwarded)
