"""`GRPOJob.spec`: what a user asks for.

Defaults written here become schema defaults, so the API server stores them in the object: a
later operator release that changes a default does not change the hyperparameters of a job that
is already running (or resuming). Values that belong to the cluster rather than the job (images,
node selectors of a pool, volume sizes) are deliberately left without a default and resolved from
the operator's settings at reconcile time.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from .base import (
    DNS_SUBDOMAIN,
    INT32_MAX,
    ApiModel,
    DataKey,
    LabelKey,
    LabelValue,
    ObjectName,
    Quantity,
    ShortString,
    cel,
    check_label_keys,
    immutable,
    labels_rule,
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
    "!(self.contains('--') || self.contains('..'))"
)
_HUB_MESSAGE = "a hub repository id (hf://org/name, modelscope://org/name) may not contain '--' or '..'"


def _hub_id(value: str) -> str:
    """_HUB_RULE, for the parser."""
    if value.startswith(("hf://", "modelscope://")) and ("--" in value or ".." in value):
        raise ValueError(_HUB_MESSAGE)
    return value


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


class ModelSpec(ApiModel):
    """The policy model to start from."""

    source: Source
    """Where the weights are: hf://org/name, modelscope://org/name, pvc://claim/path, s3://bucket/prefix,
    or an absolute path inside the trainer image."""
    revision: ShortString | None = None
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
    image_key: Annotated[str, Field(max_length=63)] = "images"
    """Column holding each row's images."""
    prompt_key: Annotated[str, Field(max_length=63)] = "prompt"
    """Column holding each row's chat prompt."""
    max_prompt_length: Annotated[int, Field(ge=16, le=262144)] = 2048
    """Longest prompt in tokens (image tokens included)."""
    max_response_length: Annotated[int, Field(ge=16, le=262144)] = 2048
    """Longest generated response in tokens."""
    filter_overlong_prompts: bool = True
    """Drop prompts longer than maxPromptLength before training instead of failing on them."""
    truncation: Literal["error", "left", "right", "middle"] = "error"
    """What to do with a prompt that is still too long."""

    @model_validator(mode="after")
    def _as_the_schema_says(self) -> Self:
        """The section's CEL rules, for the parser (same words)."""
        if (self.preset is None) == (self.train is None):
            raise ValueError(
                "set exactly one of dataset.preset (a built-in dataset) or dataset.train (parquet files)"
            )
        if self.validation is not None and self.train is None:
            raise ValueError(
                "dataset.validation goes with dataset.train; a preset brings its own validation split"
            )
        return self


class CustomReward(ApiModel):
    """A user reward function shipped in a ConfigMap."""

    config_map: ObjectName
    """ConfigMap holding the Python file."""
    key: Annotated[str, Field(pattern=r"^[-._a-zA-Z0-9]+\.py$", max_length=253)] = "reward.py"
    """Key of the file in the ConfigMap."""
    function: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)] = "compute_score"
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

    builtin: Literal["geo3k", "reasoning-format", "safety"] | None = None
    """A reward bundled with the trainer."""
    custom: CustomReward | None = None
    """A user function from a ConfigMap."""
    kwargs: Annotated[
        dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")], ShortString],
        Field(max_length=32),
    ] = Field(default_factory=dict)
    """Extra keyword arguments passed to the reward function (as strings); each name a Python
    identifier."""

    @model_validator(mode="after")
    def _as_the_schema_says(self) -> Self:
        """The section's CEL rule, for the parser (same words)."""
        if (self.builtin is None) == (self.custom is None):
            raise ValueError("set exactly one of reward.builtin or reward.custom")
        return self


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

    @model_validator(mode="after")
    def _as_the_schema_says(self) -> Self:
        """The section's CEL rules, for the parser (same words)."""
        if self.micro_batch_size_per_device is not None and self.tokens_per_device is not None:
            raise ValueError(
                "set at most one of algorithm.microBatchSizePerDevice or algorithm.tokensPerDevice"
            )
        if self.mini_batch_size > self.train_batch_size:
            raise ValueError("algorithm.miniBatchSize must not exceed algorithm.trainBatchSize")
        return self


