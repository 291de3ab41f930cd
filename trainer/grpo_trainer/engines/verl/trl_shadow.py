"""verl's processes must not see the TRL engine's trl.

verl 0.9.1's FSDP workers (verl/models/transformers/monkey_patch.py, verl/utils/model.py) import
`AutoModelForCausalLMWithValueHead` from `trl.experimental.ppo`, or else from `trl`, whenever trl
is importable at all — to patch a PPO critic's state_dict. trl 1.16, which the TRL engine pins and
the trainer image therefore carries, has neither, so every actor fails to start ("cannot import
name 'AutoModelForCausalLMWithValueHead' from 'trl'"; docs/benchmarks/verl-gpu.md). GRPO has no critic, so verl needs the name and never the model.

When the installed trl lacks it, the verl engine puts `shadows/` (a package named trl holding just
that name) first on PYTHONPATH for main_ppo and, through the job's runtime_env, for every Ray
worker. The TRL engine and the rest of the trainer keep the real trl.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

SHADOWS = Path(__file__).resolve().parent / "shadows"


def _has(find_spec: Callable[[str], Any], module: str) -> bool:
    try:
        with warnings.catch_warnings():  # trl.experimental warns on import
            warnings.simplefilter("ignore")
            return find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or fails to import
        return False


def trl_needs_shadow(find_spec: Callable[[str], Any] = importlib.util.find_spec) -> bool:
    """True when trl is installed but has no value-head model where verl looks for it.

    trl up to 0.2x kept it in trl.models.modeling_value_head (exported at the top level), later
    versions in trl.experimental.ppo; trl 1.x removed it.
    """
    if not _has(find_spec, "trl"):
        return False
    return not (_has(find_spec, "trl.experimental.ppo") or _has(find_spec, "trl.models.modeling_value_head"))


def shadowed_pythonpath(environ: Mapping[str, str]) -> str:
    """PYTHONPATH for verl's processes: the shadows first, then whatever the pod already had."""
    rest = environ.get("PYTHONPATH", "")
    return f"{SHADOWS}:{rest}" if rest else str(SHADOWS)
