"""Compose verl's own Hydra configuration with our overrides, and check what it composed to.

Composition succeeding proves little: Hydra happily composes a key into a slot nothing reads. So
the checks here look at values: every override we emitted must read back at its key, the reward
must sit where the installed verl reads it (after its own legacy migration, where it has one), and
the rules verl enforces only at run time (with torch and Ray up, minutes into a job) are checked
here in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_operator.api.batch import Batch, batch_problems
from omegaconf import DictConfig, OmegaConf

from ...failures import ConfigError
from .hydra_values import Override
from .overrides import GROUPED_AGENT_LOOP_MANAGER, GROUPED_REWARD_MANAGER, OverridePlan
from .versions import VerlProfile

# vLLM's allowed max LoRA ranks (vllm.config.lora.MaxLoRARanks); verl rounds a rank up to one.
VLLM_MAX_LORA_RANK = 512
LOSS_AGG_MODES = frozenset(
    {"token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"}
)


def compose(config_dir: Path, overrides: list[str]) -> DictConfig:
    """verl's `ppo_trainer` config with `overrides` applied, exactly as main_ppo's Hydra would."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_dir(config_dir=str(Path(config_dir).absolute()), version_base=None):
            return hydra_compose(config_name="ppo_trainer", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"verl rejected the overrides: {exc}") from exc


