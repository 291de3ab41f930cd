"""GRPOJob spec -> verl Hydra overrides, for one verl version family. Pure: no files, no imports of verl.

Every override here carries the intent of a reference recipe's setting in the form the installed verl actually
reads (docs/verl.md, "Recipe keys that no longer do what they say"): the reward under
`reward.custom_reward_function` on 0.9, `fsdp_config.use_torch_compile` rather than the actor's
ignored flag, `mm_processor_cache_gb=0` instead of the flag vLLM removed, the file logger always on.
The tests compose these overrides with each version's own configuration and check the values.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from grpo_operator.api.batch import DEFAULT_MICRO_BATCH
from grpo_operator.api.contract import Env
from grpo_operator.api.v1alpha1 import ResolvedJob

from ...failures import ConfigError
from .hydra_values import Override
from .versions import VerlProfile

CALLBACK_CLASS = "grpo_trainer.engines.verl.callback.StatusCheckpointCallback"
WORKER_SETUP_HOOK = "grpo_trainer.engines.verl.worker_setup.setup"
"""Ray runs it first in every worker of the job (worker_setup.py: fixes for verl bugs)."""
GROUPED_REWARD_MODULE = "grpo_trainer.engines.verl.grouped_reward"
GROUPED_REWARD_MANAGER = "GroupBatchRewardManager"
GROUPED_AGENT_LOOP_MANAGER = f"{GROUPED_REWARD_MODULE}.GroupedAgentLoopManager"
_REWARD_CALLS_PER_WORKER = 512
"""At most this many of a step's responses per reward worker when groups wait for each other: a
Ray async actor runs at most 1000 calls at once, and a call waiting for its group holds one."""
_VERL_REWARD_WORKERS = 8
_QWEN3_VL_NAME = re.compile(r"qwen3[-_.]?vl|qwen3\.5", re.IGNORECASE)
_QWEN3_VL_TYPES = frozenset({"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"})
_KWARG = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _verl_micro_batch() -> int:
    micro = DEFAULT_MICRO_BATCH["verl"]
    if micro is None:
        raise AssertionError("api/batch.py's DEFAULT_MICRO_BATCH names verl's default micro batch")
    return micro


_DEFAULT_MICRO_BATCH = _verl_micro_batch()
"""verl's micro-batch when the spec gives none (api/batch.py, which the checks read too)."""
_VLLM_DEFAULT_BATCHED_TOKENS = 8192
VLLM_EXECUTOR_KEY = "actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend"
"""The vLLM executor verl's rollout server starts with (verl's own value: mp)."""


@dataclass(frozen=True)
class RewardFunction:
    """The function verl's reward manager calls, and its extra keyword arguments."""

    path: str
    """An absolute file path or `pkg://module`: verl loads it in reward workers on any node."""
    name: str
    kwargs: dict[str, str] = field(default_factory=dict)
    batched: bool = False
    """Called a GRPO group at a time (lists in, a list out) by our grouped reward manager; else
    once per response by verl's naive manager."""
    why: str = ""
    """Why verl calls this function (for `grpo-train plan`)."""


@dataclass(frozen=True)
class Resume:
    """How verl should start: from the latest checkpoint, from a given one, or afresh."""

    mode: str
    """verl's trainer.resume_mode: auto, disable or resume_path."""
    path: str | None = None
    from_step: int | None = None
    """The step the run continues from, when known before launch (for status.checkpoint)."""


@dataclass(frozen=True)
class LaunchInputs:
    """What the overrides need beyond the spec: resolved paths and this attempt's choices."""

    model_path: str
    train_files: list[str]
    val_files: list[str]
    reward: RewardFunction
    resume: Resume
    worker_env: dict[str, str] = field(default_factory=dict)
    """Environment for every Ray worker (the TaskRunner that writes metrics included)."""


@dataclass(frozen=True)
class OverridePlan:
    overrides: list[Override]
    warnings: list[str]

    def rendered(self) -> list[str]:
        return [o.render() for o in self.overrides]


