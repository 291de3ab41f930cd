"""The product as shipped, on the real node of the cpu pool (hack/node-up.sh): `helm install`
starts the operator as a pod of its image, which reaches the API server through the `kubernetes`
Service with the chart's ServiceAccount and runs a job; examples/colours-cpu.yaml trains to
Succeeded in Ray pods of the CPU trainer image, in a namespace enforcing Pod Security
`restricted`, with its checkpoints and export on a real volume; the chart's pre-delete hook runs
as a pod of the operator image at uninstall.

Opt-in (marker ``real_node``): collected only with ``GRPO_REAL_NODE=1`` (``make test-real-node``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_operator.api.contract import job_dir
from grpo_trainer.spec import grpojob_document
from grpo_trainer.testing.colour_job import stage
from support.cluster import REPO_ROOT, Cluster
from support.life import apply_example, ray_job_id, wait_condition, writers
from support.namespaces import create_namespace, delete_namespace, stage_colour_claims
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI
from support.real_node import NODE_SELECTOR, image_tag
from support.release import Helm, Release, existing

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

FIELD_MANAGER = f"grpo-e2e-{secrets.token_hex(3)}"
OPERATOR_IMAGE = "ghcr.io/grpo-operator/operator"
TRAINER_IMAGE = "ghcr.io/grpo-operator/trainer-cpu"
EXAMPLE = REPO_ROOT / "examples" / "colours-cpu.yaml"
STEPS = 6
SAVE_EVERY = 3
# The real node has the host's cores (2 here): the Ray head (the driver only) and one worker must
# fit beside each other, so the head asks for a quarter core and the worker for one.
HEAD = {"headCpu": "250m", "headMemory": "2Gi"}
WORKER = {"cpuPerNode": "1", "memoryPerNode": "6Gi"}


@pytest.fixture(scope="module")
def watched(cluster: Cluster) -> Iterator[str]:
    name = create_namespace(cluster, "real-watched")
    yield name
    delete_namespace(cluster, name)


@pytest.fixture(scope="module")
def training(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Where the colour job trains: Pod Security `restricted`, its Ray pods' job API reached by
    KubeRay through the fake job API's pod backend, the model and data staged onto claims."""
    name = create_namespace(cluster, "real-train")
    cluster.kubectl(
        "label",
        "namespace",
        name,
        "pod-security.kubernetes.io/enforce=restricted",
        "grpo.dev/ray-backend=pod",
    )
    stage_colour_claims(
        cluster, name, stage(tmp_path_factory.mktemp("colours"), train_rows=64, validation_rows=8)
    )
    yield name
    delete_namespace(cluster, name)


@pytest.fixture(scope="module")
def release(cluster: Cluster, helm: Helm, watched: str, training: str, real_node: str) -> Iterator[Release]:
    namespace = create_namespace(cluster, "real-operator")
    # Pod Security `restricted` where the operator runs: the chart's pods must pass it.
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    installed = Release(helm, f"e2e-{secrets.token_hex(3)}", namespace)
    installed.install(
        {
            "image": {"tag": image_tag(), "pullPolicy": "Never"},
            "nodeSelector": NODE_SELECTOR,
            "rbac": {"clusterWide": False, "namespaces": [watched, training]},
            "settings": {"resyncSeconds": 5, "fieldManager": FIELD_MANAGER, **HEAD},
            # The cpu pool's trainer pods on the real node, from the CPU trainer image.
            # Ray's dashboard gives each of its module processes 30 s to start, which a loaded
            # 2-core machine overruns (the host's Ray head has the same setting, hack/README.md).
            "profiles": {
                "cpu": {
                    "nodeSelector": NODE_SELECTOR,
                    "image": f"{TRAINER_IMAGE}:{image_tag()}",
                    "env": {"RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT": "180"},
                }
            },
            "cleanup": {"timeoutSeconds": 90},
        }
    )
    yield installed
    installed.uninstall(check=False)
    delete_namespace(cluster, namespace)


def _colour_job(name: str) -> list[dict[str, Any]]:
    """examples/colours-cpu.yaml (its reward ConfigMap too) as job ``name``, shortened to fit."""
    documents = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    job = grpojob_document(EXAMPLE.read_text())
    job["metadata"]["name"] = name
    job["spec"]["algorithm"]["totalSteps"] = STEPS
    job["spec"]["checkpoint"]["saveInterval"] = SAVE_EVERY
    job["spec"]["resources"] = {**job["spec"]["resources"], **WORKER}
    return [*[d for d in documents if d.get("kind") != "GRPOJob"], job]


def _claim_folder(cluster: Cluster, namespace: str, claim: str) -> Path:
    """The host folder of a claim's volume (hack/provisioner: a hostPath on the real node)."""
    pvc = cluster.get("pvc", claim, namespace)
    pv = cluster.get("pv", pvc["spec"]["volumeName"])
    return Path(pv["spec"]["hostPath"]["path"])


def test_the_colour_job_trains_in_ray_pods_of_the_trainer_image(
    cluster: Cluster, release: Release, training: str, real_node: str
) -> None:
    name = f"colours-{secrets.token_hex(2)}"
    cluster.apply(_colour_job(name), training)
    seen: dict[str, dict[str, Any]] = {}

    def final_and_record(job: dict[str, Any]) -> bool:
        # The Ray pods go with the cluster when the job ends: keep what each pod's status said.
        for pod in cluster.get("pods", namespace=training)["items"]:
            if pod["status"].get("containerStatuses"):
                seen[pod["metadata"]["name"]] = pod
        return (job.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    done = cluster.wait_for("grpojob", name, training, final_and_record, timeout=900, what="a final phase")
    status = done["status"]
    assert status["phase"] == "Succeeded", json.dumps(status.get("conditions"), indent=1)

    heads = [p for p in seen.values() if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
    workers = [p for p in seen.values() if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
    assert heads, f"no head pod seen among {sorted(seen)}"
    assert workers, f"no worker pod seen among {sorted(seen)}"
    for pod in heads + workers:
        assert pod["spec"]["nodeName"] == real_node
        ray = next(
            s
            for s in pod["status"]["containerStatuses"]
            if s["name"] == "ray-head" or s["name"].startswith("ray")
        )
        assert ray["image"].endswith(f"{TRAINER_IMAGE}:{image_tag()}"), ray
        assert ray["containerID"].startswith("containerd://"), ray
        assert ray["imageID"], ray
        assert pod["spec"]["securityContext"].get("runAsNonRoot") or all(
            c.get("securityContext", {}).get("runAsNonRoot") for c in pod["spec"]["containers"]
        )

    assert status["progress"]["step"] == STEPS
    assert status["checkpoint"]["latestStep"] == STEPS
    path = job_dir(name, done["metadata"]["uid"])
    assert status["outputs"]["model"] == f"{path}/export/model"
    # On the real volume of the job's checkpoint claim: the trainer in the pod wrote them there.
    claim = next(
        v for v in cluster.get("pvc", namespace=training)["items"] if v["metadata"]["name"].startswith(name)
    )
    folder = _claim_folder(cluster, training, claim["metadata"]["name"]) / Path(path).name
    assert (folder / "checkpoints" / f"checkpoint-{STEPS}").is_dir()
    assert (folder / "export" / "model" / "config.json").is_file()
    assert (folder / "export" / "lora-adapter" / "adapter_config.json").is_file()
    assert (folder / "checkpoints").stat().st_uid == 1000  # written by the trainer's user


# Last: it uninstalls the release the module shares.
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
