"""Per-step metrics and checkpoint events in the files the status reporter tails.

`grpo_trainer.reporter` tails the attempt's metrics file of `{"step": N, "data": {metric: value}}`
lines (what verl's file logger writes) and the checkpoint events file beside it
(`contract.checkpoint_events_file`) of `{"step", "path", "savedAt"}` lines, and patches the job status. The TRL engine writes both, under
verl's metric names, so one reporter serves both engines. Run events (`resumed`, `train_end`,
`exported`) go to the metrics file as `{"event": ...}` lines, which the reporter skips.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import Env, checkpoint_events_file
from grpo_operator.api.timestamps import rfc3339

from ... import metric_keys as keys

# TRL's log keys -> verl's names, which the status reporter and dashboards already know.
_TRL_TO_VERL = {
    "reward": keys.REWARD,
    "reward_std": keys.REWARD_STD,
    "completions/mean_length": keys.RESPONSE_LENGTH,
    "completions/max_length": keys.RESPONSE_LENGTH_MAX,
    "completions/min_length": keys.RESPONSE_LENGTH_MIN,
    "completions/clipped_ratio": keys.RESPONSE_CLIP_RATIO,
    "entropy": keys.ENTROPY,
    "kl": keys.KL_LOSS,
    "loss": keys.POLICY_LOSS,
    "grad_norm": keys.GRAD_NORM,
    "learning_rate": keys.LEARNING_RATE,
    "epoch": keys.EPOCH,
}


def verl_metrics(logs: Mapping[str, Any], *, step: int, step_seconds: float | None) -> dict[str, float]:
    """Translate one TRL log record into verl-named metrics.

    Every numeric TRL value is kept under `trl/<key>` as well, so nothing TRL reports is lost.
    Non-finite values are kept only under the verl names (Python's JSON writes them as NaN and
    Infinity, as verl's own file logger does): the reporter's health check must see a NaN loss,
    and drops them from the status.
    """
    data: dict[str, float] = {}
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not math.isfinite(value):
            if key in _TRL_TO_VERL:
                data[_TRL_TO_VERL[key]] = float(value)
            continue
        data[f"trl/{key}"] = float(value)
        if key in _TRL_TO_VERL:
            data[_TRL_TO_VERL[key]] = float(value)
        elif key.startswith("rewards/") and key.endswith("/mean"):
            # Per-function reward means, e.g. rewards/correctness_reward_func/mean.
            data[keys.REWARD_FUNCTION_PREFIX + key.removeprefix("rewards/")] = float(value)
    data[keys.GLOBAL_STEP] = float(step)
    if step_seconds is not None:
        data[keys.STEP_SECONDS] = float(step_seconds)
    return data


VALIDATION_SOURCE = "all"
"""TRL scores the validation set as one: verl's per-data-source key gets this source name."""


def validation_metrics(logs: Mapping[str, Any], *, step: int, group: int) -> dict[str, float]:
    """One TRL validation record (`eval_*` keys) as verl's validation metrics.

    `eval_reward` (the mean over every validation prompt's `group` completions) becomes
    `val-core/all/reward/mean@<group>`, which the status reads as the validation score; each
    reward function's mean goes beside it, and every value under `trl/eval_*` as well.
    """
    data: dict[str, float] = {}
    prefix = f"{keys.VALIDATION_PREFIX}{VALIDATION_SOURCE}"
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            continue
        data[f"trl/{key}"] = float(value)
        if key == "eval_reward":
            data[f"{prefix}/reward/mean@{group}"] = float(value)
        elif key.startswith("eval_rewards/") and key.endswith("/mean"):
            function = key.removeprefix("eval_rewards/").removesuffix("/mean")
            data[f"{prefix}/{function}/mean@{group}"] = float(value)
    data[keys.GLOBAL_STEP] = float(step)
    return data


LOCAL_METRICS_FILE = "metrics.jsonl"
"""In the output folder, where a run with no metrics file in its environment (outside a pod, a
benchmark) writes its metrics."""


class MetricsFile:
    """Appends JSON lines and flushes each one, so a reporter tailing the file sees them at once.

    The file is opened per write: the trainer writes a line every step or so, and a crash loses
    nothing already written.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.events_path = Path(checkpoint_events_file(str(self.path)))
        self.path.parent.mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_env(cls, fallback: str | os.PathLike[str]) -> MetricsFile:
        """The path the operator passes in contract.Env.METRICS_FILE, else `fallback`."""
        return cls(os.environ.get(Env.METRICS_FILE) or fallback)

    def write(self, record: Mapping[str, Any], *, path: Path | None = None) -> None:
        with (path or self.path).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()

    def step(self, step: int, data: Mapping[str, float]) -> None:
        self.write({"step": step, "data": dict(data)})

    def event(self, event: str, step: int, **fields: Any) -> None:
        self.write({"event": event, "step": step, **fields})

    def checkpoint(self, step: int, path: str | os.PathLike[str], save_seconds: float | None = None) -> None:
        record: dict[str, Any] = {"step": step, "path": str(path), "savedAt": rfc3339()}
        if save_seconds is not None:
            record["saveSeconds"] = round(save_seconds, 3)
        self.write(record, path=self.events_path)


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every JSON line of a metrics or events file (tests and benchmarks read curves back)."""
    if not Path(path).is_file():
        return []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]
