"""The one name verl 0.9.1 takes from trl: the PPO value-head model, which its FSDP workers patch
(state_dict) whenever trl is importable. GRPO has no value head, so nothing ever builds one."""


class AutoModelForCausalLMWithValueHead:
    """A class for verl to set `state_dict` on; never instantiated by a GRPO run."""
