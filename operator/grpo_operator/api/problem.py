"""One problem with a GRPOJob: the field it is about and what is wrong, in the words a user reads.

Every check returns these — the batch arithmetic (api/batch.py), the CRD's CEL rules evaluated
offline (api/rules.py), the semantic validation (validation.py) and the offline verdict — so a
message reads the same wherever it is shown. Standard library only, like the contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    field: str
    """Where, as `kubectl explain` spells it (spec.algorithm.trainBatchSize)."""
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class ProblemError(ValueError):
    """A pure step that cannot go on for a problem of the job's own (a child that cannot be built
    from its spec): the caller fails the job with it, naming the field, instead of crashing."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def shown(value: Any) -> str:
    """A value a user wrote, as a message quotes it: strings quoted, anything long cut to 40 characters."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


_BOUNDS = {  # pydantic's error type -> our words, and the key of its bound in the error's ctx
    "greater_than": ("greater than", "gt"),
    "greater_than_equal": ("at least", "ge"),
    "less_than": ("less than", "lt"),
    "less_than_equal": ("at most", "le"),
}


def error_words(item: Mapping[str, Any], patterns: Mapping[str, str] | None = None) -> str:
    """One of pydantic's errors (an item of `ValidationError.errors()`) in the words the rest of
    our messages use ("expected ..., found ..."), with the value the user wrote; pydantic's own
    sentence where we have none. `patterns` says each regular expression of the schema in words."""
    kind, ctx = item["type"], item.get("ctx") or {}
    found: Any = item.get("input")  # whatever the user wrote
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required"
    if kind == "string_pattern_mismatch":
        words = (patterns or {}).get(ctx.get("pattern", ""))
        if words:
            return f"expected {words}, found {found!r}"
    if kind in ("literal_error", "enum") and "expected" in ctx:
        return f"expected {ctx['expected']}, found {shown(found)}"
    if kind in _BOUNDS:
        words, bound = _BOUNDS[kind]
        limit = ctx[bound]
        limit = int(limit) if isinstance(limit, float) and limit.is_integer() else limit
        return f"must be {words} {limit}, found {shown(found)}"
    if kind in ("string_too_short", "too_short"):
        return f"must have at least {_count(ctx['min_length'], kind)}, found {len(found)}"
    if kind in ("string_too_long", "too_long"):
        return f"must have at most {_count(ctx['max_length'], kind)}, found {len(found)}"
    return str(item["msg"])


def _count(number: int, kind: str) -> str:
    """A length bound with its unit: a string's characters or a list's entries."""
    one, many = ("character", "characters") if kind.startswith("string") else ("entry", "entries")
    return f"{number} {one if number == 1 else many}"


def error_field(loc: tuple[Any, ...]) -> str:
    """A pydantic location as `kubectl explain` spells the field: spec.env[0].name."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
