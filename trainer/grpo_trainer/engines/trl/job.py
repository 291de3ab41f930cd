"""A GRPOJob with `engine: trl` -> TRL engine settings, each with the reason it has its value.

The spec's fields are authoritative where it has them (learning rate, group size, lengths, loss,
LoRA, checkpoints); what the spec has no field for (AdamW betas, weight decay, schedule, warmup,
gradient clipping) keeps the single-GPU LoRA recipe's values from `TrlSettings`, and `engine.overrides` changes any
GRPOConfig or LoraConfig field last.

Batch sizes keep verl's meaning, so one spec reads the same for both engines: `trainBatchSize`
prompts are generated per round, `miniBatchSize` prompts make one optimiser update, and
`microBatchSizePerDevice` completions go through one forward pass. The arithmetic and its
messages are the operator's (grpo_operator/api/batch.py).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from typing import Any

from grpo_operator.api.batch import Batch, batch_problems
from grpo_operator.api.quantity import parse as parse_quantity
from grpo_operator.api.v1alpha1 import ResolvedJob

from ...failures import ConfigError
from .generation import resolve as resolve_generation
from .generation import trl_config as generation_trl_config
from .generation import vllm_context
from .memory import (
    GIB,
    PARKED_VLLM_HEADROOM_GIB,
    RECIPE_BUDGET_GIB,
    BudgetError,
    ModelFootprint,
    VllmNeed,
    vllm_gib,
    vllm_layout,
    vllm_need,
)
from .settings import TrlSettings, effective_batch_size, split_overrides

RECIPE = "the single-GPU LoRA recipe (no spec field)"
"""The reason of every value the spec has no field for."""

TARGETS_AGAINST_UNSLOTH = (
    "the Linear layers Unsloth's FastVisionModel adapts (vision blocks' attention and MLP, the "
    "decoder's attention, linear attention included, and MLP), plus the vision merger's two, which "
    "Unsloth leaves frozen and the recipe's 'ViT + Projector + Decoder' trains"
)


def optimizer(job: ResolvedJob) -> tuple[str, str]:
    """(optimizer, why): the single-GPU LoRA recipe's adamw_8bit where bitsandbytes works (the CUDA image), else adamw_torch."""
    if job.accelerator.device == "cpu":
        return (
            "adamw_torch",
            "adamw_torch: the single-GPU LoRA recipe's adamw_8bit needs bitsandbytes on a GPU; this job runs on CPU",
        )
    if importlib.util.find_spec("bitsandbytes") is not None:
        try:
            import bitsandbytes  # noqa: F401  (imports torch; only where it is installed)

            return "adamw_8bit", f"{RECIPE}: adamw_8bit (bitsandbytes is installed)"
        except Exception as error:  # a broken install (no CUDA libraries) must not stop planning
            problem = f"bitsandbytes does not import here ({type(error).__name__})"
    else:
        problem = "bitsandbytes is not installed here"
    return (
        "adamw_torch",
        f"adamw_torch: the single-GPU LoRA recipe's adamw_8bit needs bitsandbytes, and {problem}",
    )


def _batch_settings(job: ResolvedJob) -> dict[str, Any]:
    batch = Batch.from_spec(job.spec, "trl")
    problems = batch_problems(batch)
    if problems:
        raise ConfigError("; ".join(str(p) for p in problems))
    return {
        "num_generations": batch.group_size,
        "per_device_train_batch_size": batch.micro_batch,
        "gradient_accumulation_steps": batch.accumulation_steps,
        "steps_per_generation": batch.accumulation_steps * batch.updates_per_step,
    }


def reporting_settings(job: ResolvedJob) -> dict[str, Any]:
    """logging.tensorboard / logging.wandb -> TRL's report_to; evaluation -> TRL's evaluation.

    `evaluation.interval` counts verl steps (generation rounds); TRL counts optimiser updates, a
    verl step's trainBatchSize / miniBatchSize of them.
    """
    spec = job.spec
    report_to = []
    if spec.logging.tensorboard:
        report_to.append("tensorboard")
    if spec.logging.wandb is not None:
        report_to.append("wandb")
    updates = spec.algorithm.train_batch_size // spec.algorithm.mini_batch_size
    interval = spec.evaluation.interval
    return {
        "report_to": tuple(report_to),
        "run_name": (spec.logging.wandb.experiment if spec.logging.wandb else None) or job.name,
        "eval_steps": interval * updates if interval > 0 else 0,
        "eval_on_start": interval > 0 and spec.evaluation.before_train,
    }


