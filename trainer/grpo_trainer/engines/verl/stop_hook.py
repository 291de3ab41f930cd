"""Save, then yield, in verl's trainer loop (0.9's default trainer, `trainer.use_v1=true`).

verl's own forced save, `should_save_ckpt_esi`, sits only in the legacy trainer
(`ray_trainer.RayPPOTrainer.fit`, `trainer.use_v1=false`) and reads a cloud vendor's
capacity-block expiry; 0.9's default trainer (`ppo/v1/trainer_base.PPOTrainer.fit`) has no such
check. Both end every step the same way: the step's metrics go to the tracking logger
(`Tracking.log(data, step)`) before `global_steps` moves on. That call is the lever: after verl has
logged step N, when the attempt's stop request exists (grpo_trainer/stopping.py), the step is
saved with verl's own `_save_checkpoint` (unless verl's period just saved it), the yield record is
written and `Yielded` is raised, which ends verl's driver; the engine reads the record and exits
YIELDED. The step is complete (updated, validated where due, logged) and its dataloader state
saved with it, so the next attempt starts at step N+1.

Installed from the checkpoint callback (engines/verl/callback.py), which verl builds in its driver
(the TaskRunner) before `fit`: `install` wraps `PPOTrainer.fit` to know the trainer, and the
logger class `fit` makes.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import YieldRecord

from ...stopping import AttemptFiles

log = logging.getLogger(__name__)
_INSTALLED = "_grpo_stop_hook"


class Yielded(RuntimeError):  # noqa: N818 (a stop, not an error)
    """verl's loop ends here: the attempt saved its last step on request."""


def _latest_saved(trainer: Any) -> int | None:
    """The step verl's tracker names (latest_checkpointed_iteration.txt), if any."""
    tracker = Path(str(trainer.config.trainer.default_local_dir)) / "latest_checkpointed_iteration.txt"
    try:
        return int(tracker.read_text().strip())
    except (OSError, ValueError):
        return None


def after_log(trainer: Any, files: AttemptFiles, step: int) -> None:
    """At step `step`'s end: nothing, or save it (verl's own save), write the yield record and
    raise Yielded. A save that would not end before the request's deadline is not begun."""
    request = files.stop_requested()
    if request is None:
        return
    saved = _latest_saved(trainer)
    if saved == step:
        record = YieldRecord(step=step, steps_lost=0, requested_at=request.requested_at, saved_at=time.time())
    else:
        if time.time() > request.deadline:
            record = YieldRecord(
                step=saved or 0,
                steps_lost=step - (saved or 0),
                requested_at=request.requested_at,
                reason="SaveWouldNotFit",
            )
        else:
            began = time.perf_counter()
            trainer._save_checkpoint()
            seconds = time.perf_counter() - began
            record = YieldRecord(
                step=step,
                steps_lost=0,
                requested_at=request.requested_at,
                saved_at=time.time(),
                save_seconds=seconds,
            )
    files.write_yield(record)
    log.warning("stopping after step %s as asked (%s): %s", step, record.reason, files.yield_record)
    raise Yielded(f"stopped after step {step} as asked ({record.reason})")


def install(metrics_file: str, trainer_cls: Any = None, tracking_module: Any = None) -> bool:
    """Wrap verl's trainer `fit` and its logger; idempotent. `trainer_cls` / `tracking_module`:
    what to wrap (default: verl 0.9's `PPOTrainer` and the module its `fit` takes `Tracking` from).
    False when this verl has neither."""
    if trainer_cls is None or tracking_module is None:
        try:
            from verl.trainer.ppo.v1 import trainer_base
        except ImportError:
            return False
        trainer_cls = trainer_cls or trainer_base.PPOTrainer
        tracking_module = tracking_module or trainer_base
    # The class's own mark, not an inherited one: a subclass with its own `fit` (a recipe's
    # trainer) is wrapped too when its base already was.
    if vars(trainer_cls).get(_INSTALLED, False):
        return True
    files = AttemptFiles(Path(metrics_file))
    original_fit = trainer_cls.fit
    tracking = tracking_module.Tracking

    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        trainer = self

        class StoppingTracking(tracking):  # type: ignore[misc, valid-type]
            def log(self, data: Any, step: int, *a: Any, **kw: Any) -> Any:
                result = super().log(data, step, *a, **kw)
                # Validation before training logs at step 0: only a trained step is saved.
                if step >= 1 and step == trainer.global_steps:
                    after_log(trainer, files, step)
                return result

        tracking_module.Tracking = StoppingTracking
        try:
            return original_fit(self, *args, **kwargs)
        finally:
            tracking_module.Tracking = tracking

    trainer_cls.fit = fit
    setattr(trainer_cls, _INSTALLED, True)
    return True
