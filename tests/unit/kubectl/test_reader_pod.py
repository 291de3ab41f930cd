"""Where the reader pod behind `logs`, `checkpoints` and `plot` may run: its job's node pool only.

The pod mounts a job's claim and prints a file; it needs no accelerator and must not reach nodes
the job's own pods could not (another pool's) or nodes being emptied (cordoned, draining). The
scheduler that places it from this spec is tested in tests/integration/test_reader_placement.py.
"""

from __future__ import annotations

from typing import Any

from grpo_kubectl.reader import ReadTarget, build_reader_pod
from grpo_operator.api.v1alpha1 import GRPOJob
from support.operator_inputs import minimal_body

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
"""What cordoned and draining nodes carry (Kubernetes' own name)."""
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _job(
    accelerator: str = "nvidia", tolerations: list[dict[str, Any]] | None = None, **status: Any
) -> GRPOJob:
    body = minimal_body(
        resources={"accelerator": accelerator, "devicesPerNode": 1, "tolerations": tolerations or []}
    )
    body["status"] = status
    return GRPOJob.model_validate(body)


def _spec(target: GRPOJob | ReadTarget) -> dict[str, Any]:
    return build_reader_pod(target, "true")["spec"]


def test_a_gpu_jobs_reader_tolerates_its_pools_taint_and_no_other():
    assert _spec(_job("nvidia"))["tolerations"] == [GPU_TAINT]
    assert _spec(_job("ascend"))["tolerations"] == [
        {"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"}
    ]


def test_a_cpu_jobs_reader_and_a_claim_alone_tolerate_nothing():
    assert _spec(_job("cpu"))["tolerations"] == []
    assert _spec(ReadTarget("team-a", "kept-checkpoints", "kept"))["tolerations"] == []


def test_the_jobs_own_tolerations_are_kept_but_never_every_taint_or_a_cordoned_node():
    """A job may tolerate every taint (no key) or cordoned nodes for its own reasons; its reader
    takes the named pool taints only, so it always needs a schedulable node."""
    own = {"key": "team.example/pool", "operator": "Equal", "value": "vision", "effect": "NoSchedule"}
    job = _job(
        "nvidia",
        [
            {"operator": "Exists"},
            {"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"},
            own,
        ],
    )
    tolerations = _spec(job)["tolerations"]
    assert tolerations == [GPU_TAINT, own]
    assert all(t.get("key") and t["key"] != UNSCHEDULABLE_TAINT for t in tolerations)


def test_it_prefers_the_heads_node_while_the_cluster_may_live_and_else_a_node_of_no_accelerator_pool():
    """The volume is where the head is while the operator names a Ray cluster in status (a
    ReadWriteOnce claim attaches to one node); after that, a CPU node. One preference at a time:
    node and pod affinity are scored apart, each scaled to its best node, so a CPU preference
    beside the head's would tie with it rather than yield."""
    live = _spec(_job("nvidia", phase="Running", rayClusterName="demo-1-raycluster"))["affinity"]
    assert set(live) == {"podAffinity"}
    (term,) = live["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
        "grpo.dev/job": "demo",
        "grpo.dev/component": "head",
    }

    gone = _spec(_job("nvidia", phase="Succeeded"))["affinity"]
    assert set(gone) == {"nodeAffinity"}
    (term,) = gone["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    expressions = term["preference"]["matchExpressions"]
    assert {"key": "nvidia.com/gpu.product", "operator": "DoesNotExist"} in expressions
    assert {"key": "accelerator", "operator": "NotIn", "values": ["huawei-Ascend910"]} in expressions
    assert _spec(ReadTarget("team-a", "kept-checkpoints", "kept"))["affinity"] == gone


def test_the_pool_the_operator_recorded_on_the_claim_is_what_the_reader_tolerates_even_once_the_job_is_gone():
    """The operator's settings may taint a pool otherwise than the plugin's default profiles (a
    chart's profiles.cpu.tolerations); it records what the job's pods tolerate on the claim, and
    the reader of the claim tolerates that, with or without the job, never every taint or a
    cordoned node. A record that is not a list of tolerations is ignored."""
    from grpo_operator.children.pvc import build_checkpoint_pvc
    from grpo_operator.config import AcceleratorProfile, Settings

    dedicated = {"key": "example.com/dedicated", "operator": "Exists", "effect": "NoSchedule"}
    own = {"key": "team", "operator": "Equal", "value": "vision", "effect": "NoSchedule"}
    settings = Settings()
    settings.profiles["cpu"] = AcceleratorProfile.model_validate(
        {
            **settings.profiles["cpu"].model_dump(by_alias=True),
            "tolerations": [dedicated, {"operator": "Exists"}],
        }
    )
    job = _job("cpu", tolerations=[own])
    claim = build_checkpoint_pvc(job, settings)
    assert claim is not None
    annotations = claim["metadata"]["annotations"]
    alone = ReadTarget("team-a", claim["metadata"]["name"], job.name)

    assert _spec(ReadTarget.of_job(job).with_claim(annotations))["tolerations"] == [dedicated, own]
    assert _spec(alone.with_claim(annotations))["tolerations"] == [dedicated, own]
    assert _spec(alone.with_claim({}))["tolerations"] == []
    for garbage in ("not json", '{"key": "x"}', "[1, 2]"):
        target = alone.with_claim({key: garbage for key in annotations})
        assert _spec(target)["tolerations"] == []
    # Without a record, the job's own spec and the default profiles (a cpu pool has no taint).
    assert _spec(ReadTarget.of_job(job).with_claim(None))["tolerations"] == [own]
