"""The rollout paths keep training semantics: same tokens, same rewards, same loss; merging does not.

The compiled path's speed is the GPU's to show (benchmarks/trl_generation.py); what CPU can show is
that its static KV cache decodes exactly what the engine's eager path decodes, end to end through
GRPO steps, and why merged adapters are not one of the paths (generation.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import trl  # noqa: F401  (the trl-cpu extra; make install brings it, CI never skips)
from grpo_trainer.engines.trl.generation import resolve, trl_config
from grpo_trainer.engines.trl.metrics import read_records
from grpo_trainer.engines.trl.runner import RunRequest, train
from grpo_trainer.testing.colour_task import colour_reward, make_rows
from grpo_trainer.testing.learning import LearningPlan, learning_settings
from grpo_trainer.testing.lora import adapted_policy


def test_auto_is_compiled_on_cuda_and_eager_elsewhere() -> None:
    assert resolve("auto", "cuda", vllm=None)[0] == "compiled"
    assert resolve("auto", "cuda", vllm="0.24.0")[0] == "compiled"  # the policy samples its own rollouts
    assert resolve("auto", "cpu", vllm="0.24.0")[0] == "eager"
    assert resolve("auto", "npu", vllm="0.23.0")[0] == "eager"
    assert resolve("vllm", "cpu", vllm=None)[0] == "vllm"
    with pytest.raises(ValueError, match=r"rollout\.generation"):
        resolve("fast", "cuda", vllm=None)
    assert trl_config("eager", max_prompt_length=8, max_completion_length=2, gpu_memory_utilization=0.3) == {}


def _prompt(processor: Any) -> dict[str, Any]:
    row = make_rows(1, seed=3)[0]
    messages = [
        {
            "role": "user",
            "content": [{"type": "image", "image": row["image"]}, {"type": "text", "text": "what"}],
        }
    ]
    return processor.apply_chat_template(
        [messages], add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )


def _greedy(model: Any, inputs: dict[str, Any], **options: Any) -> list[int]:
    with torch.no_grad():
        out = model.generate(
            **inputs, max_new_tokens=12, min_new_tokens=12, do_sample=False, disable_compile=True, **options
        )
    return out[0, inputs["input_ids"].shape[1] :].tolist()


def test_static_cache_and_merged_adapters_decode_the_same_tokens_in_fp32(tiny_model_dir: Path) -> None:
    model, processor = adapted_policy(tiny_model_dir, b_std=1.0)
    inputs = _prompt(processor)
    eager = _greedy(model, inputs)
    with model.disable_adapter():
        base = _greedy(model, inputs)
    assert eager != base, "the adapter must change what is decoded, or the comparisons prove nothing"
    assert _greedy(model, inputs, cache_implementation="static") == eager
    model.merge_adapter()
    try:
        assert _greedy(model, inputs) == eager
    finally:
        model.unmerge_adapter()


def test_in_bf16_merging_loses_part_of_the_adapter_and_moves_the_frozen_weights(tiny_model_dir: Path) -> None:
    """Why the engine never generates with merged adapters. A trained LoRA update is mostly smaller
    than a bf16 weight's last place: added to the weight, much of it rounds away (systematically,
    towards the base model), the merged model's logits are off the policy's by about as much as the
    adapter moves them, and unmerging leaves the frozen weights changed. (B at 1e-4 on this
    model's 64-wide layers is relatively larger than the single-GPU LoRA recipe's 60 steps at 5e-6 on the 4B.)"""
    model, processor = adapted_policy(tiny_model_dir, b_std=1e-4, dtype=torch.bfloat16)
    layer = model.base_model.model.model.language_model.layers[0].self_attn.q_proj
    weight = layer.base_layer.weight.detach().clone()
    delta = layer.get_delta_weight("default").detach().float()
    merged = (weight.float() + delta).to(torch.bfloat16).float()
    kept = ((merged - weight.float()) * delta).sum() / (delta * delta).sum()
    assert kept < 0.8
    inputs = dict(_prompt(processor))
    inputs["pixel_values"] = inputs["pixel_values"].to(torch.bfloat16)
    with torch.no_grad():
        policy = model(**inputs).logits.float()
        with model.disable_adapter():
            base = model(**inputs).logits.float()
        model.merge_adapter()
        merged_logits = model(**inputs).logits.float()
        model.unmerge_adapter()
    assert (merged_logits - policy).norm() > 0.5 * (policy - base).norm()
    assert layer.base_layer.weight.ne(weight).any()


def _run(
    tmp_path: Path,
    model_dir: Path,
    generation: str,
    *,
    reward: Any = colour_reward,
    prepare_model: Any = None,
) -> list[dict[str, Any]]:
    """Two GRPO steps of the colour task through the engine; each step's metrics."""
    plan = LearningPlan(steps=2, prompts_per_step=2, num_generations=4, rows=8, learning_rate=5e-2)
    settings = replace(
        learning_settings(plan, tmp_path / generation / "checkpoints", vision=True),
        max_completion_length=4,
        save_steps=100,
        generation=generation,
    )
    result = train(
        RunRequest(
            settings=settings,
            model_path=str(model_dir),
            rows=make_rows(plan.rows),
            reward_funcs=[reward],
            metrics_path=str(tmp_path / generation / "metrics.jsonl"),
            prepare_model=prepare_model,
        )
    )
    assert getattr(result.trainer, "generation_fallback", None) is None
    return [r["data"] for r in read_records(tmp_path / generation / "metrics.jsonl") if "data" in r]


