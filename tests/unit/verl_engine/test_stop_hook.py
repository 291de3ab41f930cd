"""verl's planned-stop hook (engines/verl/stop_hook.py) with verl's own trainer module and logger.

verl 0.9's PPOTrainer cannot train on CPU, so its loop's end is played here in the order
`trainer_base.PPOTrainer.fit` runs it: the step's save when due, then `Tracking.log` (the real
class, console backend, taken from trainer_base's namespace as fit takes it), then the next step.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from grpo_operator.api.contract import StopRequest, stop_request_file, yield_record_file
from grpo_trainer.engines.verl.stop_hook import Yielded, install

trainer_base = pytest.importorskip("verl.trainer.ppo.v1.trainer_base")  # verl is installed by make install


class LoopOnly(trainer_base.PPOTrainer):  # type: ignore[misc, name-defined]
    """verl's trainer class with its loop's bookkeeping only: save, log, next step."""

    def __init__(self, root: Path, save_freq: int, steps: int, ask_at: int, metrics: Path) -> None:
        from omegaconf import OmegaConf

        self.config = OmegaConf.create({"trainer": {"default_local_dir": str(root), "save_freq": save_freq}})
        self.global_steps, self.steps, self.ask_at, self.metrics = 1, steps, ask_at, metrics
        self.saved: list[int] = []
        self.logged: list[int] = []

    def on_step_end(self) -> None:
        return

    def on_sample_end(self) -> None:
        return

    def _save_checkpoint(self) -> None:
        folder = Path(self.config.trainer.default_local_dir)
        (folder / f"global_step_{self.global_steps}").mkdir(parents=True, exist_ok=True)
        (folder / "latest_checkpointed_iteration.txt").write_text(str(self.global_steps))
        self.saved.append(self.global_steps)

    def fit(self, *args: Any) -> None:
        logger = trainer_base.Tracking(project_name="p", experiment_name="e", default_backend=["console"])
        while self.global_steps <= self.steps:
            if self.global_steps == self.ask_at:  # a pod's preStop hook, while this step trains
                now = time.time()
                Path(stop_request_file(str(self.metrics))).write_text(StopRequest(now, now + 600).to_json())
            if self.global_steps % self.config.trainer.save_freq == 0:
                self._save_checkpoint()
            logger.log(data={"training/global_step": self.global_steps}, step=self.global_steps)
            self.logged.append(self.global_steps)
            self.global_steps += 1


def test_a_stop_request_saves_the_step_after_its_log_line_and_ends_the_loop(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics" / "attempt-1.jsonl"
    metrics.parent.mkdir(parents=True)
    hooked = type("Hooked", (LoopOnly,), {})
    assert install(str(metrics), hooked, trainer_base)
    assert install(str(metrics), hooked, trainer_base), "idempotent"
    trainer = hooked(tmp_path / "ckpt", save_freq=4, steps=10, ask_at=3, metrics=metrics)
    with pytest.raises(Yielded):
        trainer.fit()
    assert trainer.saved == [3], "step 3 saved by verl's own save on request (the period is 4)"
    assert trainer.logged == [1, 2], "step 3's line was logged before the stop (by Tracking itself)"
    record = json.loads(Path(yield_record_file(str(metrics))).read_text())
    assert (record["step"], record["stepsLost"], record["reason"]) == (3, 0, "SavedOnStop")
    assert trainer_base.Tracking.__name__ == "Tracking", "verl's logger class is put back"


def test_no_request_no_change_and_a_periodic_save_is_not_made_twice(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics" / "attempt-1.jsonl"
    metrics.parent.mkdir(parents=True)
    hooked = type("Hooked", (LoopOnly,), {})
    install(str(metrics), hooked, trainer_base)
    plain = hooked(tmp_path / "a", save_freq=2, steps=4, ask_at=0, metrics=metrics)
    plain.fit()
    assert (plain.saved, plain.logged) == ([2, 4], [1, 2, 3, 4])
    periodic = hooked(tmp_path / "b", save_freq=2, steps=10, ask_at=4, metrics=metrics)
    with pytest.raises(Yielded):
        periodic.fit()
    assert periodic.saved == [2, 4]
