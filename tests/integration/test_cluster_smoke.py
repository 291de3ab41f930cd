"""The test cluster is real: scheduling by device resources and taints, KubeRay, the Ray job API, GC.

Each test talks to the real API server of the chosen backend (no mocked Kubernetes API) in its
own namespace. Pods run nothing: KWOK marks them Running (and completes those owned by Jobs).
"""

from __future__ import annotations

from typing import Any

import pytest
from support.cluster import Cluster
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI, succeeds_after

pytestmark = pytest.mark.cluster

NVIDIA_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
ASCEND_TOLERATION = {"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"}
RAY_IMAGE = "rayproject/ray:2.52.0"  # never pulled: KWOK runs no containers


def pod(name: str, resources: dict[str, str], tolerations: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": resources, "requests": resources},
                }
            ],
            "tolerations": tolerations,
        },
    }


def node_labels(cluster: Cluster, node_name: str) -> dict[str, str]:
    return cluster.get("node", node_name)["metadata"]["labels"]


def is_running(obj: dict[str, Any]) -> bool:
    return obj["status"].get("phase") == "Running"


def test_gpu_pod_runs_on_the_nvidia_pool(cluster: Cluster, namespace: str) -> None:
    cluster.apply(pod("gpu", {"nvidia.com/gpu": "1"}, [NVIDIA_TOLERATION]), namespace)

    running = cluster.wait_for("pod", "gpu", namespace, is_running, what="Running")

    labels = node_labels(cluster, running["spec"]["nodeName"])
    assert labels["grpo.dev/pool"] == "nvidia"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_eight_npus_land_on_the_ascend_pool(cluster: Cluster, namespace: str) -> None:
    cluster.apply(pod("npu", {"huawei.com/Ascend910": "8"}, [ASCEND_TOLERATION]), namespace)

    running = cluster.wait_for("pod", "npu", namespace, is_running, what="Running")

    labels = node_labels(cluster, running["spec"]["nodeName"])
    assert labels["grpo.dev/pool"] == "ascend"
    assert labels["accelerator"] == "huawei-Ascend910"


def test_nine_gpus_stay_pending_with_a_scheduling_failure(cluster: Cluster, namespace: str) -> None:
    # A node has 8 GPUs: no node can take 9.
    cluster.apply(pod("too-big", {"nvidia.com/gpu": "9"}, [NVIDIA_TOLERATION]), namespace)

    def failed_scheduling(_: dict[str, Any]) -> bool:
        return any(
            e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "too-big"
            for e in cluster.events(namespace)
        )

    cluster.wait_for("pod", "too-big", namespace, failed_scheduling, what="a FailedScheduling event")

    [event] = [e for e in cluster.events(namespace) if e["reason"] == "FailedScheduling"]
    assert "Insufficient nvidia.com/gpu" in event["message"]
    still = cluster.get("pod", "too-big", namespace)
    assert still["status"]["phase"] == "Pending"
    assert "nodeName" not in still["spec"]


def ray_cluster_spec(gpu_workers: int) -> dict[str, Any]:
    """A head on the CPU pool and, if asked, a worker group of 1-GPU pods on the NVIDIA pool.

    Small on purpose: other test sessions may share this cluster's 16 GPUs.
    """
    spec: dict[str, Any] = {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "ray-head",
                            "image": RAY_IMAGE,
                            "resources": {"limits": {"cpu": "4", "memory": "16Gi"}},
                        }
                    ]
                }
            },
        },
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": gpu_workers,
                "minReplicas": gpu_workers,
                "maxReplicas": gpu_workers,
                "rayStartParams": {},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-worker",
                                "image": RAY_IMAGE,
                                "resources": {
                                    "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"}
                                },
                            }
                        ],
                        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                        "tolerations": [NVIDIA_TOLERATION],
                    }
                },
            }
        ],
    }
    if not gpu_workers:
        del spec["workerGroupSpecs"]
    return spec


def test_raycluster_with_a_gpu_worker_group_becomes_ready(cluster: Cluster, namespace: str) -> None:
    cluster.apply(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": "rc"},
            "spec": ray_cluster_spec(2),
        },
        namespace,
    )

    ready = cluster.wait_for(
        "raycluster", "rc", namespace, lambda rc: rc.get("status", {}).get("state") == "ready", what="ready"
    )

    assert ready["status"]["readyWorkerReplicas"] == 2
    workers = cluster.get("pods", namespace=namespace)["items"]
    pools = {
        p["metadata"]["labels"]["ray.io/node-type"]: node_labels(cluster, p["spec"]["nodeName"])[
            "grpo.dev/pool"
        ]
        for p in workers
    }
    assert pools == {"head": "cpu", "worker": "nvidia"}


