"""The TRL engine's device memory: one budget in GiB for the whole process, and vLLM's part of it.

With colocated vLLM one process holds two things on one device: the trainer (the policy's
weights, LoRA state, optimiser moments, activations) and vLLM (its own copy of the weights, its KV
cache, CUDA graphs). vLLM is sized by `gpu_memory_utilization`, a share of whatever device the
process lands on, so the same spec takes 2.4 GiB of a 16 GB card and 14 GiB of an H200. The job
states instead one budget for the process (`spec.rollout.memoryBudget`); vLLM gets what is left
after the trainer's part, and that is turned into its share of the device the process is on
when it starts (`vllm_share`, from the device's total at run time).

What is known, and what is estimated until measured: the weights' size (their files on disk),
vLLM's least KV cache (from the model's config: bytes per token times the tokens one generation
round holds), and the overheads below (each says what measured it, or that it is an estimate).

Two layouts (`vllm_layout` picks): both copies of the weights on the device throughout, or, when
they do not fit the budget, the policy's frozen weights parked in host memory while vLLM generates
(parking.py). Then the process peaks at the larger of its two phases, not their sum.

Pure: no torch, no vLLM; the device's total comes in as a number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

GIB = 1024**3
RECIPE_BUDGET_GIB = 16 * 10**9 / GIB
"""The single-GPU LoRA recipe's device: at most 16 GB for the whole process (14.9 GiB)."""
BUDGET_FIELD = "rollout.memoryBudget"

TRAINER_OVERHEAD_GIB = 3.0
"""The trainer's peak beyond the policy's weights while it computes the loss at the single-GPU LoRA
recipe's shapes (LoRA adapters, their gradients and AdamW moments, activations with gradient
checkpointing, logits). Set a little above the overheads measured with and without an awake vLLM
(docs/benchmarks/trl-engine.md)."""
VLLM_OVERHEAD_GIB = 1.5
"""An estimate: what vLLM holds beyond its copy of the weights and the KV cache (`kv_cache_gib`):
CUDA graphs, the sampler's and the prefill's buffers. The benchmark runs give vLLM a fixed size, so
its own split is not measured."""
PARKED_RESIDENT_GIB = 1.5
"""What the trainer keeps on the device while vLLM generates, beyond the policy's weights: LoRA
adapters and AdamW moments, the CUDA context, the allocator's cache. Measured on the H200 at the
recipe's shapes: 20.0 GiB at the generation peak, less vLLM's 10.5 and the weights' 8.3 = 1.2 GiB;
1.5 with a margin. With the policy parked, that is all the trainer holds while vLLM generates."""
VLLM_ASLEEP_GIB = 1.0
"""An estimate: what vLLM keeps while it sleeps at level 2 and the policy trains (its weights and
KV cache are freed; CUDA graphs and buffers stay)."""
PARKED_VLLM_HEADROOM_GIB = 1.0
"""With the policy parked, vLLM gets its least plus this: a KV cache larger than one generation
round holds buys nothing, and every GiB given to vLLM is a GiB of the process's peak."""
KV_FALLBACK_GIB = 0.5
"""vLLM's least KV cache when the model's config does not say its attention's shape."""
KV_DTYPE_BYTES = 2
"""vLLM keeps keys and values in the model's dtype: bf16 on a GPU."""


@dataclass(frozen=True)
class ModelFootprint:
    """What the memory arithmetic needs to know about a model folder."""

    weights_gib: float
    """The weights' files on disk (safetensors): what one copy takes on the device."""
    kv_bytes_per_token: int | None = None
    """Keys and values of one token across the layers with a KV cache; None when the config is silent."""