class RolloutSpec(ApiModel):
    """Response generation."""

    engine: Literal["vllm"] = "vllm"
    """Inference engine (vLLM; vLLM-Ascend on Ascend)."""
    tensor_parallel_size: Annotated[int, Field(ge=1, le=64)] = 1
    """Devices per rollout replica; must divide resources.devicesPerNode."""
    gpu_memory_utilization: Annotated[float, Field(ge=0.05, le=0.99)] = 0.6
    """Share of device memory the rollout engine may take."""
    enforce_eager: bool = False
    """Run without CUDA/ACL graphs (slower, less memory, fewer surprises on new hardware)."""
    enable_chunked_prefill: bool = True
    """Chunked prefill in vLLM."""
    free_cache_engine: bool = True
    """Release the KV cache between rollout and training."""
    temperature: Annotated[float, Field(ge=0, le=10)] = 1.0
    """Sampling temperature during training rollouts."""


class LoraSpec(ApiModel):
    """Low-rank adapters instead of full fine-tuning."""

    rank: Annotated[int, Field(ge=1, le=512)] = 16
    alpha: Annotated[int, Field(ge=1, le=1024)] = 16
    dropout: Annotated[float, Field(ge=0, le=1)] = 0.0
    vision_layers: bool = True
    """Adapt the vision encoder and projector (so gradients reach the image features)."""
    language_layers: bool = True
    """Adapt the language decoder."""
    attention_modules: bool = True
    mlp_modules: bool = True
    target_modules: Annotated[list[Annotated[str, Field(max_length=128)]], Field(max_length=64)] | None = None
    """Explicit module names or "all-linear"; replaces the four switches above."""
    exclude_modules: Annotated[list[Annotated[str, Field(max_length=128)]], Field(max_length=64)] | None = (
        None
    )


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
    param_offload: bool = False
    """Offload actor parameters to host memory between phases."""
    optimizer_offload: bool = False
    """Offload optimizer state to host memory."""
    ref_param_offload: bool = True
    """Offload the reference model's parameters."""
    torch_compile: bool | None = None
    """Compile the FSDP actor with torch.compile (engine default when unset)."""
    use_remove_padding: bool = True
    use_fused_kernels: bool = False
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

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": _TOLERATION_RULES})

    key: LabelKey | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None

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
    cpu_per_node: Quantity | None = None
    """CPU request per worker pod (default from the profile: 4 per device plus headroom)."""
    memory_per_node: Quantity | None = None
    """Memory request per worker pod."""
    shared_memory: Quantity | None = None
    """Size of /dev/shm on every pod."""
    node_selector: Annotated[
        dict[LabelKey, LabelValue],
        Field(max_length=32, json_schema_extra={"x-kubernetes-validations": [labels_rule("nodeSelector")]}),
        AfterValidator(check_label_keys),
    ] = Field(default_factory=dict)
    """Added to the profile's node selector."""
    tolerations: Annotated[list[Toleration], Field(max_length=32)] = Field(default_factory=list)
    """Added to the profile's tolerations."""
    priority_class_name: ObjectName | None = None
    queue_name: Annotated[LabelValue, Field(min_length=1)] | None = None
    """Kueue LocalQueue; the RayJob is labelled kueue.x-k8s.io/queue-name and admitted by Kueue."""


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
                    "checkpoint.resume must be 'latest', 'none' or an absolute path to a global_step_N folder",
                ),
            ]
        }
    )

    claim_name: ObjectName | None = None
    """Use this existing PersistentVolumeClaim instead of creating one."""
    size: Quantity | None = None
    """Size of the volume the operator creates (default from the operator's settings)."""
    storage_class_name: ObjectName | None = None
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany"] | None = None
    """Default ReadWriteOnce for one node, ReadWriteMany for several (every rank writes its own shard)."""
    save_interval: Annotated[int, Field(ge=1, le=1000000)] = 20
    """Save every N steps (and always at the last step)."""
    keep: Annotated[int, Field(ge=1, le=1000)] = 3
    """Checkpoints to keep, across attempts."""
    retention: Literal["Retain", "Delete"] = "Retain"
    """Keep the volume when the job is deleted (Retain) or delete it with the job."""
    resume: Annotated[str, Field(max_length=512)] = "latest"
    """latest, none, or an absolute path to a global_step_N folder."""

    @model_validator(mode="after")
    def _as_the_schema_says(self) -> Self:
        """The section's CEL rules, for the parser (same words)."""
        if self.claim_name is not None and (self.size is not None or self.storage_class_name is not None):
            raise ValueError(
                "checkpoint.claimName names an existing volume; size and storageClassName are for one the "
                "operator creates"
            )
        if self.resume not in ("latest", "none") and not self.resume.startswith("/"):
            raise ValueError(
                "checkpoint.resume must be 'latest', 'none' or an absolute path to a global_step_N folder"
            )
        return self