def test_compiled_path_trains_exactly_as_the_eager_path(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Same seed, same data: the static-cache path samples the same completions, so rewards,
    lengths and the loss are the eager path's (torch.compile itself needs CUDA: on CPU the
    compiled path is its static cache, which is what could change the numbers)."""
    eager = _run(tmp_path, tiny_model_dir, "eager")
    compiled = _run(tmp_path, tiny_model_dir, "compiled")
    assert len(eager) == len(compiled) == 2
    for a, b in zip(eager, compiled, strict=True):
        assert a["critic/score/mean"] == b["critic/score/mean"]
        assert a["response_length/mean"] == b["response_length/mean"]
        assert a["actor/pg_loss"] == pytest.approx(b["actor/pg_loss"], abs=1e-5)
        assert a["actor/grad_norm"] == pytest.approx(b["actor/grad_norm"], rel=1e-3)


def test_a_completion_never_holds_the_image_token(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A policy that favours `<|image_pad|>` still trains: the token is banned from sampling.

    Sampled into a completion, it makes the policy's own forward pass fail ("Image features and
    image tokens do not match"). TRL suppresses it when transformers generates; the engine's
    generation settings must not replace that list (TRL lets `generation_kwargs` win).
    """
    from transformers import AutoTokenizer

    image_pad = AutoTokenizer.from_pretrained(tiny_model_dir).convert_tokens_to_ids("<|image_pad|>")
    sampled: list[list[int]] = []

    def favour_the_image_token(model: Any) -> None:
        bias = torch.zeros(model.lm_head.out_features)
        bias[image_pad] = 30.0  # unsuppressed, every completion would be image tokens
        model.lm_head.register_forward_hook(lambda _module, _inputs, logits: logits + bias.to(logits))

    def recording_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        sampled.extend(list(ids) for ids in kwargs["completion_ids"])
        return colour_reward(prompts, completions, **kwargs)

    steps = _run(
        tmp_path, tiny_model_dir, "eager", reward=recording_reward, prepare_model=favour_the_image_token
    )
    assert len(steps) == 2
    assert len(sampled) == 2 * 2 * 4
    assert all(image_pad not in ids for ids in sampled), str(sampled)


def test_vllm_gets_the_ban_transformers_has_from_trl() -> None:
    """vLLM: a logit bias of -100 on the image token, over any bias an override gave it; the other
    paths' settings untouched (TRL's `suppress_tokens` stays TRL's)."""
    from grpo_trainer.engines.trl.generation import ban_image_token

    vllm = ban_image_token("vllm", {"ignore_eos": True, "logit_bias": {6: 5.0, 99: 1.0}}, 6)
    assert vllm == {"ignore_eos": True, "logit_bias": {6: -100.0, 99: 1.0}}
    for path in ("eager", "compiled"):
        assert ban_image_token(path, {"min_new_tokens": 4}, 6) == {"min_new_tokens": 4}
    assert ban_image_token("vllm", None, None) == {}
    assert ban_image_token("vllm", None, 6) == {"logit_bias": {6: -100.0}}
