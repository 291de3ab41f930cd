"""The pod backend: Ray heads that run as pods on the real node (hack/node-up.sh).

KubeRay reaches a head's dashboard at ``<head service>.<namespace>.svc.cluster.local:8265``
through ``HTTP_PROXY``; this host has no cluster DNS and the ClusterIP has no proxy, so for a
namespace labelled ``grpo.dev/ray-backend=pod`` the job API forwards each request as it came
(method, path, body) to the address the Service's Endpoints name: the head pod's IP on the pod
bridge, which this host routes to. KubeRay then talks to the real dashboard in the pod, and
nothing is played or rewritten here.
"""

from __future__ import annotations

import http.client
import logging
from dataclasses import dataclass

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Endpoints

log = logging.getLogger("rayjobapi.pods")
# KubeRay's client gives up after 2 s, and decides what a slow head means; this side waits longer
# so that it never cuts an answer short itself.
FORWARD_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes


def service_address(client: Client, host: str) -> tuple[str, int] | None:
    """The pod IP and port behind ``<svc>.<ns>.svc[.cluster.local][:port]``; None when none is there."""
    name, _, port = host.partition(":")
    parts = name.split(".")
    if len(parts) < 3 or parts[2] != "svc":
        return None
    service, namespace = parts[0], parts[1]
    try:
        endpoints = client.get(Endpoints, service, namespace=namespace)
    except ApiError as error:
        log.info("no endpoints for %s/%s: %s", namespace, service, error.status.message)
        return None
    for subset in endpoints.subsets or []:
        # A head that is starting is not ready yet; Ray's job API may answer already.
        addresses = list(subset.addresses or []) + list(subset.notReadyAddresses or [])
        if addresses:
            return addresses[0].ip, int(port or 80)
    return None


# Headers of one hop only (RFC 9110), never forwarded; the rest go as they came (Ray's dashboard
# fails a request without a User-Agent with a 500).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
    }
)


def forward(client: Client, host: str, method: str, path: str, body: bytes, headers: dict[str, str]) -> Reply:
    """The request, sent to the head pod; a 503 that says why when it cannot be reached."""
    address = service_address(client, host)
    if address is None:
        return Reply(503, "text/plain; charset=utf-8", f"no ready head pod behind {host} yet".encode())
    connection = http.client.HTTPConnection(*address, timeout=FORWARD_TIMEOUT_SECONDS)
    try:
        sent = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}
        connection.request(method, path, body=body or None, headers=sent)
        response = connection.getresponse()
        return Reply(response.status, response.getheader("Content-Type", "application/json"), response.read())
    except OSError as error:
        return Reply(503, "text/plain; charset=utf-8", f"head pod {address[0]} for {host}: {error}".encode())
    finally:
        connection.close()
