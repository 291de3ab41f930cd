"""`GRPOJob.status`: the contract between the operator, the trainer and the people watching.

Each field has exactly one writer. The operator owns the lifecycle (`phase`, `conditions`,
`attempt`, the child names and times, `failedAttempts`); the trainer owns what only the training
process knows (`progress`, `metrics`, `history`, `checkpoint`, `health`, `log`, and the exported
`outputs`). Both send JSON merge patches that touch only their own keys, so neither can overwrite
the other. Times are RFC 3339 (`format: date-time`); conditions are a list-map keyed by type,
as the Kubernetes API conventions ask.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from ..contract import SIGNATURE_MAX_LENGTH, SIGNATURE_PATTERN
from ..problem import error_field, error_words
from .base import ApiModel

Phase = Literal["Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed"]
ConditionType = Literal["Created", "Running", "Restarting", "Suspended", "Succeeded", "Failed", "Healthy"]
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
        "eta",
    }
)
TRAINER_STATUS_FIELDS = frozenset(
    {"progress", "metrics", "history", "checkpoint", "outputs", "log", "health"}
)
HISTORY_LIMIT = 60
"""Points of status.history: one per column of `kubectl grpo plot`'s terminal chart."""
HISTORY_GAP = "_"
"""A point of status.history without a value for that series (validation runs every N steps)."""
REASON_LIMIT = 128
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
"""metav1.Condition's reason: CamelCase, machine-readable."""
CONDITION_MESSAGE_LIMIT = 4096
FAILED_ATTEMPT_MESSAGE_LIMIT = 1024
FAILED_ATTEMPTS_LIMIT = 101
"""backoffLimit is at most 100, so at most 101 attempts fail."""
NAME_LIMIT = 256
Timestamp = Annotated[str, Field(max_length=64, json_schema_extra={"format": "date-time"})]
Reason = Annotated[str, Field(max_length=REASON_LIMIT, pattern=REASON_PATTERN)]


class Condition(ApiModel):
    """A Kubernetes-convention condition, so `kubectl wait --for=condition=Succeeded` works."""

    type: ConditionType
    """Created, Running, Restarting, Suspended, Succeeded, Failed, or Healthy (False while the run
    is sick: a NaN or infinite reward or loss, a collapsing entropy, a stall)."""
    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds now."""
    reason: Reason
    """One CamelCase word for why (InvalidSpec, OutOfMemory, BackoffLimitExceeded, Stalled...)."""
    message: Annotated[str, Field(max_length=CONDITION_MESSAGE_LIMIT)] = ""
    """What happened, for a person: the field to change, the failure's own words."""
    last_transition_time: Timestamp
    """When the status last changed."""
    observed_generation: int | None = None
    """The spec generation the operator judged."""


class FailedAttempt(ApiModel):
    """Why an earlier attempt ended, for `kubectl describe`."""

    attempt: int
    """The attempt's number (1 is the first)."""
    reason: Reason
    """Why it ended, as the trainer classified it (OutOfMemory, CollectiveTimeout, ConfigError...)."""
    message: Annotated[str, Field(max_length=FAILED_ATTEMPT_MESSAGE_LIMIT)] = ""
    """The failure's own words (the trainer's failure line, or Ray's message)."""
    retryable: bool
    """Whether another attempt could fix it (a configuration or data error cannot)."""
    signature: (
        Annotated[str, Field(max_length=SIGNATURE_MAX_LENGTH, pattern=f"^{SIGNATURE_PATTERN}$")] | None
    ) = None
    """For a crash the trainer read from the engine's log: a short hash of the root exception and
    where it was raised. The same signature in two consecutive attempts ends the retries."""
    log_file: Annotated[str, Field(max_length=512)] | None = None
    """That attempt's log on the checkpoint volume (`kubectl grpo logs <job> --attempt N` reads it)."""


class LogStatus(ApiModel):
    """Where the current attempt's output is kept, written by the trainer when the attempt starts."""

    attempt: int
    """The attempt whose log this is."""
    path: Annotated[str, Field(max_length=512)]
    """The file on the checkpoint volume (as the trainer pods mount it); `<path>.1` holds the older
    part once the file has rolled over."""


VolumePath = Annotated[str, Field(max_length=512)]


class GgufOutputs(ApiModel):
    """The GGUF files (llama.cpp, Ollama): load both, e.g. `llama-mtmd-cli -m MODEL --mmproj PROJECTOR`."""

    model: VolumePath
    """The language model file."""
    projector: VolumePath
    """The vision projector (mmproj) file."""


