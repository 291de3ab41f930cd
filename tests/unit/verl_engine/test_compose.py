"""The emitted overrides, composed with verl's own configuration of each supported release.

Composition alone proves little (Hydra composes a key into a slot nothing reads), so every test
reads values back: where the reward is loaded from after verl's start-up migration, the vLLM
cache flag, torch.compile in the FSDP engine, the NPU settings, the checkpoint and logger keys.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from grpo_trainer.engines.verl.compose import check, compose, effective_reward, rules, select
from grpo_trainer.engines.verl.launch import reward_function
from grpo_trainer.engines.verl.overrides import (
    CALLBACK_CLASS,
    GROUPED_AGENT_LOOP_MANAGER,
    GROUPED_REWARD_MANAGER,
    LaunchInputs,
    OverridePlan,
    Resume,
    RewardFunction,
    build_overrides,
)
from grpo_trainer.engines.verl.versions import PROFILES, SUPPORTED, profile_for
from grpo_trainer.failures import ConfigError
from grpo_trainer.rewards import get_reward
from support.trainer_inputs import example_job, example_manifests

VERL_EXAMPLES = sorted(
    stem
    for stem, m in example_manifests().items()
    if m["spec"].get("engine", {}).get("name", "verl") == "verl"
)
METRICS = "/grpo/checkpoints/job/metrics/attempt-2.jsonl"


def test_every_seed_workload_has_a_verl_example():
    assert {"safegrpo-nvidia", "geo3k-ascend-910b", "geo3k-two-node-nvidia"} <= set(VERL_EXAMPLES)


def inputs_for(job, reward: RewardFunction | None = None, resume: Resume | None = None) -> LaunchInputs:
    builtin = job.spec.reward.builtin or "geo3k"
    spec = get_reward(builtin)
    return LaunchInputs(
        model_path="/models/qwen",
        train_files=["/grpo/data/train.parquet"],
        val_files=["/grpo/data/test.parquet"],
        reward=reward or RewardFunction(spec.path, spec.function, dict(job.spec.reward.kwargs)),
        resume=resume or Resume("auto", from_step=20),
        # OMP_NUM_THREADS as the operator sets it on a pod of 8 devices and 52 CPUs.
        worker_env={"VERL_FILE_LOGGER_PATH": METRICS, "GRPO_METRICS_FILE": METRICS, "OMP_NUM_THREADS": "6"},
    )


def composed(verl_configs: dict[str, Path], version: str, job, **kwargs):
    profile = PROFILES[profile_for(version)[0].family]
    plan = build_overrides(job, profile, inputs_for(job, **kwargs))
    return compose(verl_configs[version], plan.rendered()), plan, profile


@pytest.mark.parametrize("version", SUPPORTED)
@pytest.mark.parametrize("stem", VERL_EXAMPLES)
def test_example_composes_with_its_intent(verl_configs, version, stem):
    job = example_job(stem)
    cfg, plan, profile = composed(verl_configs, version, job)
    findings = check(cfg, plan, profile)
    assert findings.problems == []

    # The reward verl will load is ours, in the slot this release reads.
    reward = effective_reward(cfg, profile)
    expected = get_reward(job.spec.reward.builtin)
    assert reward["path"] == expected.path
    assert Path(reward["path"]).is_file()
    assert reward["name"] == "compute_score"
    assert select(cfg, "reward.reward_manager.name") == "naive"

    # vLLM: the multimodal processor cache is off the way current vLLM accepts; a replica of one
    # GPU runs the model in vLLM's engine process.
    one_gpu = job.accelerator.device == "cuda" and job.spec.rollout.tensor_parallel_size == 1
    assert select(cfg, "actor_rollout_ref.rollout.engine_kwargs.vllm") == {
        "mm_processor_cache_gb": 0,
        **({"distributed_executor_backend": "uni"} if one_gpu else {}),
    }
    # Metrics for status: the file logger, per attempt, reaching the TaskRunner through runtime_env.
    assert select(cfg, "trainer.logger")[:2] == ["console", "file"]
    assert select(cfg, "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH") == METRICS
    assert select(cfg, "ray_kwargs.ray_init.num_cpus") is None
    # Every Ray worker gets the pod's threads (Ray's own default would be 1), and verl's over-long
    # prompt filter as many processes.
    assert select(cfg, "ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS") == "6"
    assert select(cfg, "data.filter_overlong_prompts_workers") == 6
    # Checkpoints: absolute, resumed automatically, pruned to the job's keep.
    assert select(cfg, "trainer.default_local_dir") == job.paths.checkpoint_dir
    assert select(cfg, "trainer.default_local_dir").startswith("/")
    assert select(cfg, "trainer.resume_mode") == "auto"
    assert select(cfg, "trainer.max_actor_ckpt_to_keep") == job.spec.checkpoint.keep
    # The reference recipes' hyperparameters.
    algo = job.spec.algorithm
    assert select(cfg, "algorithm.adv_estimator") == "grpo"
    assert select(cfg, "data.train_batch_size") == algo.train_batch_size
    assert select(cfg, "actor_rollout_ref.rollout.n") == algo.group_size
    assert select(cfg, "actor_rollout_ref.actor.ppo_mini_batch_size") == algo.mini_batch_size
    assert (
        select(cfg, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
        == algo.micro_batch_size_per_device
    )
    assert select(cfg, "actor_rollout_ref.actor.use_kl_loss") is True
    assert select(cfg, "actor_rollout_ref.actor.kl_loss_coef") == pytest.approx(0.01)
    assert select(cfg, "actor_rollout_ref.actor.kl_loss_type") == "low_var_kl"
    assert select(cfg, "algorithm.use_kl_in_reward") is False
    assert select(cfg, "trainer.nnodes") * select(cfg, "trainer.n_gpus_per_node") == job.spec.world_size
    # Qwen3-VL: 16-pixel patches.
    assert select(cfg, "data.image_patch_size") == 16
    # The hook that reports checkpoints exists only in 0.9.
    callback = select(cfg, "trainer.checkpoint_callback_class", "absent")
    assert callback == (CALLBACK_CLASS if profile.checkpoint_callback else "absent")


@pytest.mark.parametrize("version", SUPPORTED)
def test_ascend_example_carries_the_npu_settings(verl_configs, version):
    job = example_job("geo3k-ascend-910b")
    cfg, _, _ = composed(verl_configs, version, job)
    assert select(cfg, "trainer.device") == "npu"
    assert select(cfg, "trainer.n_gpus_per_node") == 8
    # torch.compile off where the FSDP engine reads it, for the actor and the reference model.
    assert select(cfg, "actor_rollout_ref.actor.fsdp_config.use_torch_compile") is False
    assert select(cfg, "actor_rollout_ref.ref.fsdp_config.use_torch_compile") is False
    assert select(cfg, "actor_rollout_ref.actor.use_torch_compile") is False
    assert select(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size") == 2
    assert select(cfg, "actor_rollout_ref.rollout.enforce_eager") is True
    assert select(cfg, "actor_rollout_ref.rollout.enable_chunked_prefill") is False
    assert select(cfg, "actor_rollout_ref.actor.fsdp_config.param_offload") is True
    assert select(cfg, "actor_rollout_ref.actor.fsdp_config.optimizer_offload") is True
    assert select(cfg, "actor_rollout_ref.ref.fsdp_config.param_offload") is True
    assert select(cfg, "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu") == 4


def test_ascend_torch_compile_defaults_off_and_nvidia_keeps_verls_default(verl_configs):
    ascend = example_job("geo3k-ascend-910b", engine={"torchCompile": None})
    cfg, _, _ = composed(verl_configs, "0.9.1", ascend)
    assert select(cfg, "actor_rollout_ref.actor.fsdp_config.use_torch_compile") is False
    nvidia = example_job("geo3k-two-node-nvidia")
    cfg, _, _ = composed(verl_configs, "0.9.1", nvidia)
    assert select(cfg, "actor_rollout_ref.actor.fsdp_config.use_torch_compile") is True


def test_verl_07_reads_the_reward_through_its_legacy_migration(verl_configs):
    job = example_job("geo3k-ascend-910b")
    cfg, _, profile = composed(verl_configs, "0.7.1", job)
    path = get_reward("geo3k").path
    assert select(cfg, "custom_reward_function.path") == path
    # Before migration the new slot is empty; main_ppo copies the legacy keys over at start-up.
    assert select(cfg, "reward.custom_reward_function.path") is None
    assert effective_reward(cfg, profile)["path"] == path


# The reference recipes' literal reward and engine keys (SafeGRPO and geo3k on Ascend).
RECIPE_OVERRIDES = [
    "reward_model.reward_manager=batch",
    "custom_reward_function.path=./reward/safetygrpo_qwen3.py",
    "custom_reward_function.name=compute_score_batch",
    "actor_rollout_ref.actor.use_torch_compile=False",
    "+actor_rollout_ref.rollout.engine_kwargs.vllm.disable_mm_preprocessor_cache=True",
    "trainer.device=npu",
]


def test_seed_literal_overrides_drop_the_custom_reward_in_verl_09(verl_configs):
    cfg = compose(verl_configs["0.9.1"], RECIPE_OVERRIDES)
    profile = PROFILES["0.9"]
    # Composition succeeds, silently: the reward goes into a legacy slot 0.9's main_ppo never reads.
    assert select(cfg, "custom_reward_function.path") == "./reward/safetygrpo_qwen3.py"
    assert select(cfg, "reward.custom_reward_function.path") is None
    assert effective_reward(cfg, profile)["path"] is None
    # So verl would score with its default per-data-source rewards; the manager setting is dead too.
    assert select(cfg, "reward_model.reward_manager") == "batch"
    assert select(cfg, "reward.reward_manager.name") == "naive"
    # torch.compile stays on in the FSDP engine; the removed vLLM flag is passed through as given.
    assert select(cfg, "actor_rollout_ref.actor.fsdp_config.use_torch_compile") is True
    assert select(cfg, "actor_rollout_ref.ref.fsdp_config.use_torch_compile") is True
    assert select(cfg, "actor_rollout_ref.rollout.engine_kwargs.vllm") == {
        "disable_mm_preprocessor_cache": True
    }
    # The default logger list still includes wandb, which fails without a key.
    assert "wandb" in select(cfg, "trainer.logger")


@pytest.mark.parametrize(
    ("version", "override"),
    [
        # 0.7 migrates the recipe's key into reward.reward_manager.name at start-up ...
        ("0.7.1", "reward_model.reward_manager=batch"),
        # ... and on 0.9 the obvious rewrite names a manager that no longer exists.
        ("0.9.1", "reward.reward_manager.name=batch"),
    ],
)
def test_seed_batch_reward_manager_is_unknown(verl_configs, version, override):
    profile = profile_for(version)[0]
    cfg = compose(verl_configs[version], [override])
    problems = check(cfg, OverridePlan([], []), profile).problems
    assert any("reward manager 'batch' does not exist" in p for p in problems), problems


def test_our_overrides_keep_the_reward_where_the_seed_lost_it(verl_configs):
    job = example_job("safegrpo-nvidia")
    cfg, _, profile = composed(verl_configs, "0.9.1", job)
    assert select(cfg, "reward.custom_reward_function.path") == get_reward("safety").path
    assert select(cfg, "custom_reward_function.path") is None
    assert effective_reward(cfg, profile)["path"] == get_reward("safety").path


@pytest.mark.parametrize("version", SUPPORTED)
def test_reward_kwargs_reach_the_reward_function(verl_configs, version):
    job = example_job("geo3k-ascend-910b", reward={"kwargs": {"timeout_s": "3", "format_weight": "0.1"}})
    cfg, _, profile = composed(verl_configs, version, job)
    assert effective_reward(cfg, profile)["reward_kwargs"] == {"timeout_s": "3", "format_weight": "0.1"}


@pytest.mark.parametrize("version", SUPPORTED)
def test_a_custom_batch_reward_is_called_per_group_by_our_reward_manager(verl_configs, version):
    job = example_job(
        "safegrpo-nvidia",
        reward={
            "builtin": None,
            "custom": {"configMap": "my-reward", "function": "score_all", "batch": True},
        },
    )
    cfg, plan, profile = composed(verl_configs, version, job, reward=reward_function(job))
    assert check(cfg, plan, profile).problems == []
    reward = effective_reward(cfg, profile)
    assert reward["path"] == get_reward("custom").path
    assert reward["name"] == "compute_score_batch"
    assert reward["reward_kwargs"]["custom_path"] == job.paths.reward_file
    assert reward["reward_kwargs"]["custom_name"] == "score_all"
    assert reward["reward_kwargs"]["custom_kind"] == "batch"
    assert_grouped(cfg, responses=256 * 8)


def assert_grouped(cfg, responses: int) -> None:
    """verl loads our grouped reward manager, and the agent loop manager that routes groups to it."""
    assert select(cfg, "reward.reward_manager.source") == "importlib"
    assert select(cfg, "reward.reward_manager.name") == GROUPED_REWARD_MANAGER
    assert (
        select(cfg, "reward.reward_manager.module.path") == "pkg://grpo_trainer.engines.verl.grouped_reward"
    )
    assert (
        select(cfg, "actor_rollout_ref.rollout.agent.agent_loop_manager_class") == GROUPED_AGENT_LOOP_MANAGER
    )
    # Every call of a group waits on one worker; a Ray actor runs at most 1000 at once.
    assert responses / select(cfg, "reward.num_workers") <= 512
    assert select(cfg, "reward.num_workers") >= 8


@pytest.mark.parametrize("version", SUPPORTED)
def test_safegrpo_calls_the_safety_batch_reward_per_group(verl_configs, version):
    job = example_job("safegrpo-nvidia")
    cfg, plan, profile = composed(verl_configs, version, job, reward=reward_function(job))
    assert check(cfg, plan, profile).problems == []
    reward = effective_reward(cfg, profile)
    assert (reward["path"], reward["name"]) == (get_reward("safety").path, "compute_score_batch")
    assert_grouped(cfg, responses=256 * 8)


@pytest.mark.parametrize("version", SUPPORTED)
def test_more_responses_per_step_get_more_reward_workers(verl_configs, version):
    job = example_job("safegrpo-nvidia", algorithm={"trainBatchSize": 1024, "groupSize": 16})
    cfg, _, _ = composed(verl_configs, version, job, reward=reward_function(job))
    assert select(cfg, "reward.num_workers") == 32
    assert_grouped(cfg, responses=1024 * 16)


@pytest.mark.parametrize("version", SUPPORTED)
def test_the_grouped_manager_without_its_agent_loop_manager_is_refused(verl_configs, version):
    job = example_job("safegrpo-nvidia")
    profile = PROFILES[profile_for(version)[0].family]
    plan = build_overrides(job, profile, inputs_for(job, reward=reward_function(job)))
    kept = [o.render() for o in plan.overrides if "agent_loop_manager_class" not in o.key]
    problems = check(compose(verl_configs[version], kept), plan, profile).problems
    assert any("needs actor_rollout_ref.rollout.agent.agent_loop_manager_class" in p for p in problems)


@pytest.mark.parametrize("version", SUPPORTED)
def test_dr_grpo_sequence_level_and_kl_in_reward(verl_configs, version):
    job = example_job(
        "geo3k-two-node-nvidia",
        algorithm={
            "lossType": "dr_grpo",
            "importanceSampling": "sequence",
            "clipRatio": 0.0004,
            "kl": {"placement": "reward", "coefficient": 0.02, "type": "kl"},
        },
    )
    cfg, plan, profile = composed(verl_configs, version, job)
    assert check(cfg, plan, profile).problems == []
    assert select(cfg, "algorithm.norm_adv_by_std_in_grpo") is False
    assert select(cfg, "actor_rollout_ref.actor.loss_agg_mode") == "seq-mean-token-sum-norm"
    assert select(cfg, "actor_rollout_ref.actor.policy_loss.loss_mode") == "gspo"
    assert select(cfg, "actor_rollout_ref.actor.use_kl_loss") is False
    assert select(cfg, "algorithm.use_kl_in_reward") is True
    assert select(cfg, "algorithm.kl_ctrl.kl_coef") == pytest.approx(0.02)
    assert select(cfg, "algorithm.kl_penalty") == "kl"


@pytest.mark.parametrize("version", SUPPORTED)
def test_token_budget_switches_to_dynamic_batches(verl_configs, version):
    job = example_job(
        "geo3k-two-node-nvidia", algorithm={"microBatchSizePerDevice": None, "tokensPerDevice": 16384}
    )
    cfg, plan, profile = composed(verl_configs, version, job)
    assert check(cfg, plan, profile).problems == []
    assert select(cfg, "actor_rollout_ref.actor.use_dynamic_bsz") is True
    assert select(cfg, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu") == 16384
    assert select(cfg, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") is None
    assert select(cfg, "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz") is True
    assert select(cfg, "actor_rollout_ref.ref.log_prob_use_dynamic_bsz") is True


@pytest.mark.parametrize("version", SUPPORTED)
def test_lora_on_verl(verl_configs, version):
    job = example_job(
        "geo3k-two-node-nvidia", engine={"lora": {"rank": 32, "alpha": 64, "visionLayers": False}}
    )
    cfg, plan, profile = composed(verl_configs, version, job)
    assert check(cfg, plan, profile).problems == []
    assert select(cfg, "actor_rollout_ref.model.lora_rank") == 32
    assert select(cfg, "actor_rollout_ref.model.lora_alpha") == 64
    assert select(cfg, "actor_rollout_ref.model.target_modules") == "all-linear"
    assert select(cfg, "actor_rollout_ref.model.exclude_modules") == ".*visual.*"
    assert select(cfg, "actor_rollout_ref.rollout.load_format") == "safetensors"
    assert any("LoRA GRPO on Qwen3-VL" in w for w in plan.warnings)


def test_user_overrides_come_last_and_win(verl_configs):
    job = example_job(
        "geo3k-two-node-nvidia",
        engine={
            "overrides": ["actor_rollout_ref.rollout.gpu_memory_utilization=0.45", "+data.custom_flag=7"]
        },
    )
    cfg, plan, profile = composed(verl_configs, "0.9.1", job)
    assert plan.rendered()[-2:] == [
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.45",
        "+data.custom_flag=7",
    ]
    assert select(cfg, "actor_rollout_ref.rollout.gpu_memory_utilization") == pytest.approx(0.45)
    assert check(cfg, plan, profile).problems == []


EXECUTOR = "actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend"


@pytest.mark.parametrize(
    ("stem", "rollout", "expected"),
    [
        ("safegrpo-nvidia", {}, "uni"),  # one GPU per replica: no worker process beside the engine
        ("geo3k-two-node-nvidia", {}, None),  # two GPUs per replica: vLLM needs its workers
        ("geo3k-two-node-nvidia", {"tensorParallelSize": 1}, "uni"),
        ("geo3k-ascend-910b", {"tensorParallelSize": 1}, None),  # vLLM-Ascend keeps verl's choice
    ],
)
def test_a_one_gpu_rollout_replica_runs_vllm_in_its_engine_process(verl_configs, stem, rollout, expected):
    job = example_job(stem, rollout=rollout) if rollout else example_job(stem)
    cfg, plan, profile = composed(verl_configs, "0.9.1", job)
    assert select(cfg, EXECUTOR, None) == expected
    assert check(cfg, plan, profile).problems == []


@pytest.mark.parametrize(
    "override",
    [
        f"+{EXECUTOR}=mp",  # the form verl's docs give for an engine_kwargs key
        f"++{EXECUTOR}=mp",
        f"{EXECUTOR}=mp",  # plain: ours adds the key, the user's sets it after
    ],
)
def test_a_users_executor_wins_in_any_hydra_form(verl_configs, override):
    job = example_job("safegrpo-nvidia", engine={"overrides": [override]})
    cfg, plan, profile = composed(verl_configs, "0.9.1", job)
    assert select(cfg, EXECUTOR) == "mp"
    added_by_user = override.startswith("+")
    assert sum(EXECUTOR in line for line in plan.rendered()) == (1 if added_by_user else 2)
    assert plan.rendered()[-1] == override
    assert check(cfg, plan, profile).problems == []


def test_a_user_may_add_a_key_the_engine_adds(verl_configs):
    """Hydra refuses `+key` twice; the user's wins and ours is left out."""
    key = "actor_rollout_ref.rollout.engine_kwargs.vllm.mm_processor_cache_gb"
    job = example_job("geo3k-two-node-nvidia", engine={"overrides": [f"+{key}=4"]})
    cfg, plan, _ = composed(verl_configs, "0.9.1", job)
    assert select(cfg, key) == 4
    assert [line for line in plan.rendered() if key in line] == [f"+{key}=4"]


