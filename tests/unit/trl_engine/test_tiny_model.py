"""The offline tiny Qwen3-VL: a real Hugging Face folder that loads, sees images and generates."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch
import trl  # noqa: F401  (the trl-cpu extra; make install brings it, CI never skips)
from grpo_trainer.engines.trl.runner import load_policy
from grpo_trainer.engines.trl.settings import TrlSettings, build_trl_config, settings_with
from grpo_trainer.testing.colour_task import QUESTION, render_square
from grpo_trainer.testing.tiny_vlm import (
    QWEN3_VL_4B,
    SPECIAL_TOKENS,
    build_config,
    build_tokenizer,
)


def encode(processor: Any, colours: list[str]) -> Any:
    from trl.data_utils import prepare_multimodal_messages

    rng = random.Random(0)
    messages = [
        prepare_multimodal_messages([{"role": "user", "content": QUESTION}], images=[render_square(c, rng)])
        for c in colours
    ]
    return processor.apply_chat_template(
        messages,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        return_tensors="pt",
        padding=True,
    )


def test_folder_loads_with_auto_classes(tiny_model_dir: Path) -> None:
    model, processor = load_policy(str(tiny_model_dir), bf16=False)
    assert type(model).__name__ == "Qwen3VLForConditionalGeneration"
    batch = encode(processor, ["red"])
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    # A 32x32 image: 2x2 patches of 16 px, merged 2x2 -> one image token.
    assert int((batch["input_ids"] == image_pad).sum()) == 1
    out = model.generate(**batch, max_new_tokens=3, do_sample=False)
    assert out.shape[1] == batch["input_ids"].shape[1] + 3


def test_blind_model_ignores_the_image_until_trained(tiny_model_dir: Path) -> None:
    model, processor = load_policy(str(tiny_model_dir), bf16=False)
    with torch.no_grad():
        logits = model(**encode(processor, ["red", "blue"])).logits[:, -1]
    assert torch.allclose(logits[0], logits[1])


def test_lora_regex_finds_every_tower_in_the_real_model(tiny_model_dir: Path) -> None:
    from peft import LoraConfig, get_peft_model

    model, _ = load_policy(str(tiny_model_dir), bf16=False)
    _, lora = build_trl_config(TrlSettings())
    adapted = get_peft_model(model, LoraConfig(**lora))
    names = {n.split(".lora_A")[0] for n, _ in adapted.named_parameters() if ".lora_A." in n}
    assert any(".visual.blocks.0.attn.qkv" in n for n in names)
    assert any(".visual.blocks.1.mlp.linear_fc2" in n for n in names)
    assert any(".visual.merger.linear_fc2" in n for n in names)
    assert any(".visual.deepstack_merger_list.0.linear_fc1" in n for n in names)
    assert any(".language_model.layers.1.mlp.down_proj" in n for n in names)
    assert not any("lm_head" in n or "embed" in n for n in names)

    model, _ = load_policy(str(tiny_model_dir), bf16=False)
    _, lora = build_trl_config(settings_with(TrlSettings(), {"lora_vision_layers": False}))
    adapted = get_peft_model(model, LoraConfig(**lora))
    assert not any(".visual." in n for n, p in adapted.named_parameters() if p.requires_grad)


def test_4b_shapes_are_qwen3_vl_4b() -> None:
    tokenizer = build_tokenizer(vocab_size=QWEN3_VL_4B.vocab_size)
    assert len(tokenizer) == 151936
    assert all(tokenizer.convert_tokens_to_ids(t) != tokenizer.unk_token_id for t in SPECIAL_TOKENS)
    with torch.device("meta"):
        from transformers import Qwen3VLForConditionalGeneration

        model = Qwen3VLForConditionalGeneration(build_config(QWEN3_VL_4B, tokenizer))
    total = sum(p.numel() for p in model.parameters())
    assert 4.3e9 < total < 4.5e9  # Qwen3-VL-4B has 4.44 billion parameters (tied embeddings)
