"""Is a running job healthy? The trainer's verdict on its metrics, and the operator's on its pace.

Who judges what (docs/architecture.md, "Training health"):

- The trainer sees every step's raw metrics first, including the NaN and infinite values the
  status cannot hold, so it judges them (`grpo_trainer/progress.py`, thresholds from spec.health)
  and writes its verdict into `status.health`, a field only it writes.
- A stall is the one sickness the trainer cannot report: a hung process reports nothing. The
  operator judges it from what the trainer last wrote — when it read its newest step
  (`progress.lastStepAt`) and how long a step takes (`metrics.stepSeconds`) — against the clock,
  on every reconcile (the resync pass comes at least every `resyncSeconds`).
- The operator alone writes conditions: it turns both into `Healthy` and an Event when it flips.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .api.timestamps import parse_rfc3339
from .api.v1alpha1 import GRPOJob
from .api.v1alpha1.status import Progress

HEALTHY = "TrainingHealthy"
STALLED = "Stalled"
UNREADABLE = "UnreadableProgress"
HEALTHY_MESSAGE = "training normally: finite rewards and losses, entropy above its floor, steps arriving"
CLOCK_SKEW = timedelta(minutes=2)
"""How far ahead of the operator's clock a trainer's `progress.lastStepAt` may be and still be read:
nodes' clocks drift by seconds, not minutes. A step stamped further in the future says nothing of
when the trainer last made progress (its node's clock runs ahead), and would keep a hung run
`Healthy` for as long as the clock is ahead: it is read as unreadable (Unknown, and a Warning)."""


@dataclass(frozen=True)
class Verdict:
    healthy: bool | None
    """None: the operator cannot tell (the condition is Unknown)."""
    reason: str
    message: str


def judge(job: GRPOJob, running_since: datetime | None, now: datetime) -> Verdict | None:
    """The verdict on the current attempt, or None before it has reported a step (and once it
    has trained its last one: an export is not a stall).

    `running_since` is when the current attempt started running (its Running condition's
    transition): steps and verdicts from before it belong to an earlier attempt.
    """
    status, limits = job.status, job.spec.health
    trainer = status.health
    if trainer is not None and trainer.attempt == status.attempt and not trainer.healthy:
        return Verdict(False, trainer.reason, trainer.message)
    progress = status.progress
    if progress is None:
        return None
    try:
        last_step = parse_rfc3339(progress.last_step_at)
    except ValueError:
        # The trainer's field, not the operator's: never a failing reconcile, only an Unknown
        # verdict (and a Warning when it turns so) until the trainer writes a time again.
        return Verdict(
            None,
            UNREADABLE,
            f"status.progress.lastStepAt={progress.last_step_at!r} is not an RFC 3339 time: "
            "the stall check is off until the trainer writes one",
        )
    if last_step is None and _trained(progress, status.attempt):
        # The trainer leaves its pace out once the last step is trained: what follows (the
        # export) is not a stall, and the run was healthy to its end.
        return Verdict(True, HEALTHY, HEALTHY_MESSAGE)
    if last_step is None or (running_since is not None and last_step < running_since):
        return None
    if last_step - now > CLOCK_SKEW:
        return Verdict(
            None,
            UNREADABLE,
            f"status.progress.lastStepAt={progress.last_step_at!r} is {(last_step - now).total_seconds() / 60:.0f} "
            "min ahead of the operator's clock (a node whose clock runs ahead?): no evidence of progress, "
            "the stall check is off until the trainer writes a time that is not in the future",
        )
    step_seconds = status.metrics.step_seconds if status.metrics else None
    allowed = max(limits.stall_factor * (step_seconds or 0.0), float(limits.stall_minimum_seconds))
    quiet = (now - last_step).total_seconds()
    if quiet > allowed:
        usual = (
            f"{limits.stall_factor:g} × the last step's {step_seconds:.0f} s" if step_seconds else "a step"
        )
        return Verdict(
            False,
            STALLED,
            f"no step reported for {quiet / 60:.0f} min (since step {progress.step} at {progress.last_step_at}); "
            f"allowed: {allowed / 60:.0f} min ({usual}, at least spec.health.stallMinimumSeconds="
            f"{limits.stall_minimum_seconds})",
        )
    # A healthy attempt has no trainer verdict (an older trainer wrote one with healthy: true).
    # The message names no step, so the condition does not change with every step.
    return Verdict(True, HEALTHY, HEALTHY_MESSAGE)


def at_rest(healthy: dict[str, Any] | None, why: str) -> Verdict | None:
    """The Healthy condition of a job no attempt trains now (suspended): a True verdict said
    "steps arriving", which is no longer so. It stays True (nothing was sick) and says that it is
    not judged; a False or Unknown one stays as it was, the evidence of the attempt that ended."""
    if healthy is None or healthy.get("status") != "True":
        return None
    return Verdict(True, HEALTHY, f"{why}: no attempt is training, so none is judged; none was sick")


def _trained(progress: Progress, attempt: int | None) -> bool:
    """Whether this attempt reported its last step."""
    total = progress.total_steps
    return progress.attempt == attempt and total is not None and progress.step >= total
