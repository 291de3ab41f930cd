"""One copy of the weights on the device: the policy's frozen weights wait in host memory while vLLM generates.

Colocated vLLM keeps its own copy of the model. At the single-GPU LoRA recipe's shapes two bf16
copies of a 4B model are 16.5 GiB, more than the recipe's 16 GB (14.9 GiB) before anything else,
even with vLLM sleeping while the policy trains (docs/benchmarks/trl-engine.md has the figures). The two copies never work at the same time, though: vLLM
generates, then the trainer computes the loss. So when the memory arithmetic says two copies do
not fit (`memory.vllm_layout`), the engine takes turns:

- The policy's frozen parameters (every base weight: LoRA trains only its adapters) are copied
  once into pinned host memory (`host`), which stays the master copy: nothing writes to a frozen
  weight, and this path never merges adapters into the policy's own weights (TRL's sync merges
  and unmerges them in place, which also leaves rounding residue in bf16).
- Before vLLM wakes its weights, the policy's frozen parameters give their device memory back
  (`park`), and vLLM receives every weight from the host copy, with each LoRA layer's update
  added on the device the way peft's merge adds it (`merged_weights`), one tensor at a time.
- After vLLM has generated and gone back to sleep (level 2: its weights and KV cache freed), the
  frozen parameters are copied back onto the device (`restore`) for the loss.

vLLM's start is wrapped the same way (`vllm_start_parked`): it loads its weights and sizes its KV
cache while the policy is parked, so on a 16 GB card it finds the memory it was promised.

The cost is two host-device copies of the frozen weights per generation round (one into vLLM,
one back into the policy), by arithmetic about 0.2 s each for 8.3 GiB over PCIe 5 (not yet
measured); host memory holds one pinned
copy of the weights for the whole run. Only plain LoRA adapters are supported (no DoRA or other
peft variants, no LoRA bias): their merge is one addition.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from ...failures import ConfigError

log = logging.getLogger(__name__)

PEFT_PREFIX = "base_model.model."
"""What peft's wrapper adds in front of the model's own parameter names."""
WRAPPER_PARTS = (".base_layer", "_checkpoint_wrapped_module.", "modules_to_save.default.")
"""Name parts the training wrappers add (peft's base layer, activation checkpointing, peft's saved
modules) that vLLM's loader does not know."""


class ParkedPolicy:
    """A peft model's frozen parameters, parked in host memory and brought back on demand."""

    def __init__(self, model: Any) -> None:
        import torch

        self.model = model
        self.parked = False
        self._lora_of: dict[int, Any] = {}
        for module in model.modules():
            if _is_lora_layer(module):
                _check_plain_lora(module)
                self._lora_of[id(module.get_base_layer().weight)] = module
        self._frozen: list[tuple[Any, Any, Any]] = []
        """(parameter, host copy, device) for every frozen parameter."""
        pin = torch.cuda.is_available()
        for _, param in model.named_parameters():
            if param.requires_grad:
                continue
            host = torch.empty(param.shape, dtype=param.dtype, device="cpu", pin_memory=pin)
            host.copy_(param.data)
            self._frozen.append((param, host, param.device))
        self.host_bytes = sum(host.numel() * host.element_size() for _, host, _ in self._frozen)

    def park(self) -> None:
        """Give the frozen parameters' device memory back (their values live on in `host`)."""
        if self.parked:
            return
        import torch

        for param, host, _ in self._frozen:
            param.data = torch.empty(0, dtype=host.dtype, device=param.device)
        self.parked = True
        if torch.cuda.is_available():
            # The freed blocks go back to the driver, where vLLM's allocator can map them.
            torch.cuda.empty_cache()

    def restore(self) -> None:
        """Copy the frozen parameters back onto their devices (before the loss needs them)."""
        if not self.parked:
            return
        for param, host, device in self._frozen:
            param.data = host.to(device, non_blocking=True, copy=True)
        self.parked = False

    def merged_weights(self) -> Iterator[tuple[str, Any]]:
        """Every weight vLLM loads, by vLLM's name, with the adapters added as peft's merge adds them.

        One tensor at a time on the device (the largest is the embedding), whether parked or not.
        """
        host_of = {id(param): (host, device) for param, host, device in self._frozen}
        for name, param in self.model.named_parameters():
            if "lora_" in name or "original_module" in name:
                continue  # the adapters go in merged; a saved module's original copy is not vLLM's
            layer = self._lora_of.get(id(param))
            if id(param) in host_of and self.parked:
                host, device = host_of[id(param)]
                tensor = host.to(device, non_blocking=True, copy=True)
            else:
                # The policy's own weight: copied before an adapter is added, never changed in place.
                tensor = param.data.clone() if layer is not None else param.data
            if layer is not None:
                for adapter in _active_adapters(layer):
                    # peft's unsafe merge: `base.weight.data += delta` (in the weight's dtype).
                    tensor += layer.get_delta_weight(adapter)
            yield vllm_name(name), tensor


