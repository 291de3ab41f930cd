"""The single-device LoRA engine: TRL's GRPOTrainer with peft, the third seed's recipe by default.

`settings` (pure) decides what runs; `runner` runs it. Only `settings`, `metrics`, `checkpoints`
and `failures` import without torch, so the spec mapping is testable anywhere.
"""

from typing import Any

from .failures import ExitCode, classify
from .settings import TrlSettings, build_trl_config, settings_with

__all__ = ["ExitCode", "TrlSettings", "build_trl_config", "classify", "run_job", "settings_with"]


def run_job(job: Any, attempt: Any) -> int:
    """`grpo-train run` for `engine: trl` (imported lazily: it needs the API models)."""
    from .job import run_job as run

    return run(job, attempt)
