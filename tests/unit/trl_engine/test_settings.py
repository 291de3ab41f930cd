"""The pure mapping from TRL engine settings to GRPOConfig and LoraConfig keyword arguments."""

from __future__ import annotations

import re

import pytest
from grpo_trainer.engines.trl.settings import (
    TrlSettings,
    build_trl_config,
    lora_target_regex,
    settings_with,
    split_overrides,
)

# Module names of a real Qwen3-VL under peft (as printed by named_modules), plus Qwen2.5-VL's.
VISION_ATTENTION = ["model.visual.blocks.0.attn.qkv", "model.visual.blocks.23.attn.proj"]
VISION_MLP = ["model.visual.blocks.0.mlp.linear_fc1", "model.visual.blocks.0.mlp.linear_fc2"]
PROJECTOR = [
    "model.visual.merger.linear_fc1",
    "model.visual.merger.linear_fc2",
    "model.visual.deepstack_merger_list.2.linear_fc2",
    "model.visual.merger.mlp.0",  # Qwen2.5-VL
]
LANGUAGE_ATTENTION = [
    f"model.language_model.layers.3.self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj", "o_proj")
]
LANGUAGE_MLP = [f"model.language_model.layers.35.mlp.{p}" for p in ("gate_proj", "up_proj", "down_proj")]
NEVER = [
    "lm_head",
    "model.language_model.embed_tokens",
    "model.visual.patch_embed.proj",
    "model.visual.pos_embed",
    "model.language_model.layers.0.input_layernorm",
    "model.visual.merger.norm",
]


def targets(settings: TrlSettings) -> set[str]:
    pattern = lora_target_regex(settings)
    assert isinstance(pattern, str)
    every = VISION_ATTENTION + VISION_MLP + PROJECTOR + LANGUAGE_ATTENTION + LANGUAGE_MLP + NEVER
    return {name for name in every if re.fullmatch(pattern, name)}


def test_seed_recipe_reaches_trl_explicitly() -> None:
    grpo, lora = build_trl_config(TrlSettings())
    # TRL 1.16's own defaults differ on every one of these; the single-GPU LoRA recipe's values must be written.
    assert grpo["loss_type"] == "dr_grpo"
    assert grpo["importance_sampling_level"] == "sequence"
    assert grpo["learning_rate"] == 5e-6
    assert (grpo["adam_beta1"], grpo["adam_beta2"], grpo["weight_decay"]) == (0.9, 0.99, 0.1)
    assert grpo["lr_scheduler_type"] == "cosine"
    assert grpo["warmup_steps"] == 0.1  # transformers 5: a float below 1 is the warmup ratio
    assert grpo["max_grad_norm"] == 0.1
    assert grpo["num_generations"] == 2
    assert grpo["max_completion_length"] == 1024
    assert grpo["logging_steps"] == 1
    assert grpo["report_to"] == "none"
    assert grpo["beta"] == 0.0
    assert grpo["save_steps"] == 60
    assert grpo["save_total_limit"] is None  # the engine prunes across attempts itself
    assert "max_prompt_length" not in grpo  # gone from TRL 1.16; the engine filters the data
    assert (lora["r"], lora["lora_alpha"], lora["lora_dropout"]) == (16, 16, 0.0)


def test_seed_batch_of_one_becomes_one_prompt_with_its_group() -> None:
    grpo, _ = build_trl_config(TrlSettings())
    assert grpo["per_device_train_batch_size"] == 2
    grpo, _ = build_trl_config(
        settings_with(TrlSettings(), {"num_generations": 4, "per_device_train_batch_size": 6})
    )
    assert grpo["per_device_train_batch_size"] == 8
    grpo, _ = build_trl_config(
        settings_with(TrlSettings(), {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 2})
    )
    assert grpo["per_device_train_batch_size"] == 1  # two micro-steps already hold one group


def test_lora_targets_vision_projector_and_language_attention_and_mlp() -> None:
    assert targets(TrlSettings()) == set(
        VISION_ATTENTION + VISION_MLP + PROJECTOR + LANGUAGE_ATTENTION + LANGUAGE_MLP
    )


@pytest.mark.parametrize(
    ("switches", "expected"),
    [
        ({"lora_vision_layers": False}, LANGUAGE_ATTENTION + LANGUAGE_MLP),
        ({"lora_language_layers": False}, VISION_ATTENTION + VISION_MLP + PROJECTOR),
        ({"lora_mlp_modules": False}, VISION_ATTENTION + PROJECTOR + LANGUAGE_ATTENTION),
        ({"lora_attention_modules": False}, VISION_MLP + PROJECTOR + LANGUAGE_MLP),
    ],
)
def test_lora_switches(switches: dict[str, bool], expected: list[str]) -> None:
    assert targets(settings_with(TrlSettings(), switches)) == set(expected)


def test_explicit_targets_replace_the_switches() -> None:
    _, lora = build_trl_config(settings_with(TrlSettings(), {"lora_target_modules": ("q_proj", "v_proj")}))
    assert lora["target_modules"] == ["q_proj", "v_proj"]


def test_lora_with_nothing_to_adapt_is_refused() -> None:
    with pytest.raises(ValueError, match="targets nothing"):
        lora_target_regex(
            settings_with(TrlSettings(), {"lora_vision_layers": False, "lora_language_layers": False})
        )


def test_overrides_win_over_everything_and_reach_both_configs() -> None:
    settings = settings_with(
        TrlSettings(),
        {"overrides": ("beta=0.04", "loss_type=grpo", "lora.use_rslora=true", "optim=adamw_8bit")},
    )
    grpo, lora = build_trl_config(settings)
    assert (grpo["beta"], grpo["loss_type"], grpo["optim"]) == (0.04, "grpo", "adamw_8bit")
    assert lora["use_rslora"] is True


def test_override_values_are_typed() -> None:
    trainer, lora = split_overrides(["a=1", "b=1e-5", "c=[1, 2]", "d=null", "e=cosine", "lora.r=8"])
    assert trainer == {"a": 1, "b": 1e-5, "c": [1, 2], "d": None, "e": "cosine"}
    assert lora == {"r": 8}


@pytest.mark.parametrize("bad", ["novalue", "=3", ""])
def test_malformed_override_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="key=value"):
        split_overrides([bad])


def test_unknown_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="learning_rat"):
        settings_with(TrlSettings(), {"learning_rat": 1.0})