class Outputs(ApiModel):
    """Where the exported results are (paths on the checkpoint volume), written by the trainer."""

    step: int | None = None
    """The training step that was exported."""
    model: VolumePath | None = None
    """The Hugging Face model folder (LoRA merged in where LoRA was trained)."""
    lora_adapter: VolumePath | None = None
    """The LoRA adapter folder, to apply to the base model."""
    gguf: GgufOutputs | None = None
    """The GGUF files, when spec.export.gguf asked for them (their type is
    spec.export.gguf.quantization, in the model file's name)."""
    sample_file: VolumePath | None = None
    """The post-training check (spec.export.sample): its prompt, response and reward are in this
    file beside the exported model, and in the attempt's log (`kubectl grpo logs`)."""


class Progress(ApiModel):
    """Training progress, written by the trainer."""

    step: int = 0
    """The newest training step reported."""
    total_steps: int | None = None
    """Steps the run will take (epochs × training rows // trainBatchSize, or algorithm.totalSteps)."""
    steps: Annotated[str, Field(max_length=32)] | None = None
    """"step/total", for the STEP printer column."""
    epoch: int | None = None
    """The current pass over the training data (0-based)."""
    percent: float | None = None
    """step / totalSteps in percent, one decimal (the % column of `kubectl get -o wide`)."""
    eta_seconds: int | None = None
    """Seconds left at the mean pace of the last ten steps (`status.eta` shows it while the job
    trains)."""
    attempt: int | None = None
    """The attempt that reported these fields: a suspended or failed attempt's estimate is not the
    current one's."""
    last_step_at: Timestamp | None = None
    """When the trainer read this attempt's newest step: the operator's stall check starts here."""
    startup_seconds: int | None = None
    """This attempt's start-up: seconds from its trainer's start until its first step began (that
    step's end, less the step's own duration); empty until then. A retry finds the compile caches
    and the prepared data on the job's volume, so its start-up is the one to compare with the first
    attempt's."""


class Metrics(ApiModel):
    """The latest step's headline metrics, written by the trainer. Its response length is the
    history's last point (`latest_response_length`), which is that step alone."""

    reward: float | None = None
    """Mean reward of the step's responses (4 significant digits; the metrics file keeps all)."""
    val_score: float | None = None
    """The newest validation score: mean accuracy (else mean reward) over the validation sources."""
    entropy: float | None = None
    """Mean token entropy of the policy on the step's responses, in nats."""
    kl: float | None = None
    """KL divergence from the reference policy (its loss term, or the reward penalty)."""
    step_seconds: float | None = None
    """Duration of the step: rollout, rewards and updates."""
    tokens_per_second_per_device: float | None = None
    """Training throughput of the step, tokens per second per device."""


class TrainerHealth(ApiModel):
    """The trainer's verdict on a sick attempt (spec.health's thresholds): the operator turns it
    into `Healthy=False` and an Event. A healthy attempt has none (the `Healthy` condition says
    it); the trainer removes its verdict when the run recovers."""

    attempt: int
    """The attempt judged: a verdict of an earlier attempt is not this one's."""
    healthy: bool = False
    """False: the trainer writes only a sick verdict (an older trainer wrote true as well)."""
    reason: Annotated[str, Field(max_length=64)] = "TrainingHealthy"
    """NonFiniteReward, NonFiniteLoss or EntropyCollapse."""
    message: Annotated[str, Field(max_length=1024)] = ""
    """Which metric, its value, and at which step."""
    step: int | None = None
    """The step that turned the verdict."""


HISTORY_SERIES = {"reward": "reward", "valScore": "val_score", "responseLength": "response_length"}
"""The curves status.history keeps: wire name -> field name."""
HISTORY_DIGITS = 4
"""Significant digits of a history value: a plot needs no more, the metrics files keep every digit."""
HISTORY_NUMBER = r"[-+0-9.eE]+"
HISTORY_SERIES_PATTERN = rf"^(({HISTORY_NUMBER}|{HISTORY_GAP})( ({HISTORY_NUMBER}|{HISTORY_GAP}))*)?$"
_SERIES_MAX_LENGTH = HISTORY_LIMIT * 12
"""A value is at most 10 characters at 4 significant digits ("-1.234e+07"), plus its space."""
Series = Annotated[str, Field(max_length=_SERIES_MAX_LENGTH, pattern=HISTORY_SERIES_PATTERN)]


def history_number(value: float) -> str:
    """`value` at HISTORY_DIGITS significant digits, as short as it prints ("0.4125", "1024", "3e-05")."""
    return f"{float(f'{value:.{HISTORY_DIGITS}g}'):g}"


