"""The models' refusals in our words: the field as `kubectl explain` spells it, what was expected
and what was written (verdict.error_words), never pydantic's "Input should be ..."."""

from __future__ import annotations

import pytest
from grpo_operator.verdict import manifest_problems
from support.examples import with_changes
from support.verdict_cases import BASE


def problems(changes: dict) -> list[str]:
    return [str(p) for p in manifest_problems(with_changes(BASE, changes))]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"spec.resources.tolerations": [{"key": "pool", "operator": "Maybe"}]},
            "spec.resources.tolerations[0].operator: expected 'Exists' or 'Equal', found 'Maybe'",
        ),
        ({"spec.env": [{"value": "1"}]}, "spec.env[0].name: required"),
        (
            {"spec.algorithm.learningRate": -1},
            "spec.algorithm.learningRate: must be greater than 0, found -1",
        ),
        ({"spec.algorithm.learningRate": 2}, "spec.algorithm.learningRate: must be at most 1, found 2"),
        ({"spec.algorithm.groupSize": 1}, "spec.algorithm.groupSize: must be at least 2, found 1"),
        (
            {"spec.dataset.preset": None, "spec.dataset.train": []},
            "spec.dataset.train: must have at least 1 entry, found 0",
        ),
        (
            {"spec.dataset.imageKey": "k" * 64},
            "spec.dataset.imageKey: must have at most 63 characters, found 64",
        ),
    ],
)
def test_a_refused_value_is_named_with_what_was_expected(changes: dict, expected: str) -> None:
    found = problems(changes)
    assert expected in found, found
    assert not any("Input should" in p or "Field required" in p for p in found)