def select(cfg: DictConfig, key: str, default: Any = None) -> Any:
    """A resolved value at a dotted key; `default` where the key does not exist."""
    value = OmegaConf.select(cfg, key, default=default, throw_on_missing=False)
    if isinstance(value, DictConfig) or OmegaConf.is_list(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


def effective_reward(cfg: DictConfig, profile: VerlProfile) -> dict[str, Any]:
    """The custom reward function verl will actually load, after its own start-up migration.

    verl 0.7's main_ppo copies a non-empty top-level `custom_reward_function` over
    `reward.custom_reward_function`; 0.9's does not, so the top-level keys are dead there.
    """
    reward = select(cfg, "reward.custom_reward_function", {}) or {}
    if profile.migrates_legacy_reward:
        legacy = select(cfg, "custom_reward_function", {}) or {}
        if any(v is not None for v in legacy.values()):
            reward = legacy
    return reward


@dataclass(frozen=True)
class Findings:
    problems: list[str]
    """What would fail at run time or silently not do what the job asks."""
    warnings: list[str]


def check(cfg: DictConfig, plan: OverridePlan, profile: VerlProfile) -> Findings:
    """Every check on a composed config: our intent reads back, and verl's run-time rules hold."""
    problems = [*_intent_problems(cfg, plan.overrides), *_reward_problems(cfg, plan, profile), *rules(cfg)]
    return Findings(problems, [*plan.warnings, *_strategy_warnings(cfg)])


def _normalise(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_normalise(v) for v in value]
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def _intent_problems(cfg: DictConfig, overrides: list[Override]) -> list[str]:
    """Each override must read back at its key, unless a later override (the user's) changed it."""
    last_writer = {o.key.lstrip("+~"): i for i, o in enumerate(overrides)}
    problems = []
    missing = object()
    for index, override in enumerate(overrides):
        key = override.key.lstrip("+~")
        if last_writer[key] != index or type(override) is not Override:
            continue
        got = select(cfg, key, missing)
        if got is missing:
            problems.append(f"{key}: not in verl's composed config")
        elif _normalise(got) != _normalise(override.value):
            problems.append(f"{key}: composed to {got!r}, expected {override.value!r}")
    return problems


def _reward_problems(cfg: DictConfig, plan: OverridePlan, profile: VerlProfile) -> list[str]:
    wanted = {
        o.key.rsplit(".", 1)[-1]: o.value for o in plan.overrides if o.key.startswith(profile.reward_prefix)
    }
    reward = effective_reward(cfg, profile)
    problems = []
    for field_ in ("path", "name"):
        if field_ in wanted and reward.get(field_) != wanted[field_]:
            problems.append(
                f"verl {profile.reference_version} would load the reward {field_} {reward.get(field_)!r}, "
                f"not {wanted[field_]!r}"
            )
    manager = select(cfg, "reward.reward_manager.name")
    if profile.migrates_legacy_reward and select(cfg, "reward_model.reward_manager"):
        manager = select(cfg, "reward_model.reward_manager")
    if select(cfg, "reward.reward_manager.source") == "importlib":
        module = select(cfg, "reward.reward_manager.module.path")
        if not module:
            problems.append(
                f"reward manager {manager!r} is loaded by module, but reward_manager.module.path is unset"
            )
        elif manager == GROUPED_REWARD_MANAGER and not select(
            cfg, "actor_rollout_ref.rollout.agent.agent_loop_manager_class"
        ):
            problems.append(
                f"{manager} needs actor_rollout_ref.rollout.agent.agent_loop_manager_class="
                f"{GROUPED_AGENT_LOOP_MANAGER} (without it a group's responses reach different workers)"
            )
    elif manager not in {"naive", "dapo", "gdpo", "remote", "rate_limited"}:
        problems.append(f"reward manager {manager!r} does not exist in verl {profile.reference_version}")
    return problems


def composed_batch(cfg: DictConfig) -> Batch:
    """The batch sizes verl will use, read back from the composed config (user overrides included)."""
    actor = "actor_rollout_ref.actor"
    dynamic = bool(select(cfg, f"{actor}.use_dynamic_bsz"))
    return Batch(
        devices_per_node=select(cfg, "trainer.n_gpus_per_node"),
        nodes=select(cfg, "trainer.nnodes"),
        group_size=select(cfg, "actor_rollout_ref.rollout.n"),
        train_batch_size=select(cfg, "data.train_batch_size"),
        mini_batch_size=select(cfg, f"{actor}.ppo_mini_batch_size"),
        micro_batch_size_per_device=None if dynamic else select(cfg, f"{actor}.ppo_micro_batch_size_per_gpu"),
        tokens_per_device=select(cfg, f"{actor}.ppo_max_token_len_per_gpu") if dynamic else None,
        tensor_parallel_size=select(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size"),
        longest_sequence=select(cfg, "data.max_prompt_length") + select(cfg, "data.max_response_length"),
    )


def rules(cfg: DictConfig) -> list[str]:
    """The checks verl runs in `validate_config` and its workers, on composed values.

    The batch arithmetic is the operator's (grpo_operator/api/batch.py), on the sizes as composed;
    the rest is what only a composed verl config shows.
    """
    problems = [str(p) for p in batch_problems(composed_batch(cfg))]
    actor = "actor_rollout_ref.actor"
    longest = select(cfg, "data.max_prompt_length") + select(cfg, "data.max_response_length")
    if not select(cfg, f"{actor}.use_dynamic_bsz"):
        _one_of(cfg, f"{actor}.ppo_micro_batch_size", f"{actor}.ppo_micro_batch_size_per_gpu", problems)
        _one_of(
            cfg,
            "actor_rollout_ref.rollout.log_prob_micro_batch_size",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
            problems,
        )
        if select(cfg, f"{actor}.use_kl_loss") or select(cfg, "algorithm.use_kl_in_reward"):
            _one_of(
                cfg,
                "actor_rollout_ref.ref.log_prob_micro_batch_size",
                "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
                problems,
            )
    rollout = "actor_rollout_ref.rollout"
    if (
        not select(cfg, f"{rollout}.enable_chunked_prefill")
        and select(cfg, f"{rollout}.max_num_batched_tokens") < longest
    ):
        problems.append(
            f"without chunked prefill vLLM needs max_num_batched_tokens >= {longest} "
            f"(found {select(cfg, f'{rollout}.max_num_batched_tokens')})"
        )
    lora_rank = select(cfg, "actor_rollout_ref.model.lora_rank", 0) or 0
    if lora_rank > VLLM_MAX_LORA_RANK and select(cfg, f"{rollout}.name") == "vllm":
        problems.append(f"LoRA rank {lora_rank} exceeds vLLM's maximum {VLLM_MAX_LORA_RANK}")
    if lora_rank > 0 and select(cfg, f"{rollout}.load_format") not in ("safetensors", "auto"):
        problems.append("LoRA needs actor_rollout_ref.rollout.load_format=safetensors")
    if select(cfg, f"{actor}.loss_agg_mode") not in LOSS_AGG_MODES:
        problems.append(f"unknown loss_agg_mode {select(cfg, f'{actor}.loss_agg_mode')!r}")
    if select(cfg, f"{rollout}.val_kwargs.do_sample") and not select(cfg, f"{rollout}.temperature"):
        problems.append("sampling during validation needs a rollout temperature above 0")
    loggers = select(cfg, "trainer.logger")
    if "file" not in (loggers if isinstance(loggers, list) else [loggers]):
        problems.append("trainer.logger must include 'file': status reports read its per-step lines")
    if not str(select(cfg, "trainer.default_local_dir")).startswith("/"):
        problems.append("trainer.default_local_dir must be absolute (every pod resolves it the same way)")
    if select(cfg, "ray_kwargs.ray_init.num_cpus") is not None:
        problems.append(
            "ray_kwargs.ray_init.num_cpus must stay unset: ray.init refuses it on an existing cluster"
        )
    return problems


def _one_of(cfg: DictConfig, legacy: str, per_gpu: str, problems: list[str]) -> object:
    """verl wants exactly one of a deprecated global micro-batch setting and its per-device form.
    The one set (as the config holds it), None where not exactly one is."""
    a, b = select(cfg, legacy), select(cfg, per_gpu)
    if (a is None) == (b is None):
        problems.append(f"set exactly one of {legacy} and {per_gpu} (found {a!r} and {b!r})")
        return None
    return b if b is not None else a


def _strategy_warnings(cfg: DictConfig) -> list[str]:
    if (
        select(cfg, "data.image_patch_size") == 16
        and select(cfg, "actor_rollout_ref.actor.strategy") != "fsdp2"
    ):
        return ["verl's Qwen3-VL GRPO examples use engine.strategy=fsdp2"]
    return []
