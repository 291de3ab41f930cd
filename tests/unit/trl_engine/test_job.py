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
    grpo, lora = build_trl_config(settings_from_job(job))
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
