"""The metric names of the per-step metrics file: what the engines write and the reporter reads.

verl's own names (its file logger writes `{"step": N, "data": {name: value}}` per step); the TRL
engine writes the same names (engines/trl/metrics.py), so the status reporter (progress.py), the
dashboards and the benchmarks read one vocabulary whatever the engine.
"""

from __future__ import annotations

REWARD = "critic/score/mean"
REWARD_STD = "critic/score/std"
REWARDS_MEAN = "critic/rewards/mean"
REWARD_FUNCTION_PREFIX = "critic/rewards/"
"""Per-function reward means: `critic/rewards/<function>/mean`."""
RESPONSE_LENGTH = "response_length/mean"
RESPONSE_LENGTH_MAX = "response_length/max"
RESPONSE_LENGTH_MIN = "response_length/min"
RESPONSE_CLIP_RATIO = "response_length/clip_ratio"
ENTROPY = "actor/entropy"
KL_LOSS = "actor/kl_loss"
REWARD_KL_PENALTY = "actor/reward_kl_penalty"
POLICY_LOSS = "actor/pg_loss"
LOSS = "actor/loss"
GRAD_NORM = "actor/grad_norm"
LEARNING_RATE = "actor/lr"
EPOCH = "training/epoch"
GLOBAL_STEP = "training/global_step"
STEP_SECONDS = "timing_s/step"
THROUGHPUT = "perf/throughput"
"""Tokens per second per device."""
VALIDATION_PREFIX = "val-core/"
"""Validation scores: `val-core/<data_source>/<variable>/mean@N`."""
