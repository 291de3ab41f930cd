"""The GRPOJobs under examples/, and the one way a test changes one: `with_changes`."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grpo_operator.api.documents import job_document

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_FILES = {path.stem: path for path in sorted((REPO / "examples").glob("*.yaml"))}


def example_document(stem: str) -> dict[str, Any]:
    """The GRPOJob of examples/<stem>.yaml as a dict (a file may hold other documents too)."""
    return job_document(EXAMPLE_FILES[stem].read_text(), EXAMPLE_FILES[stem].name)


def with_changes(document: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of `document` with `changes` applied.

    Each key is a dotted path (`"resources.nodes"`, or one name); a mapping value is merged into
    what is there, None removes the key, any other value replaces it.
    """
    out = copy.deepcopy(dict(document))
    for dotted, value in changes.items():
        node = out
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        _put(node, leaf, value)
    return out


def _put(node: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        node.pop(key, None)
    elif isinstance(value, Mapping) and isinstance(node.get(key), dict):
        for inner, inner_value in value.items():
            _put(node[key], inner, inner_value)
    else:
        node[key] = copy.deepcopy(value)
