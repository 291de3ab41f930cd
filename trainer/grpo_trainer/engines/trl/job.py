"""A GRPOJob with `engine: trl` -> TRL engine settings, each with the reason it has its value.

The spec's fields are authoritative where it has them (learning rate, group size, lengths, loss,
LoRA, checkpoints); what the spec has no field for (AdamW betas, weight decay, schedule, warmup,
gradient clipping) keeps the single-GPU LoRA recipe's values from `TrlSettings`, and `engine.overrides` changes any
GRPOConfig or LoraConfig field last.

Batch sizes keep verl's meaning, so one spec reads the same for both engines: `trainBatchSize`
prompts are generated per round, `miniBatchSize` prompts make one optimiser update, and
`microBatchSizePerDevice` completions go through one forward pass. The arithmetic and its
messages are the operator's (grpo_operator/api/batch.py).

What depends on the software (adamw_8bit needs bitsandbytes; vLLM is named by the image's
manifest) is read from the trainer image the job runs in (`grpo_trainer.trainer_image`), never
from the machine that plans, so `grpo-train plan` on a laptop and the pod at start-up give the
same values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from grpo_operator.api.batch import Batch, batch_problems
from grpo_operator.api.quantity import parse as parse_quantity
from grpo_operator.api.v1alpha1 import ResolvedJob

from ...failures import ConfigError
from ...trainer_image import TrainerImage, running
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


def optimizer(job: ResolvedJob, image: TrainerImage) -> tuple[str, str]:
    """(optimizer, why): the single-GPU LoRA recipe's adamw_8bit where the job's image has
    bitsandbytes (the CUDA image), else adamw_torch."""
    if job.accelerator.device == "cpu":
        return (
            "adamw_torch",
            "adamw_torch: the single-GPU LoRA recipe's adamw_8bit needs bitsandbytes on a GPU; this job runs on CPU",
        )
    version = image.version("bitsandbytes")
    if version is not None:
        return "adamw_8bit", f"{RECIPE}: adamw_8bit, from bitsandbytes {version} in {image.name}"
    return (
        "adamw_torch",
        f"adamw_torch: the single-GPU LoRA recipe's adamw_8bit needs bitsandbytes, which {image.name} does not have",
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


def generation_choice(job: ResolvedJob, image: TrainerImage) -> tuple[str, str]:
    """The generation path and why (generation.py: auto keeps the policy sampling its own rollouts)."""
    return resolve_generation(job.spec.rollout.generation, job.accelerator.device, vllm=image.version("vllm"))


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
            f"{source}; vLLM's GiB come from the model's weights, which a plan made before the pod has "
            f"downloaded {job.spec.model.source} does not know: assumed spec.rollout.gpuMemoryUtilization's "
            "share until then, and the pod sizes vLLM from the weights at start (its plan says how)",
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


def settings_from_job(
    job: ResolvedJob, model: ModelFootprint | None = None, *, image: TrainerImage | None = None
) -> TrlSettings:
    """Pure mapping from a ResolvedJob to TrlSettings; ConfigError names the offending field.

    `model`: the model folder's footprint (memory.footprint), when known, for vLLM's memory;
    `image`: the trainer image the job runs in (its manifest says what it has), by default the
    one this process runs in (trainer_image.running).
    """
    image = image or running(job)
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
        "optim": optimizer(job, image)[0],
        "overrides": tuple(spec.engine.overrides),
        **reporting_settings(job),
        "vllm_gpu_memory_utilization": spec.rollout.gpu_memory_utilization,
    }
    generation, _ = generation_choice(job, image)
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


def reasons(
    job: ResolvedJob, model: ModelFootprint | None = None, *, image: TrainerImage | None = None
) -> dict[str, str]:
    """Why each GRPOConfig / LoraConfig key (`lora.` prefix) has its value, for `grpo-train plan`.

    Keys not named here take the single-GPU LoRA recipe's value (`RECIPE`); `engine.overrides` wins
    over everything. `image` as for `settings_from_job`.
    """
    image = image or running(job)
    spec = job.spec
    batch = Batch.from_spec(spec, "trl")
    micro = (
        "spec.algorithm.microBatchSizePerDevice"
        if spec.algorithm.micro_batch_size_per_device
        else "microBatchSizePerDevice unset: the whole update in one forward pass"
    )
    lora = "spec.engine.lora" if spec.engine.lora else f"{RECIPE}; spec.engine.lora is not set"
    generation, generation_why = generation_choice(job, image)
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
        "optim": optimizer(job, image)[1],
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
        **objective_reasons(job, generation),
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


def objective_reasons(job: ResolvedJob, generation: str) -> dict[str, str]:
    """Why each GRPOConfig key that shapes the loss beyond the spec's fields has its value.

    They are written into GRPOConfig explicitly (settings.py) so none changes with a TRL default,
    and said here in what they do to a step, so a plan shows the objective a job trains.
    """
    algorithm = job.spec.algorithm
    if algorithm.loss_type == "dr_grpo":
        verl = (
            "verl's dr_grpo does not (algorithm.norm_adv_by_std_in_grpo=false), as the Dr. GRPO paper "
            "proposes: engine.overrides scale_rewards=none trains that objective on TRL"
        )
    else:
        verl = f"verl's {algorithm.loss_type} does too (algorithm.norm_adv_by_std_in_grpo=true)"
    why = {
        "scale_rewards": (
            f"{RECIPE}, TRL's default: each advantage is divided by its group's reward std; {verl}"
        ),
        "epsilon_high": "spec.algorithm.clipRatio: the upper clip equals the lower one (symmetric, TRL's default)",
        "delta": "TRL's default: no second, upper clip of the ratio for negative advantages",
        "mask_truncated_completions": (
            "TRL's default, as the recipe trains: a completion cut at maxResponseLength still counts in the loss"
        ),
        "top_entropy_quantile": "TRL's default: every token counts in the loss, not only the high-entropy ones",
        "off_policy_mask_threshold": "TRL's default: no sequence is masked for being off-policy",
    }
    correction, mode = "vllm_importance_sampling_correction", "vllm_importance_sampling_mode"
    clip_max, clip_min = "vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_min"
    if generation != "vllm":
        why[correction] = (
            f"rollout.generation={generation}: the policy samples its own rollouts (adapters unmerged), so "
            "there is no other sampler to correct for; TRL reads these keys only when vLLM generates"
        )
        unused = f"not used on the {generation} path (TRL's default, written out)"
        why.update({mode: unused, clip_max: unused, clip_min: unused})
        return why
    completions = algorithm.group_size * algorithm.train_batch_size
    why[correction] = (
        "rollout.generation=vllm (TRL's default, kept): vLLM samples from its bf16 copy with the "
        "adapters merged in, not from the policy, so each sequence's loss is weighted by how much "
        "likelier the policy finds it than vLLM did (exp of the sum of its tokens' log-ratios); the "
        "recipe sampled from the policy and has no such weight"
    )
    why[mode] = (
        "TRL's default: a sequence whose weight leaves [clip_min, clip_max] is dropped from the loss, "
        f"not clipped; a step holds {completions} completions (groupSize x trainBatchSize), so each one "
        f"dropped removes 1/{completions} of its gradient, and the schedule advances even when all are"
    )
    why[clip_max] = (
        "TRL's default: a sequence over 3 times likelier under the policy than under vLLM is dropped"
    )
    why[clip_min] = (
        "TRL's default: no lower bound; a sequence far less likely under the policy is kept with a weight near 0"
    )
    return why


def sample_setting(job: ResolvedJob) -> tuple[str, str]:
    """export.sample's value and reason: how the check after training decodes (sample.py)."""
    sample = job.spec.export.sample
    tokens = sample.max_new_tokens or job.spec.dataset.max_response_length
    if sample.temperature == 0:
        return f"row {sample.row}: {tokens} new tokens, greedy", "spec.export.sample (temperature 0: greedy)"
    value = (
        f"row {sample.row}: {tokens} new tokens, temperature {sample.temperature}, min_p {sample.min_p}, "
        "top_k and top_p off"
    )
    why = (
        "spec.export.sample (the single-GPU LoRA recipe's check: temperature 0.7, min_p 0.1); the model's "
        "own generation_config top_k and top_p, which the recipe's generate kept, are switched off, so "
        "the check samples the whole distribution cut by min_p alone, as the rollouts do with "
        "rollout.topK/topP unset"
    )
    return value, why


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