def test_a_user_deleting_a_key_keeps_ours_before_it(verl_configs):
    """`~key` removes what ours added; dropping ours would leave Hydra nothing to remove."""
    job = example_job("safegrpo-nvidia", engine={"overrides": [f"~{EXECUTOR}=uni"]})
    cfg, plan, _ = composed(verl_configs, "0.9.1", job)
    assert select(cfg, EXECUTOR, None) is None
    assert plan.rendered()[-1] == f"~{EXECUTOR}=uni"


def test_a_key_that_moved_is_caught_by_value_not_by_composition(verl_configs):
    """An override whose key composes but reads back differently is a problem, not a success."""
    job = example_job("geo3k-two-node-nvidia", engine={"overrides": ["trainer.logger=[console]"]})
    cfg, plan, profile = composed(verl_configs, "0.9.1", job)
    assert any("'file'" in p for p in check(cfg, plan, profile).problems)


RULE_CASES = {
    "indivisible batch": (
        {"algorithm": {"trainBatchSize": 100, "groupSize": 5, "miniBatchSize": 20}},
        "must be divisible by the 16 devices",
    ),
    "micro batch does not split a device's share": (
        {"algorithm": {"microBatchSizePerDevice": 3}},
        "must be divisible by microBatchSizePerDevice 3",
    ),
    "tensor parallel does not divide the node": (
        {"rollout": {"tensorParallelSize": 3}},
        "tensorParallelSize=3 must divide resources.devicesPerNode=8",
    ),
    "token budget below one sequence": (
        {"algorithm": {"microBatchSizePerDevice": None, "tokensPerDevice": 2048}},
        "must hold one whole prompt + response (4096 tokens)",
    ),
}


