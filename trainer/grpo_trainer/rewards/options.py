"""Reading `reward_kwargs` leniently.

The values come from Hydra overrides (`+reward.custom_reward_function.reward_kwargs.timeout_s=3`)
and may arrive as strings or be missing; a bad value falls back to the default rather than
failing every score of a run.
"""

from __future__ import annotations

import math
from typing import Any

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def float_option(options: dict[str, Any], name: str, default: float) -> float:
    try:
        value = float(options.get(name, default))
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) else default


def int_option(options: dict[str, Any], name: str, default: int) -> int:
    try:
        return int(options.get(name, default))
    except (TypeError, ValueError, OverflowError):
        return default


def bool_option(options: dict[str, Any], name: str, default: bool) -> bool:
    value = options.get(name, default)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return default


def str_option(options: dict[str, Any], name: str, default: str) -> str:
    value = options.get(name, default)
    return value if isinstance(value, str) else default
