"""Least-privilege RBAC: exactly what the operator and the cleanup hook do with the API."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from grpo_operator.children.rbac import build_trainer_rbac
from support.helm import NAMESPACE, NAMESPACED, of_kind, only, render, render_text
from support.operator_inputs import EXAMPLES, example_body, job_from

# (API group, resource) -> verbs: the operator's whole use of the API (operator/grpo_operator/k8s/api.py
# and kopf). A change here is a change of the operator's privileges and must be deliberate.
OPERATOR_RULES = {
    ("grpo.dev", "grpojobs"): {"get", "list", "watch"},
    ("grpo.dev", "grpojobs/status"): {"get", "patch"},
    ("grpo.dev", "grpojobs/finalizers"): {"update"},
    ("ray.io", "rayjobs"): {"get", "list", "watch", "create", "patch", "delete"},
    ("", "configmaps"): {"get", "create", "patch"},
    ("", "persistentvolumeclaims"): {"get", "create"},
    ("", "serviceaccounts"): {"get", "create", "patch"},
    ("rbac.authorization.k8s.io", "roles"): {"get", "create", "patch"},
    ("rbac.authorization.k8s.io", "rolebindings"): {"get", "create", "patch"},
    ("networking.k8s.io", "networkpolicies"): {"get", "create", "patch"},
    ("", "events"): {"create", "list"},
    ("", "pods"): {"list"},
}
CLUSTER_WIDE_RULES = {
    ("scheduling.k8s.io", "priorityclasses"): {"get"},
    ("kueue.x-k8s.io", "workloadpriorityclasses"): {"get"},
}
"""What the operator reads only when installed cluster-wide: the classes a job names."""
LEADER_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": ["grpo-grpo-operator"],
        "verbs": ["get", "update"],
    },
]
CLEANUP_RULES = {
    ("grpo.dev", "grpojobs"): {"list", "delete"},
    ("ray.io", "rayjobs"): {"list"},
}
ROLE_KINDS = ("Role", "ClusterRole")


def _grants(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """What a role grants, for roles that name no objects (every role but the Lease's)."""
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "resourceNames" not in rule
        assert "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


def _is_cleanup(doc: dict[str, Any]) -> bool:
    return doc["metadata"]["name"].endswith("-cleanup")


def _is_leader(doc: dict[str, Any]) -> bool:
    return doc["metadata"]["name"].endswith("-leader")


def _is_for_users(doc: dict[str, Any]) -> bool:
    return any(k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in doc["metadata"]["labels"])


def _operator_roles(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d
        for d in of_kind(docs, *ROLE_KINDS)
        if not _is_cleanup(d) and not _is_for_users(d) and not _is_leader(d)
    ]


def test_cluster_wide_grants_exactly_what_the_operator_uses() -> None:
    docs = render()
    roles = _operator_roles(docs)
    assert [r["kind"] for r in roles] == ["ClusterRole"]
    # Cluster-wide, the operator also checks that a job's priorityClassName and Kueue
    # workloadPriorityClass exist.
    assert _grants(roles[0]) == {**OPERATOR_RULES, **CLUSTER_WIDE_RULES}
    bindings = [d for d in of_kind(docs, "ClusterRoleBinding") if not _is_cleanup(d) and not _is_leader(d)]
    assert len(bindings) == 1
    assert bindings[0]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": roles[0]["metadata"]["name"],
    }
    account = next(d for d in of_kind(docs, "ServiceAccount") if not _is_cleanup(d))
    assert bindings[0]["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]
    deployment = of_kind(docs, "Deployment")[0]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]


def test_reading_secrets_is_granted_only_when_asked_for() -> None:
    """`get` on Secrets is every value in every watched namespace: only rbac.checkSecrets adds it,
    for the preflight's check that each Secret a job names exists and holds its key."""
    for values, namespaced in (
        ({"rbac": {"checkSecrets": True}}, False),
        (
            {"rbac": {"checkSecrets": True, "clusterWide": False, "namespaces": ["team-a"]}},
            True,
        ),
    ):
        roles = _operator_roles(render(values))
        assert roles
        for role in roles:
            extra = {} if namespaced else CLUSTER_WIDE_RULES
            assert _grants(role) == {**OPERATOR_RULES, **extra, ("", "secrets"): {"get"}}


def test_namespaced_grants_the_same_only_in_the_listed_namespaces() -> None:
    docs = render(NAMESPACED)
    cluster_wide = [d for d in of_kind(docs, "ClusterRole", "ClusterRoleBinding") if not _is_for_users(d)]
    assert not cluster_wide, "namespaced mode must grant the operator nothing cluster-wide"
    roles = _operator_roles(docs)
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    for role in roles:
        assert role["kind"] == "Role"
        assert _grants(role) == OPERATOR_RULES
    bindings = [d for d in of_kind(docs, "RoleBinding") if not _is_cleanup(d) and not _is_leader(d)]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    for binding in bindings:
        assert binding["roleRef"]["kind"] == "Role"
        assert binding["subjects"][0]["namespace"] == NAMESPACE


