"""rollout.memoryBudget: one budget in GiB for the whole process, and vLLM's part of it.

vLLM is sized from what the budget leaves after the trainer's part, as a share of the device the
process lands on, read at start. A budget that cannot hold the model twice takes turns (the
policy's weights in host memory while vLLM generates); one that cannot hold even that fails
before training, naming the field.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from grpo_trainer.engines.base import EngineOptions
from grpo_trainer.engines.trl.engine import TrlEngine
from grpo_trainer.engines.trl.job import settings_from_job, vllm_layout_of, vllm_sizing
from grpo_trainer.engines.trl.memory import (
    GIB,
    PARKED_RESIDENT_GIB,
    PARKED_VLLM_HEADROOM_GIB,
    TRAINER_OVERHEAD_GIB,
    VLLM_ASLEEP_GIB,
    VLLM_OVERHEAD_GIB,
    BudgetError,
    footprint,
    kv_bytes_per_token,
    vllm_share,
)
from grpo_trainer.engines.trl.settings import build_trl_config
from grpo_trainer.failures import ConfigError
from grpo_trainer.inputs import planned_inputs
from grpo_trainer.spec import Attempt, resolve_manifest

# Qwen3-VL-4B-Instruct's decoder (its config.json's text_config).
QWEN3_VL_4B_TEXT = {
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "hidden_size": 2560,
}
H200 = 143771 * 2**20
CARD_16GB = 16 * 10**9


def model_folder(root: Path, weights_gib: float, text: dict[str, Any] = QWEN3_VL_4B_TEXT) -> Path:
    """A model folder as the memory arithmetic sees one: its config and weights of a given size.

    The weights file is sparse (its size is what counts, not its bytes), so 8 GiB cost nothing here.
    """
    folder = root / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_vl", "text_config": text}))
    with open(folder / "model.safetensors", "wb") as weights:
        weights.truncate(int(weights_gib * GIB))
    return folder


def job(generation: str = "vllm", budget: str | None = None, **rollout: Any):
    spec_rollout = {"generation": generation, **rollout}
    if budget is not None:
        spec_rollout["memoryBudget"] = budget
    return resolve_manifest(
        {
            "apiVersion": "grpo.dev/v1alpha1",
            "kind": "GRPOJob",
            "metadata": {"name": "t"},
            "spec": {
                "model": {"source": "pvc://models/qwen"},
                "dataset": {
                    "train": ["pvc://data/train.parquet"],
                    "maxPromptLength": 1024,
                    "maxResponseLength": 1024,
                },
                "reward": {"builtin": "reasoning-format"},
                "resources": {"accelerator": "nvidia", "devicesPerNode": 1, "nodes": 1},
                "algorithm": {"groupSize": 2, "trainBatchSize": 1, "miniBatchSize": 1},
                "rollout": spec_rollout,
                "engine": {"name": "trl", "lora": {"rank": 16}},
                "evaluation": {"interval": 0},
            },
        }
    )


def test_the_kv_cache_per_token_comes_from_the_models_attention() -> None:
    # 2 (keys, values) x 36 layers x 8 KV heads x 128 x 2 bytes (bf16) = 144 KiB per token.
    assert kv_bytes_per_token({"text_config": QWEN3_VL_4B_TEXT}) == 147456
    # A hybrid decoder (Qwen3.5): only its full-attention layers keep a KV cache.
    hybrid = {**QWEN3_VL_4B_TEXT, "layer_types": ["linear_attention"] * 27 + ["full_attention"] * 9}
    assert kv_bytes_per_token({"text_config": hybrid}) == 147456 // 4
    assert kv_bytes_per_token({"model_type": "unknown"}) is None


def test_a_budget_gives_vllm_what_the_trainer_leaves(tmp_path: Path) -> None:
    model = footprint(str(model_folder(tmp_path, 2.0)))
    assert model is not None
    assert model.kv_bytes_per_token == 147456
    settings = settings_from_job(job(budget="16G"), model)
    budget = 16 * 10**9 / GIB
    assert settings.generation == "vllm"
    assert settings.memory_budget_gib == pytest.approx(budget)
    assert settings.vllm_memory_gib == pytest.approx(budget - 2.0 - TRAINER_OVERHEAD_GIB)
    # The same GiB is a different share of each device, read when the run starts.
    assert vllm_share(settings.vllm_memory_gib, CARD_16GB, budget_gib=budget) == pytest.approx(
        settings.vllm_memory_gib * GIB / CARD_16GB, abs=1e-4
    )
    assert vllm_share(settings.vllm_memory_gib, H200, budget_gib=budget) == pytest.approx(0.0705, abs=1e-4)


def test_a_budget_that_cannot_hold_vllm_is_refused_naming_the_field(tmp_path: Path) -> None:
    model = footprint(str(model_folder(tmp_path, 12.0)))
    with pytest.raises(ConfigError) as refused:
        settings_from_job(job(budget="16G"), model)
    message = str(refused.value)
    assert message.startswith("rollout.memoryBudget: 14.9 GiB cannot hold colocated vLLM")
    # The smallest layout's arithmetic, phase by phase: vLLM generating beside what the trainer
    # keeps, and the policy training beside a sleeping vLLM.
    kv = 4096 * 147456 / GIB
    generating = PARKED_RESIDENT_GIB + 12.0 + kv + VLLM_OVERHEAD_GIB
    training = 12.0 + TRAINER_OVERHEAD_GIB + VLLM_ASLEEP_GIB
    assert "vLLM's copy 12.0" in message
    assert "KV cache 0.6 (4,096 tokens)" in message
    assert f"= {generating:.1f} GiB; while the policy trains, policy 12.0" in message
    assert f"= {training:.1f} GiB" in message
    assert message.endswith("raise the budget, or set rollout.generation: compiled")


def test_two_copies_that_do_not_fit_take_turns_and_the_plan_says_so(tmp_path: Path) -> None:
    model = footprint(str(model_folder(tmp_path, 8.3)))
    settings = settings_from_job(job(budget="16G"), model)
    assert settings.vllm_park_policy
    kv = 4096 * 147456 / GIB
    least = 8.3 + kv + VLLM_OVERHEAD_GIB
    assert settings.vllm_memory_gib == pytest.approx(least + PARKED_VLLM_HEADROOM_GIB)
    assert build_trl_config(settings)[0]["vllm_enable_sleep_mode"] is True
    sizing = vllm_sizing(job(budget="16G"), model)
    assert sizing.value.endswith("the policy's weights wait in host memory while vLLM generates")
    two_copies = 2 * 8.3 + TRAINER_OVERHEAD_GIB + kv + VLLM_OVERHEAD_GIB
    assert f"two copies of the weights need ~{two_copies:.1f} GiB, so they take turns" in sizing.why
    # A budget that holds both copies keeps them: no copies between the phases.
    roomy = settings_from_job(job(budget="24Gi"), model)
    assert not roomy.vllm_park_policy
    assert roomy.vllm_memory_gib == pytest.approx(24 - 8.3 - 3.0)


def test_vllm_is_laid_out_for_the_jobs_budget_not_only_the_recipes(tmp_path: Path) -> None:
    model = footprint(str(model_folder(tmp_path, 8.3)))
    # A 4B model fits the recipe's 16 GB with vLLM only if the two copies take turns...
    assert settings_from_job(job(budget="16G"), model).vllm_park_policy
    # ...a budget that holds both keeps both...
    assert not settings_from_job(job(budget="40Gi"), model).vllm_park_policy
    assert not vllm_layout_of(job(budget="40Gi"), model).parked
    # ...one that holds neither is refused, naming the field...
    with pytest.raises(ConfigError, match=r"^rollout\.memoryBudget: 9\.3 GiB cannot hold colocated vLLM"):
        settings_from_job(job(budget="10G"), model)
    # ...and `auto` never sizes vLLM at all: the policy samples its own rollouts.
    assert settings_from_job(job("auto", budget="40Gi"), model).generation == "compiled"


def test_without_a_budget_explicit_vllm_keeps_the_spec_share(tmp_path: Path) -> None:
    model = footprint(str(model_folder(tmp_path, 8.3)))
    target = job(gpuMemoryUtilization=0.25)
    settings = settings_from_job(target, model)
    assert settings.vllm_memory_gib is None
    assert settings.memory_budget_gib is None
    assert build_trl_config(settings)[0]["vllm_gpu_memory_utilization"] == 0.25
    assert "set rollout.memoryBudget" in vllm_sizing(target, model).why


def test_a_budget_larger_than_the_device_is_refused_at_start() -> None:
    with pytest.raises(
        BudgetError, match=r"^rollout.memoryBudget: 20.0 GiB is more than this device's 14.9 GiB"
    ):
        vllm_share(4.0, CARD_16GB, budget_gib=20.0)


def test_the_plan_says_what_vllm_gets_and_why(tmp_path: Path) -> None:
    target = job(budget="24Gi")
    engine = TrlEngine(EngineOptions())
    inputs = dataclasses.replace(
        planned_inputs(target, 1, engine), model_path=str(model_folder(tmp_path, 8.3))
    )
    plan = engine.plan(target, Attempt("t", "default", 1, Path(os.devnull)), inputs)
    settings = {s.key: s for s in plan.settings}
    memory = settings["vllm memory"]
    assert memory.value.startswith("12.7 GiB of the 24.0 GiB budget")
    assert memory.why.startswith(
        "spec.rollout.memoryBudget 24Gi: 24.0 - policy 8.3 - trainer ~3.0 (estimate)"
    )
    assert "KV cache 0.6 for 4,096 tokens" in memory.why
    share = settings["vllm_gpu_memory_utilization"].why
    assert share.startswith("replaced when the run starts by 12.7 GiB / the device's total")
