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


def sampling_job(**rollout: object):
    from grpo_trainer.spec import resolve_manifest

    return resolve_manifest(
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
                "rollout": rollout,
                "engine": {"name": "trl", "lora": {"rank": 16}},
                "evaluation": {"interval": 0},
            },
        }
    )


SPEC_SAMPLING = {"temperature": 0.7, "topP": 0.9, "topK": 20, "minP": 0.1}


def test_the_specs_sampling_reaches_grpoconfig_with_its_reasons() -> None:
    from grpo_trainer.engines.trl.job import reasons, settings_from_job

    job = sampling_job(**SPEC_SAMPLING)
    grpo = build_trl_config(settings_from_job(job))[0]
    assert {key: grpo[key] for key in SAMPLING} == SAMPLING
    why = reasons(job)
    assert (why["top_p"], why["top_k"], why["min_p"]) == (
        "spec.rollout.topP",
        "spec.rollout.topK (0: every token)",
        "spec.rollout.minP (0: none)",
    )
    # Unset, every path samples the whole distribution, as the reference recipes do.
    default = build_trl_config(settings_from_job(sampling_job()))[0]
    assert (default["temperature"], default["top_p"], default["top_k"], default["min_p"]) == (
        1.0,
        1.0,
        0,
        0.0,
    )


def test_trls_colocated_vllm_builds_sampling_params_from_the_spec(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL's own code, GRPOConfig -> GRPOTrainer -> VLLMGeneration -> vLLM's SamplingParams.

    vLLM cannot run here (no CUDA), so its two entry points are stand-ins: `SamplingParams` records
    the keyword arguments TRL builds it with, and the engine's `generate` returns one completion.
    Everything between the spec and those arguments is the engine's and TRL's real code.
    """
    from types import SimpleNamespace

    import trl.generation.vllm_generation as vllm_generation
    from datasets import Dataset
    from grpo_trainer.engines.trl.job import settings_from_job
    from grpo_trainer.engines.trl.runner import load_policy
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    built: list[dict[str, object]] = []

    class SamplingParams:  # vLLM's, as TRL calls it
        def __init__(self, **kwargs: object) -> None:
            built.append(kwargs)

    class LLM:  # vLLM's colocated engine: one token per prompt
        def generate(self, prompts: list[dict[str, object]], sampling_params: object, use_tqdm: bool) -> list:
            return [
                SimpleNamespace(
                    prompt_token_ids=p["prompt_token_ids"],
                    outputs=[SimpleNamespace(token_ids=[1], logprobs=None)],
                    prompt_logprobs=None,
                )
                for p in prompts
            ]

    def init_vllm(self: object) -> None:
        self.llm = LLM()  # type: ignore[attr-defined]
        self._llm_weights_sleeping = False  # type: ignore[attr-defined]

    monkeypatch.setattr(vllm_generation, "SamplingParams", SamplingParams, raising=False)
    monkeypatch.setattr(vllm_generation.VLLMGeneration, "_init_vllm", init_vllm)
    monkeypatch.setattr(vllm_generation, "extract_logprobs", lambda outputs: (None, None))

    job = sampling_job(generation="vllm", **SPEC_SAMPLING)
    settings = replace(
        settings_from_job(job),
        output_dir="unused",
        bf16=False,
        gradient_checkpointing=False,
        max_completion_length=16,
    )
    grpo, lora = build_trl_config(settings)
    model, processor = load_policy(str(tiny_model_dir), bf16=False)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
        args=GRPOConfig(**{**grpo, "use_cpu": True, "vllm_enable_sleep_mode": False}),
        train_dataset=Dataset.from_list([{"prompt": [{"role": "user", "content": "hi"}]}] * 2),
        processing_class=processor,
        peft_config=LoraConfig(**lora),
    )
    trainer.vllm_generation.generate(prompts=[[1, 2, 3]], images=None, num_generations=1)
    (params,) = built
    expected = sampling("vllm", grpo)
    assert {key: params[key] for key in expected} == expected
    assert {key: params[key] for key in SAMPLING} == SAMPLING
    assert params["max_tokens"] == 16
