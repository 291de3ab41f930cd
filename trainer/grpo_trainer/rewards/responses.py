"""Reading model output defensively: whatever the engine hands us becomes a plain string.

Reward functions are called with values straight from the rollout (and, in TRL, from chat-shaped
completions). A reward that raises stops the training step, so every entry point funnels its
input through these helpers instead of trusting the type it was promised.
"""

from __future__ import annotations

import math
import re
from typing import Any

BOXED = "\\boxed{"
_BRACES = re.compile(r"[{}]")


def as_text(value: Any) -> str:
    """`value` as a string: None, NaN and unprintable objects become "", bytes are decoded."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, float) and math.isnan(value):
        return ""
    try:
        return str(value)
    except Exception:
        return ""


def completion_text(completion: Any) -> str:
    """The text of one TRL completion: a string, or a chat list whose first message has "content".

    Mirrors the single-GPU LoRA recipe's `completion[0]["content"] if isinstance(completion, list) else completion`,
    without its failure modes (empty list, missing key, multimodal content parts).
    """
    if isinstance(completion, list | tuple):
        if not completion:
            return ""
        completion = completion[0]
    if isinstance(completion, dict):
        content = completion.get("content")
        if isinstance(content, list | tuple):
            parts = [
                as_text(part.get("text")) if isinstance(part, dict) else as_text(part) for part in content
            ]
            return "".join(parts)
        return as_text(content)
    return as_text(completion)


def last_boxed(text: str, max_chars: int = 1000) -> str | None:
    r"""Content of the last `\boxed{...}` in `text` (nested braces balanced), stripped.

    The same answer mathruler's `extract_boxed_content` (verl's geo3k score) picks, except that an
    unclosed box, or one whose content is longer than `max_chars`, gives None instead of a
    sentinel: scanning stops after `max_chars` so a huge response costs no more than a short one.
    """
    start = text.rfind(BOXED)
    if start < 0:
        return None
    begin = start + len(BOXED)
    window = text[begin : begin + max_chars + 1]
    depth = 0
    for match in _BRACES.finditer(window):
        if match.group() == "{":
            depth += 1
            continue
        depth -= 1
        if depth < 0:
            return window[: match.start()].strip()
    return None
