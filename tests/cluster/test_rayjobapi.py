"""The fake Ray job API answers like Ray, as KubeRay reaches it (absolute URLs through a proxy).

No cluster: each test talks to a server process of its own on a free loopback port.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.rayjobapi import RayJobAPI, RayJobAPIError, succeeds_after

HACK = Path(__file__).resolve().parents[2] / "hack"  # where `python -m rayjobapi` starts
HEAD = "rc-head-svc.team-a.svc.cluster.local:8265"  # a head service in namespace team-a


@pytest.fixture
def server_url() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "rayjobapi", "--listen", "127.0.0.1:0"],
        cwd=HACK,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip().removeprefix("listening on ")
    yield url
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def api(server_url: str) -> RayJobAPI:
    return RayJobAPI(server_url)


def ray(server_url: str, method: str, path: str, body: Any = None, host: str = HEAD) -> tuple[int, Any]:
    """A call as KubeRay's dashboard client makes it: http://<head>/api/..., through HTTP_PROXY."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": server_url}))
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://{host}{path}", data=data, method=method)
    try:
        with opener.open(request, timeout=5) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw.decode()


def submit(server_url: str, submission_id: str, entrypoint: str = "python train.py") -> tuple[int, Any]:
    return ray(server_url, "POST", "/api/jobs/", {"entrypoint": entrypoint, "submission_id": submission_id})


def test_unknown_job_is_404_so_that_kuberay_submits_it(server_url: str) -> None:
    status, _ = ray(server_url, "GET", "/api/jobs/nope")
    assert status == 404


def test_a_submitted_job_follows_its_namespace_timeline(server_url: str, api: RayJobAPI) -> None:
    api.configure_namespace("team-a", succeeds_after(2, "all good"))

    assert submit(server_url, "j1") == (200, {"job_id": "j1", "submission_id": "j1"})
    status, running = ray(server_url, "GET", "/api/jobs/j1")
    assert (status, running["status"], running["end_time"]) == (200, "RUNNING", None)
    deadline = time.monotonic() + 10
    while (done := ray(server_url, "GET", "/api/jobs/j1")[1])["status"] == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.1)

    assert done["status"] == "SUCCEEDED"
    assert done["message"] == "all good"
    assert done["entrypoint"] == "python train.py"
    assert abs(done["end_time"] - done["start_time"] - 2000) <= 1


def test_unconfigured_jobs_run_forever(server_url: str, api: RayJobAPI) -> None:
    submit(server_url, "j1")
    time.sleep(0.2)
    assert ray(server_url, "GET", "/api/jobs/j1")[1]["status"] == "RUNNING"


def test_job_settings_win_over_namespace_settings(server_url: str, api: RayJobAPI) -> None:
    api.configure_namespace("team-a", succeeds_after(0))
    api.configure_job("j2", [("FAILED", 0, "bad config")], logs="Traceback ...")

    submit(server_url, "j1")
    submit(server_url, "j2")

    assert ray(server_url, "GET", "/api/jobs/j1")[1]["status"] == "SUCCEEDED"
    _, failed = ray(server_url, "GET", "/api/jobs/j2")
    assert (failed["status"], failed["message"]) == ("FAILED", "bad config")
    assert ray(server_url, "GET", "/api/jobs/j2/logs") == (200, {"logs": "Traceback ..."})


def test_finish_ends_a_running_job_now(server_url: str, api: RayJobAPI) -> None:
    submit(server_url, "j1")

    api.finish("j1", "FAILED", "preempted")

    _, job = ray(server_url, "GET", "/api/jobs/j1")
    assert (job["status"], job["message"]) == ("FAILED", "preempted")


def test_a_second_submission_with_the_same_id_is_refused_as_ray_does(server_url: str) -> None:
    submit(server_url, "j1")
    status, body = submit(server_url, "j1")
    assert status == 500
    assert "Please use a different submission_id" in body


def test_stop_and_delete(server_url: str) -> None:
    submit(server_url, "j1")
    assert ray(server_url, "DELETE", "/api/jobs/j1")[0] == 400  # Ray deletes only ended jobs

    assert ray(server_url, "POST", "/api/jobs/j1/stop") == (200, {"stopped": True})
    assert ray(server_url, "GET", "/api/jobs/j1")[1]["status"] == "STOPPED"
    assert ray(server_url, "POST", "/api/jobs/j1/stop") == (200, {"stopped": False})

    assert ray(server_url, "DELETE", "/api/jobs/j1") == (200, {"deleted": True})
    assert ray(server_url, "GET", "/api/jobs/j1")[0] == 404


def test_auto_submit_counts_the_first_status_query_as_the_submission(server_url: str, api: RayJobAPI) -> None:
    api.configure_namespace("team-a", auto_submit=True)

    status, job = ray(server_url, "GET", "/api/jobs/from-submitter-pod")

    assert (status, job["status"]) == (200, "RUNNING")
    [seen] = api.jobs("team-a")
    assert seen["auto_submitted"] is True
    assert api.submissions("team-a") == []


def test_requests_are_recorded_per_namespace_and_forgotten_with_it(server_url: str, api: RayJobAPI) -> None:
    submit(server_url, "j1", entrypoint="grpo-train run")
    ray(server_url, "GET", "/api/jobs/x", host="other-head.team-b.svc.cluster.local:8265")

    assert api.submissions("team-a") == [{"entrypoint": "grpo-train run", "submission_id": "j1"}]
    assert [r["path"] for r in api.requests("team-b")] == ["/api/jobs/x"]

    api.forget_namespace("team-a")

    assert api.requests("team-a") == []
    assert api.job("j1") is None
    assert len(api.requests("team-b")) == 1


def test_a_malformed_timeline_is_refused(api: RayJobAPI) -> None:
    with pytest.raises(RayJobAPIError, match="timeline status 'DONE'"):
        api.configure_job("j1", [("DONE", 0)])


def test_the_real_backend_is_refused_without_a_real_head(api: RayJobAPI) -> None:
    with pytest.raises(RayJobAPIError, match="no real Ray head"):
        api.configure_namespace("team-a", backend="real")
    with pytest.raises(RayJobAPIError, match="backend 'ray' is not one of"):
        api.configure_job("j1", backend="ray")  # type: ignore[arg-type]
