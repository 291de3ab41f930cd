"""The Python client refuses a bad argument or manifest with its own error, in one line.

No API server is needed: each of these is refused before anything is sent (the kubeconfig names a
server nobody listens on, so a call that got as far as the network would fail differently).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from grpo_kubectl.client import GRPOClient, GRPOClientError, Job

UNREACHABLE = (
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
)
JOB = {"apiVersion": "grpo.dev/v1alpha1", "kind": "GRPOJob", "metadata": {"name": "ok"}, "spec": {}}


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "config"
    path.write_text(UNREACHABLE)
    return str(path)


@pytest.fixture
def client(kubeconfig: str) -> GRPOClient:
    return GRPOClient(namespace="team-a", kubeconfig=kubeconfig)


def _refused(call: Any, expected: str) -> GRPOClientError:
    with pytest.raises(GRPOClientError) as raised:
        call()
    message = str(raised.value)
    assert expected in message, message
    assert "\n" not in message
    return raised.value


def _with(**fields: Any) -> dict[str, Any]:
    return {**JOB, **fields}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"namespace": 5}, "namespace: expected a namespace name"),
        ({"namespace": "Team_A"}, "namespace: expected a namespace name"),
        ({"kubeconfig": 5}, "kubeconfig: expected a file path (str or pathlib.Path), got int 5"),
        ({"context": ["prod"]}, "context: expected a non-empty string, got list ['prod']"),
        ({"workdir": 3}, "workdir: expected a file path"),
        ({"workdir": "/no/such/folder"}, "workdir: /no/such/folder is not a folder"),
        ({"reader_image": ""}, "reader_image: expected a non-empty string"),
    ],
    ids=lambda v: ",".join(v) if isinstance(v, dict) else "",
)
def test_a_bad_constructor_argument_is_named(arguments, expected, kubeconfig):
    _refused(lambda: GRPOClient(**{"kubeconfig": kubeconfig, **arguments}), expected)


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (5, "create(job): expected a file path, a manifest dict or a GRPOJob model, got int 5"),
        (None, "create(job): expected a file path, a manifest dict or a GRPOJob model, got NoneType"),
        (b"job.yaml", "got bytes b'job.yaml'"),
        ("job\x00.yaml", "create(job): 'job\\x00.yaml' is not a usable path"),
        (_with(metadata="ok"), "the manifest: metadata: expected a mapping, got str 'ok'"),
        (_with(metadata=["name", "ok"]), "the manifest: metadata: expected a mapping, got list"),
        (_with(spec="fast"), "the manifest: spec: expected a mapping, got str 'fast'"),
        (_with(kind="ConfigMap"), "the manifest: kind 'ConfigMap': expected GRPOJob"),
        (_with(apiVersion="v1"), "the manifest: apiVersion 'v1': expected grpo.dev/v1alpha1"),
        (_with(metadata={"name": 5}), "metadata.name: expected an object name (a string), got int 5"),
        (_with(metadata={"name": "Bad_Name"}), "metadata.name: 'Bad_Name' is not an object name"),
        (
            _with(metadata={"name": "ok", "labels": {1: "x"}}),
            "metadata.labels: the key int 1 is not a string",
        ),
        (
            _with(spec={"model": {"source": {"hf://a"}}}),
            "spec.model.source: set {'hf://a'} is not a JSON value",
        ),
        (_with(spec={"optim": {"lr": math.nan}}), "spec.optim.lr: nan is not a JSON number"),
        (
            _with(metadata={"name": "ok", "namespace": "team-b"}),
            "metadata.namespace 'team-b' is not this client's namespace 'team-a'",
        ),
    ],
    ids=lambda v: repr(v)[:50],
)
def test_a_malformed_job_is_refused_before_anything_is_sent(job, expected, client):
    _refused(lambda: client.create(job), expected)


def test_a_file_whose_metadata_is_not_a_mapping_is_named(client, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: grpo.dev/v1alpha1\nkind: GRPOJob\nmetadata: [ok]\nspec: {}\n")
    _refused(lambda: client.create(path), f"{path}: metadata: expected a mapping, got list ['ok']")
    path.write_text(
        "apiVersion: grpo.dev/v1alpha1\nkind: GRPOJob\nmetadata: {name: ok}\nspec: {at: 2024-01-01}\n"
    )
    _refused(
        lambda: client.create(path), f"{path}: spec.at: date datetime.date(2024, 1, 1) is not a JSON value"
    )


def test_a_bad_name_is_refused(client):
    _refused(lambda: client.create(JOB, name=5), "name: expected an object name (a string), got int 5")
    _refused(lambda: client.get(5), "name: expected an object name (a string), got int 5")
    _refused(lambda: client.get(""), "name: '' is not an object name")
    _refused(lambda: client.get("a/b"), "name: 'a/b' is not an object name")


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            lambda job: job.wait("Running", timeout="600"),
            "timeout: expected a number of seconds, got str '600'",
        ),
        (
            lambda job: job.wait("Running", timeout=math.inf),
            "timeout: expected a number of seconds, got float inf",
        ),
        (lambda job: job.wait("Running", poll=0), "poll: expected more than 0 s, got 0"),
        (lambda job: job.wait("Running", poll=-1.0), "poll: expected more than 0 s, got -1"),
        (lambda job: job.wait(["Running"]), "condition ['Running']: expected one of"),
        (lambda job: job.logs(attempt="2"), "attempt: expected an attempt number (1, 2, ...), got str '2'"),
        (lambda job: job.logs(attempt=0), "attempt: expected an attempt number (1, 2, ...), got int 0"),
        (lambda job: job.logs(attempt=True), "attempt: expected an attempt number"),
        (lambda job: job.logs(poll=None), "poll: expected a number of seconds, got NoneType None"),
        (lambda job: job.plot(5), "path: expected a file path (str or pathlib.Path), got int 5"),
        (lambda job: job.delete(timeout="soon"), "timeout: expected a number of seconds"),
        (lambda job: job.patch("suspend"), "spec: expected a mapping of the fields to change, got str"),
        (lambda job: job.patch({"runPolicy": {"at": object()}}), "spec.runPolicy.at: object <object"),
    ],
    ids=lambda v: "" if callable(v) else v[:40],
)
def test_a_bad_argument_to_a_job_is_named(call, expected, client):
    _refused(lambda: call(Job(client, "ok")), expected)


def test_what_the_shared_pieces_raise_is_the_clients_own_error(client):
    """cluster.py raises the plugin's PluginError; a notebook catches GRPOClientError, and a
    traceback names the class the documentation names."""
    error = _refused(lambda: client.get("ok"), "cannot reach the API server at https://127.0.0.1:1")
    assert type(error).__name__ == "GRPOClientError"
    error = _refused(lambda: list(Job(client, "ok").logs(attempt=1)), "cannot reach the API server")
    assert type(error).__name__ == "GRPOClientError"
