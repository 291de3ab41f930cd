"""The trainer-status ValidatingAdmissionPolicy names exactly the operator's status fields."""

from __future__ import annotations

import re

import pytest
from grpo_operator.api.v1alpha1.status import (
    OPERATOR_STATUS_FIELDS,
    TRAINER_STATUS_FIELDS,
    GRPOJobStatus,
)
from support.helm import NAMESPACED, of_kind, render


def _policy(values: dict | None = None) -> dict:
    [policy] = of_kind(render(values), "ValidatingAdmissionPolicy")
    return policy


def test_every_status_field_but_the_trainers_is_held_still() -> None:
    all_fields = {field.alias or name for name, field in GRPOJobStatus.model_fields.items()}
    held = set()
    for validation in _policy()["spec"]["validations"]:
        match = re.fullmatch(
            r"object\.\?status\.\?(\w+) == oldObject\.\?status\.\?(\w+)", validation["expression"]
        )
        assert match, validation["expression"]
        assert match.group(1) == match.group(2)
        held.add(match.group(1))
        assert validation["reason"] == "Forbidden"
    assert held == all_fields - TRAINER_STATUS_FIELDS
    assert held == OPERATOR_STATUS_FIELDS


def test_it_applies_to_trainer_accounts_writing_job_status() -> None:
    spec = _policy()["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": ["grpo.dev"],
            "apiVersions": ["*"],
            "operations": ["UPDATE"],
            "resources": ["grpojobs/status"],
        }
    ]
    [condition] = spec["matchConditions"]
    assert "endsWith('-trainer')" in condition["expression"]


@pytest.mark.parametrize(("values", "namespaces"), [(None, None), (NAMESPACED, ["team-a", "team-b"])])
def test_the_binding_covers_the_namespaces_the_release_serves(
    values: dict | None, namespaces: list[str] | None
) -> None:
    [binding] = of_kind(render(values), "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["policyName"] == _policy(values)["metadata"]["name"]
    if namespaces is None:
        assert "matchResources" not in binding["spec"]
    else:
        [expression] = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        assert expression == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}
