"""Not trl.experimental: see grpo_trainer/engines/verl/trl_shadow.py."""
