"""The client and the plugin against the real API server, where a newcomer fell into a trap:
`create(path)` of an example with its reward ConfigMap created the job alone, and nothing said
that no operator was running (a job then shows `not reconciled yet` for ever).

No operator runs here: the operator's leader Lease is written by the test, renewed long ago or
just now, and named to the plugin with $KUBECTL_GRPO_OPERATOR_LEASE.
"""

from __future__ import annotations

import json
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from grpo_kubectl.client import GRPOClient, JobRefusedError
from support.cluster import Cluster
from support.plugin import kubectl_grpo
from support.plugin import plugin_path as shim_path

REPO = Path(__file__).resolve().parents[2]
COLOURS = REPO / "examples" / "colours-cpu.yaml"


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    cluster.install_crds()


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return shim_path(tmp_path_factory.mktemp("bin"))


def _lease(cluster: Cluster, namespace: str, renewed: datetime) -> None:
    cluster.apply(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "grpo-operator", "namespace": namespace},
            "spec": {
                "holderIdentity": "grpo-operator-7d9f",
                "leaseDurationSeconds": 15,
                "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            },
        }
    )


def test_create_from_a_file_applies_its_reward_configmap(cluster, namespace, crds, monkeypatch):
    monkeypatch.setenv("KUBECTL_GRPO_OPERATOR_LEASE", f"{namespace}/grpo-operator")
    _lease(cluster, namespace, datetime.now(UTC))  # an operator that runs: no warning
    client = GRPOClient(namespace, kubeconfig=str(cluster.kubeconfig))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        job = client.create(COLOURS)
    assert job.name == "colours-cpu"
    # kubectl get leaves out managedFields unless asked: who applied it is the point here.
    shown = cluster.kubectl(
        "get", "configmap", "colour-reward", "-n", namespace, "-o", "json", "--show-managed-fields"
    )
    config = json.loads(shown.stdout)
    expected = next(d for d in yaml.safe_load_all(COLOURS.read_text()) if d and d["kind"] == "ConfigMap")
    assert config["data"] == expected["data"]
    assert [m["manager"] for m in config["metadata"]["managedFields"]] == ["kubectl-grpo"]
    assert [m["operation"] for m in config["metadata"]["managedFields"]] == ["Apply"]
    assert cluster.get("grpojob", "colours-cpu", namespace)["metadata"]["name"] == "colours-cpu"


def test_a_refused_job_leaves_no_configmap_behind(cluster, namespace, crds, tmp_path):
    documents = [d for d in yaml.safe_load_all(COLOURS.read_text()) if d]
    job = next(d for d in documents if d["kind"] == "GRPOJob")
    job["spec"]["resources"]["accelerator"] = "tpu"  # not in the schema's enum
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    client = GRPOClient(namespace, kubeconfig=str(cluster.kubeconfig))
    with pytest.raises(JobRefusedError, match="accelerator"):
        client.create(path)
    assert cluster.kubectl("get", "configmap", "colour-reward", "-n", namespace, check=False).returncode != 0


def test_a_stale_operator_lease_is_said_by_status_list_and_the_client(
    cluster, namespace, crds, plugin_path, monkeypatch
):
    # The age is said to the nearest minute: each reader gets a Lease renewed 41 min 31 s before
    # its call, so "42 min" holds for the 59 s that call may take on a loaded cluster.
    def renewed_42_min_ago() -> None:
        _lease(cluster, namespace, datetime.now(UTC) - timedelta(minutes=41, seconds=31))

    manifest = next(d for d in yaml.safe_load_all(COLOURS.read_text()) if d and d["kind"] == "GRPOJob")
    cluster.apply({**manifest, "metadata": {"name": "waits", "namespace": namespace}})
    said = f"note: no operator is running (its Lease {namespace}/grpo-operator was last renewed 42 min ago)\n"
    monkeypatch.setenv("KUBECTL_GRPO_OPERATOR_LEASE", f"{namespace}/grpo-operator")
    for argv in (["status", "waits"], ["list"]):
        renewed_42_min_ago()
        done = kubectl_grpo(cluster, plugin_path, *argv, "-n", namespace)
        assert done.returncode == 0, done.stderr
        assert done.stderr == said
    client = GRPOClient(namespace, kubeconfig=str(cluster.kubeconfig))
    renewed_42_min_ago()
    assert client.operator_problem() == said.removeprefix("note: ").strip()
    _lease(cluster, namespace, datetime.now(UTC))
    assert kubectl_grpo(cluster, plugin_path, "status", "waits", "-n", namespace).stderr == ""
