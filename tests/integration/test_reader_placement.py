"""Where the real scheduler puts the reader pod behind `kubectl grpo logs`, `checkpoints` and `plot`.

The pod is the plugin's own (`reader.build_reader_pod`, as `read_through_pod` sends it); the API
server, the scheduler and the node controller are real, the nodes are KWOK's. Each test makes
nodes of its own (so the shared pools are not cordoned under other tests): one of the job's
accelerator pool, one of another pool, a cordoned one of the job's pool, a node of no pool. A
claim bound to a local volume whose node affinity names some of them decides which nodes the
pod may use, as a user's zonal or local volume does; the reader must choose among those by its
tolerations and preferences alone.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_kubectl.cluster import stored_job
from grpo_kubectl.reader import build_reader_pod
from support.cluster import Cluster

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lora-single-gpu.yaml"
KWOK_ANNOTATIONS = {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}
GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
NPU_TAINT = {"key": "huawei.com/Ascend910", "effect": "NoSchedule"}


def _node(name: str, labels: dict[str, str], taints: list[dict[str, str]], *, cordoned: bool = False) -> dict:
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": KWOK_ANNOTATIONS,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **labels},
        },
        "spec": {"taints": taints, "unschedulable": cordoned},
        "status": {"allocatable": capacity, "capacity": capacity},
    }


@pytest.fixture
def nodes(cluster: Cluster) -> Iterator[dict[str, str]]:
    """Four KWOK nodes of this test's own, by role; deleted after."""
    stem = f"reader-{secrets.token_hex(3)}"
    made = {
        "gpu": _node(f"{stem}-gpu", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, [GPU_TAINT]),
        "npu": _node(f"{stem}-npu", {"accelerator": "huawei-Ascend910"}, [NPU_TAINT]),
        "cordoned": _node(
            f"{stem}-cordoned",
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            [GPU_TAINT],
            cordoned=True,
        ),
        "cpu": _node(f"{stem}-cpu", {}, []),
    }
    names = {role: node["metadata"]["name"] for role, node in made.items()}
    try:
        cluster.kubectl(
            "create",
            "-f",
            "-",
            input=yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(made.values())}),
        )
        for name in names.values():
            cluster.kubectl("wait", "--for=condition=Ready", f"node/{name}", "--timeout=60s", timeout=90)
        yield names
    finally:
        cluster.kubectl("delete", "node", *names.values(), "--ignore-not-found", "--wait=false", check=False)


def _claim(cluster: Cluster, namespace: str, name: str, on: list[str]) -> None:
    """A claim bound to a local volume that only the nodes `on` can mount."""
    volume = f"{namespace}-{name}"
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume, "labels": {"grpo.dev/test": "true"}},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "local": {"path": f"/tmp/grpo-local-volumes/{volume}"},
                "claimRef": {"namespace": namespace, "name": name},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": on}
                                ]
                            }
                        ]
                    }
                },
            },
        }
    )
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )
    cluster.wait_for("pvc", name, namespace, lambda c: c["status"].get("phase") == "Bound", what="Bound")


@pytest.fixture
def volumes(cluster: Cluster, namespace: str) -> Iterator[Any]:
    made: list[str] = []

    def make(name: str, on: list[str]) -> None:
        made.append(f"{namespace}-{name}")
        _claim(cluster, namespace, name, on)

    yield make
    for volume in made:
        cluster.kubectl("delete", "pv", volume, "--ignore-not-found", "--wait=false", check=False)


def _finished_job(cluster: Cluster, namespace: str, name: str, accelerator: str, claim: str) -> Any:
    """A job whose Ray cluster is gone (no status.rayClusterName): what `logs` reads after the end.
    It exists so the reader pod's owner reference holds (the garbage collector would delete a pod
    whose owner is missing)."""
    manifest = yaml.safe_load(EXAMPLE.read_text())
    manifest["metadata"] = {"name": name, "namespace": namespace}
    spec = manifest["spec"]
    spec["resources"]["accelerator"] = accelerator
    spec["checkpoint"] = {"claimName": claim}
    spec["runPolicy"] = {**(spec.get("runPolicy") or {}), "suspend": True}  # no attempt, if an operator runs
    cluster.apply(manifest)
    return stored_job(cluster.get("grpojob", name, namespace))