def is_qwen3_vl(model_source: str, model_path: str | None = None) -> bool:
    """Qwen3-VL (and Qwen3.5) want 16-pixel image patches and FSDP2 in verl's own examples."""
    if model_path:
        config = Path(model_path) / "config.json"
        try:
            model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError, AttributeError):
            model_type = None
        if model_type:
            return model_type in _QWEN3_VL_TYPES
    return bool(_QWEN3_VL_NAME.search(model_source))


def build_overrides(job: ResolvedJob, profile: VerlProfile, inputs: LaunchInputs) -> OverridePlan:
    """All overrides for one attempt, user escape-hatch overrides last."""
    warnings: list[str] = []
    user = _user(job)
    ours = [
        *_algorithm(job, profile, warnings),
        *_data(job, inputs, warnings),
        *_model(job, inputs, warnings),
        *_actor(job, profile, warnings),
        *_rollout(job),
        *_ref(job),
        *_reward(job, profile, inputs.reward),
        *_trainer(job, profile, inputs, warnings),
        *_worker_env(inputs.worker_env),
        _worker_setup(),
    ]
    return OverridePlan([*_yield_to_user(ours, user), *user], warnings)


def _yield_to_user(ours: list[Override], user: list[Override]) -> list[Override]:
    """Ours without the keys a user adds (`+key=` or `++key=`): Hydra refuses to add a key twice,
    so a user's `+key` beside ours would stop verl at start-up instead of winning. A plain `key=`
    of the user's keeps ours (which may be what adds the key) and wins by coming after it."""
    added = {o.key.lstrip("+") for o in user if o.key.startswith("+")}
    return [o for o in ours if o.key not in added]


def _algorithm(job: ResolvedJob, profile: VerlProfile, warnings: list[str]) -> list[Override]:
    algo = job.spec.algorithm
    kl = algo.kl
    out = [
        Override("algorithm.adv_estimator", "grpo", why="GRPO: group-relative advantages, no critic"),
        Override(
            "algorithm.norm_adv_by_std_in_grpo",
            algo.loss_type == "grpo",
            why=f"lossType={algo.loss_type}: Dr. GRPO does not divide advantages by the group's std",
        ),
        Override("algorithm.use_kl_in_reward", kl.placement == "reward", why=f"kl.placement={kl.placement}"),
    ]
    if kl.placement == "reward":
        out += [
            Override("algorithm.kl_penalty", kl.type),
            Override("algorithm.kl_ctrl.kl_coef", kl.coefficient),
        ]
    if algo.importance_sampling == "sequence" and "gspo" not in profile.policy_loss_modes:
        raise ConfigError(
            f"algorithm.importanceSampling=sequence needs verl's gspo policy loss, which verl "
            f"{profile.reference_version} does not have"
        )
    return out


def _data(job: ResolvedJob, inputs: LaunchInputs, warnings: list[str]) -> list[Override]:
    spec = job.spec
    data, algo = spec.dataset, spec.algorithm
    out = [
        Override("data.train_files", list(inputs.train_files), why="prepared on the shared volume"),
        Override("data.val_files", list(inputs.val_files or inputs.train_files)),
        Override("data.train_batch_size", algo.train_batch_size, why="prompts per step"),
        Override("data.max_prompt_length", data.max_prompt_length),
        Override("data.max_response_length", data.max_response_length),
        Override("data.filter_overlong_prompts", data.filter_overlong_prompts),
        Override("data.truncation", data.truncation),
        Override("data.image_key", data.image_key),
        Override("data.prompt_key", data.prompt_key),
        Override(
            "data.seed",
            algo.seed,
            why=(
                "spec.algorithm.seed: the order prompts are drawn in; the reference recipes leave data.seed unset, and "
                "verl then shuffles with torch's default generator (also a fixed order, another one)"
            ),
        ),
    ]
    threads = inputs.worker_env.get(Env.THREADS, "")
    if data.filter_overlong_prompts and threads.isdigit() and int(threads) > 1:
        out.append(
            Override(
                "data.filter_overlong_prompts_workers",
                int(threads),
                why=(
                    "the over-long prompt filter runs every prompt, images included, through the "
                    "processor before step 1, in as many processes as a device's share of the pod's "
                    "CPUs instead of verl's one, each on one of them (the worker setup shares the "
                    "threads): the geo3k recipe's 2,101 rows at 896-pixel images took 4.5 s on 16 "
                    "cores, 27 s in one process"
                ),
            )
        )
    if is_qwen3_vl(spec.model.source, inputs.model_path):
        out.append(
            Override("data.image_patch_size", 16, why="Qwen3-VL uses 16-pixel patches (verl default 14)")
        )
    return out


