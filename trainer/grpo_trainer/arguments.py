"""Command-line value types shared by `grpo-train` and `kubectl grpo` (standard library only, so
the plugin's base install can import it): a bad value is argparse's one-line usage mistake."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A count that starts at 1 (an attempt number)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value