def reporting_env(job: ResolvedJob) -> dict[str, str]:
    """The environment transformers' TensorBoard and W&B callbacks read, on the job's volume.

    The same TensorBoard folder as the verl engine's; W&B's API key comes from the Secret the
    operator maps into the pod (WANDB_API_KEY), its files go beside the checkpoints.
    """
    env: dict[str, str] = {}
    if job.spec.logging.tensorboard:
        env["TENSORBOARD_LOGGING_DIR"] = f"{job.paths.job_dir}/tensorboard"
    wandb = job.spec.logging.wandb
    if wandb is not None:
        env["WANDB_PROJECT"] = wandb.project
        env["WANDB_DIR"] = f"{job.paths.job_dir}/wandb"
    return env


def memory_budget(job: ResolvedJob) -> tuple[float, str]:
    """The whole process's device memory in GiB, and where it comes from."""
    raw = job.spec.rollout.memory_budget
    if raw is None:
        return RECIPE_BUDGET_GIB, "rollout.memoryBudget unset: the single-GPU LoRA recipe's 16 GB"
    return float(parse_quantity(raw)[0]) / GIB, f"spec.rollout.memoryBudget {raw}"


def vllm_need_of(job: ResolvedJob, model: ModelFootprint | None) -> VllmNeed | None:
    """The process's least with colocated vLLM for this job's lengths and generation round."""
    if model is None:
        return None
    batch = replace(TrlSettings(), **_batch_settings(job))
    dataset = job.spec.dataset
    rounds = batch.steps_per_generation or batch.gradient_accumulation_steps
    return vllm_need(
        model,
        sequences=effective_batch_size(batch) * rounds,
        sequence_tokens=dataset.max_prompt_length + dataset.max_response_length,
        context=vllm_context(dataset.max_prompt_length, dataset.max_response_length),
    )


def vllm_layout_of(job: ResolvedJob, model: ModelFootprint | None) -> VllmNeed | None:
    """The process's least with vLLM in the layout the budget calls for (memory.vllm_layout)."""
    need = vllm_need_of(job, model)
    if need is None:
        return None
    return vllm_layout(need, memory_budget(job)[0])


def generation_choice(job: ResolvedJob, model: ModelFootprint | None) -> tuple[str, str]:
    """The generation path and why (auto weighs vLLM's second copy of the weights against the budget)."""
    budget, source = memory_budget(job)
    path, why = resolve_generation(
        job.spec.rollout.generation,
        job.accelerator.device,
        need=vllm_layout_of(job, model),
        budget_gib=budget,
    )
    if "budget" in why:
        why = f"{why} ({source})"
    return path, why


@dataclass(frozen=True)
class VllmSizing:
    """How much of the device vLLM gets: GiB of the budget (a share at start) or the spec's share."""

    gib: float | None
    """vLLM's GiB, turned into its share of the device when the run starts; None: `share` as given."""
    share: float
    value: str
    """For `grpo-train plan`: what vLLM gets."""
    why: str
    parked: bool = False
    """The policy's frozen weights wait in host memory while vLLM generates (parking.py)."""


def vllm_sizing(job: ResolvedJob, model: ModelFootprint | None) -> VllmSizing:
    """vLLM's memory for a job whose rollouts vLLM generates; ConfigError naming the budget when it
    cannot hold the model twice, the trainer's part and vLLM's least KV cache."""
    rollout = job.spec.rollout
    share = rollout.gpu_memory_utilization
    if rollout.memory_budget is None and rollout.generation == "vllm":
        return VllmSizing(
            None,
            share,
            f"{share} of the device",
            "spec.rollout.gpuMemoryUtilization: vLLM's share of whatever device the process lands on "
            "(set rollout.memoryBudget to size it from a budget for the whole process instead)",
        )
    budget, source = memory_budget(job)
    need = vllm_layout_of(job, model)
    if need is None:
        return VllmSizing(
            None,
            share,
            f"{share} of the device",
            f"{source}, but the model's weights are not here to size vLLM from: "
            "spec.rollout.gpuMemoryUtilization's share until they are (the run sizes it at start)",
        )
    try:
        gib = vllm_gib(need, budget)
    except BudgetError as error:
        raise ConfigError(str(error)) from error
    if need.parked:
        return VllmSizing(
            gib,
            share,
            f"{gib:.1f} GiB of the {budget:.1f} GiB budget, as its share of the device read at start; "
            "the policy's weights wait in host memory while vLLM generates",
            f"{source}: two copies of the weights need ~{need.both_copies.total:.1f} GiB, so they take "
            f"turns on the device ({need.describe()}); vLLM gets its least {need.vllm:.1f} + "
            f"{PARKED_VLLM_HEADROOM_GIB:.1f} of headroom",
            parked=True,
        )
    return VllmSizing(
        gib,
        share,
        f"{gib:.1f} GiB of the {budget:.1f} GiB budget, as its share of the device read at start",
        f"{source}: {budget:.1f} - policy {need.weights:.1f} - trainer ~{need.trainer:.1f} (estimate) "
        f"= {gib:.1f} GiB for vLLM, which needs at least {need.vllm:.1f} (its copy {need.weights:.1f} + "
        f"KV cache {need.kv_cache:.1f} for {need.kv_tokens:,} tokens + ~{need.vllm_overhead:.1f}, estimate)",
    )


