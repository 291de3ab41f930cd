"""`rollout.generation: auto`: vLLM where it is installed and the whole process fits the budget."""

from __future__ import annotations

import pytest
from grpo_trainer.engines.trl.generation import choose_auto, resolve
from grpo_trainer.engines.trl.job import reasons, settings_from_job
from grpo_trainer.engines.trl.memory import (
    GIB,
    PARKED_RESIDENT_GIB,
    PARKED_VLLM_HEADROOM_GIB,
    RECIPE_BUDGET_GIB,
    TRAINER_OVERHEAD_GIB,
    VLLM_ASLEEP_GIB,
    ModelFootprint,
    footprint,
    vllm_gib,
    vllm_layout,
    vllm_need,
    vllm_share,
)
from grpo_trainer.engines.trl.settings import build_trl_config
from grpo_trainer.spec import resolve_manifest

# bf16 weights, as the GPU benchmark measured them; keys and values of 36 layers x 8 heads x 128.
QWEN3_VL_4B = ModelFootprint(8.3, 2 * 36 * 8 * 128 * 2)
SMALL = ModelFootprint(2.0, 2 * 28 * 2 * 128 * 2)


def need(model: ModelFootprint):  # the single-GPU LoRA recipe's round: 2 sequences of 1,024 + 1,024
    return vllm_need(model, sequences=2, sequence_tokens=2048, context=3072)


def test_a_4b_model_fits_the_recipes_16_gb_only_with_its_weights_taking_turns() -> None:
    two_copies = need(QWEN3_VL_4B)
    assert two_copies.total > RECIPE_BUDGET_GIB  # 2 x 8.3 GiB of weights alone are 16.6
    laid_out = vllm_layout(two_copies, RECIPE_BUDGET_GIB)
    assert laid_out.parked
    path, why = choose_auto("cuda", vllm_available=True, need=laid_out, budget_gib=RECIPE_BUDGET_GIB)
    assert path == "vllm"
    assert "with the policy's weights in host memory while it generates" in why
    assert f"would need ~{two_copies.total:.1f}" in why
    # The larger of the two phases: the policy training beside a sleeping vLLM.
    assert laid_out.total == pytest.approx(8.3 + TRAINER_OVERHEAD_GIB + VLLM_ASLEEP_GIB)
    assert laid_out.generating == pytest.approx(PARKED_RESIDENT_GIB + two_copies.vllm)
    # vLLM gets its least and a little headroom, not all the budget leaves.
    assert vllm_gib(laid_out, RECIPE_BUDGET_GIB) == pytest.approx(two_copies.vllm + PARKED_VLLM_HEADROOM_GIB)


def test_a_model_too_large_even_taking_turns_compiles_and_says_both_phases() -> None:
    laid_out = vllm_layout(need(ModelFootprint(12.0, QWEN3_VL_4B.kv_bytes_per_token)), RECIPE_BUDGET_GIB)
    path, why = choose_auto("cuda", vllm_available=True, need=laid_out, budget_gib=RECIPE_BUDGET_GIB)
    assert path == "compiled"
    assert "while vLLM generates" in why
    assert "while the policy trains, policy 12.0" in why
    assert "14.9 GiB" in why
    with pytest.raises(ValueError, match="cannot hold colocated vLLM"):
        vllm_gib(laid_out, RECIPE_BUDGET_GIB)


def test_a_small_model_with_vllm_installed_gets_vllm_sized_to_the_budget() -> None:
    path, why = choose_auto("cuda", vllm_available=True, need=need(SMALL), budget_gib=RECIPE_BUDGET_GIB)
    assert (path, why.split(":")[0]) == ("vllm", "rollout.generation=auto")
    gib = vllm_gib(need(SMALL), RECIPE_BUDGET_GIB)
    # vLLM's GiB plus the policy and the trainer's own stay within the budget.
    assert gib + 2.0 + TRAINER_OVERHEAD_GIB == pytest.approx(RECIPE_BUDGET_GIB)
    assert need(SMALL).total <= RECIPE_BUDGET_GIB


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
    model = None if weights is None else need(ModelFootprint(weights))
    path, why = resolve("auto", device, vllm_available=available, need=model)
    assert path == expected
    assert why.startswith("rollout.generation=auto")


def test_a_budget_in_gib_becomes_vllms_share_of_the_device() -> None:
    assert vllm_share(14.0, int(140 * GIB)) == 0.1
    with pytest.raises(ValueError, match="not a share"):
        vllm_share(200.0, int(140 * GIB))


def test_the_plan_says_which_path_and_why(tmp_path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1024)
    measured = footprint(str(tmp_path))
    assert measured is not None
    assert measured.weights_gib == pytest.approx(1024 / GIB)
    assert footprint(str(tmp_path / "none")) is None
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
    settings = settings_from_job(job, QWEN3_VL_4B)
    assert settings.generation in ("compiled", "vllm")
    if settings.generation == "compiled":  # vLLM not installed here
        assert "use_vllm" not in build_trl_config(settings)[0]
    else:  # installed: a 4B model fits 16 GB with its weights taking turns
        assert settings.vllm_park_policy
        assert build_trl_config(settings)[0]["vllm_enable_sleep_mode"] is True
    assert reasons(job, QWEN3_VL_4B)["cache_implementation"].startswith("rollout.generation=auto")
