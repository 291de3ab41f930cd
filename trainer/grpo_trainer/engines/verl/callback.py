"""verl 0.9's checkpoint hook: tell the reporter about each save the moment verl makes it.

verl instantiates `trainer.checkpoint_callback_class` in its driver (the TaskRunner actor, on any
node) and calls `on_save` after each checkpoint. The reporter runs elsewhere (beside the Ray job's
entrypoint), so the callback appends one JSON line per save to a file next to the attempt's
metrics file, on the shared volume; the reporter tails it. verl 0.7 has no hook: there the reporter
watches `latest_checkpointed_iteration.txt` instead, which also serves as a fallback here.

verl only calls the class (duck typing), so it does not import verl: the module stays importable,
and testable, without torch.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import Env, checkpoint_events_file
from grpo_operator.api.timestamps import rfc3339

log = logging.getLogger(__name__)


class StatusCheckpointCallback:
    """Records each checkpoint save for the job's status; never raises (an exception aborts training)."""

    def __init__(self, config: Any = None) -> None:
        self.config = config
        # verl builds this in its driver before training: the place to hook the planned stop.
        metrics_file = os.environ.get(Env.METRICS_FILE)
        if metrics_file:
            from .stop_hook import install

            if not install(metrics_file):
                log.warning("this verl has no trainer to hook: a planned stop will not save first")

    def on_save(
        self,
        trainer: Any = None,
        global_step: int = 0,
        checkpoint_dir: str = "",
        async_save: bool = False,
        **kwargs: Any,
    ) -> None:
        metrics_file = os.environ.get(Env.METRICS_FILE)
        if not metrics_file:
            return
        event = {
            "step": int(global_step),
            "path": str(checkpoint_dir),
            "savedAt": rfc3339(),
            # With asynchronous saves the shards may still be in flight; the tracker file is
            # written only when they are durable.
            "durable": not async_save,
        }
        try:
            path = Path(checkpoint_events_file(metrics_file))
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(event) + "\n")
        except OSError:
            log.exception("could not record checkpoint step %s for the job's status", global_step)
