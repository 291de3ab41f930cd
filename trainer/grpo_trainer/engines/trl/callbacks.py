"""Trainer callbacks: metric lines for the status reporter, checkpoint events and pruning, and the
planned stop (save, then yield: grpo_trainer/stopping.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import StopRequest
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from ...stopping import AttemptFiles
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
        self._save_began: float | None = None
        self.last_save_seconds: float | None = None
        """How long the newest save took (the checkpoint event carries it to status)."""

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._step_started = time.perf_counter()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._step_started is not None:
            self._last_step_seconds = time.perf_counter() - self._step_started
        # The Trainer logs, evaluates, then saves after this: a save's time starts at the last of them.
        self._save_began = time.perf_counter()
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
        self._save_began = time.perf_counter()
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
        if self._save_began is not None:
            self.last_save_seconds = time.perf_counter() - self._save_began
        self.metrics.checkpoint(
            state.global_step, output_dir / f"checkpoint-{state.global_step}", self.last_save_seconds
        )
        prune_checkpoints(output_dir, self.keep)

    def on_evaluate(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._save_began = time.perf_counter()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.metrics.event("train_end", state.global_step)


class StopCallback(TrainerCallback):
    """Save, then yield: at each step's end, a look for the attempt's stop request (one stat).

    When the attempt's pods are stopping, the step just trained is saved (`should_save`) and
    training stops there (`should_training_stop`); the runner then writes the yield record. A save
    that would not end before the request's deadline (the last save's time says how long one
    takes) is not begun: the previous checkpoint stands.
    """

    def __init__(self, files: AttemptFiles, progress: ProgressCallback) -> None:
        self.files = files
        self.progress = progress
        self.request: StopRequest | None = None
        self.stopped_at: int | None = None
        """The step training stopped after, on request."""
        self.saving = False
        self.saved_step: int | None = None
        self.saved_at: float | None = None
        self.reason = ""

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.request is not None:
            return
        request = self.files.stop_requested()
        if request is None:
            return
        self.request = request
        self.stopped_at = state.global_step
        control.should_training_stop = True
        expected = self.progress.last_save_seconds or 0.0
        if time.time() + expected > request.deadline:
            self.reason = "SaveWouldNotFit"
        else:
            self.reason = "SavedOnStop"
            self.saving = True
            control.should_save = True

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.saving and state.global_step == self.stopped_at:
            self.saved_step = state.global_step
            self.saved_at = time.time()