def _model(job: ResolvedJob, inputs: LaunchInputs, warnings: list[str]) -> list[Override]:
    engine = job.spec.engine
    out = [
        Override("actor_rollout_ref.model.path", inputs.model_path, why=f"from {job.spec.model.source}"),
        Override("actor_rollout_ref.model.use_remove_padding", engine.use_remove_padding),
        Override("actor_rollout_ref.model.use_fused_kernels", engine.use_fused_kernels),
        Override("actor_rollout_ref.model.enable_gradient_checkpointing", engine.gradient_checkpointing),
    ]
    lora = engine.lora
    if lora is None:
        return out
    out += [
        Override("actor_rollout_ref.model.lora_rank", lora.rank),
        Override("actor_rollout_ref.model.lora_alpha", lora.alpha),
        Override(
            "actor_rollout_ref.rollout.load_format",
            "safetensors",
            why="vLLM must load real weights to attach LoRA adapters to",
        ),
    ]
    if lora.target_modules:
        targets: str | list[str] = (
            "all-linear" if lora.target_modules == ["all-linear"] else list(lora.target_modules)
        )
        out.append(Override("actor_rollout_ref.model.target_modules", targets))
    else:
        if not (lora.language_layers and lora.attention_modules and lora.mlp_modules):
            raise ConfigError(
                "engine.lora: with verl, languageLayers/attentionModules/mlpModules=false need explicit "
                "engine.lora.targetModules (module names or a regular expression)"
            )
        out.append(Override("actor_rollout_ref.model.target_modules", "all-linear"))
    excludes = list(lora.exclude_modules or [])
    if not lora.vision_layers and not lora.target_modules:
        excludes.append(".*visual.*")
    if excludes:
        value: str | list[str] = excludes[0] if len(excludes) == 1 else excludes
        out.append(Override("actor_rollout_ref.model.exclude_modules", value))
    if is_qwen3_vl(job.spec.model.source, inputs.model_path):
        warnings.append(
            "LoRA GRPO on Qwen3-VL is reported to be extremely slow in verl (hours per step); "
            "full fine-tuning is the usual choice there"
        )
    return out


def _torch_compile(job: ResolvedJob) -> bool | None:
    """The job's torch.compile choice; off by default where the device lacks it (Ascend's NPUs)."""
    compile_ = job.spec.engine.torch_compile
    if compile_ is None and not job.accelerator.torch_compile:
        return False
    return compile_


