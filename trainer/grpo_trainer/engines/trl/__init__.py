"""The single-device LoRA engine: TRL's GRPOTrainer with peft, the third seed's recipe by default.

`settings` (pure) decides what runs; `runner` runs it. Only `settings`, `metrics`, `checkpoints`
and `failures` import without torch, so the spec mapping is testable anywhere.
"""

from .failures import ExitCode, classify
from .settings import TrlSettings, build_trl_config, settings_with

__all__ = ["ExitCode", "TrlSettings", "build_trl_config", "classify", "settings_with"]
