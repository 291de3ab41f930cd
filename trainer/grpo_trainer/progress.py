"""Training progress -> the job's status: per-step metrics and checkpoint events in, a patch out.

The trainer is the one writer of `status.progress`, `status.metrics`, `status.history`,
`status.checkpoint` and `status.health`. The pure part here turns the metrics lines (verl's file-logger format,
`{"step": N, "data": {...}}`, which the TRL engine writes too) into those fields; `Reporter`
(reporter.py) tails the files and sends the patch at most every few
seconds, keeping the newest values across API errors so nothing is lost, only coalesced.

Metric names (verl): `critic/score/mean` (reward), `val-core/<data_source>/acc/mean@N` (validation),
`response_length/mean`, `actor/entropy`, `actor/kl_loss` (or `actor/reward_kl_penalty`),
`timing_s/step`, `perf/throughput` (tokens/s per device), `training/global_step`, `training/epoch`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from grpo_operator.api.contract import YieldRecord
from grpo_operator.api.timestamps import rfc3339
from grpo_operator.api.v1alpha1.status import (
    HISTORY_LIMIT,
    HISTORY_SERIES,
    TRAINER_STATUS_FIELDS,
    CheckpointStatus,
    History,
    LastStop,
    Metrics,
    Progress,
    TrainerHealth,
)

from . import metric_keys as keys

ETA_WINDOW = 10
"""Recent steps whose mean duration predicts the rest."""

NON_FINITE = (
    ("NonFiniteReward", (keys.REWARD, keys.REWARDS_MEAN)),
    ("NonFiniteLoss", (keys.POLICY_LOSS, keys.KL_LOSS, keys.LOSS, keys.GRAD_NORM)),
)
"""A NaN or infinity in any of these keys makes the run sick: it does not come back by itself."""

_METRICS = {
    "reward": (keys.REWARD,),
    "response_length": (keys.RESPONSE_LENGTH,),
    "entropy": (keys.ENTROPY,),
    "kl": (keys.KL_LOSS, keys.REWARD_KL_PENALTY),
    "step_seconds": (keys.STEP_SECONDS,),
    "tokens_per_second_per_device": (keys.THROUGHPUT,),
}


def parse_line(line: str) -> tuple[int, dict[str, Any]] | None:
    """One file-logger line -> (step, metrics); None for anything else (partial, foreign, garbage)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("data"), dict):
        return None
    step = record.get("step")
    if isinstance(step, bool) or not isinstance(step, int | float):
        return None
    return int(step), record["data"]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def validation_score(data: dict[str, Any]) -> float | None:
    """The headline validation number: mean accuracy (else mean reward) over data sources.

    verl logs `val-core/<source>/<var>/mean@N` per data source; `acc` is what verl itself treats as
    the core variable when a reward reports it, `reward` otherwise.
    """
    for variable in ("acc", "reward"):
        values = [
            v
            for key, value in data.items()
            if key.startswith(keys.VALIDATION_PREFIX)
            and f"/{variable}/mean@" in key
            and (v := _number(value)) is not None
        ]
        if values:
            return sum(values) / len(values)
    return None


def step_metrics(data: dict[str, Any]) -> dict[str, float]:
    """The status metrics present in one line (snake_case field names)."""
    out = {}
    for name, names in _METRICS.items():
        for key in names:
            value = _number(data.get(key))
            if value is not None:
                out[name] = value
                break
    val = validation_score(data)
    if val is not None:
        out["val_score"] = val
    return out


