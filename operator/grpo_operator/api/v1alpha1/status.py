"""`GRPOJob.status`: the contract between the operator, the trainer and the people watching.

Each field has exactly one writer. The operator owns the lifecycle (`phase`, `conditions`,
`attempt`, the child names and times); the trainer owns what only the training process knows
(`progress`, `metrics`, `history`, `checkpoint`, and the exported `outputs`). Both send JSON merge
patches that touch only their own keys, so neither can overwrite the other.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import ApiModel

Phase = Literal["Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed"]
ConditionType = Literal["Created", "Running", "Restarting", "Suspended", "Succeeded", "Failed"]
OPERATOR_STATUS_FIELDS = frozenset(
    {
        "phase",
        "conditions",
        "attempt",
        "rayJobName",
        "rayClusterName",
        "dashboardURL",
        "startTime",
        "completionTime",
        "observedGeneration",
        "failedAttempts",
    }
)
TRAINER_STATUS_FIELDS = frozenset({"progress", "metrics", "history", "checkpoint", "outputs"})
HISTORY_LIMIT = 120
REASON_LIMIT = 128
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
"""metav1.Condition's reason: CamelCase, machine-readable."""
CONDITION_MESSAGE_LIMIT = 4096
FAILED_ATTEMPT_MESSAGE_LIMIT = 1024
FAILED_ATTEMPTS_LIMIT = 101
"""backoffLimit is at most 100, so at most 101 attempts fail."""
NAME_LIMIT = 256
Timestamp = Annotated[str, Field(max_length=64)]
Reason = Annotated[str, Field(max_length=REASON_LIMIT, pattern=REASON_PATTERN)]


class Condition(ApiModel):
    """A Kubernetes-convention condition, so `kubectl wait --for=condition=Succeeded` works."""

    type: ConditionType
    status: Literal["True", "False", "Unknown"]
    reason: Reason
    message: Annotated[str, Field(max_length=CONDITION_MESSAGE_LIMIT)] = ""
    last_transition_time: Timestamp
    observed_generation: int | None = None


class FailedAttempt(ApiModel):
    """Why an earlier attempt ended, for `kubectl describe`."""

    attempt: int
    reason: Reason
    message: Annotated[str, Field(max_length=FAILED_ATTEMPT_MESSAGE_LIMIT)] = ""
    retryable: bool


class Outputs(ApiModel):
    """Where the exported results are (paths on the checkpoint volume), written by the trainer."""

    step: int | None = None
    """The training step that was exported."""
    model: Annotated[str, Field(max_length=512)] | None = None
    """The Hugging Face model folder (LoRA merged in where LoRA was trained)."""
    lora_adapter: Annotated[str, Field(max_length=512)] | None = None
    """The LoRA adapter folder, to apply to the base model."""


class Progress(ApiModel):
    """Training progress, written by the trainer."""

    step: int = 0
    total_steps: int | None = None
    steps: Annotated[str, Field(max_length=32)] | None = None
    """"step/total", for the STEP printer column."""
    epoch: int | None = None
    percent: float | None = None
    eta_seconds: int | None = None
    updated_at: Timestamp | None = None


class Metrics(ApiModel):
    """The latest step's headline metrics, written by the trainer."""

    reward: float | None = None
    val_score: float | None = None
    response_length: float | None = None
    entropy: float | None = None
    kl: float | None = None
    step_seconds: float | None = None
    tokens_per_second_per_device: float | None = None


class HistoryPoint(ApiModel):
    """One point of the downsampled history kept for plots."""

    step: int
    reward: float | None = None
    val_score: float | None = None
    response_length: float | None = None


class CheckpointStatus(ApiModel):
    """The newest checkpoint, written by the trainer."""

    latest_step: int | None = None
    path: Annotated[str, Field(max_length=512)] | None = None
    saved_at: Timestamp | None = None
    resumed_from_step: int | None = None


class GRPOJobStatus(ApiModel):
    """Observed state of a GRPOJob."""

    # operator
    phase: Phase | None = None
    conditions: Annotated[list[Condition], Field(max_length=16)] = Field(default_factory=list)
    attempt: int | None = None
    failed_attempts: Annotated[list[FailedAttempt], Field(max_length=FAILED_ATTEMPTS_LIMIT)] = Field(
        default_factory=list
    )
    ray_job_name: Annotated[str, Field(max_length=NAME_LIMIT)] | None = None
    ray_cluster_name: Annotated[str, Field(max_length=NAME_LIMIT)] | None = None
    dashboard_url: Annotated[str, Field(max_length=NAME_LIMIT)] | None = Field(
        default=None, alias="dashboardURL"
    )
    start_time: Timestamp | None = None
    completion_time: Timestamp | None = None
    observed_generation: int | None = None
    outputs: Outputs | None = None
    # trainer
    progress: Progress | None = None
    metrics: Metrics | None = None
    history: Annotated[list[HistoryPoint], Field(max_length=HISTORY_LIMIT)] = Field(default_factory=list)
    checkpoint: CheckpointStatus | None = None