@pytest.mark.parametrize("case", sorted(RULE_CASES))
def test_verl_runtime_rules(verl_configs, case):
    changes, message = RULE_CASES[case]
    job = example_job("geo3k-two-node-nvidia", **changes)
    cfg, _, _ = composed(verl_configs, "0.9.1", job)
    problems = rules(cfg)
    assert any(message in p for p in problems), problems


def test_both_micro_batch_settings_is_a_problem(verl_configs):
    job = example_job(
        "geo3k-two-node-nvidia", engine={"overrides": ["actor_rollout_ref.actor.ppo_micro_batch_size=64"]}
    )
    cfg, _, _ = composed(verl_configs, "0.9.1", job)
    assert any("exactly one of actor_rollout_ref.actor.ppo_micro_batch_size" in p for p in rules(cfg))


def test_lora_rank_beyond_vllm(verl_configs):
    job = example_job(
        "geo3k-two-node-nvidia",
        engine={"lora": {"rank": 16}, "overrides": ["actor_rollout_ref.model.lora_rank=1024"]},
    )
    cfg, _, _ = composed(verl_configs, "0.9.1", job)
    assert any("exceeds vLLM's maximum 512" in p for p in rules(cfg))


def test_chunked_prefill_off_raises_vllms_batch_token_budget(verl_configs):
    job = example_job("geo3k-ascend-910b", dataset={"maxResponseLength": 8192})
    cfg, plan, profile = composed(verl_configs, "0.9.1", job)
    assert select(cfg, "actor_rollout_ref.rollout.max_num_batched_tokens") == 2048 + 8192
    assert check(cfg, plan, profile).problems == []