@dataclass
class TrainingState:
    """Everything the reporter knows, folded from metric lines and checkpoint events."""

    total_steps: int | None = None
    resumed_from_step: int | None = None
    step: int = 0
    epoch: int | None = None
    latest: dict[str, float] = field(default_factory=dict)
    history: dict[int, dict[str, float]] = field(default_factory=dict)
    step_seconds: list[float] = field(default_factory=list)
    checkpoint: dict[str, Any] | None = None
    attempt: int = 1
    entropy_floor: float = 0.0
    """spec.health.entropyFloor; 0 turns the entropy check off."""
    entropy_collapse_steps: int = 10
    last_step_at: str | None = None
    health: dict[str, Any] | None = None
    """This attempt's verdict (status.health), from its own lines only."""
    low_entropy_steps: int = 0
    started_at: float | None = None
    """When this attempt's trainer started (seconds since the epoch): its start-up counts from here."""
    startup_seconds: int | None = None
    """This attempt's start-up, known once its first step is read (status.progress.startupSeconds)."""
    last_stop: dict[str, Any] | None = None
    """This attempt's planned stop (its yield record), once it has one (status.checkpoint.lastStop)."""

    def add_line(
        self,
        step: int,
        data: dict[str, Any],
        *,
        live: bool = False,
        at: float | None = None,
    ) -> None:
        """Fold in one metrics line; lines of an earlier attempt may be replayed first.

        A `live` line is this attempt's, read `at` (seconds since the epoch): it moves lastStepAt
        and is judged for health, and the first one dates the attempt's start-up.
        """
        values = step_metrics(data)
        global_step = _number(data.get(keys.GLOBAL_STEP))
        step = int(global_step) if global_step is not None else step
        epoch = _number(data.get(keys.EPOCH))
        if epoch is not None:
            self.epoch = int(epoch)
        # The newest line is the truth: a retried attempt restarts from its checkpoint's step.
        self.step = step
        self.latest.update(values)
        point = self.history.setdefault(step, {})
        point.update({k: v for k, v in values.items() if k in ("reward", "val_score", "response_length")})
        if not point:
            del self.history[step]
        if "step_seconds" in values:
            self.step_seconds = [*self.step_seconds, values["step_seconds"]][-ETA_WINDOW:]
        if live:
            self.last_step_at = rfc3339(datetime.fromtimestamp(at, UTC)) if at is not None else None
            self.judge(step, data)
            if self.startup_seconds is None and self.started_at is not None and at is not None:
                # The first step began its own duration before it was read.
                began = at - values.get("step_seconds", 0.0)
                self.startup_seconds = max(0, round(began - self.started_at))

    def judge(self, step: int, data: dict[str, Any]) -> None:
        """Update the health verdict with one step's raw metrics (before non-finite values are dropped)."""
        if self.health is not None and self.health["reason"].startswith("NonFinite"):
            return  # a run with NaN weights or rewards does not heal itself
        for reason, names in NON_FINITE:
            for key in names:
                value = data.get(key)
                if isinstance(value, float) and not math.isfinite(value):
                    what = "reward" if reason == "NonFiniteReward" else "loss"
                    self._verdict(
                        False,
                        reason,
                        f"{key} is {value} at step {step}: the {what} is no longer a number",
                        step,
                    )
                    return
        entropy = _number(data.get(keys.ENTROPY))
        if self.entropy_floor > 0 and entropy is not None:
            self.low_entropy_steps = self.low_entropy_steps + 1 if entropy <= self.entropy_floor else 0
            if self.low_entropy_steps >= self.entropy_collapse_steps:
                self._verdict(
                    False,
                    "EntropyCollapse",
                    f"mean token entropy {entropy:.4g} has been at or below spec.health.entropyFloor="
                    f"{self.entropy_floor:g} for {self.low_entropy_steps} steps (step {step}): the policy "
                    "samples nearly one answer per prompt, so GRPO's groups have nothing to compare",
                    step,
                )
                return
        if self.health is None or not self.health["healthy"]:
            # A healthy verdict is its step alone: the operator words the Healthy condition.
            self._verdict(True, "TrainingHealthy", "", step)

    def _verdict(self, healthy: bool, reason: str, message: str, step: int) -> None:
        self.health = {"healthy": healthy, "reason": reason, "message": message, "step": step}

    def add_checkpoint(self, step: int, path: str, saved_at: str, save_seconds: float | None = None) -> None:
        if self.checkpoint is None or step >= self.checkpoint["step"]:
            self.checkpoint = {"step": step, "path": path, "saved_at": saved_at, "save_seconds": save_seconds}

    def add_yield(self, record: YieldRecord) -> None:
        """The attempt's yield record: what a planned stop saved (status.checkpoint.lastStop)."""
        self.last_stop = {
            "attempt": self.attempt,
            "step": record.step,
            "steps_lost": record.steps_lost,
            "save_seconds": None if record.save_seconds is None else round(record.save_seconds, 3),
            "requested_at": _time(record.requested_at),
            "saved_at": _time(record.saved_at),
            "reason": record.reason,
        }


def _time(seconds: float | None) -> str | None:
    return None if seconds is None else rfc3339(datetime.fromtimestamp(seconds, UTC))