def rayjob(name: str, submission_mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": "python -c 'print(42)'",
            "submissionMode": submission_mode,
            # The head alone: the job API decides the outcome, devices do not matter here.
            "rayClusterSpec": ray_cluster_spec(0),
        },
    }


def rayjob_status(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("status", {})


def status_polls(job_api: RayJobAPI, namespace: str, job_id: str) -> int:
    return sum(
        1 for r in job_api.requests(namespace) if r["method"] == "GET" and r["path"] == f"/api/jobs/{job_id}"
    )


@pytest.mark.parametrize(
    ("ray_status", "deployment_status"), [("SUCCEEDED", "Complete"), ("FAILED", "Failed")]
)
def test_rayjob_follows_the_job_api(
    cluster: Cluster, namespace: str, job_api: RayJobAPI, ray_status: str, deployment_status: str
) -> None:
    job_api.configure_namespace(namespace, RUNNING_FOREVER)
    cluster.apply(rayjob("job", "HTTPMode"), namespace)

    running = cluster.wait_for(
        "rayjob", "job", namespace, lambda j: rayjob_status(j).get("jobStatus") == "RUNNING", what="RUNNING"
    )
    job_id = running["status"]["jobId"]
    [submission] = job_api.submissions(namespace)
    assert submission["submission_id"] == job_id
    assert submission["entrypoint"] == "python -c 'print(42)'"

    # While the job API keeps answering RUNNING, KubeRay keeps polling and the RayJob keeps running.
    polls = status_polls(job_api, namespace, job_id)
    cluster.wait_for(
        "rayjob",
        "job",
        namespace,
        lambda _: status_polls(job_api, namespace, job_id) >= polls + 2,
        what="two more status polls",
    )
    assert rayjob_status(cluster.get("rayjob", "job", namespace))["jobDeploymentStatus"] == "Running"

    job_api.finish(job_id, ray_status, message=f"the job API said {ray_status}")

    done = cluster.wait_for(
        "rayjob",
        "job",
        namespace,
        lambda j: rayjob_status(j).get("jobDeploymentStatus") == deployment_status,
        what=deployment_status,
    )
    assert done["status"]["jobStatus"] == ray_status
    assert done["status"]["message"] == f"the job API said {ray_status}"


def test_rayjob_in_k8s_job_mode_follows_the_job_api(
    cluster: Cluster, namespace: str, job_api: RayJobAPI
) -> None:
    # The KWOK submitter pod submits nothing: the first status query counts as the submission.
    job_api.configure_namespace(namespace, succeeds_after(2), auto_submit=True)
    cluster.apply(rayjob("k8s-mode", "K8sJobMode"), namespace)

    done = cluster.wait_for(
        "rayjob",
        "k8s-mode",
        namespace,
        lambda j: rayjob_status(j).get("jobDeploymentStatus") in ("Complete", "Failed"),
        what="a terminal state",
    )

    assert done["status"]["jobDeploymentStatus"] == "Complete"
    assert done["status"]["jobStatus"] == "SUCCEEDED"
    submitter = cluster.get("job", "k8s-mode", namespace)
    assert submitter["status"]["succeeded"] == 1


def test_deleting_an_owner_deletes_its_children(cluster: Cluster, namespace: str) -> None:
    cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}, namespace)
    owner = cluster.get("configmap", "owner", namespace)
    owner_ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    child_pod = pod("child", {"cpu": "1"}, [])
    child_pod["metadata"]["ownerReferences"] = [owner_ref]
    cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "child", "ownerReferences": [owner_ref]},
            },
            child_pod,
        ],
        namespace,
    )
    cluster.wait_for("pod", "child", namespace, is_running, what="Running")

    cluster.kubectl("delete", "configmap", "owner", "--namespace", namespace, "--cascade=background")

    cluster.wait_gone("configmap", "child", namespace)
    cluster.wait_gone("pod", "child", namespace)


def test_apply_keeps_a_string_that_reads_as_a_number(cluster: Cluster, namespace: str) -> None:
    """A random hex token such as `482e87` is a string to PyYAML and the number 4.82e+89 to
    kubectl's YAML 1.2; the tests' apply must hand kubectl what they mean (one object, and a list)."""
    tokens = {"exponent": "482e87", "octal": "0700", "boolean": "no"}
    one = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "looks-numeric", "labels": {"token": tokens["exponent"]}},
        "data": tokens,
    }
    other = {**one, "metadata": {"name": "looks-numeric-too", "labels": {"token": "1e10"}}}
    cluster.apply(one, namespace)
    cluster.apply([other, {**one, "data": {**tokens, "added": "7e3"}}], namespace)
    first = cluster.get("configmap", "looks-numeric", namespace)
    assert first["metadata"]["labels"]["token"] == "482e87"
    assert first["data"] == {**tokens, "added": "7e3"}
    assert cluster.get("configmap", "looks-numeric-too", namespace)["metadata"]["labels"]["token"] == "1e10"
