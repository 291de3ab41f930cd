"""The policy's frozen weights wait in host memory while vLLM generates (engines/trl/parking.py).

What CPU can show: parking frees every frozen parameter and restores it bit for bit; the weights
vLLM receives are exactly what peft's own merge makes, under the model's own parameter names,
parked or not; and the turns come in the right order, over two rounds, around vLLM's sleep and
wake-up. vLLM itself needs CUDA, so the last test drives the engine's hooks with a stand-in that
records what TRL's colocated generation does to vLLM (trl/generation/vllm_generation.py, 1.16):
wake the weights, load them, wake the KV cache, generate, sleep at level 2. The device's peak is
the H200's to show (benchmarks/trl_generation.py).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import torch
from accelerate import Accelerator
from grpo_trainer.engines.trl import parking
from grpo_trainer.engines.trl.runner import load_policy
from grpo_trainer.failures import ConfigError
from grpo_trainer.testing.lora import adapted_policy
from trl.generation.vllm_generation import VLLMGeneration


def _merged_by_peft(model: Any) -> dict[str, torch.Tensor]:
    """peft's own merge, on a copy, under the model's own names."""
    return dict(copy.deepcopy(model).merge_and_unload().named_parameters())


def _snapshot(model: Any) -> dict[str, torch.Tensor]:
    return {name: param.detach().clone() for name, param in model.named_parameters()}


def test_parking_frees_every_frozen_weight_and_restores_it_bit_for_bit(tiny_model_dir: Path) -> None:
    model, _ = adapted_policy(tiny_model_dir, b_std=0.1, dtype=torch.bfloat16)
    before = _snapshot(model)
    trainable = {name: param.data_ptr() for name, param in model.named_parameters() if param.requires_grad}
    assert trainable
    assert len(trainable) < len(before)
    policy = parking.ParkedPolicy(model)
    frozen_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if not p.requires_grad)
    assert policy.host_bytes == frozen_bytes

    for _ in range(2):  # every round parks and restores again
        policy.park()
        for name, param in model.named_parameters():
            if param.requires_grad:  # the adapters train on: untouched, same storage
                assert param.data_ptr() == trainable[name]
                assert torch.equal(param, before[name])
            else:
                assert param.numel() == 0, name
        policy.park()  # twice is once
        policy.restore()
        for name, param in model.named_parameters():
            assert param.shape == before[name].shape
            assert torch.equal(param, before[name]), name
        policy.restore()


def test_vllm_receives_exactly_what_peft_merges_under_the_models_own_names(tiny_model_dir: Path) -> None:
    model, _ = adapted_policy(tiny_model_dir, b_std=1e-2, dtype=torch.bfloat16)
    before = _snapshot(model)
    # peft's own merge on a copy: the weights TRL's sync would push (merge, read, unmerge).
    expected = _merged_by_peft(model)
    # The names vLLM's loader knows are the model's own, without peft's wrapping.
    plain, _ = load_policy(str(tiny_model_dir), bf16=False)
    assert set(expected) == {name for name, _ in plain.named_parameters()}
    q_proj = "model.language_model.layers.0.self_attn.q_proj.weight"
    q_proj_policy = "base_model.model.model.language_model.layers.0.self_attn.q_proj.base_layer.weight"
    assert not torch.equal(expected[q_proj], before[q_proj_policy]), "the adapter must change the merge"

    policy = parking.ParkedPolicy(model)
    for parked in (False, True):
        if parked:
            policy.park()
        sent = dict(policy.merged_weights())
        assert set(sent) == set(expected)
        for name, tensor in sent.items():
            assert tensor.dtype == expected[name].dtype
            assert torch.equal(tensor, expected[name]), (parked, name)
        # Merging happened on copies: neither the policy's weights nor the host copy took an adapter in.
        policy.restore()
        for name, param in model.named_parameters():
            assert torch.equal(param, before[name]), (parked, name)


def test_a_peft_variant_is_refused_naming_the_override(tiny_model_dir: Path) -> None:
    from peft import LoraConfig, get_peft_model

    model, _ = load_policy(str(tiny_model_dir), bf16=False)
    dora = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj"], use_dora=True))
    with pytest.raises(ConfigError, match=r"^engine.overrides: .* plain LoRA only, not DoRA"):
        parking.ParkedPolicy(dora)


class _Weights:
    """vLLM's model as TRL reaches it (`llm_engine.model_executor.driver_worker.model_runner.model`)."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.loaded: dict[str, torch.Tensor] = {}
        self.calls = 0

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        self.calls += 1
        for name, tensor in weights:
            self.loaded[name] = tensor.clone()


