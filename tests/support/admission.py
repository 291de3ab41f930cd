"""ValidatingAdmissionPolicies a test puts in front of one namespace, to make the real API server
refuse what a test needs refused (a child, a delete), and take away again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from support.cluster import Cluster


@contextmanager
def refusing(
    cluster: Cluster,
    namespace: str,
    *,
    group: str,
    resource: str,
    operations: list[str],
    expression: str,
    message: str,
    probe: list[str],
) -> Iterator[None]:
    """While inside, `namespace` refuses `resource` requests for which `expression` is false.

    `probe` is a kubectl command (without the namespace) that the policy must refuse: it is retried
    until it is, because a new policy takes a moment to reach the API server's admission chain.
    """
    name = f"test-{namespace}"[:63]
    cluster.apply(
        [
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {
                        "resourceRules": [
                            {
                                "apiGroups": [group],
                                "apiVersions": ["*"],
                                "operations": operations,
                                "resources": [resource],
                            }
                        ]
                    },
                    "validations": [{"expression": expression, "message": message, "reason": "Invalid"}],
                },
            },
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {
                    "policyName": name,
                    "validationActions": ["Deny"],
                    "matchResources": {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                    },
                },
            },
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while cluster.kubectl(*probe, "-n", namespace, check=False).returncode == 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"the test policy {name} did not take effect in 30 s")
            time.sleep(0.5)
        yield
    finally:
        cluster.kubectl("delete", "validatingadmissionpolicybinding", name, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found", check=False)
