"""Export after training: a merged model that loads without peft, and the adapter on its own."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import torch
import trl  # noqa: F401  (the trl-cpu extra; make install brings it, CI never skips)
from grpo_trainer.engines.trl.runner import RunRequest, load_policy, train
from grpo_trainer.testing.colour_task import colour_reward, make_rows
from grpo_trainer.testing.learning import LearningPlan, learning_settings


def test_trains_and_exports_adapter_and_merged_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    plan = LearningPlan(steps=2, prompts_per_step=2, num_generations=4, rows=8, learning_rate=5e-2)
    result = train(
        RunRequest(
            settings=replace(learning_settings(plan, tmp_path / "checkpoints", vision=True), save_steps=1),
            model_path=str(tiny_model_dir),
            rows=make_rows(plan.rows),
            reward_funcs=[colour_reward],
            metrics_path=str(tmp_path / "metrics.jsonl"),
            export_dir=str(tmp_path / "export"),
        )
    )
    assert result.global_step == 2
    record = json.loads((tmp_path / "export" / "export.json").read_text())
    assert record["step"] == 2
    assert record["model"]
    assert record["loraAdapter"]

    from peft import PeftModel

    merged, processor = load_policy(record["model"], bf16=False)
    base, _ = load_policy(str(tiny_model_dir), bf16=False)
    adapted = PeftModel.from_pretrained(base, record["loraAdapter"])
    batch = processor.apply_chat_template(
        [
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "image": make_rows(1)[0]["image"]},
                        {"type": "text", "text": "what colour is the square ?"},
                    ],
                }
            ]
        ],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        return_tensors="pt",
    )
    with torch.no_grad():
        assert torch.allclose(merged(**batch).logits, adapted(**batch).logits, atol=1e-4)
        assert not any(".lora_" in name for name, _ in merged.named_parameters())
