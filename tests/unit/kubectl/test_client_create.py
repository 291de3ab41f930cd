"""`GRPOClient.create(path)` applies what the file holds beside its job, as `kubectl apply -f`
does, or refuses the file in one sentence; `kubectl grpo validate -f` counts the same objects.

The API server is a stand-in for the calls create makes (lightkube's create, Cluster.apply); the
same against the real API server is in tests/integration/test_client_traps.py.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_kubectl.cli import main
from grpo_kubectl.client import GRPOClient, GRPOClientError
from grpo_kubectl.cluster import Cluster
from grpo_kubectl.companions import companions

REPO = Path(__file__).resolve().parents[3]
COLOURS = REPO / "examples" / "colours-cpu.yaml"
UNREACHABLE = (
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
)


@pytest.fixture
def client(tmp_path: Path) -> GRPOClient:
    path = tmp_path / "config"
    path.write_text(UNREACHABLE)
    return GRPOClient(namespace="team-a", kubeconfig=str(path))


def _recording(client: GRPOClient, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = []

    def create(obj: Any, *, dry_run: bool = False) -> Any:
        calls.append(("dry run" if dry_run else "create", obj.metadata.name))
        return obj

    monkeypatch.setattr(client.cluster.client, "create", create)
    monkeypatch.setattr(
        client.cluster,
        "apply",
        lambda d: calls.append(("apply", (d["kind"], d["metadata"]["namespace"], d["metadata"]["name"]))),
    )
    monkeypatch.setattr(client.cluster, "no_operator", lambda: None)
    return calls


def test_the_files_reward_configmap_is_applied_with_the_job(client, monkeypatch):
    """create("examples/colours-cpu.yaml") created the job alone, which then waited Pending for
    its reward ConfigMap; `kubectl apply -f` creates both."""
    calls = _recording(client, monkeypatch)
    job = client.create(COLOURS)
    assert job.name == "colours-cpu"
    assert calls == [
        ("dry run", "colours-cpu"),  # the job's verdict first: a refused job leaves nothing behind
        ("apply", ("ConfigMap", "team-a", "colour-reward")),
        ("create", "colours-cpu"),
    ]


def test_a_job_alone_is_created_in_one_call(client, monkeypatch):
    calls = _recording(client, monkeypatch)
    manifest = next(d for d in yaml.safe_load_all(COLOURS.read_text()) if d["kind"] == "GRPOJob")
    client.create(manifest)
    assert calls == [("create", "colours-cpu")]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}},
            "{path} holds a Deployment web beside its GRPOJob: only v1 ConfigMaps, Secrets and "
            "PersistentVolumeClaims with a name are applied with a job; apply the rest with kubectl apply -f",
        ),
        (
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf", "namespace": "other"}},
            "{path}: Secret hf is meant for namespace 'other', not the job's 'team-a': a job reads objects of "
            "its own namespace only",
        ),
    ],
    ids=["foreign-kind", "foreign-namespace"],
)
def test_a_file_create_would_apply_only_in_part_is_refused_before_anything(
    extra, message, client, monkeypatch, tmp_path
):
    calls = _recording(client, monkeypatch)
    path = tmp_path / "job.yaml"
    path.write_text(COLOURS.read_text() + "---\n" + yaml.safe_dump(extra))
    with pytest.raises(GRPOClientError) as refused:
        client.create(path)
    assert str(refused.value) == message.format(path=path)
    assert calls == []


def test_a_stale_operator_is_a_warning_on_create(client, monkeypatch):
    _recording(client, monkeypatch)
    monkeypatch.setattr(client.cluster, "no_operator", lambda: "no operator is running (...)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client.create(COLOURS)
    assert [str(w.message) for w in caught] == [
        "grpojob colours-cpu is created, but no operator is running (...)"
    ]


def test_validate_counts_as_there_what_create_applies(tmp_path, capsys, monkeypatch):
    """validate -f counted a ConfigMap of the file as present whatever create did with it: one
    meant for another namespace, which create refuses, is not there for the job."""
    config = tmp_path / "config"
    config.write_text(UNREACHABLE)
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.setattr(Cluster, "dry_run", lambda self, manifest: None)
    # The claims are there; the reward ConfigMap is not, unless the file brings it.
    monkeypatch.setattr(
        Cluster, "read_object", lambda self, kind, name: {} if kind == "PersistentVolumeClaim" else None
    )
    assert main(["validate", "-f", str(COLOURS), "-n", "team-a"]) == 0
    assert capsys.readouterr().out.startswith("ok: the API server accepts it (dry run), it passes")
    elsewhere = COLOURS.read_text().replace(
        "  name: colour-reward\n", "  name: colour-reward\n  namespace: other\n", 1
    )
    path = tmp_path / "job.yaml"
    path.write_text(elsewhere)
    assert main(["validate", "-f", str(path), "-n", "team-a"]) == 3
    out = capsys.readouterr().out
    assert "ConfigMap 'colour-reward' does not exist in namespace team-a" in out


def test_companions_of_a_json_file_are_none():
    assert companions('{"kind": "GRPOJob"}', "job.json", "team-a").objects == []