def downsample(history: dict[int, dict[str, float]], limit: int = HISTORY_LIMIT) -> list[dict[str, Any]]:
    """At most `limit` points, in step order, for a plot of the whole run.

    Consecutive steps share a bucket; each bucket becomes one point at its last step with the mean
    reward and response length and the bucket's newest validation score, so sparse validation
    points survive and a long run's curve keeps its shape. The newest step is the last point,
    alone.
    """
    steps = sorted(history)
    if len(steps) <= limit:
        return [{"step": s, **history[s]} for s in steps]
    # The newest step is a point of its own: the last point is what the run does now (the newest
    # response length is read from it, not kept twice).
    *earlier, newest = steps
    points = []
    for i in range(limit - 1):
        bucket = earlier[len(earlier) * i // (limit - 1) : len(earlier) * (i + 1) // (limit - 1)]
        point: dict[str, Any] = {"step": bucket[-1]}
        for name in ("reward", "response_length"):
            values = [history[s][name] for s in bucket if name in history[s]]
            if values:
                point[name] = sum(values) / len(values)
        vals = [history[s]["val_score"] for s in bucket if "val_score" in history[s]]
        if vals:
            point["val_score"] = vals[-1]
        points.append(point)
    return [*points, {"step": newest, **history[newest]}]


SIGNIFICANT_DIGITS = 4
"""Digits of status.metrics: what `kubectl get` shows in REWARD and VAL (a printer column cannot
round); the metrics files keep every digit."""


def rounded(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def eta_seconds(state: TrainingState) -> int | None:
    """Seconds left at the recent pace; None when unknown, and once the last step is done (an ETA
    of `0s` on a finished job reads as a job about to finish)."""
    if state.total_steps is None or not state.step_seconds:
        return None
    remaining = max(state.total_steps - state.step, 0)
    if not remaining:
        return None
    return round(remaining * sum(state.step_seconds) / len(state.step_seconds))


PACE_FIELDS = {
    "progress": ("etaSeconds", "lastStepAt"),
    "metrics": ("stepSeconds", "tokensPerSecondPerDevice"),
}
"""How the attempt is going, step by step: what the ETA and the stall check read while it trains,
left out once the last step is trained (the export that follows is not a stall, and a finished
run's pace is in its metrics files)."""


def trained(state: TrainingState) -> bool:
    """Whether the run has trained its last step."""
    return state.total_steps is not None and state.step >= state.total_steps


def status_patch(state: TrainingState) -> dict[str, Any]:
    """The merge patch for `status` (the trainer's own fields only), in the API's wire form."""
    total = state.total_steps
    percent = None
    if total:
        percent = round(min(100.0, 100.0 * state.step / total), 1)
    progress = Progress(
        step=state.step,
        total_steps=total,
        steps=f"{state.step}/{total}" if total else str(state.step),
        epoch=state.epoch,
        percent=percent,
        eta_seconds=eta_seconds(state),
        attempt=state.attempt,
        last_step_at=state.last_step_at,
        startup_seconds=state.startup_seconds,
    )
    # The newest response length is the history's last point alone; the reward and validation
    # score are there too, and here for the REWARD and VAL columns (a printer column cannot read
    # a series).
    latest = {k: rounded(v) for k, v in state.latest.items() if k in Metrics.model_fields}
    status: dict[str, Any] = {
        "progress": progress.to_wire(),
        "metrics": Metrics(**latest).to_wire(),
        # Every column, null where a series has no point yet: a merge patch merges objects key
        # by key, and a column left from an earlier patch would not line up with the new steps.
        "history": {wire: None for wire in HISTORY_SERIES} | History.of(downsample(state.history)).to_wire(),
    }
    saved = state.checkpoint or {}
    checkpoint = CheckpointStatus(
        latest_step=saved.get("step"),
        path=saved.get("path"),
        saved_at=saved.get("saved_at"),
        save_seconds=saved.get("save_seconds"),
        resumed_from_step=state.resumed_from_step,
        last_stop=LastStop(**state.last_stop) if state.last_stop else None,
    ).to_wire()
    if checkpoint:
        status["checkpoint"] = checkpoint
    if trained(state):
        for part, names in PACE_FIELDS.items():
            for name in names:
                status[part][name] = None
    elif progress.eta_seconds is None:
        status["progress"]["etaSeconds"] = None
    if state.startup_seconds is None and state.started_at is not None:
        # An earlier attempt's start-up is not this one's: cleared until this one's first step.
        # A reporter that does not know when the attempt started (`grpo-train report` by hand)
        # leaves the field to the one that does.
        status["progress"]["startupSeconds"] = None
    # A merge patch keeps what it does not name: null removes a value written before (an ETA, a
    # pace, a sick verdict of this attempt that has recovered or of an earlier one).
    if state.health is not None:
        if state.health["healthy"]:
            status["health"] = None  # the Healthy condition says it
        else:
            status["health"] = TrainerHealth(attempt=state.attempt, **state.health).to_wire()
    assert set(status) <= TRAINER_STATUS_FIELDS, "the trainer patches only its own status fields"
    return {"status": status}


def total_steps(train_rows: int | None, train_batch_size: int, epochs: int, fixed: int | None) -> int | None:
    """verl's step count: len(train) // batch (drop_last) per epoch, unless total steps are fixed."""
    if fixed is not None:
        return fixed
    if train_rows is None:
        return None
    return max(train_rows // train_batch_size, 0) * epochs