def _actor(job: ResolvedJob, profile: VerlProfile, warnings: list[str]) -> list[Override]:
    spec = job.spec
    algo, engine, kl = spec.algorithm, spec.engine, spec.algorithm.kl
    prefix = "actor_rollout_ref.actor"
    out = [
        Override(f"{prefix}.strategy", engine.strategy, why=_strategy_why(engine.strategy)),
        Override(f"{prefix}.optim.lr", algo.learning_rate),
        Override(f"{prefix}.ppo_mini_batch_size", algo.mini_batch_size, why="prompts per optimizer update"),
        Override(f"{prefix}.use_kl_loss", kl.placement == "loss", why=f"kl.placement={kl.placement}"),
        Override(f"{prefix}.entropy_coeff", algo.entropy_coefficient),
        Override(f"{prefix}.clip_ratio", algo.clip_ratio),
        Override(f"{prefix}.clip_ratio_low", algo.clip_ratio),
        Override(f"{prefix}.clip_ratio_high", algo.clip_ratio),
        Override(f"{prefix}.loss_agg_mode", _loss_agg_mode(job)),
        Override(f"{prefix}.fsdp_config.param_offload", engine.param_offload),
        Override(f"{prefix}.fsdp_config.optimizer_offload", engine.optimizer_offload),
    ]
    if kl.placement == "loss":
        out += [
            Override(f"{prefix}.kl_loss_coef", kl.coefficient),
            Override(f"{prefix}.kl_loss_type", kl.type),
        ]
    if algo.tokens_per_device is not None:
        out += [
            Override(f"{prefix}.use_dynamic_bsz", True, why="tokensPerDevice: dynamic micro-batches"),
            Override(f"{prefix}.ppo_max_token_len_per_gpu", algo.tokens_per_device),
        ]
    else:
        micro = algo.micro_batch_size_per_device or _DEFAULT_MICRO_BATCH
        out.append(Override(f"{prefix}.ppo_micro_batch_size_per_gpu", micro))
    loss_mode = "gspo" if algo.importance_sampling == "sequence" else "vanilla"
    out.append(
        Override(
            f"{prefix}.policy_loss.loss_mode",
            loss_mode,
            why=f"importanceSampling={algo.importance_sampling}",
        )
    )
    if loss_mode == "gspo" and algo.clip_ratio > 0.01:
        warnings.append(
            f"GSPO clips sequence-level ratios; verl's GSPO examples use clip ranges of about 3e-4 to 4e-4, "
            f"this job uses {algo.clip_ratio}"
        )
    compile_ = _torch_compile(job)
    if compile_ is not None:
        why = "the FSDP engine reads fsdp_config.use_torch_compile; actor.use_torch_compile alone is ignored"
        out += [
            Override(f"{prefix}.use_torch_compile", compile_),
            Override(f"{prefix}.fsdp_config.use_torch_compile", compile_, why=why),
            Override("actor_rollout_ref.ref.fsdp_config.use_torch_compile", compile_),
        ]
    return out


def _strategy_why(strategy: str) -> str:
    if strategy == "fsdp":
        return "spec.engine.strategy: verl's default, FSDP1, as the reference recipes ran"
    return (
        "spec.engine.strategy (default fsdp2): FSDP2, which verl recommends (less memory, composes with "
        "torch.compile) and its Qwen3-VL examples use; the reference recipes ran verl's default, fsdp (FSDP1): set "
        "engine.strategy: fsdp for their exact setup"
    )


def _loss_agg_mode(job: ResolvedJob) -> str:
    algo = job.spec.algorithm
    if algo.loss_aggregation:
        return algo.loss_aggregation
    if algo.loss_type == "dr_grpo":
        return "seq-mean-token-sum-norm"
    if algo.importance_sampling == "sequence":
        return "seq-mean-token-mean"
    return "token-mean"


def _log_prob_micro(job: ResolvedJob) -> int:
    algo = job.spec.algorithm
    return (
        algo.log_prob_micro_batch_size_per_device or algo.micro_batch_size_per_device or _DEFAULT_MICRO_BATCH
    )


def _rollout(job: ResolvedJob) -> list[Override]:
    spec = job.spec
    rollout, data, algo = spec.rollout, spec.dataset, spec.algorithm
    prefix = "actor_rollout_ref.rollout"
    out = [
        Override(f"{prefix}.name", rollout.engine),
        Override(f"{prefix}.n", algo.group_size, why="responses per prompt (G)"),
        Override(f"{prefix}.tensor_model_parallel_size", rollout.tensor_parallel_size),
        Override(f"{prefix}.gpu_memory_utilization", rollout.gpu_memory_utilization),
        Override(f"{prefix}.enforce_eager", rollout.enforce_eager),
        Override(f"{prefix}.enable_chunked_prefill", rollout.enable_chunked_prefill),
        Override(f"{prefix}.free_cache_engine", rollout.free_cache_engine),
        Override(f"{prefix}.temperature", rollout.temperature),
        Override(f"{prefix}.top_p", rollout.top_p),
        Override(
            f"{prefix}.top_k",
            rollout.top_k or -1,
            why="spec.rollout.topK; verl's vLLM rollout reads -1, not 0, as every token",
        ),
        Override(
            f"{prefix}.engine_kwargs.vllm.mm_processor_cache_gb",
            0,
            add=True,
            why="replaces disable_mm_preprocessor_cache, which current vLLM rejects at start-up",
        ),
    ]
    if job.accelerator.device == "cuda" and rollout.tensor_parallel_size == 1:
        out.append(
            Override(
                VLLM_EXECUTOR_KEY,
                "uni",
                add=True,
                why=(
                    "a replica of one GPU: vLLM runs the model in its engine process instead of "
                    "starting a worker process beside it (verl asks for mp), which starts every "
                    "attempt sooner"
                ),
            )
        )
    longest = data.max_prompt_length + data.max_response_length
    if not rollout.enable_chunked_prefill and longest > _VLLM_DEFAULT_BATCHED_TOKENS:
        out.append(
            Override(
                f"{prefix}.max_num_batched_tokens",
                longest,
                why="without chunked prefill vLLM needs a whole prompt+response in one batch",
            )
        )
    if algo.tokens_per_device is not None:
        out += [
            Override(f"{prefix}.log_prob_use_dynamic_bsz", True),
            Override(f"{prefix}.log_prob_max_token_len_per_gpu", algo.tokens_per_device),
        ]
    else:
        out.append(Override(f"{prefix}.log_prob_micro_batch_size_per_gpu", _log_prob_micro(job)))
    return out


