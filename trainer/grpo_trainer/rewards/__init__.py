"""Reward functions for GRPO runs: built-ins by name, and users' functions from a file.

Each reward module is a verl custom reward (`compute_score(data_source, solution_str,
ground_truth, extra_info=None, **kwargs)`), importable as a package module or loadable by file
path; `get_reward(name)` says where an engine finds it. Importing this package is cheap: sympy is
only ever imported by the worker processes `sympy_pool` starts.
"""

from grpo_trainer.rewards.registry import BUILTIN_REWARDS, CUSTOM_REWARD, RewardSpec, get_reward

__all__ = ["BUILTIN_REWARDS", "CUSTOM_REWARD", "RewardSpec", "get_reward"]
