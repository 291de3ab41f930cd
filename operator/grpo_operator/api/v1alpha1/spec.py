"""`GRPOJob.spec`: what a user asks for.

The defaults written here are the API's defaults, and they live here alone: the API server
stores a spec as the user wrote it (the CRD keeps only the defaults of immutable fields, which
its transition rules need stored; crdgen.py), and the operator, the trainer and `kubectl grpo`
read every spec through these models. So `kubectl describe` shows what the user asked for. The
trainer's resolved job (children/configmap.py) writes every default down when it is rendered and
is kept for every later attempt of the same spec as written, so a default changed in a later
release does not reach a job already running, even when a retry resumes its checkpoint: it
applies to jobs created, or edited, after the upgrade (still an API change, to be named in the
release notes). Values that belong to
the cluster rather than the job (images, node selectors of a pool, volume sizes) are
deliberately left without a default and resolved from the operator's settings at reconcile time.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from ..quantity import parse as parse_quantity
from .base import (
    DNS_SUBDOMAIN,
    INT32_MAX,
    MAX_QUANTITY_RULE,
    QUANTITY_PATTERN,
    ApiModel,
    DataKey,
    LabelKey,
    LabelValue,
    ObjectName,
    Quantity,
    ShortString,
    bounded_quantity,
    cel,
    check_label_keys,
    immutable,
    labels_rule,
    unless_unbounded,
)

_HUB_NAME = r"[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
"""One half of a Hugging Face or ModelScope repository id (the hub's own rule, less its no-'--'/'..')."""
SOURCE_PATTERN = (
    rf"^((hf|modelscope)://{_HUB_NAME}/{_HUB_NAME}"
    rf"|pvc://{DNS_SUBDOMAIN}(/[^\s]*)?"
    r"|s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?"
    r"|/[^\s]*)$"
)
SOURCE_HELP = (
    "hf://org/name, modelscope://org/name, pvc://claim/path, s3://bucket/prefix, "
    "or an absolute path inside the trainer image"
)
_HUB_RULE = (
    "!(self.startsWith('hf://') || self.startsWith('modelscope://')) || "
    "!(self.contains('--') || self.contains('..') || self.endsWith('.git') || self.endsWith('.ipynb'))"
)
_HUB_MESSAGE = (
    "a hub repository id (hf://org/name, modelscope://org/name) may not contain '--' or '..', nor end "
    "in .git or .ipynb: name the repository itself, as on its page"
)


def _hub_id(value: str) -> str:
    """_HUB_RULE, for the parser."""
    if value.startswith(("hf://", "modelscope://")) and (
        "--" in value or ".." in value or value.endswith((".git", ".ipynb"))
    ):
        raise ValueError(_HUB_MESSAGE)
    return value


DEVICE_RESOURCES = ("nvidia.com/gpu", "huawei.com/Ascend910", "huawei.com/Ascend310", "amd.com/gpu")
"""Accelerator resources that resources.devicesPerNode asks for: naming one in extraResources too
would silently replace the device count (the operator also refuses its profiles' own)."""
_UNPREFIXED = r"^(ephemeral-storage|hugepages-[0-9]+[KMGT]i)$"
"""Kubernetes' own resources a pod may request besides CPU and memory; every other resource is an
extended one, which Kubernetes accepts only under a domain prefix and in whole numbers."""


def _extra_resources(value: dict[str, str]) -> dict[str, str]:
    """extraResources' CEL rules, for the parser (quantity() is Kubernetes' own CEL library)."""
    for key, amount in value.items():
        if key in DEVICE_RESOURCES:
            raise ValueError(_DEVICE_MESSAGE)
        if "/" not in key and not re.match(_UNPREFIXED, key) and key not in ("cpu", "memory"):
            raise ValueError(_PREFIX_MESSAGE)
        if "/" in key and parse_quantity(amount)[0].denominator != 1:
            raise ValueError(_WHOLE_MESSAGE)
    return value


_DEVICE_MESSAGE = (
    "resources.extraResources may not name an accelerator's device resource "
    f"({', '.join(DEVICE_RESOURCES)}): resources.devicesPerNode asks for it"
)
_PREFIX_MESSAGE = (
    "resources.extraResources: an extended resource needs its vendor's domain prefix "
    "(rdma/hca_shared_devices_a, example.com/fpga); unprefixed are only ephemeral-storage and hugepages-<size>"
)
_WHOLE_MESSAGE = (
    "resources.extraResources: an extended resource (vendor/name) is counted in whole numbers (1, 2, 8)"
)


Source = Annotated[
    str,
    Field(
        pattern=SOURCE_PATTERN,
        max_length=512,
        json_schema_extra={"x-kubernetes-validations": [cel(_HUB_RULE, _HUB_MESSAGE)]},
    ),
    AfterValidator(_hub_id),
]
OVERRIDE_PATTERN = r"^(~|\+{1,2})?[A-Za-z_][-A-Za-z0-9_.@/\[\]]*=.*$"
"""`key=value` (Hydra's `+key=value`, `++key=value` and `~key=value` too): what the engines accept."""
PYTHON_FILE_PATTERN = r"^\.?[-_a-zA-Z0-9][-._a-zA-Z0-9]*\.py$"
"""A reward file's key in its ConfigMap: a ConfigMap key that ends in `.py`."""
IDENTIFIER_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
"""A Python identifier (a reward function's name)."""
KWARG_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
"""A keyword argument's name: a Python identifier of at most 63 characters."""
ABSOLUTE_PATH_PATTERN = r"^/"
ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
"""An environment variable's name, as Kubernetes accepts it for a container."""
SOURCE_PATTERN_WORDS = {
    SOURCE_PATTERN: SOURCE_HELP,
    OVERRIDE_PATTERN: "key=value (or +key=value, ++key=value, ~key=value)",
    PYTHON_FILE_PATTERN: "a ConfigMap key ending in .py (letters, digits, '-', '_' and '.')",
    IDENTIFIER_PATTERN: "a Python identifier (letters, digits and '_', not starting with a digit)",
    KWARG_PATTERN: "a Python identifier of at most 63 characters",
    ABSOLUTE_PATH_PATTERN: "an absolute path (starting with /)",
    ENV_NAME_PATTERN: "an environment variable name (letters, digits, '-', '_' and '.', not starting with a digit)",
}
"""The spec's patterns in words, for the offline verdict's messages (grpo_operator/verdict.py)."""


class ModelSpec(ApiModel):
    """The policy model to start from."""

    source: Source
    """Where the weights are: hf://org/name, modelscope://org/name, pvc://claim/path, s3://bucket/prefix,
    or an absolute path inside the trainer image."""
    revision: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    """Branch, tag or commit for hf:// and modelscope:// sources."""
    credentials_secret: ObjectName | None = None
    """Secret whose keys become the trainer's environment (HF_TOKEN, MODELSCOPE_API_TOKEN,
    AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_ENDPOINT_URL)."""


class DatasetSpec(ApiModel):
    """Training and validation data: a preset, or parquet files in verl's RL layout."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "has(self.preset) != has(self.train)",
                    "set exactly one of dataset.preset (a built-in dataset) or dataset.train (parquet files)",
                ),
                cel(
                    "!has(self.validation) || has(self.train)",
                    "dataset.validation goes with dataset.train; a preset brings its own validation split",
                ),
            ]
        }
    )

    preset: Literal["geo3k"] | None = None
    """A built-in dataset converted to verl's layout by the trainer (geo3k: hiyouga/geometry3k)."""
    source: Source | None = None
    """Where the preset's raw data is (default for geo3k: hf://hiyouga/geometry3k)."""
    train: Annotated[list[Source], Field(min_length=1, max_length=32)] | None = None
    """Training parquet files or folders."""
    validation: Annotated[list[Source], Field(min_length=1, max_length=32)] | None = None
    """Validation parquet files or folders."""
    credentials_secret: ObjectName | None = None
    """Secret with credentials for the dataset sources (same keys as model.credentialsSecret)."""
    image_key: Annotated[str, Field(min_length=1, max_length=63)] = "images"
    """Column holding each row's images."""
    prompt_key: Annotated[str, Field(min_length=1, max_length=63)] = "prompt"
    """Column holding each row's chat prompt."""
    max_prompt_length: Annotated[int, Field(ge=16, le=262144)] = 2048
    """Longest prompt in tokens (image tokens included)."""
    max_response_length: Annotated[int, Field(ge=16, le=262144)] = 2048
    """Longest generated response in tokens."""
    filter_overlong_prompts: bool = True
    """Drop prompts longer than maxPromptLength before training instead of failing on them."""
    truncation: Literal["error", "left", "right", "middle"] = "error"
    """What to do with a prompt that is still too long."""


class CustomReward(ApiModel):
    """A user reward function shipped in a ConfigMap."""

    config_map: ObjectName
    """ConfigMap holding the Python file."""
    key: Annotated[str, Field(pattern=PYTHON_FILE_PATTERN, max_length=253)] = "reward.py"
    """Key of the file in the ConfigMap."""
    function: Annotated[str, Field(pattern=IDENTIFIER_PATTERN, max_length=128)] = "compute_score"
    """Function to call."""
    batch: bool = False
    """The function grades a whole batch: f(data_sources, solution_strs, ground_truths, extra_infos) -> list."""


class RewardSpec(ApiModel):
    """How responses are scored."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "has(self.builtin) != has(self.custom)",
                    "set exactly one of reward.builtin or reward.custom",
                )
            ]
        }
    )

    builtin: Literal["geo3k", "geo3k-lenient", "reasoning-format", "safety"] | None = None
    """A reward bundled with the trainer: geo3k (verl's own geo3k score, as the geo3k Ascend recipe scores), geo3k-lenient
    (the same weights, equal values written differently count as equal), reasoning-format, safety."""
    custom: CustomReward | None = None
    """A user function from a ConfigMap."""
    kwargs: Annotated[
        dict[Annotated[str, Field(pattern=KWARG_PATTERN)], ShortString],
        Field(max_length=32),
    ] = Field(default_factory=dict)
    """Extra keyword arguments passed to the reward function (as strings); each name a Python
    identifier."""


class KLSpec(ApiModel):
    """KL regularisation against the reference policy."""

    coefficient: Annotated[float, Field(ge=0, le=10)] = 0.01
    """Weight of the KL term."""
    type: Literal["kl", "abs", "mse", "low_var_kl", "full"] = "low_var_kl"
    """Estimator of the KL divergence."""
    placement: Literal["loss", "reward", "none"] = "loss"
    """Add KL to the policy loss (GRPO's default), subtract it from the reward, or leave it out."""


class AlgorithmSpec(ApiModel):
    """GRPO hyperparameters. Batch sizes count prompts; each prompt yields groupSize responses."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!(has(self.microBatchSizePerDevice) && has(self.tokensPerDevice))",
                    "set at most one of algorithm.microBatchSizePerDevice or algorithm.tokensPerDevice",
                ),
                cel(
                    "self.miniBatchSize <= self.trainBatchSize",
                    "algorithm.miniBatchSize must not exceed algorithm.trainBatchSize",
                ),
            ]
        }
    )

    group_size: Annotated[int, Field(ge=2, le=256)] = 5
    """Responses sampled per prompt (G, verl's rollout.n)."""
    train_batch_size: Annotated[int, Field(ge=1, le=65536)] = 512
    """Prompts per training step."""
    mini_batch_size: Annotated[int, Field(ge=1, le=65536)] = 16
    """Prompts per optimizer update (PPO mini-batch)."""
    micro_batch_size_per_device: Annotated[int, Field(ge=1, le=4096)] | None = None
    """Responses per forward/backward pass on one device (default 2 unless tokensPerDevice is set)."""
    tokens_per_device: Annotated[int, Field(ge=1024, le=4194304)] | None = None
    """Token budget per device per pass; switches to dynamic batch sizes instead of a fixed micro-batch."""
    log_prob_micro_batch_size_per_device: Annotated[int, Field(ge=1, le=4096)] | None = None
    """Responses per log-probability pass (rollout and reference); defaults to the micro-batch size."""
    learning_rate: Annotated[float, Field(gt=0, le=1)] = 1e-6
    """Actor learning rate."""
    kl: KLSpec = Field(default_factory=KLSpec)
    entropy_coefficient: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Weight of the entropy bonus."""
    loss_type: Literal["grpo", "dr_grpo"] = "grpo"
    """grpo normalises advantages by the group's std; dr_grpo (Dr. GRPO) does not, and sums token losses
    over a constant length."""
    loss_aggregation: (
        Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] | None
    ) = None
    """Override how token losses are aggregated (default follows lossType)."""
    importance_sampling: Literal["token", "sequence"] = "token"
    """Importance ratio per token (GRPO) or per sequence (GSPO)."""
    clip_ratio: Annotated[float, Field(gt=0, le=1)] = 0.2
    """PPO clip range."""
    epochs: Annotated[int, Field(ge=1, le=10000)] = 15
    """Passes over the training data."""
    total_steps: Annotated[int, Field(ge=1, le=10000000)] | None = None
    """Stop after this many steps (overrides epochs)."""
    seed: Annotated[int, Field(ge=0, le=2147483647)] = 42
    """Data shuffling seed."""


_BUDGET_FLOOR = "1Gi"
_BUDGET_MESSAGE = (
    "rollout.memoryBudget must be at least 1Gi: it holds the whole training process on its device "
    "(e.g. 16G for a 16 GB card)"
)


def _budget_floor(value: str) -> str:
    """_BUDGET_RULE and the bound every quantity has, for the parser."""
    if parse_quantity(value)[0] < parse_quantity(_BUDGET_FLOOR)[0]:
        raise ValueError(_BUDGET_MESSAGE)
    return bounded_quantity(value)


MemoryBudget = Annotated[
    str,
    Field(
        pattern=QUANTITY_PATTERN,
        max_length=32,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    f"{unless_unbounded('self')} || !quantity(self).isLessThan(quantity('{_BUDGET_FLOOR}'))",
                    _BUDGET_MESSAGE,
                ),
                MAX_QUANTITY_RULE,
            ]
        },
    ),
    AfterValidator(_budget_floor),
]


class RolloutSpec(ApiModel):
    """Response generation."""

    engine: Literal["vllm"] = "vllm"
    """Inference engine (vLLM; vLLM-Ascend on Ascend)."""
    tensor_parallel_size: Annotated[int, Field(ge=1, le=64)] = 1
    """Devices per rollout replica; must divide resources.devicesPerNode."""
    gpu_memory_utilization: Annotated[float, Field(ge=0.05, le=0.99)] = 0.6
    """Share of device memory the rollout engine may take (verl; the trl engine's vLLM too when
    rollout.memoryBudget is unset)."""
    enforce_eager: bool = False
    """Run without CUDA/ACL graphs (slower, less memory, fewer surprises on new hardware)."""
    enable_chunked_prefill: bool = True
    """Chunked prefill in vLLM."""
    free_cache_engine: bool = True
    """Release the KV cache between rollout and training."""
    temperature: Annotated[float, Field(ge=0, le=10)] = 1.0
    """Sampling temperature during training rollouts."""
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    """Nucleus sampling during training rollouts: sample from the most likely tokens whose
    probabilities add up to topP (1: every token, as both engines' defaults and the reference
    recipes)."""
    top_k: Annotated[int, Field(ge=0, le=1048576)] = 0
    """Sample from the topK most likely tokens only (0: every token, as the reference recipes; verl
    receives it as its -1)."""
    min_p: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Drop tokens less likely than minP times the most likely token's probability (0: none, as the
    reference recipes). The trl engine only: verl passes no min-p to its rollouts."""
    memory_budget: MemoryBudget | None = None
    """The trl engine's device memory for its whole training process (policy, LoRA state,
    activations and, when vLLM generates, vLLM's copy of the weights, KV cache and graphs), e.g. 16G
    for a 16 GB card. vLLM gets what is left after the trainer's part, as its share of the device the
    process lands on, read at start. A budget that cannot hold the model twice has the policy's
    weights wait in host memory while vLLM generates (one copy on the device at a time). Unset:
    gpuMemoryUtilization's share of the device for generation vllm. `grpo-train plan` shows the
    arithmetic; a budget that cannot hold even one copy at a time beside LoRA and vLLM's least KV
    cache fails before training."""
    generation: Literal["auto", "eager", "compiled", "vllm"] = "auto"
    """How the trl engine generates rollouts: eager (transformers' generate, step by step), compiled
    (a static KV cache and torch.compile'd CUDA-graph decoding: the same sampling, much less launch
    overhead), vllm (TRL's colocated vLLM: its own copy of the weights, adapters merged into it,
    rollouts corrected by importance sampling: faster, but it samples from a bf16 merge of the
    adapters, not the policy being trained), or auto (the policy samples its own rollouts: compiled
    on CUDA, eager elsewhere; vllm only when asked for; `grpo-train plan` says which and why). verl
    always generates with rollout.engine; leave this at auto there."""


ModuleName = Annotated[str, Field(min_length=1, max_length=128)]
"""A module name as the model spells it (an empty one would name nothing and adapt nothing)."""


class LoraSpec(ApiModel):
    """Low-rank adapters instead of full fine-tuning."""

    rank: Annotated[int, Field(ge=1, le=512)] = 16
    """The adapters' rank r."""
    alpha: Annotated[int, Field(ge=1, le=1024)] = 16
    """The adapters' scaling alpha (the update is scaled by alpha / rank)."""
    dropout: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Dropout on the adapters' input."""
    vision_layers: bool = True
    """Adapt the vision encoder and projector (so gradients reach the image features)."""
    language_layers: bool = True
    """Adapt the language decoder."""
    attention_modules: bool = True
    """Adapt the attention projections."""
    mlp_modules: bool = True
    """Adapt the MLP projections."""
    target_modules: Annotated[list[ModuleName], Field(max_length=64)] | None = None
    """Explicit module names or "all-linear"; replaces the four switches above."""
    exclude_modules: Annotated[list[ModuleName], Field(max_length=64)] | None = None
    """Module names never to adapt."""


class EngineSpec(ApiModel):
    """The training engine."""

    name: Annotated[
        Literal["verl", "trl"],
        Field(
            json_schema_extra={
                "x-kubernetes-validations": [immutable("engine.name", "checkpoints are engine-specific")]
            }
        ),
    ] = "verl"
    """verl (distributed, vLLM rollouts) or trl (one device, LoRA)."""
    strategy: Literal["fsdp", "fsdp2"] = "fsdp2"
    """verl's actor strategy."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass: less device memory, about a third more compute."""
    param_offload: bool = False
    """Offload actor parameters to host memory between phases."""
    optimizer_offload: bool = False
    """Offload optimizer state to host memory."""
    ref_param_offload: bool = True
    """Offload the reference model's parameters (verl 0.9.1's FSDP engine keeps the forward-only
    reference's parameters on the host whatever this says)."""
    torch_compile: bool | None = None
    """Compile the FSDP actor with torch.compile (engine default when unset)."""
    use_remove_padding: bool = True
    """Pack sequences without padding in the actor's forward passes (verl's use_remove_padding)."""
    use_fused_kernels: bool = False
    """verl's fused kernels for the log-probability and entropy computation."""
    lora: LoraSpec | None = None
    """Train LoRA adapters instead of all weights (required for trl)."""
    overrides: Annotated[
        list[Annotated[str, Field(pattern=OVERRIDE_PATTERN, max_length=1024)]], Field(max_length=128)
    ] = Field(default_factory=list)
    """Escape hatch: raw engine overrides (Hydra `key=value` for verl, GRPOConfig `key=value` for trl),
    applied last."""


_TOLERATION_RULES = [
    cel(
        "has(self.key) || (has(self.operator) && self.operator == 'Exists')",
        "a toleration without a key must use operator Exists (it then tolerates every taint)",
    ),
    cel(
        "!(has(self.operator) && self.operator == 'Exists' && has(self.value) && self.value != '')",
        "a toleration with operator Exists takes no value",
    ),
    cel(
        "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
        "tolerationSeconds goes with effect NoExecute",
    ),
]


class Toleration(ApiModel):
    """A pod toleration, as in core/v1."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [*_TOLERATION_RULES]})

    key: LabelKey | None = None
    """The taint key; empty with operator Exists tolerates every taint."""
    operator: Literal["Exists", "Equal"] | None = None
    """Equal (the default) matches key and value; Exists matches any value."""
    value: LabelValue | None = None
    """The taint value, for operator Equal."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """The taint effect to tolerate; empty tolerates every effect."""
    toleration_seconds: int | None = None
    """For NoExecute: how long the pod stays bound after the taint appears (default: forever)."""

    @model_validator(mode="after")
    def _as_the_pod_api_wants(self) -> Self:
        """_TOLERATION_RULES, for the parser."""
        exists = self.operator == "Exists"
        if self.key is None and not exists:
            raise ValueError(_TOLERATION_RULES[0]["message"])
        if exists and self.value:
            raise ValueError(_TOLERATION_RULES[1]["message"])
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError(_TOLERATION_RULES[2]["message"])
        return self


class ResourcesSpec(ApiModel):
    """Where and on how much hardware the job runs."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.workloadPriorityClass) || has(self.queueName)",
                    "resources.workloadPriorityClass orders a job in its Kueue queue: set "
                    "resources.queueName too",
                )
            ]
        }
    )

    accelerator: Annotated[
        Literal["nvidia", "ascend", "cpu"],
        Field(
            json_schema_extra={
                "x-kubernetes-validations": [
                    immutable("resources.accelerator", "checkpoints are device-specific")
                ]
            }
        ),
    ]
    """Accelerator profile from the operator's settings: nvidia GPUs, ascend NPUs, or cpu (no
    accelerator: a smoke run of data and rewards with the trl engine before asking for devices)."""
    product: Annotated[LabelValue, Field(min_length=1)] | None = None
    """Device product to pin to (e.g. NVIDIA-H100-80GB-HBM3; Ascend910B3)."""
    devices_per_node: Annotated[
        int,
        Field(
            ge=1,
            le=16,
            json_schema_extra={
                "x-kubernetes-validations": [
                    immutable("resources.devicesPerNode", "the world size must not change across resumes")
                ]
            },
        ),
    ] = 8
    """Accelerators per worker pod (one pod per node); devicesPerNode × nodes is the job's world size,
    fixed for its life because checkpoint shards embed it."""
    nodes: Annotated[
        int,
        Field(
            ge=1,
            le=128,
            json_schema_extra={
                "x-kubernetes-validations": [
                    immutable("resources.nodes", "the world size must not change across resumes")
                ]
            },
        ),
    ] = 1
    """Worker pods, one per node; more than one needs a ReadWriteMany checkpoint volume."""
    cpu_per_node: Quantity | None = None
    """CPU request per worker pod (default from the operator's settings: 6 per device, cpuPerDevice,
    plus 4, cpuHeadroom)."""
    memory_per_node: Quantity | None = None
    """Memory request and limit per worker pod (default: the profile's memoryPerDevice × devicesPerNode)."""
    shared_memory: Quantity | None = None
    """Size of /dev/shm on every pod (default from the operator's settings, 32Gi)."""
    node_selector: Annotated[
        dict[LabelKey, LabelValue],
        Field(max_length=32, json_schema_extra={"x-kubernetes-validations": [labels_rule("nodeSelector")]}),
        AfterValidator(check_label_keys),
    ] = Field(default_factory=dict)
    """Added to the profile's node selector."""
    tolerations: Annotated[list[Toleration], Field(max_length=32)] = Field(default_factory=list)
    """Added to the profile's tolerations."""
    priority_class_name: ObjectName | None = None
    """PriorityClass of every trainer pod (preemption order; Kueue reads it too)."""
    queue_name: Annotated[LabelValue, Field(min_length=1)] | None = None
    """Kueue LocalQueue. Each attempt's RayJob is created suspended with Kueue's queue label, and
    Kueue starts it by unsuspending it when the queue admits it (and may suspend it again to
    preempt it: the attempt then waits in the queue instead of failing)."""
    workload_priority_class: ObjectName | None = None
    """Kueue WorkloadPriorityClass (kueue.x-k8s.io/priority-class on each attempt's RayJob): the
    job's order in its queue and in preemption, apart from its pods' PriorityClass. A retry is a new
    RayJob, so a new Kueue Workload: it queues anew at this priority (Kueue orders equal
    priorities by creation time, so it goes behind the workloads already waiting)."""
    extra_resources: Annotated[
        dict[LabelKey, Quantity],
        Field(
            max_length=16,
            json_schema_extra={
                "x-kubernetes-validations": [
                    cel(
                        "self.all(k, !(k in ['cpu', 'memory']))",
                        "resources.extraResources is for devices such as RDMA NICs; CPU and memory have "
                        "cpuPerNode and memoryPerNode",
                    ),
                    cel(f"self.all(k, !(k in {list(DEVICE_RESOURCES)}))", _DEVICE_MESSAGE),
                    cel(
                        f"self.all(k, k.contains('/') || k in ['cpu', 'memory'] || k.matches(r'{_UNPREFIXED}'))",
                        _PREFIX_MESSAGE,
                    ),
                    cel(
                        f"self.all(k, !k.contains('/') || {unless_unbounded('self[k]')} "
                        "|| quantity(self[k]).isInteger())",
                        _WHOLE_MESSAGE,
                    ),
                ]
            },
        ),
        AfterValidator(_extra_resources),
    ] = Field(default_factory=dict)
    """More resources each worker pod requests and is limited to, beside its accelerators: e.g.
    rdma/rdma_shared_device_a: 1 for RDMA between nodes."""