class _StandInLLM:
    """Records what is done to vLLM, and whether the policy was parked at that moment."""

    def __init__(self, events: list[str], policy_parked: Any) -> None:
        self.events = events
        self.parked = policy_parked
        self.model = _Weights(events)
        runner = type("Runner", (), {"model": self.model})()
        worker = type("Worker", (), {"model_runner": runner})()
        executor = type("Executor", (), {"driver_worker": worker})()
        self.llm_engine = type("Engine", (), {"model_executor": executor})()

    def _record(self, what: str) -> None:
        self.events.append(f"{what} parked={self.parked()}")

    def sleep(self, level: int) -> None:
        self._record(f"sleep {level}")

    def wake_up(self, tags: list[str]) -> None:
        self._record(f"wake {','.join(tags)}")

    def reset_prefix_cache(self) -> None:
        self._record("reset")

    def generate(self, prompts: list[Any]) -> list[Any]:
        self._record("generate")
        return prompts


def test_vllm_and_the_policy_take_turns_over_two_rounds(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, processor = adapted_policy(tiny_model_dir, b_std=1e-2, dtype=torch.bfloat16)
    before = _snapshot(model)
    events: list[str] = []
    state: dict[str, Any] = {}

    def parked() -> bool:
        return bool(state.get("policy") and state["policy"].parked) or any(
            p.numel() == 0 for p in model.parameters()
        )

    def start_vllm(generation: Any) -> None:  # TRL's _init_vllm, colocated, sleep mode on
        generation.llm = _StandInLLM(events, parked)
        events.append(f"start parked={parked()}")
        generation.llm.sleep(level=2)
        generation._llm_weights_sleeping = True

    def generate(self: Any, prompts: list[Any], **_: Any) -> list[Any]:  # TRL's generate, colocated
        if self._llm_weights_sleeping:
            self.sync_weights()
        self.llm.wake_up(tags=["kv_cache"])
        out = self.llm.generate(prompts)
        self.llm.sleep(level=2)
        self._llm_weights_sleeping = True
        return out

    monkeypatch.setattr(VLLMGeneration, "_init_vllm", start_vllm)
    monkeypatch.setattr(VLLMGeneration, "generate", generate)
    with parking.vllm_start_parked():
        generation = VLLMGeneration(
            model=model, accelerator=Accelerator(cpu=True), processing_class=processor, enable_sleep_mode=True
        )
    assert VLLMGeneration._init_vllm is start_vllm  # the wrapper is gone once the trainer is built
    trainer = type("Trainer", (), {"vllm_generation": generation})()
    state["policy"] = parking.install(trainer)
    assert events == ["start parked=True", "sleep 2 parked=True"]
    assert not parked()  # the policy is back for the first step

    round_events = [
        "wake weights parked=True",
        "reset parked=True",
        "wake kv_cache parked=True",
        "generate parked=True",
        "sleep 2 parked=True",
    ]
    for step in range(2):
        events.clear()
        generation.llm.model.calls = 0
        assert generation.generate(prompts=[[1, 2, 3]]) == [[1, 2, 3]]
        assert generation.llm.model.calls == 1, "the weights go to vLLM in one load_weights call a round"
        assert events == round_events, step
        assert not parked()
        for name, param in model.named_parameters():
            if not param.requires_grad:  # the frozen weights are back as they were
                assert torch.equal(param, before[name]), name
        # vLLM got the merged weights, under the model's own names.
        expected = _merged_by_peft(model)
        assert set(generation.llm.model.loaded) == set(expected)
        for name, tensor in generation.llm.model.loaded.items():
            assert torch.equal(tensor, expected[name]), name
        # The adapters train between rounds; the next round must send the new ones.
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "lora_B" in name:
                    param.mul_(2)


def test_install_needs_the_trainer_built_parked_and_sleep_mode() -> None:
    generation = type("Generation", (), {"enable_sleep_mode": True})()
    trainer = type("Trainer", (), {"vllm_generation": generation})()
    with pytest.raises(RuntimeError, match="vllm_start_parked"):
        parking.install(trainer)
    generation.parked_policy = object()
    generation.enable_sleep_mode = False
    with pytest.raises(RuntimeError, match="sleep mode"):
        parking.install(trainer)