@pytest.mark.parametrize("values", [None, NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_leader_election_may_touch_only_the_releases_lease(values: dict | None) -> None:
    docs = render(values)
    [role] = [d for d in of_kind(docs, *ROLE_KINDS) if _is_leader(d)]
    assert role["kind"] == "Role"
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == LEADER_RULES
    [binding] = [d for d in of_kind(docs, "RoleBinding") if _is_leader(d)]
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    settings = yaml.safe_load(only(docs, "ConfigMap", "-settings")["data"]["settings.yaml"])
    assert (settings["leaseNamespace"], settings["leaseName"]) == (NAMESPACE, "grpo-grpo-operator")


def test_the_cleanup_hook_may_only_delete_jobs() -> None:
    for values, kind in ((None, "ClusterRole"), (NAMESPACED, "Role")):
        roles = [d for d in of_kind(render(values), *ROLE_KINDS) if _is_cleanup(d)]
        assert roles, "no cleanup role rendered"
        for role in roles:
            assert role["kind"] == kind
            assert _grants(role) == CLEANUP_RULES


@pytest.mark.parametrize("values", [None, NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_no_wildcards_anywhere(values: dict | None) -> None:
    for role in of_kind(render(values), *ROLE_KINDS):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert "*" not in rule.get(field, []), f"{role['metadata']['name']}: {field} has '*'"
                assert not any("*" in item for item in rule.get(field, []) if item)


@pytest.mark.parametrize("values", [None, NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_every_rule_says_why(values: dict | None) -> None:
    """Each rule in the rendered roles is preceded by a comment line (the template's)."""
    for text in render_text(values).split("\n---\n"):
        doc = yaml.safe_load(text)
        if not doc or doc["kind"] not in ROLE_KINDS:
            continue
        lines = text.splitlines()
        rule_lines = [i for i, line in enumerate(lines) if re.match(r"^\s*- apiGroups:", line)]
        assert len(rule_lines) == len(doc["rules"])
        for i in rule_lines:
            assert lines[i - 1].lstrip().startswith("#"), (
                f"{doc['metadata']['name']}: no comment above {lines[i]!r}"
            )


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_operator_holds_what_it_grants_each_trainer(example) -> None:
    """The API server lets the operator create the trainer's Role only if it holds every grant."""
    operator = OPERATOR_RULES
    for manifest in build_trainer_rbac(job_from(example_body(example))):
        if manifest["kind"] != "Role":
            continue
        for rule in manifest["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    held = operator.get((group, resource), set())
                    assert set(rule["verbs"]) <= held, (
                        f"trainer gets {rule['verbs']} on {resource}; operator holds {held}"
                    )


USER_ROLES = {
    "grpo-grpo-operator-editor": (
        {"edit", "admin"},
        {
            ("grpo.dev", "grpojobs"): {
                "get",
                "list",
                "watch",
                "create",
                "update",
                "patch",
                "delete",
                "deletecollection",
            },
            ("grpo.dev", "grpojobs/status"): {"get"},
        },
    ),
    "grpo-grpo-operator-logreader": (
        {"edit", "admin"},
        {
            ("grpo.dev", "grpojobs"): {"get"},
            ("", "persistentvolumeclaims"): {"get"},
            ("", "pods"): {"create", "get", "delete"},
            ("", "pods/log"): {"get"},
        },
    ),
    "grpo-grpo-operator-viewer": (
        {"view"},
        {
            ("grpo.dev", "grpojobs"): {"get", "list", "watch"},
            ("grpo.dev", "grpojobs/status"): {"get", "list", "watch"},
        },
    ),
}


@pytest.mark.parametrize("values", [None, NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_user_roles_join_the_built_in_edit_and_view(values: dict | None) -> None:
    roles = {d["metadata"]["name"]: d for d in of_kind(render(values), "ClusterRole") if _is_for_users(d)}
    assert set(roles) == set(USER_ROLES)
    for name, (aggregates, grants) in USER_ROLES.items():
        labels = roles[name]["metadata"]["labels"]
        joined = {
            k.rsplit("-", 1)[-1]
            for k, v in labels.items()
            if k.startswith("rbac.authorization.k8s.io/aggregate-to-") and v == "true"
        }
        assert joined == aggregates
        assert _grants(roles[name]) == grants
    # Bound by the cluster's own edit/view bindings: the chart binds them to no one.
    assert not [
        b
        for b in of_kind(render(values), "ClusterRoleBinding", "RoleBinding")
        if b["roleRef"]["name"] in roles
    ]


def test_user_roles_can_be_left_out() -> None:
    assert not [d for d in of_kind(render({"rbac": {"userRoles": False}}), "ClusterRole") if _is_for_users(d)]