class EvaluationSpec(ApiModel):
    """Validation during training."""

    interval: Annotated[int, Field(ge=0, le=1000000)] = 10
    """Validate every N steps; 0 turns validation off."""
    before_train: bool = True
    """Validate once before the first step, for a baseline."""


class WandbSpec(ApiModel):
    """Weights & Biases logging."""

    project: Annotated[str, Field(max_length=128)]
    experiment: Annotated[str, Field(max_length=128)] | None = None
    secret_name: ObjectName
    """Secret with the API key."""
    secret_key: DataKey = "WANDB_API_KEY"


class LoggingSpec(ApiModel):
    """Where metrics go besides the job's status (which is always updated)."""

    console: bool = True
    wandb: WandbSpec | None = None
    tensorboard: bool = False
    """Write TensorBoard event files next to the checkpoints."""


class ExportSpec(ApiModel):
    """What is written when training succeeds."""

    hugging_face: bool = True
    """Merge the final checkpoint into a Hugging Face model folder."""
    lora_adapter: bool = True
    """Also write the LoRA adapter on its own (LoRA runs only)."""
    path: Annotated[str, Field(pattern=r"^/", max_length=512)] | None = None
    """Absolute output folder (default: <checkpoint dir>/export)."""


class RunPolicy(ApiModel):
    """Retries, deadlines and clean-up."""

    backoff_limit: Annotated[int, Field(ge=0, le=100)] = 3
    """Retries after a retryable failure; each retry resumes from the latest checkpoint."""
    active_deadline_seconds: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    """Fail the job (DeadlineExceeded) when it has run this long, all attempts together."""
    ttl_seconds_after_finished: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None
    """Delete the finished job's Ray cluster after this many seconds (the GRPOJob stays)."""
    suspend: bool = False
    """Tear the Ray cluster down and keep the checkpoints; setting it back resumes."""


class KeyRef(ApiModel):
    """A key of a Secret or ConfigMap in the job's namespace."""

    name: ObjectName
    key: DataKey
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
    config_map_key_ref: KeyRef | None = None

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

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": _ENV_RULES})

    name: Annotated[str, Field(pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$", max_length=253)]
    value: Annotated[str, Field(max_length=4096)] | None = None
    value_from: EnvVarSource | None = None

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
    image: Annotated[str, Field(max_length=512)] | None = None
    """Trainer image (default: the accelerator profile's)."""
    env: Annotated[list[EnvVar], Field(max_length=64)] = Field(default_factory=list)
    """Extra environment for every trainer pod: `value`, or `valueFrom` a Secret's or ConfigMap's key."""

    @property
    def world_size(self) -> int:
        """Devices across all nodes; fixed for the job's life (checkpoint shards embed it)."""
        return self.resources.devices_per_node * self.resources.nodes
