"""logging.tensorboard, logging.wandb and evaluation on the trl engine: honoured, never ignored."""

from __future__ import annotations

from typing import Any

import pytest
from grpo_trainer.engines.base import EngineOptions, Resume
from grpo_trainer.engines.trl.job import reasons, reporting_env, settings_from_job
from grpo_trainer.engines.trl.metrics import validation_metrics
from grpo_trainer.engines.trl.settings import build_trl_config
from grpo_trainer.failures import ConfigError
from grpo_trainer.progress import validation_score
from grpo_trainer.spec import resolve_manifest


def manifest(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "grpo.dev/v1alpha1",
        "kind": "GRPOJob",
        "metadata": {"name": "t"},
        "spec": {
            "model": {"source": "pvc://models/qwen"},
            "dataset": {"train": ["pvc://data/train.parquet"], "validation": ["pvc://data/val.parquet"]},
            "reward": {"builtin": "reasoning-format"},
            "resources": {"accelerator": "nvidia", "devicesPerNode": 1, "nodes": 1},
            "algorithm": {"groupSize": 2, "trainBatchSize": 4, "miniBatchSize": 2},
            "engine": {"name": "trl"},
            **spec,
        },
    }


def test_tensorboard_and_wandb_reach_trls_report_to_with_files_on_the_jobs_volume() -> None:
    job = resolve_manifest(
        manifest(
            logging={"tensorboard": True, "wandb": {"project": "vlm", "secretName": "wandb"}},
            evaluation={"interval": 0},
        )
    )
    grpo, _ = build_trl_config(settings_from_job(job))
    assert grpo["report_to"] == ["tensorboard", "wandb"]
    assert grpo["run_name"] == "t"
    assert reporting_env(job) == {
        "TENSORBOARD_LOGGING_DIR": f"{job.paths.job_dir}/tensorboard",
        "WANDB_PROJECT": "vlm",
        "WANDB_DIR": f"{job.paths.job_dir}/wandb",
    }
    assert reasons(job)["report_to"].startswith("spec.logging")


def test_no_logger_asked_for_means_none() -> None:
    job = resolve_manifest(manifest(evaluation={"interval": 0}))
    grpo, _ = build_trl_config(settings_from_job(job))
    assert (grpo["report_to"], grpo["eval_strategy"]) == ("none", "no")
    assert reporting_env(job) == {}


def test_evaluation_interval_counts_verl_steps_and_trl_counts_updates() -> None:
    job = resolve_manifest(manifest(evaluation={"interval": 5, "beforeTrain": True}))
    grpo, _ = build_trl_config(settings_from_job(job))
    # trainBatchSize 4 / miniBatchSize 2: two optimiser updates per verl step.
    assert (grpo["eval_strategy"], grpo["eval_steps"], grpo["eval_on_start"]) == ("steps", 10, True)
    assert grpo["per_device_eval_batch_size"] == 2  # one prompt's G completions per pass
    assert reasons(job)["eval_steps"].startswith("spec.evaluation: every 5 steps")


def test_a_validation_round_becomes_the_status_validation_score() -> None:
    logs = {"eval_reward": 1.5, "eval_rewards/correctness_reward_func/mean": 2.0, "eval_loss": 0.1}
    data = validation_metrics(logs, step=3, group=2)
    assert data["val-core/all/reward/mean@2"] == 1.5
    assert data["val-core/all/correctness_reward_func/mean@2"] == 2.0
    assert data["trl/eval_loss"] == 0.1
    assert "critic/score/mean" not in data  # a validation line never reads as a training reward
    assert validation_score(data) == 1.5


def test_a_logger_whose_package_is_missing_is_refused_before_training_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from grpo_trainer.engines.trl import engine
    from grpo_trainer.engines.trl.engine import TrlEngine

    real = importlib.util.find_spec
    absent = {"tensorboard", "tensorboardX", "wandb"}
    monkeypatch.setattr(
        engine.importlib.util, "find_spec", lambda name, *a: None if name in absent else real(name, *a)
    )
    job = resolve_manifest(
        manifest(
            logging={"tensorboard": True, "wandb": {"project": "vlm", "secretName": "wandb"}},
            evaluation={"interval": 0},
        )
    )
    with pytest.raises(ConfigError) as refused:
        TrlEngine(EngineOptions()).preflight(job, Resume(None))
    assert "logging.tensorboard: the tensorboard package is not installed here" in str(refused.value)
    assert "logging.wandb: the wandb package is not installed here" in str(refused.value)
