"""`Job.wait` on a job that has finished, and what the client and a job print as.

The job's body is served by a stand-in for the one API call `wait` makes (`Cluster.job_body`);
the same wait against the real API server is in tests/integration/test_client_traps.py.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from grpo_kubectl.client import GRPOClient, Job, JobFinishedError

UNREACHABLE = (
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
)
SUCCEEDED = {
    "phase": "Succeeded",
    "conditions": [
        {"type": "Running", "status": "False", "reason": "Succeeded"},
        {"type": "Succeeded", "status": "True", "reason": "Succeeded"},
    ],
}


@pytest.fixture
def client(tmp_path: Path) -> GRPOClient:
    path = tmp_path / "config"
    path.write_text(UNREACHABLE)
    return GRPOClient(namespace="team-a", kubeconfig=str(path), workdir=str(tmp_path))


def _serving(client: GRPOClient, monkeypatch: pytest.MonkeyPatch, status: dict[str, Any]) -> Job:
    body = {"metadata": {"name": "short", "namespace": "team-a"}, "status": status}
    monkeypatch.setattr(client.cluster, "job_body", lambda name: body)
    return Job(client, "short")


@pytest.mark.parametrize("condition", ["Running", "Created"])
def test_waiting_for_what_a_succeeded_job_went_through_returns_at_once(condition, client, monkeypatch):
    """The README's `job.wait("Running", timeout=600)` on a job that already succeeded waited out
    all 600 s: it returns the status at once."""
    job = _serving(client, monkeypatch, SUCCEEDED)
    started = time.monotonic()
    assert job.wait(condition, timeout=600, poll=0.05)["phase"] == "Succeeded"
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("condition", ["Suspended", "Restarting", "Failed"])
def test_waiting_for_what_a_succeeded_job_never_will_be_raises_at_once(condition, client, monkeypatch):
    job = _serving(client, monkeypatch, SUCCEEDED)
    started = time.monotonic()
    with pytest.raises(
        JobFinishedError, match=rf"^grpojob short has finished \(Succeeded\): it will not be {condition}$"
    ):
        job.wait(condition, timeout=600, poll=0.05)
    assert time.monotonic() - started < 1


def test_the_client_and_a_job_print_what_they_are(client, tmp_path):
    assert (
        repr(client) == f"GRPOClient(namespace='team-a', server='https://127.0.0.1:1', workdir='{tmp_path}')"
    )
    assert repr(Job(client, "short")) == "Job('short', namespace='team-a')"
