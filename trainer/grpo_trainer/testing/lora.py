"""The tiny model with the engine's LoRA attached, its adapters drawn like a trained one's.

A freshly attached adapter has B = 0 and changes nothing, so tests of what an adapter does to
generation, merging or the weights vLLM receives draw B at a chosen scale first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def adapted_policy(model_dir: Path, b_std: float, dtype: Any = None, seed: int = 1) -> tuple[Any, Any]:
    """(peft model, processor): the model folder's policy with the engine's LoRA, B ~ N(0, b_std)."""
    import torch
    from peft import LoraConfig, get_peft_model

    from grpo_trainer.engines.trl.runner import load_policy
    from grpo_trainer.engines.trl.settings import TrlSettings, build_trl_config

    dtype = dtype or torch.float32
    model, processor = load_policy(str(model_dir), bf16=False)
    _, lora = build_trl_config(TrlSettings())
    peft_model = get_peft_model(model.to(dtype), LoraConfig(**lora))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.copy_((torch.randn(parameter.shape, generator=generator) * b_std).to(dtype))
    return peft_model, processor
