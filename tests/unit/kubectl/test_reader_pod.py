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
