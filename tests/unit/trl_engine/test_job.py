"""A GRPOJob with engine: trl -> TRL settings (the spec's batch sizes keep verl's meaning)."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpo_trainer.engines.trl.job import settings_from_job
from grpo_trainer.engines.trl.settings import build_trl_config
from grpo_trainer.failures import ConfigError
from grpo_trainer.spec import load_job, resolve_manifest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lora-single-gpu.yaml"


def manifest(**algorithm: object) -> dict[str, object]:
    return {
        "apiVersion": "grpo.dev/v1alpha1",
        "kind": "GRPOJob",
        "metadata": {"name": "t"},
        "spec": {
            "model": {"source": "pvc://models/qwen"},
            "dataset": {"train": ["pvc://data/train.parquet"]},
            "reward": {"builtin": "reasoning-format"},
            "resources": {"accelerator": "nvidia", "devicesPerNode": 1, "nodes": 1},
            "algorithm": {"groupSize": 2, "trainBatchSize": 1, "miniBatchSize": 1, **algorithm},
            "engine": {"name": "trl", "overrides": ["max_grad_norm=1.0"]},
        },
    }


def test_the_seed_example_maps_to_the_seed_recipe() -> None:
    job = load_job(EXAMPLE)
    settings = settings_from_job(job)
    grpo, lora = build_trl_config(settings)
    # The recipe's TRL cut a prompt over max_prompt_length=1024 from the left instead of dropping it.
    assert (settings.max_prompt_length, settings.filter_overlong_prompts, settings.truncation) == (
        1024,
        False,
        "left",
    )
    assert grpo["output_dir"] == job.paths.checkpoint_dir
    assert (grpo["learning_rate"], grpo["num_generations"], grpo["max_completion_length"]) == (5e-6, 2, 1024)
    assert (grpo["per_device_train_batch_size"], grpo["gradient_accumulation_steps"]) == (2, 1)
    assert grpo["steps_per_generation"] == 1
    assert (grpo["max_steps"], grpo["save_steps"]) == (60, 60)
    assert (grpo["loss_type"], grpo["importance_sampling_level"], grpo["beta"]) == (
        "dr_grpo",
        "sequence",
        0.0,
    )
    assert (grpo["adam_beta2"], grpo["weight_decay"], grpo["max_grad_norm"]) == (0.99, 0.1, 0.1)
    assert grpo["gradient_checkpointing"] is True
    assert (lora["r"], lora["lora_alpha"]) == (16, 16)


def test_batch_sizes_keep_verls_meaning() -> None:
    job = resolve_manifest(
        manifest(trainBatchSize=8, miniBatchSize=4, microBatchSizePerDevice=2, totalSteps=10)
    )
    grpo, _ = build_trl_config(settings_from_job(job))
    # 4 prompts x 2 completions per update, 2 per forward -> 4 micro-steps; 2 updates per round.
    assert (grpo["per_device_train_batch_size"], grpo["gradient_accumulation_steps"]) == (2, 4)
    assert grpo["steps_per_generation"] == 8
    assert grpo["max_steps"] == 20
    assert grpo["max_grad_norm"] == 1.0  # engine.overrides applied last


def test_incompatible_micro_batch_is_a_spec_error() -> None:
    job = resolve_manifest(manifest(microBatchSizePerDevice=3))
    with pytest.raises(ConfigError, match="microBatchSizePerDevice"):
        settings_from_job(job)


def test_kl_in_the_reward_is_refused() -> None:
    job = resolve_manifest(manifest(kl={"coefficient": 0.1, "placement": "reward"}))
    with pytest.raises(ConfigError, match="placement=reward"):
        settings_from_job(job)


def test_kl_in_the_loss_becomes_beta() -> None:
    job = resolve_manifest(manifest(kl={"coefficient": 0.04, "placement": "loss"}))
    assert settings_from_job(job).beta == 0.04


def _with(spec_update: dict[str, object], accelerator: str = "nvidia") -> dict[str, object]:
    body = manifest()
    spec = body["spec"]
    assert isinstance(spec, dict)
    spec.update(spec_update)
    spec["resources"] = {"accelerator": accelerator, "devicesPerNode": 1, "nodes": 1}
    return body


@pytest.mark.parametrize(
    ("accelerator", "choice", "path"),
    [("nvidia", "auto", "compiled"), ("cpu", "auto", "eager"), ("nvidia", "eager", "eager")],
)
def test_rollout_generation_picks_the_path(accelerator: str, choice: str, path: str) -> None:
    job = resolve_manifest(_with({"rollout": {"generation": choice}}, accelerator))
    settings = settings_from_job(job)
    grpo, _ = build_trl_config(settings)
    assert settings.generation == path
    assert grpo.get("cache_implementation") == ("static" if path == "compiled" else None)
    assert "use_vllm" not in grpo


def test_vllm_generation_is_trls_colocated_vllm_sized_by_the_spec() -> None:
    job = resolve_manifest(_with({"rollout": {"generation": "vllm", "gpuMemoryUtilization": 0.25}}))
    grpo, _ = build_trl_config(settings_from_job(job))
    assert (grpo["use_vllm"], grpo["vllm_mode"], grpo["vllm_gpu_memory_utilization"]) == (
        True,
        "colocate",
        0.25,
    )
    assert grpo["vllm_max_model_length"] == 2 * 2048 + 2048  # room for a prompt vLLM counts longer


def test_the_plan_says_how_rollouts_are_generated_and_what_is_exported() -> None:
    from grpo_trainer.engines.base import EngineOptions
    from grpo_trainer.engines.trl.engine import TrlEngine
    from grpo_trainer.inputs import planned_inputs
    from grpo_trainer.spec import Attempt
    from grpo_trainer.trainer_image import for_job

    job = load_job(EXAMPLE)
    engine = TrlEngine(EngineOptions(image=for_job(job)))  # as `grpo-train plan` does
    plan = engine.plan(job, Attempt("t", "default", 1, Path("/tmp/m.jsonl")), planned_inputs(job, 1, engine))
    settings = {s.key: s for s in plan.settings}
    assert settings["generation"].value == "compiled"
    assert "CUDA-graph" in settings["generation"].why
    assert settings["cache_implementation"].value == "static"
    assert settings["export.gguf"].value == "q4_k_m + mmproj f16"
    assert settings["export.sample"].value.startswith("row 0: 512 new tokens")
    assert settings["export.gguf"].why.endswith("in /opt/llama.cpp in the trainer-cuda:0.1.0 image")
