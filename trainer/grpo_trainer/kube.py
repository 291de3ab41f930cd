"""The job's status subresource, patched with the trainer's own narrow credentials.

The operator gives every trainer pod a ServiceAccount whose Role may only `get` and `patch`
`grpojobs/status` of this one job (`resourceNames`). In a pod lightkube finds those credentials
itself; outside a cluster it uses $KUBECONFIG (or an explicit kubeconfig file).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import httpx2
from grpo_operator.api.v1alpha1 import GROUP, KIND, PLURAL, VERSION
from lightkube import ApiError, Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import PatchType

FIELD_MANAGER = "grpo-trainer"
QUIET_LOGGERS = ("httpx", "httpx2")
"""The HTTP clients under lightkube log every request at INFO ("HTTP Request: PATCH ..."), which
the engines' INFO logging lets into the attempt's log: one line per status report. Warnings stay."""
GRPOJobResource = create_namespaced_resource(GROUP, VERSION, KIND, PLURAL)


class StatusWriter(Protocol):
    """Anything that can merge-patch one job's status (the reporter's only dependency on Kubernetes)."""

    def patch_status(self, body: dict[str, Any]) -> None: ...


class KubeStatusWriter:
    """Merge-patches `status` of one GRPOJob through the status subresource."""

    def __init__(self, name: str, namespace: str, kubeconfig: str | None = None, timeout: float = 10.0):
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        for logger in QUIET_LOGGERS:
            quiet = logging.getLogger(logger)
            quiet.setLevel(max(quiet.level, logging.WARNING))
        self.name = name
        self.namespace = namespace
        self._client = Client(
            config=config, namespace=namespace, field_manager=FIELD_MANAGER, timeout=httpx2.Timeout(timeout)
        )

    def patch_status(self, body: dict[str, Any]) -> None:
        # A JSON merge patch touches only the keys it names: the operator's fields stay as they are.
        self._client.patch(
            GRPOJobResource.Status,
            self.name,
            body,
            namespace=self.namespace,
            patch_type=PatchType.MERGE,
        )

    def exists(self) -> bool:
        """Whether the job is there to report to (False on 404; other API errors raise)."""
        try:
            self._client.get(GRPOJobResource.Status, self.name, namespace=self.namespace)
        except ApiError as error:
            if error.status.code == 404:
                return False
            raise
        return True