def vllm_name(name: str) -> str:
    """A peft model's parameter name as vLLM's loader knows it (the model's own name)."""
    name = name.removeprefix(PEFT_PREFIX)
    for part in WRAPPER_PARTS:
        name = name.replace(part, "")
    return name


def _is_lora_layer(module: Any) -> bool:
    from peft.tuners.lora import LoraLayer

    return isinstance(module, LoraLayer)


def _active_adapters(layer: Any) -> list[str]:
    if getattr(layer, "disable_adapters", False):
        return []
    return [name for name in layer.active_adapters if name in layer.lora_A]


def _check_plain_lora(layer: Any) -> None:
    """Parking merges by one addition; a peft variant (DoRA and the like) or a LoRA bias merges otherwise."""
    variants = [name for name in getattr(layer, "lora_variant", {}) or {}]
    biased = [name for name, on in (getattr(layer, "lora_bias", {}) or {}).items() if on]
    if variants or biased:
        raise ConfigError(
            "engine.overrides: vLLM with the policy's weights in host memory (rollout.memoryBudget too small "
            "for two copies) supports plain LoRA only, not DoRA or lora_bias; drop the override or raise "
            "rollout.memoryBudget"
        )


_INIT_VLLM = "_init_vllm"
"""TRL's VLLMGeneration method that starts vLLM (and, colocated, puts it to sleep)."""


@contextlib.contextmanager
def vllm_start_parked() -> Iterator[None]:
    """While a GRPOTrainer is built: vLLM starts (loads its weights, sizes its KV cache) with the
    policy parked, and the parked policy stays on the VLLMGeneration for `install`."""
    from trl.generation.vllm_generation import VLLMGeneration

    original: Callable[[Any], None] = getattr(VLLMGeneration, _INIT_VLLM)  # TRL leaves it unannotated

    def init_parked(generation: Any) -> None:
        policy = ParkedPolicy(generation.model)
        log.info(
            "policy's frozen weights (%.1f GiB) wait in host memory while vLLM starts and generates",
            policy.host_bytes / 1024**3,
        )
        policy.park()
        try:
            original(generation)
        finally:
            policy.restore()
        generation.parked_policy = policy

    setattr(VLLMGeneration, _INIT_VLLM, init_parked)
    try:
        yield
    finally:
        setattr(VLLMGeneration, _INIT_VLLM, original)


def install(trainer: Any) -> ParkedPolicy:
    """Make a built trainer's colocated vLLM take turns with the policy (see the module's docstring)."""
    generation = trainer.vllm_generation
    policy: ParkedPolicy | None = getattr(generation, "parked_policy", None)
    if policy is None:
        raise RuntimeError("the trainer was not built inside vllm_start_parked()")
    if not generation.enable_sleep_mode:
        raise RuntimeError("parking the policy needs vLLM's sleep mode (its weights freed between rounds)")
    generate = generation.generate

    def sync_weights() -> None:
        import torch

        policy.park()
        llm = generation.llm
        llm.wake_up(tags=["weights"])
        generation._llm_weights_sleeping = False
        model = llm.llm_engine.model_executor.driver_worker.model_runner.model
        # One call with the generator, not one per tensor: vLLM's loaders build a dict of every
        # parameter of the module on each call (O(parameters) a call, ~1,000 calls a round at 4B),
        # and they consume the weights lazily, so one tensor at a time is still on the device.
        model.load_weights(policy.merged_weights())
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        llm.reset_prefix_cache()

    def generate_then_restore(*args: Any, **kwargs: Any) -> Any:
        try:
            return generate(*args, **kwargs)
        finally:
            # TRL's generate ends with vLLM asleep (weights and KV cache freed): the policy's turn.
            policy.restore()

    generation.sync_weights = sync_weights
    generation.generate = generate_then_restore
    return policy