class History(ApiModel):
    """The run's curves for plots, decimated to at most 60 points over the whole run: one line of
    numbers per series, aligned with `steps` (`_` where a point has no value), so `kubectl
    describe` shows four lines, not a page per point. Every step is in the metrics files on the
    checkpoint volume (`kubectl grpo plot --full`)."""

    steps: Series = ""
    """The last step of each point, in order."""
    reward: Series | None = None
    """Mean reward over each point's steps."""
    val_score: Series | None = None
    """The newest validation score among each point's steps."""
    response_length: Series | None = None
    """Mean response length over each point's steps, in tokens."""

    @classmethod
    def of(cls, points: list[dict[str, Any]]) -> History:
        """Points ({"step", "reward", "val_score", "response_length"}, in step order) in columns;
        a series no point has is left out."""
        columns: dict[str, str] = {"steps": " ".join(str(int(p["step"])) for p in points)}
        for field in HISTORY_SERIES.values():
            if any(p.get(field) is not None for p in points):
                columns[field] = " ".join(
                    HISTORY_GAP if p.get(field) is None else history_number(p[field]) for p in points
                )
        return cls(**columns)


def history_points(status: dict[str, Any]) -> list[dict[str, Any]]:
    """status.history (wire form) back into points, {"step", "reward", "valScore",
    "responseLength"} with only the values a point has: what plots and notebooks read.

    A status written before the columnar form (a list of points) reads as it is; a column that
    does not parse or does not line up with the steps is dropped rather than plotted wrongly.
    """
    history = status.get("history")
    if isinstance(history, list):
        return [dict(p) for p in history if isinstance(p, dict)]
    if not isinstance(history, dict) or not isinstance(history.get("steps"), str):
        return []
    try:
        steps = [int(s) for s in history["steps"].split()]
    except ValueError:
        return []
    points: list[dict[str, Any]] = [{"step": s} for s in steps]
    for wire in HISTORY_SERIES:
        values = history.get(wire)
        if not isinstance(values, str):
            continue
        try:
            column = [None if v == HISTORY_GAP else float(v) for v in values.split()]
        except ValueError:
            continue
        if len(column) != len(steps):
            continue
        for point, value in zip(points, column, strict=True):
            if value is not None:
                point[wire] = value
    return points


def latest_response_length(status: dict[str, Any]) -> float | None:
    """The newest step's mean response length (wire form): the history's last point, which the
    trainer keeps as that step alone."""
    points = history_points(status)
    value = points[-1].get("responseLength") if points else None
    return value if isinstance(value, float) else None


class LastStop(ApiModel):
    """The trainer's account of the latest planned stop (save, then yield): the step it saved, how
    long the save took, and the steps a next attempt trains again. Why the pods were stopped is
    the operator's to say (the job's conditions and a Normal Event `SavedBeforeStop`)."""

    attempt: int
    """The attempt that stopped."""
    step: int
    """The newest complete checkpoint when it stopped: the next attempt resumes after it."""
    steps_lost: int = 0
    """Steps trained after that checkpoint (0 when the save on stop was made)."""
    save_seconds: float | None = None
    """How long the save on stop took; empty when none was made."""
    requested_at: Timestamp | None = None
    """When the first of the attempt's pods asked it to stop."""
    saved_at: Timestamp | None = None
    """When the save on stop was complete."""
    reason: Reason = "SavedOnStop"
    """SavedOnStop, or SaveWouldNotFit (the save could not end before the pods' deadline, so the
    previous checkpoint stands)."""


class CheckpointStatus(ApiModel):
    """The newest checkpoint, written by the trainer."""

    latest_step: int | None = None
    """Its step."""
    path: Annotated[str, Field(max_length=512)] | None = None
    """Its folder on the checkpoint volume."""
    saved_at: Timestamp | None = None
    """When it was complete."""
    save_seconds: float | None = None
    """How long the newest save took (the operator sizes the save-on-stop bound from it)."""
    resumed_from_step: int | None = None
    """The checkpoint this attempt resumed from, if any."""
    last_stop: LastStop | None = None
    """The latest planned stop, when the trainer saved (or could not save) before it."""


