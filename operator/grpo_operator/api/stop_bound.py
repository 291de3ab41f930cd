"""How long a planned stop may take: the save on stop's bound and the pods' termination grace.

A pod stopped gracefully runs its preStop hook, then gets SIGTERM, and is killed
`terminationGracePeriodSeconds` after the stop began. Within that time the trainer must finish
the step it is on, save it and end, so the grace period is

    grace = save bound + step allowance + margin

- the **save bound**: `spec.checkpoint.saveOnStop.timeoutSeconds`; unset, twice the job's last
  measured save (`status.checkpoint.saveSeconds`) plus 30 s; unmeasured, the engine's default
  (SAVE_DEFAULTS);
- the **step allowance**: the step in progress must end before the save begins: 1.5 times the
  job's last step (`status.metrics.stepSeconds`, rounded up), else the engine's default
  (STEP_DEFAULTS);
- the **margin** (MARGIN_SECONDS): the trainer's last status report (its reporter retries for up to
  30 s) and the hook's own bookkeeping.

The preStop hook waits `grace - margin` seconds at most, and tells the trainer that deadline: a
save that would not end by then is not begun (the previous checkpoint stands). Standard library
only: the operator's builders, the trainer's `plan` and the plugin share it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SAVE_DEFAULTS = {"trl": 120, "verl": 900}
"""Seconds a save may take before one was measured: a LoRA adapter and its optimiser state (trl);
a sharded FSDP actor at a 4B model's size, weights and optimiser, on a network volume (verl)."""
STEP_DEFAULTS = {"trl": 300, "verl": 1200}
"""Seconds to finish the step in progress before one was measured."""
MARGIN_SECONDS = 45
MEASURED_SAVE_FACTOR = 2.0
MEASURED_SAVE_EXTRA = 30
STEP_FACTOR = 1.5


@dataclass(frozen=True)
class StopBound:
    """The parts of a planned stop's time, each with where it came from."""

    save_seconds: int
    save_why: str
    step_seconds: int
    step_why: str
    margin_seconds: int = MARGIN_SECONDS

    @property
    def hook_seconds(self) -> int:
        """How long the pods' preStop hook waits for the trainer: the grace period less the margin."""
        return self.save_seconds + self.step_seconds

    @property
    def grace_seconds(self) -> int:
        """The Ray pods' terminationGracePeriodSeconds."""
        return self.hook_seconds + self.margin_seconds

    def describe(self) -> str:
        return (
            f"{self.grace_seconds} s grace = save {self.save_seconds} s ({self.save_why}) + step "
            f"{self.step_seconds} s ({self.step_why}) + margin {self.margin_seconds} s"
        )

    def as_json(self) -> dict[str, object]:
        """The bound as `grpo-train plan --json` gives it."""
        return {
            "terminationGracePeriodSeconds": self.grace_seconds,
            "preStopSeconds": self.hook_seconds,
            "save": {"seconds": self.save_seconds, "why": self.save_why},
            "step": {"seconds": self.step_seconds, "why": self.step_why},
            "marginSeconds": self.margin_seconds,
        }


def stop_bound(
    engine: str,
    timeout_seconds: int | None,
    measured_save_seconds: float | None = None,
    measured_step_seconds: float | None = None,
) -> StopBound:
    """The bound for a job of `engine` with `spec.checkpoint.saveOnStop.timeoutSeconds`, given the
    job's last measured save and step (its status), when it has them."""
    if timeout_seconds is not None:
        save, save_why = timeout_seconds, "spec.checkpoint.saveOnStop.timeoutSeconds"
    elif _positive(measured_save_seconds):
        assert measured_save_seconds is not None
        save = math.ceil(measured_save_seconds * MEASURED_SAVE_FACTOR) + MEASURED_SAVE_EXTRA
        save_why = (
            f"twice the last save ({measured_save_seconds:.3g} s, status.checkpoint.saveSeconds) + 30 s"
        )
    else:
        save = SAVE_DEFAULTS.get(engine, max(SAVE_DEFAULTS.values()))
        save_why = f"the {engine} engine's default before a save is measured"
    if _positive(measured_step_seconds):
        assert measured_step_seconds is not None
        step = max(1, math.ceil(measured_step_seconds * STEP_FACTOR))
        step_why = f"1.5 x the last step ({measured_step_seconds:.3g} s, status.metrics.stepSeconds)"
    else:
        step = STEP_DEFAULTS.get(engine, max(STEP_DEFAULTS.values()))
        step_why = f"the {engine} engine's default before a step is measured"
    return StopBound(save, save_why, step, step_why)


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0