def _reader(cluster: Cluster, job: Any) -> str:
    """Creates the plugin's reader pod for `job`; its name."""
    pod = build_reader_pod(job, "true")
    created = cluster.kubectl("create", "-o", "name", "-f", "-", input=yaml.safe_dump(pod)).stdout
    return created.strip().split("/")[1]


def _placed(cluster: Cluster, namespace: str, pod: str) -> str:
    found = cluster.wait_for(
        "pod", pod, namespace, lambda p: bool(p["spec"].get("nodeName")), timeout=60, what="a node"
    )
    return str(found["spec"]["nodeName"])


def _refused(cluster: Cluster, namespace: str, pod: str) -> str:
    """The scheduler's reason for finding no node (PodScheduled False, Unschedulable)."""

    def unschedulable(p: dict[str, Any]) -> bool:
        assert not p["spec"].get("nodeName"), f"placed on {p['spec']['nodeName']}"
        return any(
            c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
            for c in (p.get("status") or {}).get("conditions") or []
        )

    found = cluster.wait_for("pod", pod, namespace, unschedulable, timeout=60, what="Unschedulable")
    message = next(c["message"] for c in found["status"]["conditions"] if c["type"] == "PodScheduled")
    # Still nowhere a little later: the scheduler retries an unschedulable pod on node changes.
    assert not (cluster.get("pod", pod, namespace)["spec"].get("nodeName"))
    return str(message)


def test_a_gpu_jobs_reader_never_lands_on_another_pools_node_or_a_cordoned_one(
    cluster, namespace, crds, nodes, volumes
):
    """Before: the reader tolerated every taint, so where only an NPU node or a cordoned node could
    mount the volume, there it went. Now it waits, saying why, and where its own pool's node can
    mount the volume too it goes there."""
    volumes("npu-only", [nodes["npu"]])
    job = _finished_job(cluster, namespace, "npu-only", "nvidia", "npu-only")
    why = _refused(cluster, namespace, _reader(cluster, job))
    # The scheduler counts untolerated taints without naming them (Kubernetes 1.36): the node the
    # volume allows is the NPU node, so the taint it means is that pool's.
    assert "untolerated taint" in why, why

    volumes("cordoned-only", [nodes["cordoned"]])
    job = _finished_job(cluster, namespace, "cordoned-only", "nvidia", "cordoned-only")
    why = _refused(cluster, namespace, _reader(cluster, job))
    assert "unschedulable" in why, why

    volumes("pool", [nodes["npu"], nodes["cordoned"], nodes["gpu"]])
    job = _finished_job(cluster, namespace, "pool", "nvidia", "pool")
    for _ in range(3):
        assert _placed(cluster, namespace, _reader(cluster, job)) == nodes["gpu"]


def test_a_readers_node_is_a_cpu_node_when_one_can_mount_the_volume(cluster, namespace, crds, nodes, volumes):
    """A GPU job's reader may use its pool's nodes but prefers a node of no accelerator pool once its
    Ray cluster is gone; a CPU job's reader tolerates no accelerator pool at all."""
    volumes("gpu-or-cpu", [nodes["gpu"], nodes["cpu"]])
    gpu_job = _finished_job(cluster, namespace, "gpu-job", "nvidia", "gpu-or-cpu")
    cpu_job = _finished_job(cluster, namespace, "cpu-job", "cpu", "gpu-or-cpu")
    for job in (gpu_job, cpu_job, gpu_job, cpu_job, gpu_job):
        assert _placed(cluster, namespace, _reader(cluster, job)) == nodes["cpu"]

    volumes("gpu-only", [nodes["gpu"]])
    job = _finished_job(cluster, namespace, "cpu-on-gpu", "cpu", "gpu-only")
    why = _refused(cluster, namespace, _reader(cluster, job))
    assert "untolerated taint" in why, why  # the GPU node's, the only one the volume allows


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    cluster.install_crds()
