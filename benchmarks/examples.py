"""The GRPOJobs under examples/, and the one way a benchmark changes one: dotted changes.

The same shape as the tests' helper (tests/support/examples.py), which benchmarks do not import.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from grpo_operator.api.documents import job_document

from .paths import EXAMPLES


def example_document(stem: str) -> dict[str, Any]:
    """The GRPOJob of examples/<stem>.yaml as a dict (a file may hold other documents too)."""
    path = EXAMPLES / f"{stem}.yaml"
    return job_document(path.read_text(), path.name)


def with_changes(document: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of `document` with `changes` applied, in order.

    Each key is a dotted path (`"spec.resources.nodes"`, or one name); a mapping value is merged
    into what is there, None removes the key, any other value replaces it.
    """
    out = copy.deepcopy(dict(document))
    for dotted, value in changes.items():
        node = out
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        _put(node, leaf, value)
    return out


def example_job(stem: str, **changes: Any) -> dict[str, Any]:
    """examples/<stem>.yaml with `changes` (dotted paths, as `with_changes` takes them)."""
    return with_changes(example_document(stem), changes)


def _put(node: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        node.pop(key, None)
    elif isinstance(value, Mapping) and isinstance(node.get(key), dict):
        for inner, inner_value in value.items():
            _put(node[key], inner, inner_value)
    else:
        node[key] = copy.deepcopy(value)
