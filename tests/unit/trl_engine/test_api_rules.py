"""The admission rules of the new spec fields, as the API server's CEL evaluates them (api/rules.py)."""

from __future__ import annotations

from typing import Any

import pytest
from grpo_operator.api.rules import rule_violations
from grpo_operator.api.v1alpha1 import GRPOJob


def spec(engine: str, **export: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": {"source": "pvc://models/qwen"},
        "dataset": {"train": ["pvc://data/train.parquet"]},
        "reward": {"builtin": "reasoning-format"},
        "resources": {"accelerator": "nvidia", "devicesPerNode": 1, "nodes": 1},
        "algorithm": {"groupSize": 2, "trainBatchSize": 1, "miniBatchSize": 1},
        "engine": {"name": engine, **({"lora": {"rank": 16}} if engine == "trl" else {})},
        "export": export,
        # No validation data, so no validation (a CEL rule of its own refuses an interval here).
        "evaluation": {"interval": 0},
    }
    # Defaults applied, as the server holds the object.
    return GRPOJob.model_validate({"metadata": {"name": "j"}, "spec": body}).spec.to_wire()


def messages(body: dict[str, Any]) -> list[str]:
    return [str(v) for v in rule_violations(body)]


def test_the_trl_engine_may_ask_for_gguf_and_a_generation_path() -> None:
    body = spec("trl", gguf={"quantization": "q5_k_m"})
    body["rollout"]["generation"] = "vllm"
    assert messages(body) == []


def test_verl_refuses_gguf_naming_the_field() -> None:
    (message,) = messages(spec("verl", gguf={}))
    assert "export.gguf is written by the trl engine" in message


def test_verl_refuses_a_generation_path() -> None:
    body = spec("verl")
    body["rollout"]["generation"] = "compiled"
    (message,) = messages(body)
    assert "rollout.generation chooses the trl engine's generation path" in message


def test_gguf_needs_the_merged_model() -> None:
    (message,) = messages(spec("trl", gguf={}, huggingFace=False))
    assert (
        message == "spec.export: export.gguf is converted from the merged model: set export.huggingFace: true"
    )


@pytest.mark.parametrize("quantization", ["iq2_xs", "Q4_K_M", "q4"])
def test_only_llama_quantize_types_without_an_importance_matrix(quantization: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="quantization"):
        spec("trl", gguf={"quantization": quantization})


def test_the_trl_engine_may_sample_with_min_p_within_a_budget() -> None:
    body = spec("trl")
    body["rollout"].update(topP=0.9, topK=20, minP=0.1, memoryBudget="16G")
    assert messages(body) == []


def test_verl_refuses_min_p_and_a_memory_budget_naming_each_field() -> None:
    body = spec("verl")
    body["rollout"].update(topP=0.9, topK=20)
    assert messages(body) == []
    body["rollout"].update(minP=0.1, memoryBudget="16G")
    found = {str(v.field): str(v) for v in rule_violations(body)}
    assert set(found) == {"spec.rollout.minP", "spec.rollout.memoryBudget"}
    assert "rollout.minP is the trl engine's: verl passes no min-p" in found["spec.rollout.minP"]
    assert "rollout.memoryBudget sizes the trl engine's process" in found["spec.rollout.memoryBudget"]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("topP", 0.0, "greater than 0"),
        ("topP", 1.5, "less than or equal to 1"),
        ("topK", -1, "greater than or equal to 0"),
        ("minP", 1.1, "less than or equal to 1"),
        ("memoryBudget", "512Mi", "rollout.memoryBudget must be at least 1Gi"),
        ("memoryBudget", "16 GB", "should match pattern"),
    ],
)
def test_sampling_and_budget_ranges_are_refused_naming_the_field(
    field: str, value: Any, expected: str
) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as refused:
        GRPOJob.model_validate(
            {"metadata": {"name": "j"}, "spec": {**spec("trl"), "rollout": {field: value}}}
        )
    (error,) = refused.value.errors()
    assert error["loc"][:3] == ("spec", "rollout", field)
    assert expected in error["msg"]
