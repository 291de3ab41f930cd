"""Training engines, one package each behind one protocol (base.py): verl (multi-device GRPO with
vLLM rollouts) and trl (single-device LoRA GRPO)."""
