"""Every example parses, passes validation, and builds the children pinned in golden files.

Regenerate the golden files after an intended change with:
    GRPO_UPDATE_GOLDEN=1 pytest tests/unit/controller/test_examples.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_operator.children.configmap import build_spec_configmap
from grpo_operator.children.networkpolicy import build_network_policy
from grpo_operator.children.pvc import build_checkpoint_pvc
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.children.rbac import build_trainer_rbac
from grpo_operator.config import load_settings
from grpo_operator.validation import validate
from support.operator_inputs import EXAMPLES, example_body, job_from

GOLDEN = Path(__file__).parent / "golden"
SETTINGS = load_settings(environ={})


def test_there_is_one_example_per_seed_and_a_multi_node_one() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {"safegrpo-nvidia", "geo3k-ascend-910b", "lora-single-gpu", "geo3k-two-node-nvidia"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_valid(path: Path) -> None:
    job = job_from(example_body(path))
    assert validate(job, SETTINGS) == []


def _readable(child: dict[str, Any]) -> dict[str, Any]:
    """The spec ConfigMap with its job.json parsed, so a spec change is a diff a reviewer can read."""
    if child["kind"] != "ConfigMap":
        return child
    data = {key: json.loads(value) for key, value in child["data"].items()}
    return {**child, "data": data}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_children_match_golden(path: Path) -> None:
    job = job_from(example_body(path))
    children = [
        build_spec_configmap(job, SETTINGS),
        *build_trainer_rbac(job),
        build_checkpoint_pvc(job, SETTINGS),
        build_network_policy(job, SETTINGS),
        build_rayjob(job, SETTINGS, attempt=1),
    ]
    rendered = yaml.safe_dump_all([_readable(c) for c in children if c is not None], sort_keys=True)
    golden = GOLDEN / f"{path.stem}.yaml"
    if os.environ.get("GRPO_UPDATE_GOLDEN"):
        golden.write_text(rendered)
    assert golden.exists(), f"no golden file; run with GRPO_UPDATE_GOLDEN=1 to create {golden.name}"
    assert rendered == golden.read_text()


def _worker(rayjob: dict) -> dict:
    return rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]


def test_ascend_rayjob_requests_npus_and_declares_the_ray_resource() -> None:
    job = job_from(example_body(Path("examples/geo3k-ascend-910b.yaml").resolve()))
    rayjob = build_rayjob(job, SETTINGS, attempt=1)
    worker = _worker(rayjob)
    pod = worker["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["huawei.com/Ascend910"] == "8"
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    assert pod["nodeSelector"] == {"accelerator": "huawei-Ascend910"}
    assert {"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert worker["rayStartParams"]["resources"] == '"{\\"NPU\\": 8}"'
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["VERL_PLATFORM"] == "huawei"
    assert env["USE_OPTIMIZED_MODEL"] == "0"
    assert env["HCCL_CONNECT_TIMEOUT"] == "1800"
    assert (
        env["GRPO_METRICS_FILE"] == "/grpo/checkpoints/geo3k-qwen3-vl-4b-npu-00000000/metrics/attempt-1.jsonl"
    )


def test_nvidia_rayjob_uses_gpus_and_nccl() -> None:
    job = job_from(example_body(Path("examples/safegrpo-nvidia.yaml").resolve()))
    rayjob = build_rayjob(job, SETTINGS, attempt=3)
    assert rayjob["metadata"]["name"] == "safegrpo-qwen3-vl-4b-3"
    assert rayjob["spec"]["backoffLimit"] == 0
    assert rayjob["spec"]["shutdownAfterJobFinishes"] is True
    assert rayjob["spec"]["entrypoint"] == "grpo-train run --spec /grpo/spec/job.json"
    worker = _worker(rayjob)
    container = worker["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert "resources" not in worker["rayStartParams"], "KubeRay derives GPU from nvidia.com/gpu itself"
    env = {e["name"]: e for e in container["env"]}
    assert "NCCL_TIMEOUT" in env
    assert "VERL_PLATFORM" not in env
    assert env["GRPO_ATTEMPT"]["value"] == "3"
    assert env["WANDB_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "wandb-credentials"
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/grpo/spec", "/grpo/checkpoints", "/dev/shm", "/grpo/sources/safegrpo-data"} <= mounts


def test_single_node_rwo_volume_keeps_head_with_worker_and_multi_node_does_not() -> None:
    single = build_rayjob(
        job_from(example_body(Path("examples/safegrpo-nvidia.yaml").resolve())), SETTINGS, 1
    )
    head = single["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    terms = head["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["labelSelector"]["matchLabels"]["grpo.dev/component"] == "worker"
    multi = build_rayjob(
        job_from(example_body(Path("examples/geo3k-two-node-nvidia.yaml").resolve())), SETTINGS, 1
    )
    assert "affinity" not in multi["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert _worker(multi)["replicas"] == 2
    assert _worker(multi)["template"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"
    }


def test_checkpoint_volume_is_retained_by_default_and_owned_when_delete() -> None:
    body = example_body(Path("examples/safegrpo-nvidia.yaml").resolve())
    retained = build_checkpoint_pvc(job_from(body), SETTINGS)
    assert "ownerReferences" not in retained["metadata"]
    assert retained["spec"]["resources"]["requests"]["storage"] == "500Gi"
    deleted = build_checkpoint_pvc(job_from(body, **{"checkpoint.retention": "Delete"}), SETTINGS)
    assert deleted["metadata"]["ownerReferences"][0]["kind"] == "GRPOJob"
    assert (
        build_checkpoint_pvc(
            job_from(body, **{"checkpoint.claimName": "mine", "checkpoint.size": None}), SETTINGS
        )
        is None
    )


def test_trainer_role_is_limited_to_its_own_job_status() -> None:
    job = job_from(example_body(Path("examples/lora-single-gpu.yaml").resolve()))
    _, role, binding = build_trainer_rbac(job)
    assert role["rules"] == [
        {
            "apiGroups": ["grpo.dev"],
            "resources": ["grpojobs/status"],
            "resourceNames": ["lora-vision-grpo"],
            "verbs": ["get", "patch"],
        }
    ]
    assert binding["subjects"][0]["name"] == "lora-vision-grpo-trainer"


def test_a_queue_name_hands_the_rayjob_to_kueue_suspended() -> None:
    """Kueue's contract: the queue label, and created suspended; Kueue unsuspends it on admission."""
    body = example_body(Path("examples/safegrpo-nvidia.yaml").resolve())
    rayjob = build_rayjob(job_from(body, **{"resources.queueName": "team-a-gpus"}), SETTINGS, 1)
    assert rayjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a-gpus"
    assert rayjob["spec"]["suspend"] is True
    # Kueue's RayJob integration refuses the in-tree autoscaler and needs the cluster torn down at the end.
    assert rayjob["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] is False
    assert rayjob["spec"]["shutdownAfterJobFinishes"] is True


def test_a_workload_priority_class_goes_on_every_attempts_rayjob() -> None:
    body = example_body(Path("examples/safegrpo-nvidia.yaml").resolve())
    changes = {"resources.queueName": "team-a-gpus", "resources.workloadPriorityClass": "research-high"}
    job = job_from(body, **changes)
    for attempt in (1, 2):  # a retry is a new Workload: it must carry the priority too
        labels = build_rayjob(job, SETTINGS, attempt)["metadata"]["labels"]
        assert labels["kueue.x-k8s.io/priority-class"] == "research-high"
        assert labels["kueue.x-k8s.io/queue-name"] == "team-a-gpus"
    plain = build_rayjob(job_from(body, **{"resources.queueName": "q"}), SETTINGS, 1)
    assert "kueue.x-k8s.io/priority-class" not in plain["metadata"]["labels"]


def test_without_a_queue_the_rayjob_starts_at_once() -> None:
    rayjob = build_rayjob(job_from(example_body(EXAMPLES[0])), SETTINGS, 1)
    assert "suspend" not in rayjob["spec"]
    assert "kueue.x-k8s.io/queue-name" not in rayjob["metadata"]["labels"]


def _templates(rayjob: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cluster = rayjob["spec"]["rayClusterSpec"]
    return {
        "head": cluster["headGroupSpec"]["template"],
        "worker": cluster["workerGroupSpecs"][0]["template"],
    }


def test_pass_throughs_reach_every_trainer_pod() -> None:
    body = example_body(Path("examples/geo3k-two-node-nvidia.yaml").resolve())
    job = job_from(
        body,
        **{
            "pods.labels": {"team": "vision", "app.kubernetes.io/name": "mine", "volcano.sh/queue-name": "q"},
            "pods.annotations": {"sidecar.istio.io/inject": "false"},
            "pods.imagePullSecrets": ["registry-creds"],
            "pods.schedulerName": "volcano",
            "resources.extraResources": {"rdma/rdma_shared_device_a": "1"},
        },
    )
    templates = _templates(build_rayjob(job, SETTINGS, 1))
    for component, template in templates.items():
        meta, spec = template["metadata"], template["spec"]
        assert meta["labels"]["team"] == "vision"
        assert meta["labels"]["volcano.sh/queue-name"] == "q"
        # Ours win: the operator's selectors and the head's affinity read them.
        assert meta["labels"]["app.kubernetes.io/name"] == "grpo-job"
        assert meta["labels"]["grpo.dev/component"] == component
        assert meta["annotations"] == {"sidecar.istio.io/inject": "false"}
        assert spec["imagePullSecrets"] == [{"name": "registry-creds"}]
        assert spec["schedulerName"] == "volcano"
    worker = templates["worker"]["spec"]["containers"][0]["resources"]
    assert worker["requests"]["rdma/rdma_shared_device_a"] == "1"
    assert worker["limits"]["rdma/rdma_shared_device_a"] == "1"
    assert worker["requests"]["nvidia.com/gpu"] == "8"
    head = templates["head"]["spec"]["containers"][0]["resources"]
    assert "rdma/rdma_shared_device_a" not in head["requests"], "the head trains nothing"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"resources.extraResources": {"cpu": "8"}}, "spec.resources.extraResources"),
        ({"pods.labels": {"grpo.dev/job": "other"}}, "spec.pods.labels"),
    ],
)
def test_pass_throughs_cannot_take_what_the_operator_sets(change: dict[str, Any], field: str) -> None:
    from grpo_operator.api.rules import rule_violations

    job = job_from(example_body(EXAMPLES[0]), **change)
    assert [v.field for v in rule_violations(job.spec.to_wire())] == [field]
