"""verl's actor start-up next to the TRL engine's trl, in verl's own code.

verl 0.9.1 patches trl's PPO value-head model in every actor (apply_monkey_patch) whenever trl is
importable; trl 1.16, which the TRL engine pins, no longer has it. On the H200 every verl run died
there. These run verl's own function on the tiny Qwen3-VL in a fresh process, once with the
environment the verl engine gives main_ppo and its Ray workers, once without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from grpo_trainer.engines.verl.trl_shadow import SHADOWS, shadowed_pythonpath, trl_needs_shadow

REPO = Path(__file__).resolve().parents[3]

# What verl's actor does first with the model it loaded (verl/workers/engine/fsdp/transformer_impl.py).
ACTOR_START = """
import sys
from transformers import AutoModelForImageTextToText
from verl.models.transformers.monkey_patch import apply_monkey_patch
model = AutoModelForImageTextToText.from_pretrained(sys.argv[1])
apply_monkey_patch(model, use_remove_padding=False)
import trl
print("trl seen by verl:", trl.__file__)
"""


def _start_actor(model: Path, pythonpath: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    return subprocess.run(
        [sys.executable, "-c", ACTOR_START, str(model)], env=env, capture_output=True, text=True, timeout=300
    )


def test_the_installed_trl_is_the_one_that_breaks_verl(verl_release: str) -> None:
    assert version("trl").startswith("1."), "the TRL engine's pin changed: re-check verl against it"
    assert trl_needs_shadow()


def test_verl_actors_start_with_the_engine_environment(tiny_model: Path) -> None:
    base = os.pathsep.join([str(REPO / "trainer"), str(REPO / "operator")])
    without = _start_actor(tiny_model, base)
    assert without.returncode != 0
    assert "AutoModelForCausalLMWithValueHead" in without.stderr

    shadowed = _start_actor(tiny_model, shadowed_pythonpath({"PYTHONPATH": base}))
    assert shadowed.returncode == 0, shadowed.stderr[-2000:]
    assert f"trl seen by verl: {SHADOWS / 'trl' / '__init__.py'}" in shadowed.stdout
