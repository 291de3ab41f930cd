"""LoRA targets on a hybrid decoder: a tiny Qwen3.5 (linear attention in three of four layers).

Built from transformers' own Qwen3.5 classes at toy sizes, so the module names are the real ones.
The expected set is Unsloth's selection for the same switches (every Linear under the vision
blocks' attention and MLP and the decoder's attention, linear attention included, and MLP) plus
the vision merger, which the recipe trains and Unsloth does not (job.TARGETS_AGAINST_UNSLOTH).
"""

from __future__ import annotations

import re

import torch  # the trl-cpu extra; make install brings it, CI never skips
from grpo_trainer.engines.trl.settings import TrlSettings, lora_target_regex


def tiny_qwen35() -> object:
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    text = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "linear_num_value_heads": 4,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "vocab_size": 256,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    }
    vision = {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64}
    return Qwen3_5ForConditionalGeneration(Qwen3_5Config(text_config=text, vision_config=vision))


def linear_names(model: object) -> list[str]:
    return [name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)]  # type: ignore[attr-defined]


def unsloth_selection(names: list[str]) -> set[str]:
    """Unsloth's rule for all four switches on: attention or MLP Linear layers of either tower."""
    return {
        name
        for name in names
        if ("visual" in name or "language_model" in name) and any(part in name for part in ("attn", "mlp"))
    }


def test_the_linear_attention_projections_are_adapted_as_unsloth_adapts_them() -> None:
    names = linear_names(tiny_qwen35())
    chosen = {name for name in names if re.fullmatch(lora_target_regex(TrlSettings()), name)}
    merger = {name for name in names if ".merger." in name}
    assert chosen == unsloth_selection(names) | merger
    linear_attention = {name for name in chosen if ".linear_attn." in name}
    # 3 linear-attention layers x in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj.
    assert len(linear_attention) == 15
    assert "lm_head" not in chosen


def test_attention_off_leaves_linear_attention_frozen_too() -> None:
    names = linear_names(tiny_qwen35())
    settings = TrlSettings(lora_attention_modules=False)
    chosen = {name for name in names if re.fullmatch(lora_target_regex(settings), name)}
    assert not {name for name in chosen if "attn" in name}
    assert {name for name in chosen if ".mlp." in name}