class PodsSpec(ApiModel):
    """What every trainer pod (the Ray head and its workers) gets besides what the operator sets."""

    labels: Annotated[
        dict[LabelKey, LabelValue],
        Field(
            max_length=32,
            json_schema_extra={
                "x-kubernetes-validations": [
                    cel(
                        "self.all(k, !k.startsWith('grpo.dev/'))",
                        "pods.labels: the grpo.dev/ labels are the operator's own",
                    )
                ]
            },
        ),
    ] = Field(default_factory=dict)
    """Extra labels (gang schedulers, cost tags, sidecar injectors); the operator's own win."""
    annotations: Annotated[dict[LabelKey, Annotated[str, Field(max_length=4096)]], Field(max_length=32)] = (
        Field(default_factory=dict)
    )
    """Extra annotations (e.g. for a sidecar injector or a network attachment)."""
    image_pull_secrets: Annotated[list[ObjectName], Field(max_length=16)] = Field(default_factory=list)
    """Secrets in the job's namespace for pulling the trainer image from a private registry."""
    scheduler_name: ObjectName | None = None
    """The scheduler that places the pods (e.g. a gang scheduler); the cluster's default when unset."""


class SaveOnStopSpec(ApiModel):
    """Save, then yield: when the job's pods are stopped gracefully (runPolicy.suspend,
    activeDeadlineSeconds, Kueue's preemption, a drain or another eviction), the trainer finishes
    the step it is on, saves it and stops; the next attempt resumes after that step. The pods'
    termination grace period is this save's bound plus the time to finish a step plus a margin
    (`grpo-train plan` shows the sum and where each part came from)."""

    enabled: bool = True
    """Save on a planned stop. Off: a stop loses the steps since the latest periodic checkpoint."""
    timeout_seconds: Annotated[int, Field(ge=1, le=86400)] | None = None
    """How long the save may take. Unset: twice the job's last measured save
    (status.checkpoint.saveSeconds) plus 30 s, else the engine's default (trl 120 s, verl 900 s).
    A save that would not end in time is not begun: the previous checkpoint stands, and
    status.checkpoint.lastStop says how many steps that loses."""