def settings_from_job(job: ResolvedJob, model: ModelFootprint | None = None) -> TrlSettings:
    """Pure mapping from a ResolvedJob to TrlSettings; ConfigError names the offending field.

    `model`: the model folder's footprint (memory.footprint), when known, for `rollout.generation:
    auto` and vLLM's memory.
    """
    spec = job.spec
    algorithm = spec.algorithm
    kl = algorithm.kl
    if kl.placement == "reward" and kl.coefficient > 0:
        raise ConfigError(
            "spec.algorithm.kl: placement=reward is not supported by the trl engine; use loss or none"
        )
    values: dict[str, Any] = {
        "output_dir": job.paths.checkpoint_dir,
        "learning_rate": algorithm.learning_rate,
        **_batch_settings(job),
        "max_prompt_length": spec.dataset.max_prompt_length,
        "filter_overlong_prompts": spec.dataset.filter_overlong_prompts,
        "truncation": spec.dataset.truncation,
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
        "top_p": spec.rollout.top_p,
        "top_k": spec.rollout.top_k,
        "min_p": spec.rollout.min_p,
        "seed": algorithm.seed,
        "save_steps": spec.checkpoint.save_interval,
        "keep_checkpoints": spec.checkpoint.keep,
        "gradient_checkpointing": spec.engine.gradient_checkpointing,
        # bf16 where the device computes in it; a CPU run stays in fp32 (CPU bf16 kernels are
        # slow or missing for several of the model's ops).
        "bf16": job.accelerator.device != "cpu",
        "optim": optimizer(job)[0],
        "overrides": tuple(spec.engine.overrides),
        **reporting_settings(job),
        "vllm_gpu_memory_utilization": spec.rollout.gpu_memory_utilization,
    }
    generation, _ = generation_choice(job, model)
    values["generation"] = generation
    if generation == "vllm":
        sizing = vllm_sizing(job, model)
        values["vllm_memory_gib"] = sizing.gib
        values["vllm_park_policy"] = sizing.parked
        if spec.rollout.memory_budget is not None:
            values["memory_budget_gib"] = memory_budget(job)[0]
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


