"""What a ServiceAccount may do, asked the way an admin would: `kubectl auth can-i --as=...`.

Every answer comes from the API server's authorizer (a SubjectAccessReview per question), so it
covers the chart's roles, their bindings, the subjects' names and namespaces together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from support.cluster import Cluster

# The verbs RBAC knows for ordinary resources; "exactly what it needs" means every one of these
# that the operator does not use is refused.
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True)
class Access:
    verb: str
    resource: str
    """As kubectl names it: plural[.group]."""
    subresource: str = ""
    namespace: str | None = None
    """None: at cluster scope (for a namespaced resource, in every namespace at once)."""

    def __str__(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        where = f"in {self.namespace}" if self.namespace else "cluster-wide"
        return f"{self.verb} {self.resource}{sub} {where}"


def accesses(
    rules: Mapping[tuple[str, str], Iterable[str]], namespace: str | None, verbs: Iterable[str] = VERBS
) -> dict[Access, bool]:
    """For each resource of ``rules`` ((group, resource[/sub]) -> verbs) and each of ``verbs``:
    whether the rules grant it."""
    out: dict[Access, bool] = {}
    for (group, resource), granted in rules.items():
        plural, _, sub = resource.partition("/")
        name = f"{plural}.{group}" if group else plural
        for verb in verbs:
            out[Access(verb, name, sub, namespace)] = verb in granted
    return out


def granted(rules: Mapping[tuple[str, str], Iterable[str]], namespace: str | None) -> list[Access]:
    """Every access ``rules`` grant, asked in ``namespace``."""
    return [access for access, allowed in accesses(rules, namespace).items() if allowed]


def can_i(cluster: Cluster, user: str, access: Access) -> bool:
    args = ["auth", "can-i", access.verb, access.resource, f"--as={user}"]
    if access.subresource:
        args.append(f"--subresource={access.subresource}")
    args += ["--namespace", access.namespace] if access.namespace else ["--all-namespaces"]
    result = cluster.kubectl(*args, check=False)
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), f"kubectl {' '.join(args)}: {result.stdout}{result.stderr}"
    return answer == "yes"


def wrong_answers(cluster: Cluster, user: str, expected: Mapping[Access, bool]) -> list[str]:
    """Each access whose answer is not the expected one, readably; [] when all agree."""
    wanted = list(expected.items())
    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(lambda item: can_i(cluster, user, item[0]), wanted))
    return [
        f"{user} {'can' if answer else 'cannot'} {access}, expected {'can' if allowed else 'cannot'}"
        for (access, allowed), answer in zip(wanted, answers, strict=True)
        if answer != allowed
    ]


def assert_access(cluster: Cluster, user: str, expected: Mapping[Access, bool]) -> None:
    wrong = wrong_answers(cluster, user, expected)
    assert not wrong, f"{len(wrong)} of {len(expected)} answers are wrong:\n" + "\n".join(wrong)


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def never_granted(namespace: str) -> dict[Access, bool]:
    """A sample of what the operator must not be able to do anywhere."""
    namespaced = [
        Access("get", "secrets", namespace=namespace),
        Access("list", "secrets", namespace=namespace),
        Access("create", "pods", namespace=namespace),
        Access("delete", "pods", namespace=namespace),
        Access("create", "pods", "exec", namespace=namespace),
        Access("create", "serviceaccounts", "token", namespace=namespace),
        Access("impersonate", "serviceaccounts", namespace=namespace),
        Access("create", "rayclusters.ray.io", namespace=namespace),
        Access("delete", "rayclusters.ray.io", namespace=namespace),
        Access("create", "deployments.apps", namespace=namespace),
        Access("create", "jobs.batch", namespace=namespace),
        Access("escalate", "roles.rbac.authorization.k8s.io", namespace=namespace),
        Access("bind", "roles.rbac.authorization.k8s.io", namespace=namespace),
        Access("delete", "events", namespace=namespace),
    ]
    cluster_scoped = [
        Access("list", "secrets"),
        Access("create", "clusterroles.rbac.authorization.k8s.io"),
        Access("create", "clusterrolebindings.rbac.authorization.k8s.io"),
        Access("create", "customresourcedefinitions.apiextensions.k8s.io"),
        Access("delete", "customresourcedefinitions.apiextensions.k8s.io"),
        Access("list", "nodes"),
        Access("create", "namespaces"),
        Access("delete", "namespaces"),
    ]
    return dict.fromkeys([*namespaced, *cluster_scoped], False)
