"""One TRL engine run: load the policy, build GRPOTrainer, resume, train, export.

What to run is decided by the pure `settings.build_trl_config`, and where to resume from by the
attempt driver. `run` turns any failure into the contract's Failure (an exit-code
class the operator acts on).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import UNKNOWN, Failure, YieldRecord

from ...failures import ConfigError, DataError, classify_exception
from ...stopping import AttemptFiles, yielded
from ..base import Checkpoint, ExportResult
from . import parking
from .checkpoints import latest_checkpoint, remove_incomplete
from .export import ExportPlan, export_event, export_policy
from .generation import ban_image_token
from .generation import configure as configure_generation
from .metrics import LOCAL_METRICS_FILE, MetricsFile
from .rewards import RewardFunc
from .settings import TrlSettings, build_trl_config

log = logging.getLogger(__name__)


@dataclass
class RunRequest:
    """What one run trains on and where its outputs go."""

    settings: TrlSettings
    model_path: str
    rows: list[dict[str, Any]]
    reward_funcs: Sequence[RewardFunc]
    # Validation rows (settings.eval_steps > 0): scored by the same rewards, reported as val-core/.
    eval_rows: list[dict[str, Any]] = field(default_factory=list)
    # Where the step metrics go; None: the environment's GRPO_METRICS_FILE, else output_dir.
    metrics_path: str | None = None
    # The checkpoint to continue from (for a job: the driver's decision, grpo_trainer/inputs.py);
    # None: from the first step.
    resume: Checkpoint | None = None
    export_dir: str | None = None
    # What to export into `export_dir` (default: the adapter and the merged model).
    export: ExportPlan = field(default_factory=ExportPlan)
    # Test and benchmark hooks: a (model, processor) built in memory instead of loaded from
    # `model_path`, a function that adjusts the model, extra callbacks.
    policy: tuple[Any, Any] | None = None
    prepare_model: Callable[[Any], None] | None = None
    callbacks: Sequence[Any] = field(default_factory=tuple)


@dataclass
class RunResult:
    global_step: int
    resumed_from: int | None
    dropped_prompts: int
    exported: ExportResult | None
    trainer: Any
    yielded: YieldRecord | None = None
    """Training stopped early on the attempt's stop request (and nothing was exported)."""