class GRPOJobStatus(ApiModel):
    """Observed state of a GRPOJob."""

    # operator
    phase: Phase | None = None
    """Pending, Running, Restarting (a retry is starting), Suspended, Succeeded or Failed."""
    conditions: Annotated[
        list[Condition],
        Field(
            max_length=16,
            json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
        ),
    ] = Field(default_factory=list)
    """The job's conditions, one per type: `kubectl wait --for=condition=Succeeded` (or Failed,
    Healthy=false...) waits on them. A finished job keeps those of its end (Succeeded or Failed,
    Healthy, Suspended): Created, Running and Restarting go with the attempt they described."""
    attempt: int | None = None
    """The current attempt (1 + the attempts before it, failed or suspended); each later attempt
    resumes from the latest checkpoint."""
    failed_attempts: Annotated[list[FailedAttempt], Field(max_length=FAILED_ATTEMPTS_LIMIT)] = Field(
        default_factory=list
    )
    """Why each earlier attempt ended, and where its log is."""
    ray_job_name: Annotated[str, Field(max_length=NAME_LIMIT)] | None = None
    """The current attempt's RayJob (<job>-<attempt>)."""
    ray_cluster_name: Annotated[str, Field(max_length=NAME_LIMIT)] | None = None
    """The RayCluster KubeRay made for it, while it lives."""
    dashboard_url: Annotated[str, Field(max_length=NAME_LIMIT)] | None = Field(
        default=None, alias="dashboardURL"
    )
    """The Ray dashboard of that cluster, while it lives."""
    start_time: Timestamp | None = None
    """When the first attempt was started."""
    completion_time: Timestamp | None = None
    """When the job succeeded or failed."""
    observed_generation: int | None = None
    """The spec generation the operator last acted on."""
    eta: Annotated[str, Field(max_length=16)] | None = None
    """Time left ("2h30m", "3d4h"), for the ETA column of `kubectl get -o wide`: the current
    attempt's progress.etaSeconds while the job is Running; empty while it starts, is suspended,
    and once it has ended."""
    # trainer
    outputs: Outputs | None = None
    progress: Progress | None = None
    metrics: Metrics | None = None
    history: History | None = None
    checkpoint: CheckpointStatus | None = None
    log: LogStatus | None = None
    health: TrainerHealth | None = None


# --- reading what another version wrote ------------------------------------------------------


def readable(status: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`status` without the trainer's fields these models cannot read, and a line for each one
    left out ("status.health: ...").

    The trainer is another process, often of another version: during an upgrade an attempt of
    the previous trainer goes on patching the shapes it knows (a history as a list of points, a
    sample with its text, a healthy verdict), and a finished job keeps what its trainer last
    wrote. None of it may fail a reconcile: the operator reads the rest, and says what it could
    not read. A key of no writer (an older version's field the schema dropped) goes the same way.
    """
    kept: dict[str, Any] = {}
    unread: list[str] = []
    fields = GRPOJobStatus.model_fields
    known = {info.alias or name: name for name, info in fields.items()}
    for key, value in status.items():
        if key in OPERATOR_STATUS_FIELDS:
            kept[key] = value
            continue
        if key not in TRAINER_STATUS_FIELDS or key not in known:
            unread.append(f"status.{key}: not a field of this version")
            continue
        try:
            GRPOJobStatus.model_validate({key: value})
        except ValidationError as error:
            first = error.errors()[0]
            unread.append(cut(f"{error_field(('status', *first['loc']))}: {error_words(first)}", 256))
            continue
        kept[key] = value
    return kept, unread


# --- the ETA -----------------------------------------------------------------------------------


def duration(seconds: int | None) -> str | None:
    """Seconds for a person: "45s", "12m", "2h30m", "3d4h"."""
    if seconds is None:
        return None
    days, rest = divmod(max(seconds, 0), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m" if minutes else f"{secs}s"


def current_eta_seconds(status: dict[str, Any]) -> int | None:
    """The trainer's estimate (status.progress.etaSeconds, wire form) where it is true now: the
    job is Running and the estimate is its current attempt's. A suspended job's estimate is
    frozen and a finished job has none; after a resume the new attempt makes its own."""
    progress = status.get("progress")
    if status.get("phase") != "Running" or not isinstance(progress, dict):
        return None
    seconds = progress.get("etaSeconds")
    if progress.get("attempt") != status.get("attempt") or isinstance(seconds, bool):
        return None
    return seconds if isinstance(seconds, int) else None


# --- writing within the schema's bounds -------------------------------------------------------

_NOT_REASON = re.compile(r"[^A-Za-z0-9_]+")


def cut(text: str, limit: int) -> str:
    """`text` within `limit` characters, marked when something was cut (the schema's bounds: a
    status patch over them is refused, and a refused patch is retried on every reconcile)."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def reason(text: str, fallback: str = "Failed") -> str:
    """A condition reason as Kubernetes spells them (CamelCase, no spaces), within the schema's bound.

    Reasons come from outside too (the trainer's failure line, KubeRay): what does not fit the
    pattern is squeezed into it rather than sent to be refused.
    """
    words = [w for w in _NOT_REASON.split(str(text)) if w]
    squeezed = "".join(w[:1].upper() + w[1:] for w in words).lstrip("0123456789_")
    return (squeezed[:1].upper() + squeezed[1:REASON_LIMIT]) or fallback


def diff(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns the operator's fields of `current` into `wanted` (None deletes)."""
    patch: dict[str, Any] = {}
    for key in set(current) | set(wanted):
        if key not in wanted:
            patch[key] = None
        elif current.get(key) != wanted[key]:
            patch[key] = wanted[key]
    return patch
