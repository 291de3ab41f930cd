"""`rollout.generation`: auto keeps the policy sampling its own rollouts; vllm is sized to the budget.

The memory arithmetic (memory.py) sizes an explicit `generation: vllm`: both copies of the weights
on the device, or the policy's parked in host memory while vLLM generates.
"""

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
from grpo_trainer.trainer_image import manifest, running

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
    assert f"~{two_copies.total:.1f}" not in laid_out.describe()
    # The larger of the two phases: the policy training beside a sleeping vLLM.
    assert laid_out.total == pytest.approx(8.3 + TRAINER_OVERHEAD_GIB + VLLM_ASLEEP_GIB)
    assert laid_out.generating == pytest.approx(PARKED_RESIDENT_GIB + two_copies.vllm)
    # vLLM gets its least and a little headroom, not all the budget leaves.
    assert vllm_gib(laid_out, RECIPE_BUDGET_GIB) == pytest.approx(two_copies.vllm + PARKED_VLLM_HEADROOM_GIB)


def test_a_model_too_large_even_taking_turns_is_refused_naming_both_phases() -> None:
    laid_out = vllm_layout(need(ModelFootprint(12.0, QWEN3_VL_4B.kv_bytes_per_token)), RECIPE_BUDGET_GIB)
    assert "while the policy trains, policy 12.0" in laid_out.describe()
    with pytest.raises(ValueError, match="cannot hold colocated vLLM"):
        vllm_gib(laid_out, RECIPE_BUDGET_GIB)


def test_a_small_model_gets_vllm_sized_to_the_budget() -> None:
    gib = vllm_gib(need(SMALL), RECIPE_BUDGET_GIB)
    # vLLM's GiB plus the policy and the trainer's own stay within the budget.
    assert gib + 2.0 + TRAINER_OVERHEAD_GIB == pytest.approx(RECIPE_BUDGET_GIB)
    assert need(SMALL).total <= RECIPE_BUDGET_GIB


@pytest.mark.parametrize(
    ("device", "vllm", "expected"),
    [
        ("cpu", "0.24.0", "eager"),
        ("npu", "0.23.0", "eager"),
        ("cuda", None, "compiled"),
        ("cuda", "0.24.0", "compiled"),
    ],
)
def test_auto_keeps_the_policy_sampling_its_own_rollouts(
    device: str, vllm: str | None, expected: str
) -> None:
    """LoRA jobs (every TRL job) never get vLLM's merged sampler by default: it changes the loss."""
    path, why = resolve("auto", device, vllm=vllm)
    assert path == expected
    assert why.startswith("rollout.generation=auto")
    assert choose_auto(device, vllm=vllm) == (path, why)
    if vllm and device == "cuda":
        assert f"the image's vLLM {vllm} is left to rollout.generation: vllm" in why


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
    cuda = running(job, {"GRPO_IMAGE_FLAVOUR": "cuda"})
    assert cuda.manifest == manifest("cuda")
    assert cuda.has("vllm")
    settings = settings_from_job(job, QWEN3_VL_4B, image=cuda)
    assert settings.generation == "compiled"  # vLLM is in the image, and auto does not take it
    grpo = build_trl_config(settings)[0]
    assert "use_vllm" not in grpo
    assert grpo["vllm_importance_sampling_correction"] is False
    assert reasons(job, QWEN3_VL_4B, image=cuda)["cache_implementation"].startswith("rollout.generation=auto")
