"""The operator's API client (grpo_operator.k8s) against the real API server: every call the
reconciler makes, the errors it maps, and a rotated service-account token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.configmap import build_spec_configmap
from grpo_operator.children.pvc import build_checkpoint_pvc
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.config import load_settings
from grpo_operator.k8s import Api, ApiError
from support.cluster import Cluster
from support.jobs import example

from .test_reporter import crds  # noqa: F401  (fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]


@pytest.fixture
def api(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Api:
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    return Api.from_environment("grpo-operator-test")


def new_job(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    body = example("geo3k-ascend-910b")
    body["metadata"] = {"name": name, "namespace": namespace}
    cluster.apply(body)
    return cluster.get("grpojob", name, namespace)


async def test_every_call_the_reconciler_makes(cluster: Cluster, namespace: str, api: Api) -> None:
    body = new_job(cluster, namespace, "client")
    job = GRPOJob.model_validate(body)
    settings = load_settings(environ={})
    try:
        got = await api.get_job(namespace, "client")
        assert got is not None
        assert got["metadata"]["uid"] == body["metadata"]["uid"]
        assert await api.get_job(namespace, "missing") is None
        assert [j["metadata"]["name"] for j in await api.list_jobs([namespace])] == ["client"]
        assert "client" in [j["metadata"]["name"] for j in await api.list_jobs([])]

        await api.patch_job_status(namespace, "client", {"phase": "Pending", "attempt": 1})
        await api.patch_job_status(namespace, "client", {"attempt": 2})
        status = cluster.get("grpojob", "client", namespace)["status"]
        assert (status["phase"], status["attempt"]) == ("Pending", 2), "a merge patch keeps other fields"

        configmap = build_spec_configmap(job, settings)
        await api.apply(configmap)
        await api.apply(configmap)  # server-side apply is idempotent
        applied = cluster.get("configmap", configmap["metadata"]["name"], namespace)
        assert applied["data"] == configmap["data"]

        claim = build_checkpoint_pvc(job, settings)
        assert claim is not None
        await api.create(claim)
        with pytest.raises(ApiError) as exists:
            await api.create(claim)
        assert exists.value.code == 409
        stored = await api.read(claim)
        assert stored is not None
        assert stored["metadata"]["labels"]["grpo.dev/job"] == "client"
        assert await api.read({**claim, "metadata": {**claim["metadata"], "name": "missing"}}) is None
        assert await api.claim_access_modes(namespace, claim["metadata"]["name"]) == ["ReadWriteOnce"]
        assert await api.claim_access_modes(namespace, "missing") == []

        rayjob = build_rayjob(job, settings, attempt=1)
        assert await api.get_rayjob(namespace, rayjob["metadata"]["name"]) is None
        await api.apply(rayjob, first=True)
        got_rayjob = await api.get_rayjob(namespace, rayjob["metadata"]["name"])
        assert got_rayjob is not None
        assert got_rayjob["metadata"]["ownerReferences"][0]["uid"] == body["metadata"]["uid"]
        await api.delete_rayjob(namespace, rayjob["metadata"]["name"])
        await api.delete_rayjob(namespace, "missing-1")  # 404 is fine

        await api.post_event(body, "Normal", "ClientTest", "posted by the operator's client")
        events = cluster.kubectl(
            "get", "events", "-n", namespace, "--field-selector", "reason=ClientTest", "-o", "yaml"
        ).stdout
        assert "posted by the operator's client" in events

        bad = {**configmap, "metadata": {**configmap["metadata"], "name": "Not_A_Name"}}
        with pytest.raises(ApiError) as refused:
            await api.apply(bad)
        assert refused.value.code == 422
        assert "Not_A_Name" in refused.value.message
    finally:
        await api.close()


async def test_a_rotated_token_is_read_again(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    """In a pod the kubelet rewrites the token file; a 401 makes the client read it again."""
    cluster.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": namespace}}
    )
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "reader-view", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        }
    )
    token = cluster.kubectl("create", "token", "reader", "-n", namespace, "--duration=10m").stdout.strip()
    source = yaml.safe_load(cluster.kubeconfig.read_text())
    context = next(c for c in source["contexts"] if c["name"] == source["current-context"])["context"]
    server = next(c for c in source["clusters"] if c["name"] == context["cluster"])["cluster"]
    if "certificate-authority" in server and not Path(server["certificate-authority"]).is_absolute():
        server = {
            **server,
            "certificate-authority": str(cluster.kubeconfig.parent / server["certificate-authority"]),
        }
    token_file = tmp_path / "token"
    token_file.write_text("expired-token")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": server}],
                "users": [{"name": "reader", "user": {"tokenFile": str(token_file)}}],
                "contexts": [{"name": "reader", "context": {"cluster": "test", "user": "reader"}}],
                "current-context": "reader",
            }
        )
    )

    def client() -> Api:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("KUBECONFIG", str(kubeconfig))
            return Api.from_environment("grpo-operator-test")

    api = client()
    token_file.write_text(token)  # the kubelet rotated it after the client read the old one
    try:
        assert await api.claim_access_modes(namespace, "missing") == []
    finally:
        await api.close()

    token_file.write_text("revoked-token")
    api = client()
    try:
        with pytest.raises(ApiError) as refused:
            await api.claim_access_modes(namespace, "missing")
        assert refused.value.code == 401, "a token that stays bad is reported, not retried forever"
    finally:
        await api.close()
