"""`rollout.generation: auto`: vLLM where it is installed and the whole process fits the budget."""

from __future__ import annotations

import pytest
from grpo_trainer.engines.trl.generation import (
    GIB,
    RECIPE_BUDGET_GIB,
    choose_auto,
    model_weights_gib,
    resolve,
    vllm_memory_gib,
    vllm_process_gib,
    vllm_share,
)
from grpo_trainer.engines.trl.job import reasons, settings_from_job
from grpo_trainer.engines.trl.settings import build_trl_config
from grpo_trainer.spec import resolve_manifest

QWEN3_VL_4B_GIB = 8.3  # bf16 weights, as the GPU benchmark measured them


def test_a_4b_model_with_vllm_does_not_fit_the_recipes_16_gb_so_auto_compiles() -> None:
    path, why = choose_auto(
        "cuda", vllm_available=True, weights_gib=QWEN3_VL_4B_GIB, budget_gib=RECIPE_BUDGET_GIB
    )
    assert path == "compiled"
    assert "two copies of 8.3 GiB of weights" in why
    assert "14.9 GiB" in why


def test_a_small_model_with_vllm_installed_gets_vllm_sized_to_the_budget() -> None:
    path, why = choose_auto("cuda", vllm_available=True, weights_gib=2.0, budget_gib=RECIPE_BUDGET_GIB)
    assert (path, why.split(":")[0]) == ("vllm", "rollout.generation=auto")
    share = vllm_memory_gib(2.0, RECIPE_BUDGET_GIB)
    # vLLM's GiB plus the policy and the trainer's own stay within the budget.
    assert share + 2.0 + 3.0 == pytest.approx(RECIPE_BUDGET_GIB)
    assert vllm_process_gib(2.0) <= RECIPE_BUDGET_GIB


@pytest.mark.parametrize(
    ("device", "available", "weights", "expected"),
    [
        ("cpu", True, 1.0, "eager"),
        ("npu", True, 1.0, "eager"),
        ("cuda", False, 1.0, "compiled"),
        ("cuda", True, None, "compiled"),
    ],
)
def test_auto_falls_back_with_a_reason(
    device: str, available: bool, weights: float | None, expected: str
) -> None:
    path, why = resolve("auto", device, vllm_available=available, weights_gib=weights)
    assert path == expected
    assert why.startswith("rollout.generation=auto")


def test_a_budget_in_gib_becomes_vllms_share_of_the_device() -> None:
    assert vllm_share(14.0, int(140 * GIB)) == 0.1
    with pytest.raises(ValueError, match="not a share"):
        vllm_share(200.0, int(140 * GIB))


def test_the_plan_says_which_path_and_why(tmp_path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1024)
    assert model_weights_gib(str(tmp_path)) == pytest.approx(1024 / GIB)
    assert model_weights_gib(str(tmp_path / "none")) is None
    job = resolve_manifest(
        {
            "apiVersion": "grpo.dev/v1alpha1",
            "kind": "GRPOJob",
            "metadata": {"name": "t"},
            "spec": {
                "model": {"source": "pvc://models/qwen"},
                "dataset": {"train": ["pvc://data/train.parquet"]},
                "reward": {"builtin": "reasoning-format"},
                "resources": {"accelerator": "nvidia", "devicesPerNode": 1, "nodes": 1},
                "algorithm": {"groupSize": 2, "trainBatchSize": 1, "miniBatchSize": 1},
                "engine": {"name": "trl"},
                "evaluation": {"interval": 0},
            },
        }
    )
    settings = settings_from_job(job, QWEN3_VL_4B_GIB)
    assert settings.generation in ("compiled", "vllm")
    if settings.generation == "compiled":  # vLLM installed or not, a 4B model does not fit 16 GB
        assert "use_vllm" not in build_trl_config(settings)[0]
    assert reasons(job, QWEN3_VL_4B_GIB)["cache_implementation"].startswith("rollout.generation=auto")
