"""benchmarks/trl_offpolicy.py's arithmetic: the importance weights TRL gives each sequence, the
ones its `sequence_mask` drops, the size of a 60-step adapter, the peaking search and the verdict
of the learning test. The GPU parts run on the GPU machine (issue 66); these run anywhere."""

from __future__ import annotations

import math

import pytest

from benchmarks import trl_offpolicy as op


def test_a_sequences_log_weight_sums_its_tokens_up_to_its_end() -> None:
    policy = [[-1.0, -2.0, -3.0], [-0.5, -0.5, -9.0]]
    sampler = [[-1.5, -2.0, -2.0], [-0.5, -1.0, -0.1]]
    # The second sequence ended after two tokens: its third (padding) counts nothing.
    assert op.sequence_log_ratios(policy, sampler, [3, 2]) == pytest.approx([-0.5, 0.5])


def test_trls_sequence_mask_drops_a_weight_over_three_and_with_no_lower_bound_keeps_any_below() -> None:
    ratios = [math.log(2.9), math.log(3.1), math.log(1e-6), 0.0]
    assert op.masked(ratios) == [False, True, False, False]
    assert op.masked(ratios, clip_max=3.0, clip_min=1 / 3) == [False, True, True, False]
    assert op.masked(ratios, clip_max=None) == [False, False, False, False]


def test_what_a_path_reports() -> None:
    summary = op.path_summary([0.0, 0.1, 2.0, -3.0], [0.01, 0.03], [1.0, 3.0])
    assert summary["masked_fraction"] == 0.25  # e^2 = 7.4 > 3
    assert summary["masked_fraction_if_clip_min_1_over_3"] == 0.5  # e^-3 = 0.05 < 1/3
    assert summary["log_ratio"]["q0"] == -3.0
    assert summary["log_ratio"]["q100"] == 2.0
    assert summary["log_ratio"]["q50"] == pytest.approx(0.05)
    assert summary["mean_abs_token_log_ratio"] == pytest.approx(0.02)
    assert summary["policy_entropy_nats"] == 2.0


def test_quantiles_interpolate() -> None:
    assert op.quantiles([3.0, 1.0, 2.0, 4.0], (0.0, 0.5, 1.0)) == {"q0": 1.0, "q50": 2.5, "q100": 4.0}


def test_a_60_step_adapter_moves_at_most_the_schedules_sum_of_learning_rates() -> None:
    # Warmup over 6 steps (0, 1/6, ..., 5/6), then a cosine over 54 from 1 down towards 0.
    warmup = sum(step / 6 for step in range(6))
    cosine = sum(0.5 * (1 + math.cos(math.pi * k / 54)) for k in range(54))
    assert op.recipe_update_bound() == pytest.approx(5e-6 * (warmup + cosine))
    assert op.recipe_update_bound() == pytest.approx(1.5e-4)  # 30 steps at the full rate: half of 60
    assert op.recipe_update_bound(learning_rate=1.0, steps=1, warmup_ratio=0.0) == 1.0


def test_peaking_finds_the_scale_that_meets_the_entropy_target() -> None:
    def entropy(scale: float) -> float:  # falls with the scale, as the logits sharpen
        return 11.4 / scale

    scale = op.peak(entropy, 1.0)
    assert entropy(scale) == pytest.approx(1.0, rel=1e-3)
    assert entropy(scale) <= 1.0
    assert op.peak(entropy, 20.0) == 1.0  # already below the target: left as it is


def test_the_learning_verdict_holds_the_chosen_path_to_eagers_last_window() -> None:
    eager = {"curves": {"vision LoRA": [0.0] * 190 + [0.92] * 10}}
    assert op.learning_verdict({"vision_last_window_mean": 0.91}, eager)["learns_as_eager"]
    verdict = op.learning_verdict({"vision_last_window_mean": 0.85}, eager)
    assert verdict == {
        "eager_last_window_mean": pytest.approx(0.92),
        "chosen_last_window_mean": 0.85,
        "learns_as_eager": False,
    }


def test_eagers_recorded_learning_test_is_what_the_verdict_reads() -> None:
    import json

    eager = json.loads(op.EAGER_LEARNING.read_text())
    assert op.learning_verdict({"vision_last_window_mean": 0.92}, eager)["eager_last_window_mean"] == (
        pytest.approx(0.921)
    )