def test_unknown_key_is_a_config_error(verl_configs):
    with pytest.raises(ConfigError, match="verl rejected the overrides"):
        compose(verl_configs["0.9.1"], ["trainer.no_such_key=1"])


def test_checkpoint_callback_key_does_not_exist_in_07(verl_configs):
    with pytest.raises(ConfigError):
        compose(verl_configs["0.7.1"], [f"trainer.checkpoint_callback_class={CALLBACK_CLASS}"])


@pytest.mark.parametrize("version", SUPPORTED)
def test_the_specs_sampling_lands_where_verls_rollout_reads_it(verl_configs, version):
    # The slots verl's agent loop builds vLLM's SamplingParams from (rollout.temperature/top_p/top_k).
    job = example_job("safegrpo-nvidia", rollout={"temperature": 0.8, "topP": 0.95, "topK": 50})
    cfg, _, _ = composed(verl_configs, version, job)
    rollout = "actor_rollout_ref.rollout"
    assert select(cfg, f"{rollout}.temperature") == pytest.approx(0.8)
    assert select(cfg, f"{rollout}.top_p") == pytest.approx(0.95)
    assert select(cfg, f"{rollout}.top_k") == 50
    # Unset, every token: verl's vLLM rollout reads -1 (not 0) as no top-k, its own default.
    default, _, _ = composed(verl_configs, version, example_job("safegrpo-nvidia"))
    assert (select(default, f"{rollout}.top_p"), select(default, f"{rollout}.top_k")) == (1.0, -1)
