"""Hydra command-line overrides, written so that Hydra reads back exactly the value we meant.

An override is `key=value` in Hydra's own grammar, not a shell word: an unquoted `1e-6` is a float,
`true` a bool, `a,b` a sweep, and `${x}` an interpolation. Every value we emit goes through
`render`, which quotes whatever would not survive as itself; a property test parses the result
with Hydra's parser.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

# Characters Hydra accepts in an unquoted string that cannot change its type or meaning.
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./@+-]*")
_KEYWORDS = frozenset({"true", "false", "null", "nan", "inf", "on", "off", "yes", "no"})


@dataclass(frozen=True)
class Override:
    """One Hydra override and, for `grpo-train plan`, the reason it is there."""

    key: str
    value: Any
    add: bool = False
    """Prefix with `+`: the key does not exist in verl's config and is added."""
    why: str = ""

    def render(self) -> str:
        return f"{'+' if self.add else ''}{self.key}={render(self.value)}"


def render(value: Any) -> str:
    """A Python value as a Hydra override value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot pass a non-finite number to verl: {value}")
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(render(item) for item in value) + "]"
    if isinstance(value, str):
        return _render_string(value)
    raise TypeError(f"no Hydra form for {type(value).__name__}")


def _render_string(text: str) -> str:
    if _PLAIN.fullmatch(text) and text.lower() not in _KEYWORDS:
        return text
    return "'" + _escape_quoted(text) + "'"


def _escape_quoted(text: str) -> str:
    """Escape for a single-quoted Hydra string.

    Hydra needs backslashes doubled only where they precede a quote or end the string, quotes
    preceded by a backslash, and `${` escaped so OmegaConf does not treat it as an interpolation.
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\":
            j = i
            while j < len(text) and text[j] == "\\":
                j += 1
            run = text[i:j]
            at_quote_or_end = j == len(text) or text[j] == "'" or text.startswith("${", j)
            out.append(run * 2 if at_quote_or_end else run)
            i = j
        elif text[i] == "'":
            out.append("\\'")
            i += 1
        elif text.startswith("${", i):
            out.append("\\${")
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)
