"""The TRL engine's settings and the pure mapping from them to TRL's and peft's configuration.

`TrlSettings` holds the single-GPU LoRA recipe as defaults, so a GRPOJob that says only
`engine: trl` trains the way the single-GPU LoRA recipe does; every value can be changed by the job. The mapping
(`build_trl_config`) is pure, so what reaches `GRPOConfig` and `LoraConfig` is unit-tested
without importing torch or TRL, and every recipe value is written explicitly: TRL 1.16's defaults
differ from the single-GPU LoRA recipe's (`loss_type` is `dapo` there, `importance_sampling_level` is `token`,
`learning_rate` 1e-6, `logging_steps` 10).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from .generation import trl_config as generation_trl_config

# Module-name fragments, matched as regular expressions by peft against full module names.
# The Qwen-VL family names its vision tower `visual` and its language model `language_model`;
# LLaVA-style models use `vision_tower`/`vision_model`, `multi_modal_projector` and
# `language_model`/`text_model`. Matching by family fragments keeps the engine model-agnostic
# without loading the model in this pure module.
_VISION_TOWER = r"(?:visual|vision_tower|vision_model)"
_LANGUAGE_MODEL = r"(?:language_model|text_model)"
_VISION_ATTENTION_LEAVES = r"(?:attn|self_attn|attention)\.(?:qkv|proj|q_proj|k_proj|v_proj|o_proj|out_proj)"
_VISION_MLP_LEAVES = r"mlp\.(?:linear_fc1|linear_fc2|fc1|fc2|gate_proj|up_proj|down_proj)"
# The projector that turns vision features into language-model embeddings (the single-GPU LoRA recipe trains it
# together with the encoder: "ViT + Projector + Decoder").
_PROJECTOR = (
    r"(?:visual\.merger|visual\.deepstack_merger_list\.\d+|multi_modal_projector|mm_projector)"
    r"\.(?:linear_fc1|linear_fc2|mlp\.0|mlp\.2|linear_1|linear_2)"
)
# Full attention, and the linear attention (Gated DeltaNet) of the hybrid decoders: Qwen3.5 names its
# projections in_proj_qkv/in_proj_z/in_proj_b/in_proj_a/out_proj, Qwen3-Next in_proj_qkvz/in_proj_ba/
# out_proj. Unsloth adapts all of them ("attn" is in their path); so does this.
_LANGUAGE_ATTENTION_LEAVES = (
    r"(?:self_attn\.(?:q_proj|k_proj|v_proj|o_proj)"
    r"|linear_attn\.(?:in_proj_qkvz|in_proj_qkv|in_proj_z|in_proj_ba|in_proj_b|in_proj_a|out_proj))"
)
_LANGUAGE_MLP_LEAVES = r"mlp\.(?:gate_proj|up_proj|down_proj)"


@dataclass(frozen=True)
class TrlSettings:
    """Everything the TRL engine needs to know about one run, with the single-GPU LoRA recipe's values.

    Lengths are in tokens. `per_device_train_batch_size` counts completions, as in TRL; the single-GPU LoRA recipe's
    value 1 is raised to a multiple of `num_generations` by `build_trl_config` (see there).
    """

    output_dir: str = "outputs"
    # Optimiser and schedule (seed: AdamW 5e-6, betas 0.9/0.99, weight decay 0.1, cosine, warmup 0.1).
    learning_rate: float = 5e-6
    adam_beta1: float = 0.9
    adam_beta2: float = 0.99
    weight_decay: float = 0.1
    # The single-GPU LoRA recipe uses `adamw_8bit`, which needs bitsandbytes on a GPU: a job gets it
    # where its trainer image has bitsandbytes (job.optimizer), the portable optimiser elsewhere.
    optim: str = "adamw_torch"
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.1
    max_grad_norm: float = 0.1
    # Batch and group (seed: batch 1, no accumulation, G=2).
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 1
    num_generations: int = 2
    # Optimiser steps per generation round (None: TRL's default, one round per step).
    steps_per_generation: int | None = None
    # Lengths (seed: 1024 + 1024). TRL 1.16 has no `max_prompt_length`: the engine drops or cuts
    # longer prompts before training instead (see `data.fit_prompts`).
    max_prompt_length: int = 1024
    max_completion_length: int = 1024
    # What happens to a longer prompt (dataset.filterOverlongPrompts, dataset.truncation): dropped,
    # else cut (left, right, middle) or refused (error). Applied by the engine, not GRPOConfig.
    filter_overlong_prompts: bool = True
    truncation: str = "error"
    # Length of the run: `max_steps` wins when positive (seed: 60 steps).
    max_steps: int = 60
    num_train_epochs: float = 1.0
    # Objective (seed: Dr. GRPO loss, sequence-level importance sampling, no KL term).
    loss_type: str = "dr_grpo"
    importance_sampling_level: str = "sequence"
    beta: float = 0.0
    epsilon: float = 0.2
    # Advantages divided by their group's reward std: TRL's default, which the single-GPU LoRA
    # recipe trained with (job.py's reasons say how verl's dr_grpo differs).
    scale_rewards: str = "group"
    num_iterations: int = 1
    entropy_coef: float = 0.0
    # The rest of TRL 1.16's loss, written out rather than inherited: symmetric clipping (None:
    # epsilon's), no two-sided clip (delta), truncated completions in the loss, every token's
    # entropy kept, no off-policy masking.
    epsilon_high: float | None = None
    delta: float | None = None
    mask_truncated_completions: bool = False
    top_entropy_quantile: float = 1.0
    off_policy_mask_threshold: float | None = None
    # TRL's correction for vLLM sampling from other probabilities than the policy's (the vllm path
    # only; TRL 1.16's defaults): each sequence's loss is weighted by exp(sum over its tokens of
    # log pi - log pi_vLLM), and a sequence whose weight leaves [clip_min, clip_max] is dropped.
    vllm_importance_sampling_correction: bool = True
    vllm_importance_sampling_mode: str = "sequence_mask"
    vllm_importance_sampling_clip_max: float | None = 3.0
    vllm_importance_sampling_clip_min: float | None = None
    # Sampling, the same on every generation path (generation.sampling says what reaches each).
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    # Benchmarks: every completion runs to max_completion_length on every path (like for like).
    ignore_eos: bool = False
    reward_weights: tuple[float, ...] | None = None
    # Checkpoints and logs (seed: save every 60 steps, log every step, no external reporter).
    save_steps: int = 60
    # Checkpoints kept on the shared volume, over all attempts of the job (the engine prunes).
    keep_checkpoints: int = 3
    logging_steps: int = 1
    # Where metrics go besides the status: TRL's report_to (logging.tensorboard, logging.wandb).
    report_to: tuple[str, ...] = ()
    run_name: str | None = None
    # Validation every N optimiser updates (0: none) on the validation rows, and once before training.
    eval_steps: int = 0
    eval_on_start: bool = False
    seed: int = 42
    # Precision and memory.
    bf16: bool = True
    gradient_checkpointing: bool = True
    # Rollouts (generation.py): eager, compiled (static cache + CUDA graphs) or vllm (colocated).
    generation: str = "eager"
    # vllm only: the share of the device vLLM may take (weights, KV cache, graphs), or the same in
    # GiB (wins when set; turned into a share of the device at run time), and whether vLLM sleeps
    # (weights and KV cache freed) while the policy trains.
    vllm_gpu_memory_utilization: float = 0.3
    vllm_memory_gib: float | None = None
    vllm_sleep: bool = True
    # The policy's frozen weights wait in host memory while vLLM generates (parking.py): set when
    # the budget cannot hold two copies of the weights (memory.vllm_layout).
    vllm_park_policy: bool = False
    # The job's budget for the whole process (rollout.memoryBudget), when it gave one: the run
    # checks that the device it lands on has that much.
    memory_budget_gib: float | None = None
    # LoRA (seed: r=16, alpha=16, dropout 0, vision and language layers, attention and MLP).
    lora_rank: int = 16
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_vision_layers: bool = True
    lora_language_layers: bool = True
    lora_attention_modules: bool = True
    lora_mlp_modules: bool = True
    # Explicit module names or one regular expression; replaces the four switches above.
    lora_target_modules: tuple[str, ...] | str | None = None
    lora_exclude_modules: tuple[str, ...] | None = None
    # `key=value` escape hatch onto GRPOConfig (`beta=0.04`) or LoraConfig (`lora.use_rslora=true`).
    overrides: tuple[str, ...] = ()


def lora_target_regex(settings: TrlSettings) -> str | list[str]:
    """Return peft's `target_modules` for the switches, or the explicit list when one is given.

    The result is one regular expression (peft full-matches a string against each module name),
    so only the Linear layers inside the chosen towers are adapted; embeddings, norms and the
    language-model head stay frozen as in the single-GPU LoRA recipe.
    """
    if settings.lora_target_modules is not None:
        if isinstance(settings.lora_target_modules, str):
            return settings.lora_target_modules
        return list(settings.lora_target_modules)
    alternatives: list[str] = []
    if settings.lora_vision_layers:
        leaves = []
        if settings.lora_attention_modules:
            leaves.append(_VISION_ATTENTION_LEAVES)
        if settings.lora_mlp_modules:
            leaves.append(_VISION_MLP_LEAVES)
        if leaves:
            alternatives.append(rf".*{_VISION_TOWER}\..*(?:{'|'.join(leaves)})")
        alternatives.append(rf".*{_PROJECTOR}")
    if settings.lora_language_layers:
        leaves = []
        if settings.lora_attention_modules:
            leaves.append(_LANGUAGE_ATTENTION_LEAVES)
        if settings.lora_mlp_modules:
            leaves.append(_LANGUAGE_MLP_LEAVES)
        if leaves:
            alternatives.append(rf".*{_LANGUAGE_MODEL}\..*(?:{'|'.join(leaves)})")
    if not alternatives:
        raise ValueError("LoRA targets nothing: enable vision or language layers, or name target modules")
    return "|".join(f"(?:{a})" for a in alternatives)


def parse_override_value(raw: str) -> Any:
    """Read an override's value as JSON where it is JSON (numbers, booleans, lists), else as text.

    `true`, `1e-5` and `[0.5, 1]` become typed values; `cosine` stays a string, so users need no
    quoting for the common case.
    """
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def split_overrides(overrides: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split `key=value` overrides into GRPOConfig ones and LoraConfig ones (`lora.` prefix)."""
    trainer: dict[str, Any] = {}
    lora: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"engine override {item!r} is not of the form key=value")
        value = parse_override_value(raw.strip())
        if key.startswith("lora."):
            lora[key.removeprefix("lora.")] = value
        else:
            trainer[key] = value
    return trainer, lora