def load_policy(model_path: str, *, bf16: bool) -> tuple[Any, Any]:
    """The base model and its processor from a local folder (no hub: jobs mount their models)."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    dtype = torch.bfloat16 if bf16 else torch.float32
    model = AutoModelForImageTextToText.from_pretrained(model_path, dtype=dtype, local_files_only=True)
    processor = AutoProcessor.from_pretrained(model_path, padding_side="left", local_files_only=True)
    return model, processor


def make_trainer(
    request: RunRequest,
    configs: tuple[dict[str, Any], dict[str, Any]],
    model: Any,
    processor: Any,
    rows: list[dict[str, Any]],
    callbacks: list[Any],
    eval_rows: list[dict[str, Any]] | None = None,
) -> Any:
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    grpo_kwargs, lora_kwargs = configs
    return GRPOTrainer(
        model=model,
        reward_funcs=list[Any](request.reward_funcs),
        args=GRPOConfig(**grpo_kwargs),
        train_dataset=Dataset.from_list(rows),
        eval_dataset=Dataset.from_list(eval_rows) if eval_rows else None,
        processing_class=processor,
        peft_config=LoraConfig(**lora_kwargs),
        callbacks=callbacks,
    )


def train(request: RunRequest) -> RunResult:
    """Train to the end (resuming when a checkpoint exists) and export; raises on failure."""
    from .callbacks import ProgressCallback, StopCallback

    settings = request.settings
    output_dir = Path(settings.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    # The driver's path wins: outside a pod it is the workdir's copy of the pod path the
    # environment names.
    metrics = (
        MetricsFile(request.metrics_path)
        if request.metrics_path
        else MetricsFile.from_env(output_dir / LOCAL_METRICS_FILE)
    )

    grpo_kwargs, lora_kwargs = build_trl_config(settings)
    if settings.generation == "vllm" and settings.vllm_memory_gib is not None:
        grpo_kwargs["vllm_gpu_memory_utilization"] = _vllm_share_here(settings)
    if request.policy is not None:
        model, processor = request.policy
    else:
        # After overrides: `bf16=false` in engine.overrides must also load fp32 weights.
        model, processor = load_policy(request.model_path, bf16=bool(grpo_kwargs["bf16"]))
    if request.prepare_model is not None:
        request.prepare_model(model)
    grpo_kwargs["generation_kwargs"] = ban_image_token(
        settings.generation,
        grpo_kwargs.get("generation_kwargs"),
        getattr(model.config, "image_token_id", None),
    )

    rows, dropped = _fit(request.rows, processor, settings, "training")
    if not rows:
        raise DataError(
            f"dataset.maxPromptLength: no training prompt fits in {settings.max_prompt_length} tokens "
            f"({dropped} dropped by dataset.filterOverlongPrompts)"
        )
    eval_rows, _ = _fit(request.eval_rows, processor, settings, "validation")
    progress = ProgressCallback(metrics, keep=settings.keep_checkpoints, group_size=settings.num_generations)
    # The stop request lies beside the metrics file the attempt writes (contract.stop_request_file).
    stop = StopCallback(AttemptFiles(Path(metrics.path)), progress)
    parked = settings.generation == "vllm" and settings.vllm_park_policy
    with parking.vllm_start_parked() if parked else contextlib.nullcontext():
        trainer = make_trainer(
            request,
            (grpo_kwargs, lora_kwargs),
            model,
            processor,
            rows,
            [progress, stop, *request.callbacks],
            eval_rows=eval_rows if grpo_kwargs.get("eval_strategy", "no") != "no" else None,
        )
    if parked:
        parking.install(trainer)
    configure_generation(
        trainer,
        settings.generation,
        generation_batch=int(trainer.args.generation_batch_size),
        max_length=settings.max_prompt_length + settings.max_completion_length,
    )

    removed = remove_incomplete(output_dir)
    if removed:
        log.warning("removed incomplete checkpoints: %s", ", ".join(str(p) for p in removed))
    checkpoint = request.resume
    if checkpoint is not None:
        metrics.event("resumed", checkpoint.step, path=checkpoint.path)
    trainer.train(resume_from_checkpoint=checkpoint.path if checkpoint else None)
    if stop.request is not None:
        record = _yield_record(stop, output_dir, trainer.state.global_step)
        stop.files.write_yield(record)
        metrics.event("yielded", record.step, stepsLost=record.steps_lost, reason=record.reason)
        return RunResult(
            global_step=trainer.state.global_step,
            resumed_from=checkpoint.step if checkpoint else None,
            dropped_prompts=dropped,
            exported=None,
            trainer=trainer,
            yielded=record,
        )

    exported: ExportResult | None = None
    if request.export_dir and request.export.anything:
        exported = export_policy(
            trainer.model, processor, request.export_dir, step=trainer.state.global_step, plan=request.export
        )
        metrics.event("exported", trainer.state.global_step, **export_event(exported))
    return RunResult(
        global_step=trainer.state.global_step,
        resumed_from=checkpoint.step if checkpoint else None,
        dropped_prompts=dropped,
        exported=exported,
        trainer=trainer,
    )


def _yield_record(stop: Any, output_dir: Path, trained: int) -> YieldRecord:
    """What the attempt stopped with: the step it saved on request, else the newest complete
    checkpoint and the steps trained since (which the next attempt trains again)."""
    assert stop.request is not None
    if stop.saved_step is not None:
        return YieldRecord(
            step=stop.saved_step,
            steps_lost=trained - stop.saved_step,
            requested_at=stop.request.requested_at,
            saved_at=stop.saved_at,
            save_seconds=stop.progress.last_save_seconds,
        )
    latest = latest_checkpoint(output_dir)
    step = latest.step if latest is not None else 0
    return YieldRecord(
        step=step,
        steps_lost=trained - step,
        requested_at=stop.request.requested_at,
        reason=stop.reason if stop.reason != "SavedOnStop" else "SaveFailed",
    )


def _vllm_share_here(settings: TrlSettings) -> float:
    """vLLM's GiB as its share of the device this process is on (its total, read now)."""
    import torch

    from .memory import BudgetError, vllm_share

    assert settings.vllm_memory_gib is not None
    device = torch.cuda.current_device()
    total = torch.cuda.get_device_properties(device).total_memory
    try:
        share = vllm_share(settings.vllm_memory_gib, total, budget_gib=settings.memory_budget_gib)
    except BudgetError as error:
        raise ConfigError(f"{error} ({torch.cuda.get_device_name(device)})") from error
    log.info(
        "vLLM gets %.1f GiB: gpu_memory_utilization %.4f of this device's %.1f GiB",
        settings.vllm_memory_gib,
        share,
        total / 1024**3,
    )
    return share


def _fit(
    rows: list[dict[str, Any]], processor: Any, settings: TrlSettings, what: str
) -> tuple[list[dict[str, Any]], int]:
    """The rows within max_prompt_length (dropped or cut, as the dataset's spec says), and the drop count."""
    from .data import fit_prompts

    if not rows:
        return rows, 0
    fitted = fit_prompts(
        rows,
        processor,
        settings.max_prompt_length,
        filter_overlong=settings.filter_overlong_prompts,
        truncation=settings.truncation,
    )
    limit = settings.max_prompt_length
    if fitted.dropped:
        log.warning("dropped %d %s prompts longer than %d tokens", fitted.dropped, what, limit)
    if fitted.truncated:
        log.warning("cut %d %s prompts to %d tokens (%s)", fitted.truncated, what, limit, settings.truncation)
    return fitted.rows, fitted.dropped


def run(request: RunRequest) -> Failure | None:
    """`train`, with a failure classified for the operator (None when training succeeded)."""
    try:
        result = train(request)
    except Exception as error:
        failure = classify_exception(error)
        log.exception("TRL engine failed (exit %d, %s)", failure.code, failure.reason)
        print(f"grpo-train: {failure.message}", file=sys.stderr)
        return failure
    except SystemExit as error:
        # Something in the stack called sys.exit mid-training: never a success (exit 0 would
        # read as Succeeded with no model), and worth another attempt from the last checkpoint.
        log.exception("TRL engine: sys.exit during training")
        return Failure(UNKNOWN, "EngineExited", f"training stopped early: sys.exit({error.code!r})")
    if result.yielded is not None:
        return yielded(result.yielded)
    return None