class CheckpointSpec(ApiModel):
    """Where checkpoints live and how many are kept."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!(has(self.claimName) && (has(self.size) || has(self.storageClassName)))",
                    "checkpoint.claimName names an existing volume; size and storageClassName are for one the "
                    "operator creates",
                ),
                cel(
                    "self.resume in ['latest', 'none'] || self.resume.startsWith('/')",
                    "checkpoint.resume must be 'latest', 'none' or an absolute path to a checkpoint folder",
                ),
            ]
        }
    )

    claim_name: ObjectName | None = None
    """Use this existing PersistentVolumeClaim instead of creating one."""
    size: Quantity | None = None
    """Size of the volume the operator creates (default from the operator's settings)."""
    storage_class_name: ObjectName | None = None
    """StorageClass of the volume the operator creates (default from the operator's settings, else the
    cluster's default class)."""
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany"] | None = None
    """Default ReadWriteOnce for one node, ReadWriteMany for several (every rank writes its own shard)."""
    save_interval: Annotated[int, Field(ge=1, le=1000000)] = 20
    """Save every N steps (and always at the last step)."""
    keep: Annotated[int, Field(ge=1, le=1000)] = 3
    """Checkpoints to keep, across attempts."""
    retention: Literal["Retain", "Delete"] = "Retain"
    """Keep the volume when the job is deleted (Retain) or delete it with the job."""
    resume: Annotated[str, Field(min_length=1, max_length=512)] = "latest"
    """How the first attempt starts: latest (from the newest complete checkpoint, when there is one),
    none (from scratch; an earlier run's checkpoints are not continued), or an absolute path to a
    checkpoint folder written by the job's engine. A retried attempt always continues from the latest."""
    save_on_stop: SaveOnStopSpec = Field(default_factory=SaveOnStopSpec)
    """Save the step in progress before the job's pods stop (a suspension, a deadline, a preemption,
    an eviction)."""


class EvaluationSpec(ApiModel):
    """Validation during training."""

    interval: Annotated[int, Field(ge=0, le=1000000)] = 10
    """Validate every N steps; 0 turns validation off."""
    before_train: bool = True
    """Validate once before the first step, for a baseline."""


class WandbSpec(ApiModel):
    """Weights & Biases logging."""

    project: Annotated[str, Field(min_length=1, max_length=128)]
    """The W&B project."""
    experiment: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    """The run's name in the project (default: the job's name)."""
    secret_name: ObjectName
    """Secret with the API key."""
    secret_key: DataKey = "WANDB_API_KEY"
    """Key of the API key in that Secret."""


class LoggingSpec(ApiModel):
    """Where metrics go besides the job's status (which is always updated)."""

    console: bool = True
    """Print each step's metrics in the trainer's log."""
    wandb: WandbSpec | None = None
    tensorboard: bool = False
    """Write TensorBoard event files next to the checkpoints."""


GgufQuantization = Literal[
    "q2_k",
    "q3_k_s",
    "q3_k_m",
    "q3_k_l",
    "q4_0",
    "q4_1",
    "q4_k_s",
    "q4_k_m",
    "q5_0",
    "q5_1",
    "q5_k_s",
    "q5_k_m",
    "q6_k",
    "q8_0",
    "bf16",
    "f16",
    "f32",
]


class GgufExport(ApiModel):
    """A llama.cpp / Ollama copy of the merged model: the language model file and its vision
    projector (`mmproj`), converted and quantized by llama.cpp's own tools (trl engine)."""

    quantization: GgufQuantization = "q4_k_m"
    """llama-quantize type of the language model file (q4_k_m: the single-GPU LoRA recipe's choice)."""
    projector: Literal["f32", "f16", "bf16", "q8_0"] = "f16"
    """Type of the vision projector file; llama.cpp keeps projectors at 16 bits or q8_0."""


class SampleCheck(ApiModel):
    """One generation after the export, recorded beside the model and summarised in status (trl engine)."""

    enabled: bool = True
    """Run the check (it needs export.huggingFace: the merged model generates)."""
    row: Annotated[int, Field(ge=0, le=1000000)] = 0
    """Row of the validation set (of the training set when there is none) whose image and prompt are used."""
    max_new_tokens: Annotated[int, Field(ge=1, le=262144)] | None = None
    """Longest response (default: dataset.maxResponseLength)."""
    temperature: Annotated[float, Field(ge=0, le=10)] = 0.7
    """Sampling temperature (the single-GPU LoRA recipe's check: 0.7 with min_p 0.1); 0 decodes greedily."""
    min_p: Annotated[float, Field(ge=0, le=1)] = 0.1
    """Drop tokens less likely than this share of the most likely one's probability (0: off)."""


class ExportSpec(ApiModel):
    """What is written when training succeeds."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.gguf) || self.huggingFace",
                    "export.gguf is converted from the merged model: set export.huggingFace: true",
                )
            ]
        }
    )

    hugging_face: bool = True
    """Merge the final checkpoint into a Hugging Face model folder."""
    lora_adapter: bool = True
    """Also write the LoRA adapter on its own (LoRA runs only)."""
    gguf: GgufExport | None = None
    """Also write GGUF files for llama.cpp and Ollama (trl engine)."""
    sample: SampleCheck = Field(default_factory=SampleCheck)
    """The post-training check: one generation on a held-out image and prompt (trl engine)."""
    path: Annotated[str, Field(pattern=ABSOLUTE_PATH_PATTERN, max_length=512)] | None = None
    """Absolute output folder (default: <checkpoint dir>/export)."""


class RunPolicy(ApiModel):
    """Retries, deadlines and clean-up."""

    backoff_limit: Annotated[int, Field(ge=0, le=100)] = 3
    """Retries after a retryable failure; each retry resumes from the latest checkpoint."""
    start_deadline_seconds: Annotated[int, Field(ge=60, le=INT32_MAX)] = 1800
    """Fail an attempt whose Ray cluster has not started this long after its RayJob was made
    (StartDeadlineExceeded, with the pods' own reasons: unschedulable, a volume that does not
    mount, an image that does not pull). Time queued by Kueue does not count."""
    active_deadline_seconds: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    """Fail the job (DeadlineExceeded) when it has run this long, all attempts together."""
    ttl_seconds_after_finished: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None
    """Delete the finished job's Ray cluster after this many seconds (the GRPOJob stays)."""
    failed_cluster_retention_seconds: Annotated[int, Field(ge=0, le=604800)] = 0
    """Keep the Ray cluster of the attempt that failed the job this long, to debug it in place
    (its pods, `kubectl exec`, the Ray dashboard); 0 deletes it at once. A retried attempt's
    cluster is always deleted, so the next attempt gets its devices; its log stays on the
    checkpoint volume either way. When this is longer than ttlSecondsAfterFinished, a successful
    job's RayJob is deleted as soon as training succeeds."""
    suspend: bool = False
    """Tear the Ray cluster down and keep the checkpoints; setting it back resumes."""


class HealthSpec(ApiModel):
    """When a run counts as sick: the `Healthy` condition turns False and a Warning Event says why.

    A NaN or infinite reward or loss is always sick. The trainer judges every step it logs; the
    operator turns its verdict into the condition and judges a stall from the step times.
    """

    entropy_floor: Annotated[float, Field(ge=0, le=10)] = 0.02
    """Mean token entropy (nats) at or below which the policy counts as collapsing: it samples
    almost one answer per prompt, so the group has nothing to compare. 0 turns the check off."""
    entropy_collapse_steps: Annotated[int, Field(ge=1, le=10000)] = 10
    """Consecutive steps at or below entropyFloor before the run is called sick."""
    stall_factor: Annotated[float, Field(ge=1, le=1000)] = 5.0
    """No step reported for this many times the last step's duration counts as stalled."""
    stall_minimum_seconds: Annotated[int, Field(ge=60, le=604800)] = 1800
    """Never call a run stalled sooner than this after its last step (validation and checkpoint
    saves take longer than a step)."""


class KeyRef(ApiModel):
    """A key of a Secret or ConfigMap in the job's namespace."""

    name: ObjectName
    """The Secret's or ConfigMap's name."""
    key: DataKey
    """The key whose value the variable takes."""
    optional: bool | None = None
    """Start the pod even when the key or the object is missing (the variable is then unset)."""


class EnvVarSource(ApiModel):
    """Where a variable's value comes from: a Secret's key or a ConfigMap's key."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "has(self.secretKeyRef) != has(self.configMapKeyRef)",
                    "set exactly one of valueFrom.secretKeyRef or valueFrom.configMapKeyRef",
                )
            ]
        }
    )

    secret_key_ref: KeyRef | None = None
    """A Secret's key (tokens, passwords: they stay in the Secret)."""
    config_map_key_ref: KeyRef | None = None
    """A ConfigMap's key."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError("set exactly one of valueFrom.secretKeyRef or valueFrom.configMapKeyRef")
        return self


_ENV_RULES = [
    cel("!(has(self.value) && has(self.valueFrom))", "set value or valueFrom, not both"),
    cel(
        "!self.name.startsWith('GRPO_')",
        "GRPO_* variables are the operator's (the job's name, attempt and files): choose another name",
    ),
]


class EnvVar(ApiModel):
    """An environment variable for every trainer pod: a plain value, or a Secret's or ConfigMap's key
    (which stays out of the job's spec, its ConfigMap and its RayJob)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [*_ENV_RULES]})

    name: Annotated[str, Field(pattern=ENV_NAME_PATTERN, max_length=253)]
    """The variable's name."""
    value: Annotated[str, Field(max_length=4096)] | None = None
    """Its value."""
    value_from: EnvVarSource | None = None
    """Or a Secret's or ConfigMap's key to read it from."""

    @model_validator(mode="after")
    def _one_value(self) -> Self:
        """_ENV_RULES, for the parser."""
        if self.value is not None and self.value_from is not None:
            raise ValueError(_ENV_RULES[0]["message"])
        if self.name.startswith("GRPO_"):
            raise ValueError(_ENV_RULES[1]["message"])
        return self


class GRPOJobSpec(ApiModel):
    """A GRPO post-training run."""

    model: ModelSpec
    dataset: DatasetSpec
    reward: RewardSpec
    resources: ResourcesSpec
    algorithm: AlgorithmSpec = Field(default_factory=AlgorithmSpec)
    rollout: RolloutSpec = Field(default_factory=RolloutSpec)
    engine: EngineSpec = Field(default_factory=EngineSpec)
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec)
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec)
    logging: LoggingSpec = Field(default_factory=LoggingSpec)
    export: ExportSpec = Field(default_factory=ExportSpec)
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    image: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    """Trainer image (default: the accelerator profile's)."""
    env: Annotated[list[EnvVar], Field(max_length=64)] = Field(default_factory=list)
    """Extra environment for every trainer pod: `value`, or `valueFrom` a Secret's or ConfigMap's key."""
    pods: PodsSpec = Field(default_factory=PodsSpec)
    health: HealthSpec = Field(default_factory=HealthSpec)

    @property
    def world_size(self) -> int:
        """Devices across all nodes; fixed for the job's life (checkpoint shards embed it)."""
        return self.resources.devices_per_node * self.resources.nodes