def _ref(job: ResolvedJob) -> list[Override]:
    algo, engine = job.spec.algorithm, job.spec.engine
    prefix = "actor_rollout_ref.ref"
    out = [Override(f"{prefix}.fsdp_config.param_offload", engine.ref_param_offload)]
    if algo.tokens_per_device is not None:
        out += [
            Override(f"{prefix}.log_prob_use_dynamic_bsz", True),
            Override(f"{prefix}.log_prob_max_token_len_per_gpu", algo.tokens_per_device),
        ]
    else:
        out.append(Override(f"{prefix}.log_prob_micro_batch_size_per_gpu", _log_prob_micro(job)))
    return out


def _reward(job: ResolvedJob, profile: VerlProfile, reward: RewardFunction) -> list[Override]:
    prefix = profile.reward_prefix
    where = (
        "verl 0.9 reads only reward.custom_reward_function"
        if not profile.migrates_legacy_reward
        else "verl 0.7's main_ppo migrates these keys into reward.custom_reward_function"
    )
    out = [
        Override(f"{prefix}.path", reward.path, why=where),
        Override(f"{prefix}.name", reward.name, why=reward.why),
    ]
    for key, value in sorted(reward.kwargs.items()):
        if not _KWARG.fullmatch(key):
            raise ConfigError(f"reward.kwargs: {key!r} is not a Python identifier; rename it")
        out.append(Override(f"{prefix}.reward_kwargs.{key}", str(value), add=True))
    if reward.batched:
        out += _grouped_reward(job)
    return out


