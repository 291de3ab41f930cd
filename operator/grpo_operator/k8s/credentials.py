"""Who the operator is to the API server: the server's address, its TLS context, the Authorization
header, from where lightkube finds them (the pod's service account, $KUBECONFIG, ~/.kube/config).
"""

from __future__ import annotations

import base64
import os
import ssl
from collections.abc import Callable
from pathlib import Path

from lightkube import KubeConfig
from lightkube.config.client_adapter import verify_cluster

from .transport import proxy_for


class Credentials:
    """The server, its TLS context and the Authorization header, from lightkube's config lookup.

    A token file (a pod's projected service-account token, which the kubelet rotates) is read
    again whenever the server answers 401. Exec plugins and auth providers are not supported:
    the operator runs with a service account, a token or a client certificate.
    """

    def __init__(
        self,
        server: str,
        context: ssl.SSLContext | None,
        header: Callable[[], str | None],
        proxy: str | None = None,
    ) -> None:
        self.server = server
        self.ssl = context
        self._header = header
        self.authorization = header()
        self.proxy = proxy

    def refresh(self) -> None:
        self.authorization = self._header()

    @classmethod
    def from_environment(cls) -> Credentials:
        config = KubeConfig.from_env().get()
        if config is None:
            raise ValueError(
                "no Kubernetes configuration: not in a pod, and no current context in the kubeconfig"
            )
        user = config.user
        if user is not None and (user.exec is not None or user.auth_provider is not None) and not user.token:
            raise ValueError(
                "the kubeconfig's user authenticates with an exec plugin or auth provider, which "
                "grpo-operator does not run; use a service account token or a client certificate"
            )

        def header() -> str | None:
            if user is None:
                return None
            if user.token_file:
                return "Bearer " + Path(config.abs_file(user.token_file)).read_text().strip()
            if user.token:
                return "Bearer " + user.token
            if user.username and user.password:
                return "Basic " + base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
            return None  # a client certificate, in the TLS context

        secure = config.cluster.server.startswith("https:")
        context = verify_cluster(config.cluster, user, config.abs_file) if secure and user else None
        return cls(config.cluster.server, context, header, proxy_for(config.cluster.server, os.environ))
