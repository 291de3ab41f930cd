"""Client for the fake Ray job API (hack/rayjobapi/server.py) that the KubeRay operator talks to.

Under KWOK no Ray head runs; KubeRay's calls to ``http://<head-svc>.<ns>.svc.cluster.local:8265``
reach that server through ``HTTP_PROXY``. Tests decide what Ray "does" with each job: a status
timeline, logs, and whether an unknown job id counts as submitted. They read back every request
KubeRay sent (submissions with their entrypoint, stops, deletes).

A timeline is a sequence of ``(status, seconds)`` or ``(status, seconds, message)`` steps, status one
of PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED. It starts when the job is submitted, or when it is
put on a job that already exists. Unconfigured jobs run forever (``RUNNING_FOREVER``).

Which submission mode to use:
- ``submissionMode: HTTPMode``: KubeRay POSTs the job to the API itself (entrypoint, runtime_env,
  metadata all recorded) and follows the timeline for as long as it says. The suite relies on it.
- ``K8sJobMode`` (KubeRay's default): the submitter pod is a KWOK pod that "completes" at once without
  submitting anything. Configure ``auto_submit=True`` so that the first status query counts as the
  submission, and make the timeline end within 30 s: KubeRay fails such a RayJob 30 s after its
  submitter finished unless the job API reports a terminal state by then.

Backends: a job is ``scripted`` (the timeline, the default) or ``real``: the server forwards it to a
real Ray head on loopback, which runs the entrypoint in a folder that mirrors the head pod
(hack/rayjobapi/real.py; GRPO_WORKDIR, KUBECONFIG). Choose with ``backend="real"`` on a namespace
or a job id, or label the namespace ``grpo.dev/ray-backend=real``. A real job's view (``job``,
``jobs``) adds ``phase``, ``real_id``, ``rayjob``, ``workdir`` and ``kubeconfig``.

Usage::

    api.configure_namespace(namespace, succeeds_after(2))
    ... create a RayJob (HTTPMode) in `namespace`, wait for it to be Complete ...
    [submission] = api.submissions(namespace)
    assert submission["entrypoint"] == "grpo-train run --spec /etc/grpo/spec.json"

    api.configure_job(rayjob_status_job_id, [("RUNNING", 0), ("FAILED", 1, "OOM")])
    api.finish(job_id, "SUCCEEDED")   # from now on
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import quote, urlencode

Step = tuple[str, float] | tuple[str, float, str]
Timeline = Sequence[Step]
Backend = Literal["scripted", "real"]

RUNNING_FOREVER: Timeline = (("RUNNING", 0),)


def succeeds_after(seconds: float, message: str = "Job finished successfully.") -> Timeline:
    return (("RUNNING", 0), ("SUCCEEDED", seconds, message))


def fails_after(seconds: float, message: str = "Job entrypoint command failed with exit code 1.") -> Timeline:
    return (("RUNNING", 0), ("FAILED", seconds, message))


class RayJobAPIError(RuntimeError):
    pass


class RayJobAPI:
    """Control client of one fake Ray job API server.

    Methods:
        healthy() -> bool
        configure_job(submission_id, timeline=None, *, logs=None, auto_submit=False, backend=None) -> dict
        configure_namespace(namespace, timeline=None, *, logs=None, auto_submit=False, backend=None) -> None
        finish(submission_id, status="SUCCEEDED", message=None) -> dict
        job(submission_id) -> dict | None
        jobs(namespace=None) -> list[dict]
        requests(namespace=None) -> list[dict]
        submissions(namespace=None) -> list[dict]
        wait_for_job(namespace, timeout=60.0) -> dict
        forget_namespace(namespace) -> None
        reset() -> None

    A job, as ``job``/``jobs``/``wait_for_job`` return it: ``submission_id``, ``namespace``,
    ``host`` (head service host:port), ``status`` and ``message`` now, ``request`` (the submission
    body: ``entrypoint``, ``runtime_env``, ``metadata``, ``entrypoint_resources``, ...; empty when
    auto-submitted), ``auto_submitted``, ``timeline``, ``submitted_at``, ``stopped_at``.
    A request, as ``requests`` returns it: ``seq``, ``time``, ``method``, ``url``, ``host``,
    ``namespace``, ``path``, ``body`` (parsed JSON, text or None), ``status`` (the HTTP answer).
    """

    def __init__(self, base_url: str, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        # Never through a proxy: the server is on loopback, whatever HTTP_PROXY the tests inherit.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _call(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> Any:
        url = f"{self.base_url}/_control/{path}"
        if query:
            url += "?" + urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            if e.code == 404 and method == "GET":
                return None
            raise RayJobAPIError(f"{method} {url}: {e.code} {e.read().decode(errors='replace')}") from e

    def healthy(self) -> bool:
        try:
            return bool(self._call("GET", "healthz"))
        except (OSError, RayJobAPIError):
            return False

    @staticmethod
    def _settings(
        timeline: Timeline | None, logs: str | None, auto_submit: bool, backend: Backend | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"auto_submit": auto_submit}
        if timeline is not None:
            body["timeline"] = [list(step) for step in timeline]
        if logs is not None:
            body["logs"] = logs
        if backend is not None:
            body["backend"] = backend
        return body

    def configure_job(
        self,
        submission_id: str,
        timeline: Timeline | None = None,
        *,
        logs: str | None = None,
        auto_submit: bool = False,
        backend: Backend | None = None,
    ) -> dict[str, Any]:
        """Settings for one job id (before or after its submission); wins over its namespace's."""
        body = self._settings(timeline, logs, auto_submit, backend)
        return self._call("PUT", f"jobs/{quote(submission_id)}", body)

    def configure_namespace(
        self,
        namespace: str,
        timeline: Timeline | None = None,
        *,
        logs: str | None = None,
        auto_submit: bool = False,
        backend: Backend | None = None,
    ) -> None:
        """Settings for every job submitted to a head service in this namespace."""
        body = self._settings(timeline, logs, auto_submit, backend)
        self._call("PUT", f"namespaces/{quote(namespace)}", body)

    def finish(
        self, submission_id: str, status: str = "SUCCEEDED", message: str | None = None
    ) -> dict[str, Any]:
        """End a submitted job now with SUCCEEDED, FAILED or STOPPED."""
        step: Step = (status, 0) if message is None else (status, 0, message)
        return self.configure_job(submission_id, [step])

    def job(self, submission_id: str) -> dict[str, Any] | None:
        return self._call("GET", f"jobs/{quote(submission_id)}")

    def jobs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "jobs", query={"namespace": namespace} if namespace else None)

    def requests(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "requests", query={"namespace": namespace} if namespace else None)

    def submissions(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Bodies of the job submissions (POST /api/jobs/) that the API accepted, oldest first."""
        return [
            r["body"]
            for r in self.requests(namespace)
            if r["method"] == "POST" and r["path"].rstrip("/") == "/api/jobs" and r["status"] == 200
        ]

    def wait_for_job(self, namespace: str, timeout: float = 60.0) -> dict[str, Any]:
        """The first job submitted from ``namespace``, waiting for it up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.jobs(namespace)
            if jobs:
                return jobs[0]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no Ray job was submitted from namespace {namespace} in {timeout} s")
            time.sleep(0.5)

    def forget_namespace(self, namespace: str) -> None:
        self._call("DELETE", f"namespaces/{quote(namespace)}")

    def reset(self) -> None:
        self._call("POST", "reset")
