"""A job's Kubernetes identity: its pod's ServiceAccount, as a bound token in a kubeconfig.

A job the real Ray head runs must reach the API server as its pod would: with the token of the
pod's ServiceAccount, so the Role the operator grants that account is what the job may do, and a
missing permission fails here as it would in a real cluster. The token comes from the TokenRequest
API (what ``kubectl create token`` calls), bound to the head pod when KubeRay has made one, so it
stops working when that pod is deleted, as a projected token would.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.authentication_v1 import BoundObjectReference, TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ServiceAccountToken

# A day: the kubelet would refresh a projected token before it expires; nothing refreshes this one.
TOKEN_SECONDS = 24 * 3600


class TokenError(Exception):
    """No token for the ServiceAccount; the message is meant for the RayJob's status."""


@dataclass(frozen=True)
class ApiEndpoint:
    """Where jobs reach the API server: its URL and the CA certificate (PEM) that signs it."""

    server: str
    ca_pem: bytes

    @classmethod
    def from_kubeconfig(cls, path: Path) -> ApiEndpoint:
        config = KubeConfig.from_file(path).get()
        cluster = config.cluster
        if cluster.certificate_auth_data:
            ca = base64.b64decode(cluster.certificate_auth_data)
        elif cluster.certificate_auth:
            ca = Path(config.abs_file(cluster.certificate_auth)).read_bytes()
        else:
            raise ValueError(f"{path}: the cluster has no certificate authority to hand to jobs")
        return cls(server=cluster.server, ca_pem=ca)


def request_token(client: Client, namespace: str, account: str, pod: dict[str, Any] | None) -> str:
    """A token of ``account``, bound to the head pod when there is one."""
    bound = None
    if pod is not None:
        meta = pod["metadata"]
        bound = BoundObjectReference(apiVersion="v1", kind="Pod", name=meta["name"], uid=meta["uid"])
    request = ServiceAccountToken(
        metadata=ObjectMeta(),
        spec=TokenRequestSpec(audiences=[], expirationSeconds=TOKEN_SECONDS, boundObjectRef=bound),
    )
    try:
        granted = client.create(request, account, namespace=namespace)
    except ApiError as error:
        if error.status.code == 404:
            raise TokenError(f"ServiceAccount {namespace}/{account} not found") from error
        raise TokenError(
            f"no token for ServiceAccount {namespace}/{account}: {error.status.message}"
        ) from error
    return granted.status.token


def write_kubeconfig(path: Path, api: ApiEndpoint, token: str, namespace: str, account: str) -> None:
    """A kubeconfig (JSON is YAML) with the token as its only credential and the job's namespace."""
    user = f"system:serviceaccount:{namespace}:{account}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "grpo-local",
                "cluster": {
                    "server": api.server,
                    "certificate-authority-data": base64.b64encode(api.ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": "pod", "context": {"cluster": "grpo-local", "user": user, "namespace": namespace}}
        ],
        "current-context": "pod",
    }
    _write_private(path, json.dumps(config, indent=1).encode())


def write_service_account_files(folder: Path, api: ApiEndpoint, token: str, namespace: str) -> None:
    """The files the ServiceAccount admission plugin projects into every pod that wants them."""
    folder.mkdir(parents=True, exist_ok=True)
    _write_private(folder / "token", token.encode())
    (folder / "ca.crt").write_bytes(api.ca_pem)
    (folder / "namespace").write_text(namespace)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
