"""The kind backend itself (hack/kind-up.sh, ``make e2e-kind``): the suite really talks to a kind
cluster made from the node image of hack/kind-node-image.sh, with its control plane, CoreDNS,
kube-proxy and kindnet (hack/kind/node/kindnet.yaml) running from the images made here.

Collected only with ``GRPO_TEST_CLUSTER=kind`` (marker ``kind_backend``, tests/conftest.py): the
other backends have no kind node. The node is cordoned so the suite's pods go to the KWOK pools;
the pods here name it in ``nodeName``, which the scheduler and the cordon do not apply to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster

pytestmark = [pytest.mark.kind_backend, pytest.mark.cluster]

HACK = Path(__file__).resolve().parents[2] / "hack"


def _versions() -> dict[str, str]:
    """The pinned versions the node image was built from (hack/versions.env and its siblings)."""
    values = {}
    for path in (HACK / "versions.env", HACK / "node" / "versions.env", HACK / "kind" / "versions.env"):
        for line in path.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.startswith("#"):
                values[key.strip()] = value.strip()
    return values


VERSIONS = _versions()


def _kind_node(cluster: Cluster) -> dict[str, Any]:
    nodes = cluster.get("nodes")["items"]
    kind_nodes = [n for n in nodes if "node-role.kubernetes.io/control-plane" in n["metadata"]["labels"]]
    assert len(kind_nodes) == 1, [n["metadata"]["name"] for n in nodes]
    return kind_nodes[0]


def test_the_api_server_is_a_kind_node_of_images_made_here(cluster: Cluster) -> None:
    node = _kind_node(cluster)
    name = node["metadata"]["name"]
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == VERSIONS["KUBERNETES_VERSION"]
    # Debian bookworm's containerd, not the one kind's own base image builds.
    assert info["containerRuntimeVersion"].startswith("containerd://1.6."), info
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
    assert ready == "True"
    assert node["spec"].get("unschedulable") is True, "hack/kind-up.sh cordons the kind node"

    tags = {
        "kube-apiserver": VERSIONS["KUBERNETES_VERSION"],
        "kube-controller-manager": VERSIONS["KUBERNETES_VERSION"],
        "kube-scheduler": VERSIONS["KUBERNETES_VERSION"],
        "etcd": VERSIONS["ETCD_VERSION"],
    }
    for component, tag in tags.items():
        pod = cluster.get("pod", f"{component}-{name}", "kube-system")
        assert pod is not None, f"no static pod {component}-{name}"
        assert pod["status"]["phase"] == "Running", (component, pod["status"])
        assert pod["spec"]["containers"][0]["image"] == f"grpo-local/{component}:{tag}"
    # The API server the suite talks to is that static pod: it reports the same version.
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert version["gitVersion"] == VERSIONS["KUBERNETES_VERSION"]

    # DaemonSets without a node selector also put (fake) pods on the KWOK nodes: the kind node's
    # own pod is the one that runs.
    pods = cluster.get("pods", namespace="kube-system")["items"]
    for daemonset, image in (
        ("kube-proxy", f"grpo-local/kube-proxy:{VERSIONS['KUBERNETES_VERSION']}"),
        ("kindnet", f"grpo-local/kube-network-policies:{VERSIONS['KUBE_NETWORK_POLICIES_VERSION']}"),
    ):
        ds = cluster.get("daemonset", daemonset, "kube-system")
        images = [c["image"] for c in ds["spec"]["template"]["spec"]["containers"]]
        assert image in images
        (pod,) = [
            p
            for p in pods
            if p["spec"].get("nodeName") == name
            and any(o.get("name") == daemonset for o in p["metadata"].get("ownerReferences", []))
        ]
        statuses = pod["status"].get("containerStatuses", [])
        assert statuses, (daemonset, pod["status"])
        assert all(c["ready"] for c in statuses), (daemonset, pod["status"])
    coredns = cluster.get("deployment", "coredns", "kube-system")
    assert coredns["spec"]["template"]["spec"]["containers"][0]["image"] == (
        f"grpo-local/coredns:{VERSIONS['COREDNS_VERSION']}"
    )
    assert coredns["status"].get("readyReplicas", 0) >= 1, coredns["status"]
