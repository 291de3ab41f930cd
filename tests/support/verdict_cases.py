"""Invalid GRPOJobs, each with the field a user must change, for comparing every judge's verdict.

Each case is a small change to a valid job. The API server refuses most (schema, CEL: the batch
arithmetic included), the operator the rest (its settings, a claim it reads); `grpo-train validate`/`plan`, `kubectl grpo
validate` offline and online must refuse exactly these, naming the same field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from support.examples import with_changes

BASE: dict[str, Any] = {
    "apiVersion": "grpo.dev/v1alpha1",
    "kind": "GRPOJob",
    "metadata": {"name": "verdict"},
    "spec": {
        "model": {"source": "hf://Qwen/Qwen3-VL-4B-Instruct"},
        "dataset": {"preset": "geo3k"},
        "reward": {"builtin": "geo3k"},
        "resources": {"accelerator": "nvidia", "devicesPerNode": 8},
        "algorithm": {"trainBatchSize": 64, "miniBatchSize": 16, "groupSize": 4},
    },
}


@dataclass(frozen=True)
class Case:
    id: str
    changes: dict[str, Any]
    """Dotted paths under the manifest -> new value (None removes the key)."""
    field: str
    """The field every judge must name."""
    judge: str
    """Who refuses it in a cluster: "server" (schema or CEL) or "operator" (validation.py)."""
    name: str = "verdict"
    extra: dict[str, Any] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        body = with_changes(BASE, {"metadata.name": self.name})
        return with_changes(body, self.changes)


CASES = [
    Case("preset-and-train", {"spec.dataset.train": ["pvc://data/train.parquet"]}, "spec.dataset", "server"),
    Case("neither-preset-nor-train", {"spec.dataset.preset": None}, "spec.dataset", "server"),
    Case(
        "validation-without-train",
        {"spec.dataset.validation": ["pvc://data/val.parquet"]},
        "spec.dataset",
        "server",
    ),
    Case(
        "two-rewards",
        {"spec.reward.custom": {"configMap": "my-reward"}},
        "spec.reward",
        "server",
    ),
    Case(
        "micro-batch-and-token-budget",
        {"spec.algorithm.microBatchSizePerDevice": 2, "spec.algorithm.tokensPerDevice": 16384},
        "spec.algorithm",
        "server",
    ),
    Case("mini-batch-above-train-batch", {"spec.algorithm.miniBatchSize": 128}, "spec.algorithm", "server"),
    Case("resume-not-a-path", {"spec.checkpoint.resume": "yesterday"}, "spec.checkpoint", "server"),
    Case(
        "claim-and-size",
        {"spec.checkpoint.claimName": "ckpt", "spec.checkpoint.size": "10Gi"},
        "spec.checkpoint",
        "server",
    ),
    Case(
        "trl-on-eight-devices",
        {"spec.engine": {"name": "trl", "lora": {"rank": 8}}},
        "spec.engine.name",
        "server",
    ),
    Case(
        "trl-without-lora",
        {"spec.engine": {"name": "trl"}, "spec.resources.devicesPerNode": 1},
        "spec.engine.lora",
        "server",
    ),
    Case("group-of-one", {"spec.algorithm.groupSize": 1}, "spec.algorithm.groupSize", "server"),
    Case(
        "unknown-accelerator", {"spec.resources.accelerator": "tpu"}, "spec.resources.accelerator", "server"
    ),
    Case(
        "priority-without-queue",
        {"spec.resources.workloadPriorityClass": "research-high"},
        "spec.resources",
        "server",
    ),
    Case("mistyped-field", {"spec.algorithm.groupSise": 8}, "spec.algorithm.groupSise", "server"),
    # YAML that quotes a number or a boolean: the models alone would read "4" as 4, the server refuses it.
    Case("number-as-a-string", {"spec.algorithm.groupSize": "4"}, "spec.algorithm.groupSize", "server"),
    Case(
        "boolean-as-a-string",
        {"spec.engine": {"gradientCheckpointing": "true"}},
        "spec.engine.gradientCheckpointing",
        "server",
    ),
    # A list's empty entry (`- ` in YAML): the server prunes a null field, but refuses a null item.
    Case(
        "null-in-a-list",
        {"spec.engine": {"overrides": ["actor_rollout_ref.actor.ppo_epochs=1", None]}},
        "spec.engine.overrides[1]",
        "server",
    ),
    # An empty module name (`targetModules: [""]`) names no module: refused, not silently ignored.
    Case(
        "empty-module-name",
        {"spec.engine": {"lora": {"rank": 8, "targetModules": ["q_proj", ""]}}},
        "spec.engine.lora.targetModules[1]",
        "server",
    ),
    # An empty image (a template's unset value) ran the profile's image without a word.
    Case("empty-image", {"spec.image": ""}, "spec.image", "server"),
    # Beside spec, where the GRPOJob model ignores what it does not know: kubectl's strict field
    # validation refuses it.
    Case("mistyped-top-level-field", {"sepc": {"algorithm": {"groupSize": 8}}}, "sepc", "server"),
    Case(
        "responses-do-not-split-over-devices",
        {
            "spec.algorithm.trainBatchSize": 30,
            "spec.algorithm.miniBatchSize": 10,
            "spec.algorithm.groupSize": 5,
        },
        "spec.algorithm.trainBatchSize",
        "server",
    ),
    Case(
        "tensor-parallel-does-not-divide-a-node",
        {"spec.rollout.tensorParallelSize": 3},
        "spec.rollout.tensorParallelSize",
        "server",
    ),
    Case(
        "two-nodes-on-a-single-node-volume",
        {"spec.resources.nodes": 2, "spec.checkpoint.accessMode": "ReadWriteOnce"},
        "spec.checkpoint.accessMode",
        "server",
    ),
    Case(
        "validation-interval-without-validation-data",
        {"spec.dataset.preset": None, "spec.dataset.train": ["pvc://data/train.parquet"]},
        "spec.evaluation.interval",
        "server",
    ),
    Case("name-too-long-for-kuberay", {}, "metadata.name", "server", name="n" * 41),
    Case(
        "verl-on-cpu",
        {"spec.resources.accelerator": "cpu", "spec.resources.devicesPerNode": 1},
        "spec.engine.name",
        "operator",
    ),
]