def reasons(job: ResolvedJob, model: ModelFootprint | None = None) -> dict[str, str]:
    """Why each GRPOConfig / LoraConfig key (`lora.` prefix) has its value, for `grpo-train plan`.

    Keys not named here take the single-GPU LoRA recipe's value (`RECIPE`); `engine.overrides` wins over everything.
    """
    spec = job.spec
    batch = Batch.from_spec(spec, "trl")
    micro = (
        "spec.algorithm.microBatchSizePerDevice"
        if spec.algorithm.micro_batch_size_per_device
        else "microBatchSizePerDevice unset: the whole update in one forward pass"
    )
    lora = "spec.engine.lora" if spec.engine.lora else f"{RECIPE}; spec.engine.lora is not set"
    generation, generation_why = generation_choice(job, model)
    generation_keys = set(
        generation_trl_config(
            generation, max_prompt_length=0, max_completion_length=0, gpu_memory_utilization=0.0
        )
    )
    why = {
        "output_dir": "the job's checkpoint folder on the shared volume (resumed across attempts)",
        "learning_rate": "spec.algorithm.learningRate",
        "num_generations": "spec.algorithm.groupSize (G completions per prompt)",
        "per_device_train_batch_size": f"completions per forward pass: {micro} (rounded up to whole groups)",
        "gradient_accumulation_steps": (
            f"miniBatchSize × groupSize / micro-batch = {batch.responses_per_update} / {batch.micro_batch}: "
            "forward passes per optimiser update"
        ),
        "steps_per_generation": (
            f"accumulation × trainBatchSize / miniBatchSize = {batch.accumulation_steps} × "
            f"{batch.updates_per_step}: one generation round serves a verl step's updates"
        ),
        "max_completion_length": "spec.dataset.maxResponseLength",
        "max_steps": (
            "spec.algorithm.totalSteps × updates per step (TRL counts optimiser updates)"
            if spec.algorithm.total_steps
            else "spec.algorithm.totalSteps unset: spec.algorithm.epochs decide"
        ),
        "num_train_epochs": "spec.algorithm.epochs",
        "loss_type": "spec.algorithm.lossType",
        "importance_sampling_level": "spec.algorithm.importanceSampling",
        "epsilon": "spec.algorithm.clipRatio",
        "beta": f"spec.algorithm.kl.coefficient with placement={spec.algorithm.kl.placement}",
        "entropy_coef": "spec.algorithm.entropyCoefficient",
        "temperature": "spec.rollout.temperature",
        "top_p": "spec.rollout.topP",
        "top_k": "spec.rollout.topK (0: every token)",
        "min_p": "spec.rollout.minP (0: none)",
        "seed": "spec.algorithm.seed",
        "save_steps": "spec.checkpoint.saveInterval",
        "save_total_limit": "the engine prunes to spec.checkpoint.keep across attempts, not the Trainer",
        "gradient_checkpointing": "spec.engine.gradientCheckpointing",
        "remove_unused_columns": "images and answers travel in extra columns the rewards read",
        "bf16": f"the {job.accelerator.name} pool's device ({job.accelerator.device}): bf16 except on CPU",
        "optim": optimizer(job)[1],
        "report_to": "spec.logging.tensorboard and spec.logging.wandb (files under the job's folder)",
        "run_name": "spec.logging.wandb.experiment, else the job's name",
        **{
            key: (
                f"spec.evaluation: every {spec.evaluation.interval} steps × updates per step, "
                f"beforeTrain={str(spec.evaluation.before_train).lower()}; G completions per validation prompt"
                if spec.evaluation.interval > 0
                else "spec.evaluation.interval=0: no validation"
            )
            for key in ("eval_strategy", "eval_steps", "eval_on_start", "per_device_eval_batch_size")
        },
        "warmup_steps": f"{RECIPE}: warmup ratio 0.1 (transformers 5 reads a fraction below 1 as a ratio)",
        **{key: generation_why for key in generation_keys},
        **{f"lora.{key}": lora for key in ("r", "lora_alpha", "lora_dropout", "exclude_modules")},
        "lora.target_modules": lora
        if spec.engine.lora and spec.engine.lora.target_modules
        else f"{lora}: {TARGETS_AGAINST_UNSLOTH}",
    }
    trainer_overrides, lora_overrides = split_overrides(spec.engine.overrides)
    if "vllm_gpu_memory_utilization" in why:
        sizing = vllm_sizing(job, model)
        why["vllm_gpu_memory_utilization"] = (
            sizing.why
            if sizing.gib is None
            else f"replaced when the run starts by {sizing.gib:.1f} GiB / the device's total: {sizing.why}"
        )
    why.update({key: "engine.overrides" for key in trainer_overrides})
    why.update({f"lora.{key}": "engine.overrides" for key in lora_overrides})
    return why


def reward_funcs_for(job: ResolvedJob) -> list[Any]:
    """The job's reward as TRL reward functions; ConfigError when the user's file cannot give it.

    A missing function, a file that does not import or does not exist fails the job at once:
    another attempt would load the same file. A custom file runs in the sandbox's workers
    (rewards.py), never in this process.
    """
    from .rewards import builtin_reward_funcs, custom_reward_funcs

    reward = job.spec.reward
    options = dict(reward.kwargs)
    if reward.custom is None:
        return builtin_reward_funcs(reward.builtin or "reasoning-format", options)
    if not job.paths.reward_file:
        raise ConfigError("reward.custom is set but the job has no mounted reward file")
    try:
        return custom_reward_funcs(
            job.paths.reward_file, reward.custom.function, options, batch=reward.custom.batch
        )
    except ConfigError as exc:
        raise ConfigError(f"{exc} (ConfigMap {reward.custom.config_map}, key {reward.custom.key})") from exc
