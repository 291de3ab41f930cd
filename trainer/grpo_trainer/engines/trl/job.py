"""A GRPOJob with `engine: trl` -> TRL engine settings and one run (what `grpo-train run` calls).

The spec's fields are authoritative where it has them (learning rate, group size, lengths, loss,
LoRA, checkpoints); what the spec has no field for (AdamW betas, weight decay, schedule, warmup,
gradient clipping) keeps the seed's values from `TrlSettings`, and `engine.overrides` changes any
GRPOConfig or LoraConfig field last.

Batch sizes keep verl's meaning, so one spec reads the same for both engines: `trainBatchSize`
prompts are generated per round, `miniBatchSize` prompts make one optimiser update, and
`microBatchSizePerDevice` completions go through one forward pass.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from .settings import TrlSettings

log = logging.getLogger(__name__)


class SpecError(ValueError):
    """The spec asks for something the TRL engine cannot do (a configuration error)."""


def _batch_settings(algorithm: Any) -> dict[str, Any]:
    group = algorithm.group_size
    per_update = algorithm.mini_batch_size * group
    per_device = algorithm.micro_batch_size_per_device or per_update
    if per_update % per_device:
        raise SpecError(
            f"algorithm.miniBatchSize x groupSize ({algorithm.mini_batch_size} x {group} = {per_update} "
            f"completions) must be a multiple of microBatchSizePerDevice ({per_device})"
        )
    if algorithm.train_batch_size % algorithm.mini_batch_size:
        raise SpecError(
            f"algorithm.trainBatchSize ({algorithm.train_batch_size}) must be a multiple of "
            f"miniBatchSize ({algorithm.mini_batch_size})"
        )
    accumulation = per_update // per_device
    return {
        "num_generations": group,
        "per_device_train_batch_size": per_device,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": accumulation * (algorithm.train_batch_size // algorithm.mini_batch_size),
    }


def settings_from_job(job: Any) -> TrlSettings:
    """Pure mapping from a ResolvedJob to TrlSettings; SpecError names the offending field."""
    spec = job.spec
    algorithm = spec.algorithm
    kl = algorithm.kl
    if kl.placement == "reward" and kl.coefficient > 0:
        raise SpecError("algorithm.kl.placement=reward is not supported by the trl engine; use loss or none")
    if spec.reward.custom is not None and spec.reward.custom.batch:
        log.info("a batch reward function is called once per TRL batch through the per-sample adapter")
    values: dict[str, Any] = {
        "output_dir": job.paths.checkpoint_dir,
        "learning_rate": algorithm.learning_rate,
        **_batch_settings(algorithm),
        "max_prompt_length": spec.dataset.max_prompt_length,
        "max_completion_length": spec.dataset.max_response_length,
        # TRL counts optimiser updates; a verl step (one generation round) holds
        # trainBatchSize / miniBatchSize of them.
        "max_steps": algorithm.total_steps * (algorithm.train_batch_size // algorithm.mini_batch_size)
        if algorithm.total_steps
        else -1,
        "num_train_epochs": float(algorithm.epochs),
        "loss_type": algorithm.loss_type,
        "importance_sampling_level": algorithm.importance_sampling,
        "epsilon": algorithm.clip_ratio,
        "beta": kl.coefficient if kl.placement == "loss" else 0.0,
        "entropy_coef": algorithm.entropy_coefficient,
        "temperature": spec.rollout.temperature,
        "seed": algorithm.seed,
        "save_steps": spec.checkpoint.save_interval,
        "keep_checkpoints": spec.checkpoint.keep,
        "gradient_checkpointing": spec.engine.gradient_checkpointing,
        "overrides": tuple(spec.engine.overrides),
    }
    lora = spec.engine.lora
    if lora is not None:
        values.update(
            lora_rank=lora.rank,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            lora_vision_layers=lora.vision_layers,
            lora_language_layers=lora.language_layers,
            lora_attention_modules=lora.attention_modules,
            lora_mlp_modules=lora.mlp_modules,
            lora_target_modules=tuple(lora.target_modules) if lora.target_modules else None,
            lora_exclude_modules=tuple(lora.exclude_modules) if lora.exclude_modules else None,
        )
    return replace(TrlSettings(), **values)


def reward_funcs_for(job: Any) -> list[Any]:
    from .rewards import builtin_reward_funcs, custom_reward_funcs

    reward = job.spec.reward
    options = dict(reward.kwargs)
    if reward.custom is not None:
        if not job.paths.reward_file:
            raise SpecError("reward.custom is set but the job has no mounted reward file")
        return custom_reward_funcs(job.paths.reward_file, reward.custom.function, options)
    return builtin_reward_funcs(reward.builtin or "reasoning-format", options)


def run_job(job: Any, attempt: Any) -> int:
    """One attempt: data, model, reporter, training with resume, export. Returns the exit code."""
    from grpo_trainer import data, sources
    from grpo_trainer.exitcodes import Failure, TrainerError
    from grpo_trainer.run import _status_writer, start_reporter

    from .checkpoints import latest_checkpoint
    from .data import rows_from_parquet
    from .runner import RunRequest, run

    try:
        settings = settings_from_job(job)
        prepared = data.prepare(job)
        model = sources.resolve(job.spec.model.source, "model", job.paths.cache_dir, job.spec.model.revision)
        rows = rows_from_parquet(
            prepared.train_files, prompt_key=job.spec.dataset.prompt_key, image_key=job.spec.dataset.image_key
        )
        rewards = reward_funcs_for(job)
    except TrainerError as error:
        failure = error.failure()
        print(failure.marker_line(), file=sys.stderr, flush=True)
        return failure.code
    except SpecError as error:
        failure = Failure(3, "ConfigError", str(error))
        print(failure.marker_line(), file=sys.stderr, flush=True)
        return failure.code

    latest = latest_checkpoint(job.paths.checkpoint_dir)
    writer = _status_writer(attempt, None)
    reporter = (
        start_reporter(job, attempt, writer, len(rows), latest.step if latest else None) if writer else None
    )
    try:
        outcome = run(
            RunRequest(
                settings=settings,
                model_path=str(Path(model)),
                rows=rows,
                reward_funcs=rewards,
                metrics_path=str(attempt.metrics_file),
                # A retried attempt always continues from the latest checkpoint.
                resume="latest" if attempt.number > 1 else job.spec.checkpoint.resume,
                export_dir=job.paths.export_dir,
                export_adapter=job.spec.export.lora_adapter,
                export_merged=job.spec.export.hugging_face,
            )
        )
    finally:
        if reporter is not None and not reporter.stop():
            log.warning("the last status update could not be sent")
    if outcome.code:
        print(
            Failure(int(outcome.code), outcome.reason, outcome.message).marker_line(),
            file=sys.stderr,
            flush=True,
        )
    return int(outcome.code)