def _grouped_reward(job: ResolvedJob) -> list[Override]:
    """verl 0.9 has no batch reward manager: ours scores each GRPO group with one batch call."""
    algo = job.spec.algorithm
    responses = algo.train_batch_size * algo.group_size
    workers = max(_VERL_REWARD_WORKERS, -(-responses // _REWARD_CALLS_PER_WORKER))
    return [
        Override("reward.reward_manager.source", "importlib", why="a reward manager of ours, by module"),
        Override(
            "reward.reward_manager.name",
            GROUPED_REWARD_MANAGER,
            why=(
                "verl 0.9 has no batch manager (the SafeGRPO recipe's reward_manager=batch is unknown to it): this one "
                f"collects the {algo.group_size} responses of each prompt (one uid) and calls the batch "
                "function once per group, the largest unit verl 0.9 keeps together"
            ),
        ),
        Override("reward.reward_manager.module.path", f"pkg://{GROUPED_REWARD_MODULE}"),
        Override(
            "actor_rollout_ref.rollout.agent.agent_loop_manager_class",
            GROUPED_AGENT_LOOP_MANAGER,
            add=True,
            why=(
                "verl's agent loop sends each response to a random reward worker; this manager sends a "
                "group's responses to one worker (by uid) and tells it the group's size"
            ),
        ),
        Override(
            "reward.num_workers",
            workers,
            why=(
                f"groups wait for their last response on one worker, and a Ray actor runs at most 1000 "
                f"calls at once: at most {_REWARD_CALLS_PER_WORKER} of the step's {responses} responses "
                f"per worker (verl's default is {_VERL_REWARD_WORKERS})"
            ),
        ),
    ]


def _trainer(
    job: ResolvedJob, profile: VerlProfile, inputs: LaunchInputs, warnings: list[str]
) -> list[Override]:
    spec = job.spec
    res, ckpt, evaluation, logging = spec.resources, spec.checkpoint, spec.evaluation, spec.logging
    loggers = ["console"] if logging.console else []
    loggers.append("file")
    if logging.wandb:
        loggers.append("wandb")
    if logging.tensorboard:
        loggers.append("tensorboard")
    validate = evaluation.interval > 0
    if validate and not inputs.val_files:
        warnings.append("no validation files: validation is turned off")
        validate = False
    project = logging.wandb.project if logging.wandb else job.namespace
    experiment = (logging.wandb.experiment if logging.wandb else None) or job.name
    names = (
        "logging.wandb"
        if logging.wandb and logging.wandb.experiment
        else "the job's namespace and name (set logging.wandb.project/experiment to choose others)"
    )
    names_why = (
        f"{names}: they name the run in verl's loggers and nothing else here (the checkpoint folder, "
        "which verl derives from them by default, is the job's own); the recipes' names "
        "(verl_grpo_example_geo3k/qwen3_vl_4b_npu_fsdp, verl_grpo/qwen3_vl_4b_thinking_safegrpo) "
        "named their wandb or console runs"
    )
    out = [
        Override(
            "trainer.logger", loggers, why="file: per-step metrics for status; verl's default adds wandb"
        ),
        Override("trainer.project_name", project, why=names_why),
        Override("trainer.experiment_name", experiment, why=names_why),
        Override("trainer.nnodes", res.nodes),
        Override("trainer.n_gpus_per_node", res.devices_per_node),
        Override(
            "trainer.device", job.accelerator.device, why=f"the {job.accelerator.name} pool's device type"
        ),
        Override("trainer.critic_warmup", 0),
        Override("trainer.total_epochs", spec.algorithm.epochs),
        Override("trainer.save_freq", ckpt.save_interval),
        Override("trainer.test_freq", evaluation.interval if validate else -1),
        Override("trainer.val_before_train", validate and evaluation.before_train),
        Override("trainer.default_local_dir", job.paths.checkpoint_dir, why="absolute, on the shared volume"),
        Override("trainer.max_actor_ckpt_to_keep", ckpt.keep, why="the trainer prunes older attempts' ones"),
        Override("trainer.resume_mode", inputs.resume.mode),
    ]
    if spec.algorithm.total_steps is not None:
        out.append(Override("trainer.total_training_steps", spec.algorithm.total_steps))
    if inputs.resume.mode == "resume_path":
        out.append(Override("trainer.resume_from_path", inputs.resume.path))
    if profile.checkpoint_callback:
        out.append(
            Override(
                "trainer.checkpoint_callback_class",
                CALLBACK_CLASS,
                why="reports each saved checkpoint to the job's status",
            )
        )
    return out


def _worker_env(env: dict[str, str]) -> list[Override]:
    """Environment for Ray workers: main_ppo passes it to ray.init as the job's runtime_env.

    The driver's own environment does not reach Ray actors; the file logger (in the TaskRunner
    actor, on any node) reads VERL_FILE_LOGGER_PATH from here.
    """
    return [
        Override(f"ray_kwargs.ray_init.runtime_env.env_vars.{key}", value, add=True)
        for key, value in sorted(env.items())
    ]


def _worker_setup() -> Override:
    return Override(
        "ray_kwargs.ray_init.runtime_env.worker_process_setup_hook",
        WORKER_SETUP_HOOK,
        add=True,
        why="every Ray worker fixes Qwen3-VL's position ids first: verl crashes in update_actor "
        "when all sequences of a batch have one length (engines/verl/worker_setup.py)",
    )


def _user(job: ResolvedJob) -> list[Override]:
    out: list[Override] = []
    for raw in job.spec.engine.overrides:
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"engine.overrides: {raw!r} is not a Hydra key=value override")
        out.append(_Raw(key, value, why="engine.overrides"))
    return out


@dataclass(frozen=True)
class _Raw(Override):
    """A user's override, passed through untouched (it is already in Hydra's syntax)."""

    def render(self) -> str:
        return f"{self.key}={self.value}"
