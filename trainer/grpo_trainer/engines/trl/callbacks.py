"""Trainer callbacks: metric lines for the status reporter, checkpoint events and pruning."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from .checkpoints import prune_checkpoints
from .metrics import MetricsFile, validation_metrics, verl_metrics


class ProgressCallback(TrainerCallback):
    """Writes one verl-format metrics line per logged step and an event per checkpoint.

    Step time is measured here, around the whole optimiser step including generation, because
    that is what a user waits for; TRL's own `step_time` is kept under `trl/step_time`.
    """

    def __init__(
        self, metrics: MetricsFile, *, keep: int, save_at_end: bool = True, group_size: int = 1
    ) -> None:
        self.metrics = metrics
        self.group_size = group_size
        self.keep = keep
        self.save_at_end = save_at_end
        self._step_started: float | None = None
        self._last_step_seconds: float | None = None

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._step_started = time.perf_counter()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._step_started is not None:
            self._last_step_seconds = time.perf_counter() - self._step_started
        # The Trainer saves only on multiples of save_steps; the last step must be resumable
        # and exportable too.
        if self.save_at_end and state.max_steps > 0 and state.global_step >= state.max_steps:
            control.should_save = True

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # The Trainer's closing summary (train_runtime, ...) is not a step record.
        if not logs or "train_runtime" in logs:
            return
        if any(key.startswith("eval_") for key in logs):
            # A validation round: its own line at the same step, so the status gets its score.
            self.metrics.step(
                state.global_step, validation_metrics(logs, step=state.global_step, group=self.group_size)
            )
            return
        data = verl_metrics(logs, step=state.global_step, step_seconds=self._last_step_seconds)
        data["training/total_steps"] = float(state.max_steps)
        self.metrics.step(state.global_step, data)

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        output_dir = Path(str(args.output_dir))
        self.metrics.checkpoint(state.global_step, output_dir / f"checkpoint-{state.global_step}")
        prune_checkpoints(output_dir, self.keep)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.metrics.event("train_end", state.global_step)
