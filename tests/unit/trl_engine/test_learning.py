"""The learning test (CPU size): GRPO through the engine learns to see; the frozen control cannot.

Chance here is the blind optimum, 1/4 (always naming one colour). The full run must climb far
above it; the control, identical but for the vision layers frozen and their output detached,
must stay near it. The GPU version (benchmarks/trl_learning.py) holds the 0.9 target.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trl  # noqa: F401  (the trl-cpu extra; make install brings it, CI never skips)
from grpo_trainer.testing.colour_task import blind_optimum
from grpo_trainer.testing.learning import CI_PLAN, build_model_dir, run_colour_grpo, window_mean

WINDOW = 10


def best_window(curve: list[float]) -> float:
    return max(window_mean(curve[: i + 1], WINDOW) for i in range(WINDOW - 1, len(curve)))


@pytest.mark.slow
def test_grpo_learns_to_see_and_the_frozen_control_does_not(tmp_path: Path) -> None:
    model_dir = build_model_dir(tmp_path, CI_PLAN)

    curve, result = run_colour_grpo(tmp_path, model_dir, CI_PLAN, vision=True)
    assert len(curve) == CI_PLAN.steps
    assert window_mean(curve[:WINDOW], WINDOW) < blind_optimum()  # starts at or below chance
    assert best_window(curve) >= 0.85, curve
    assert window_mean(curve, WINDOW) >= 0.8, curve
    # Gradients reached the vision encoder itself, not only the projector.
    vision_b = [
        p for n, p in result.trainer.model.named_parameters() if ".visual.blocks." in n and "lora_B" in n
    ]
    assert vision_b
    assert all(float(p.detach().abs().max()) > 0 for p in vision_b)

    control, _ = run_colour_grpo(tmp_path, model_dir, CI_PLAN, vision=False)
    assert best_window(control) <= blind_optimum() + 0.15, control