def footprint(model_dir: str | None) -> ModelFootprint | None:
    """The model folder's footprint, or None when it has no weights here (not downloaded yet)."""
    if not model_dir:
        return None
    folder = Path(model_dir)
    files = list(folder.glob("*.safetensors"))
    if not files:
        return None
    weights = sum(f.stat().st_size for f in files) / GIB
    config_file = folder / "config.json"
    per_token = None
    if config_file.is_file():
        try:
            per_token = kv_bytes_per_token(json.loads(config_file.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            per_token = None
    return ModelFootprint(weights, per_token)


def kv_bytes_per_token(config: dict[str, Any]) -> int | None:
    """Bytes of keys and values per token: 2 x layers with full attention x KV heads x head size x 2.

    A vision-language model's decoder is its `text_config`. Hybrid decoders (Qwen3.5's linear
    attention, `layer_types`) keep a KV cache only in their full-attention layers; the linear
    layers' fixed-size state per sequence is left out (small beside the cache at these lengths).
    """
    text = config.get("text_config") or config
    layers = text.get("num_hidden_layers")
    heads = text.get("num_attention_heads")
    kv_heads = text.get("num_key_value_heads") or heads
    head_dim = text.get("head_dim") or (text.get("hidden_size", 0) // heads if heads else None)
    if not (layers and kv_heads and head_dim):
        return None
    types = text.get("layer_types")
    if isinstance(types, list) and types:
        layers = sum(1 for kind in types if kind in ("full_attention", "attention", "sliding_attention"))
    return int(2 * layers * kv_heads * head_dim * KV_DTYPE_BYTES)


def kv_cache_gib(model: ModelFootprint, tokens: int) -> float:
    """The KV cache for `tokens` tokens at once."""
    if model.kv_bytes_per_token is None:
        return KV_FALLBACK_GIB
    return model.kv_bytes_per_token * tokens / GIB


@dataclass(frozen=True)
class VllmNeed:
    """The whole process's least with colocated vLLM, part by part (GiB)."""

    weights: float
    trainer: float
    kv_cache: float
    kv_tokens: int
    vllm_overhead: float
    parked: bool = False
    """The policy's frozen weights wait in host memory while vLLM generates (parking.py)."""
    resident: float = PARKED_RESIDENT_GIB
    vllm_asleep: float = VLLM_ASLEEP_GIB

    @property
    def vllm(self) -> float:
        """vLLM's own least: its copy of the weights, the KV cache for one round, its overhead."""
        return self.weights + self.kv_cache + self.vllm_overhead

    @property
    def both_copies(self) -> VllmNeed:
        """The same need with both copies of the weights on the device throughout."""
        return replace(self, parked=False)

    @property
    def training(self) -> float:
        """The process while the policy computes the loss."""
        return self.weights + self.trainer + (self.vllm_asleep if self.parked else self.vllm)

    @property
    def generating(self) -> float:
        """The process while vLLM generates."""
        return (self.resident if self.parked else self.weights + self.trainer) + self.vllm

    @property
    def total(self) -> float:
        return max(self.training, self.generating)

    def describe(self) -> str:
        vllm = (
            f"vLLM's copy {self.weights:.1f} + KV cache {self.kv_cache:.1f} ({self.kv_tokens:,} tokens) "
            f"+ vLLM ~{self.vllm_overhead:.1f} (graphs, buffers; estimate)"
        )
        if not self.parked:
            return (
                f"policy {self.weights:.1f} + trainer ~{self.trainer:.1f} (LoRA, optimiser, activations) "
                f"+ {vllm} = {self.total:.1f} GiB"
            )
        return (
            f"while vLLM generates, trainer ~{self.resident:.1f} (LoRA, optimiser; the policy's weights in "
            f"host memory) + {vllm} = {self.generating:.1f} GiB; while the policy trains, policy "
            f"{self.weights:.1f} + trainer ~{self.trainer:.1f} + vLLM asleep ~{self.vllm_asleep:.1f} "
            f"= {self.training:.1f} GiB"
        )


def vllm_need(model: ModelFootprint, *, sequences: int, sequence_tokens: int, context: int) -> VllmNeed:
    """What the process needs at least when vLLM generates `sequences` completions at once.

    vLLM refuses to start without room for one sequence at its whole context (`max_model_len`),
    and generates a round's sequences together only when the cache holds them all (each up to
    `sequence_tokens`, prompt and completion): the least is the larger of the two.
    """
    tokens = max(context, sequences * sequence_tokens)
    return VllmNeed(
        weights=model.weights_gib,
        trainer=TRAINER_OVERHEAD_GIB,
        kv_cache=kv_cache_gib(model, tokens),
        kv_tokens=tokens,
        vllm_overhead=VLLM_OVERHEAD_GIB,
    )


def vllm_layout(need: VllmNeed, budget_gib: float) -> VllmNeed:
    """Both copies of the weights on the device when they fit the budget (no copies between
    phases), else the policy parked in host memory while vLLM generates: the smallest layout
    that could fit, which `vllm_gib` then holds against the budget."""
    if need.total <= budget_gib:
        return need
    return replace(need, parked=True)


class BudgetError(ValueError):
    """The budget cannot hold what the job asks for; the message names the field."""


def vllm_gib(need: VllmNeed, budget_gib: float, *, field: str = BUDGET_FIELD) -> float:
    """What vLLM may take (weights, KV cache, graphs) so the whole process stays within the budget."""
    left = budget_gib - (need.resident if need.parked else need.weights + need.trainer)
    if left < need.vllm or need.total > budget_gib:
        raise BudgetError(
            f"{field}: {budget_gib:.1f} GiB cannot hold colocated vLLM: it needs at least {need.describe()}; "
            "raise the budget, or set rollout.generation: compiled"
        )
    if need.parked:
        return min(left, need.vllm + PARKED_VLLM_HEADROOM_GIB)
    return left


def vllm_share(gib: float, device_total_bytes: int, *, budget_gib: float | None = None) -> float:
    """vLLM's `gpu_memory_utilization` (a share of the whole device) for `gib` of it.

    `budget_gib`, when the job gave one, must fit the device the process landed on.
    """
    total_gib = device_total_bytes / GIB
    if budget_gib is not None and budget_gib > total_gib:
        raise BudgetError(
            f"{BUDGET_FIELD}: {budget_gib:.1f} GiB is more than this device's {total_gib:.1f} GiB: "
            "lower the budget, or ask for a larger device (resources.product)"
        )
    share = gib * GIB / device_total_bytes
    if not 0.0 < share < 1.0:
        raise BudgetError(f"vLLM's {gib:.1f} GiB is not a share of a {total_gib:.1f} GiB device")
    return round(share, 4)