def effective_batch_size(settings: TrlSettings) -> int:
    """The per-device batch TRL can run: a multiple of the group size.

    TRL requires each generation batch to hold whole groups of `num_generations` completions; the
    recipe's batch of 1 with G=2 is rejected by stock TRL. Unsloth, which the single-GPU LoRA recipe ran on, raises the
    batch to `num_generations`; rounding up to the next multiple does the same here, so one step
    is one prompt with its G completions.
    """
    rounds = settings.steps_per_generation or settings.gradient_accumulation_steps
    per_round = settings.per_device_train_batch_size * rounds
    if per_round % settings.num_generations == 0:
        return settings.per_device_train_batch_size
    g = settings.num_generations
    return math.ceil(settings.per_device_train_batch_size / g) * g


def eval_config(settings: TrlSettings) -> dict[str, Any]:
    """TRL's evaluation keys: a generation round on the validation rows every `eval_steps` updates.

    TRL generates `num_generations` completions per validation prompt and logs their rewards as
    `eval_reward`; one prompt per forward pass keeps validation within training's memory.
    """
    if settings.eval_steps <= 0:
        return {"eval_strategy": "no"}
    return {
        "eval_strategy": "steps",
        "eval_steps": settings.eval_steps,
        "eval_on_start": settings.eval_on_start,
        "per_device_eval_batch_size": settings.num_generations,
    }


