"""Like for like: every generation path samples with the same settings and the same length.

`generation.sampling` states what TRL 1.16 hands vLLM's SamplingParams (colocate mode) and
transformers' generate from the GRPOConfig keys; the transformers side is checked against a real
GRPOTrainer built on the tiny model.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from grpo_trainer.engines.trl.generation import VLLM_PROMPT_HEADROOM, sampling
from grpo_trainer.engines.trl.settings import TrlSettings, build_trl_config

SAMPLING = {"temperature": 0.7, "top_p": 0.9, "top_k": 20, "min_p": 0.1}
SHARED = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")


def config(path: str, **changes: object) -> dict[str, object]:
    settings = replace(TrlSettings(), generation=path, max_completion_length=256, **SAMPLING, **changes)
    return build_trl_config(settings)[0]


def test_vllm_gets_the_sampling_and_the_length_transformers_gets() -> None:
    vllm = sampling("vllm", config("vllm"))
    for path in ("eager", "compiled"):
        other = sampling(path, config(path))
        assert {key: other[key] for key in SHARED} == {key: vllm[key] for key in SHARED}
        assert other["max_new_tokens"] == vllm["max_tokens"] == 256
    assert {key: vllm[key] for key in SAMPLING} == SAMPLING


def test_the_recipes_defaults_sample_the_full_distribution_on_every_path() -> None:
    grpo = build_trl_config(TrlSettings(generation="vllm"))[0]
    assert sampling("vllm", grpo)["min_p"] == 0.0
    assert (grpo["temperature"], grpo["top_p"], grpo["top_k"], grpo["min_p"]) == (1.0, 1.0, 0, 0.0)


def test_vllms_context_leaves_the_completion_its_full_length() -> None:
    grpo = config("vllm", max_prompt_length=1024)
    # A prompt vLLM counts up to twice as long as the engine did still gets its 256 tokens.
    assert grpo["vllm_max_model_length"] == VLLM_PROMPT_HEADROOM * 1024 + 256
    assert grpo["vllm_max_model_length"] - 2 * 1024 >= grpo["max_completion_length"]


def test_ignore_eos_runs_every_path_to_the_full_length_in_its_own_words() -> None:
    assert sampling("vllm", config("vllm", ignore_eos=True))["ignore_eos"] is True
    for path in ("eager", "compiled"):
        assert sampling(path, config(path, ignore_eos=True))["min_new_tokens"] == 256
    assert "generation_kwargs" not in config("eager")


@pytest.mark.parametrize("ignore_eos", [False, True])
def test_trls_own_generate_kwargs_are_what_sampling_says(tiny_model_dir: Path, ignore_eos: bool) -> None:
    from datasets import Dataset
    from grpo_trainer.engines.trl.runner import load_policy
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    grpo, lora = build_trl_config(
        replace(
            TrlSettings(),
            output_dir="unused",
            bf16=False,
            gradient_checkpointing=False,
            max_completion_length=16,
            ignore_eos=ignore_eos,
            **SAMPLING,
        )
    )
    model, processor = load_policy(str(tiny_model_dir), bf16=False)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
        args=GRPOConfig(**{**grpo, "use_cpu": True}),
        train_dataset=Dataset.from_list([{"prompt": [{"role": "user", "content": "hi"}]}] * 2),
        processing_class=processor,
        peft_config=LoraConfig(**lora),
    )
    expected = sampling("eager", grpo)
    assert {key: trainer.generation_kwargs[key] for key in expected} == expected