def importance_sampling(settings: TrlSettings) -> dict[str, Any]:
    """TRL's vLLM importance-sampling keys, always written: the correction is on only where vLLM
    generates (on the other paths the policy samples its own rollouts: there is nothing to correct,
    and TRL reads the keys only with `use_vllm`)."""
    return {
        "vllm_importance_sampling_correction": settings.generation == "vllm"
        and settings.vllm_importance_sampling_correction,
        "vllm_importance_sampling_mode": settings.vllm_importance_sampling_mode,
        "vllm_importance_sampling_clip_max": settings.vllm_importance_sampling_clip_max,
        "vllm_importance_sampling_clip_min": settings.vllm_importance_sampling_clip_min,
    }


def build_trl_config(settings: TrlSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """Map settings to (`GRPOConfig` keyword arguments, `LoraConfig` keyword arguments).

    Pure: no TRL import, so the mapping is tested on any machine. Overrides are applied last and
    win over every derived value.
    """
    grpo: dict[str, Any] = {
        "output_dir": settings.output_dir,
        "learning_rate": settings.learning_rate,
        "adam_beta1": settings.adam_beta1,
        "adam_beta2": settings.adam_beta2,
        "weight_decay": settings.weight_decay,
        "optim": settings.optim,
        "lr_scheduler_type": settings.lr_scheduler_type,
        # transformers 5 dropped `warmup_ratio`: a float below 1 in `warmup_steps` is the ratio.
        "warmup_steps": settings.warmup_ratio,
        "max_grad_norm": settings.max_grad_norm,
        "per_device_train_batch_size": effective_batch_size(settings),
        "gradient_accumulation_steps": settings.gradient_accumulation_steps,
        "steps_per_generation": settings.steps_per_generation,
        "num_generations": settings.num_generations,
        "max_completion_length": settings.max_completion_length,
        "max_steps": settings.max_steps,
        "num_train_epochs": settings.num_train_epochs,
        "loss_type": settings.loss_type,
        "importance_sampling_level": settings.importance_sampling_level,
        "beta": settings.beta,
        "epsilon": settings.epsilon,
        "scale_rewards": settings.scale_rewards,
        "num_iterations": settings.num_iterations,
        "entropy_coef": settings.entropy_coef,
        "epsilon_high": settings.epsilon if settings.epsilon_high is None else settings.epsilon_high,
        "delta": settings.delta,
        "mask_truncated_completions": settings.mask_truncated_completions,
        "top_entropy_quantile": settings.top_entropy_quantile,
        "off_policy_mask_threshold": settings.off_policy_mask_threshold,
        **importance_sampling(settings),
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "top_k": settings.top_k,
        "min_p": settings.min_p,
        "reward_weights": list(settings.reward_weights) if settings.reward_weights is not None else None,
        # Checkpoints are pruned by the engine (all attempts share one folder), not by the Trainer.
        "save_strategy": "steps",
        "save_steps": settings.save_steps,
        "save_total_limit": None,
        "save_only_model": False,
        "logging_steps": settings.logging_steps,
        "logging_first_step": True,
        "report_to": list(settings.report_to) or "none",
        "run_name": settings.run_name,
        **eval_config(settings),
        "seed": settings.seed,
        "bf16": settings.bf16,
        "fp16": False,
        "gradient_checkpointing": settings.gradient_checkpointing,
        # Non-reentrant checkpointing works with frozen inputs and LoRA without extra hooks.
        "gradient_checkpointing_kwargs": {"use_reentrant": False},
        # Images and answers travel in extra columns the reward functions read.
        "remove_unused_columns": False,
        "dataloader_num_workers": 0,
    }
    grpo.update(
        generation_trl_config(
            settings.generation,
            max_prompt_length=settings.max_prompt_length,
            max_completion_length=settings.max_completion_length,
            gpu_memory_utilization=settings.vllm_gpu_memory_utilization,
            ignore_eos=settings.ignore_eos,
            sleep=settings.vllm_sleep,
            park_policy=settings.vllm_park_policy,
        )
    )
    lora: dict[str, Any] = {
        "r": settings.lora_rank,
        "lora_alpha": settings.lora_alpha,
        "lora_dropout": settings.lora_dropout,
        "bias": "none",
        "target_modules": lora_target_regex(settings),
        "task_type": "CAUSAL_LM",
    }
    if settings.lora_exclude_modules:
        lora["exclude_modules"] = list(settings.lora_exclude_modules)
    trainer_overrides, lora_overrides = split_overrides(settings.overrides)
    grpo.update(trainer_overrides)
    lora.update(lora_overrides)
    return grpo, lora


def settings_with(settings: TrlSettings, values: Mapping[str, Any]) -> TrlSettings:
    """Return a copy with `values` applied, rejecting names `TrlSettings` does not have."""
    known = {f.name for f in fields(TrlSettings)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown TRL engine settings: {', '.join(unknown)}")
    return replace(settings, **dict(values))
