"""A stand-in for the Ray dashboard's job API, for a test cluster whose pods run nothing.

The KubeRay operator asks the dashboard on each RayCluster's head service
(``http://<head-svc>.<namespace>.svc.cluster.local:8265``) to submit jobs and for their status.
Under KWOK no dashboard runs, so hack/cluster-up.sh starts the KubeRay operator with
``HTTP_PROXY`` pointing here: this server receives those absolute URLs and answers like Ray would,
following a status timeline that each test controls. Standard library only, so any Python 3.11
starts it.

Ray job API (what KubeRay v1.5.0's dashboard client calls, plus what ``ray job`` adds)::

    POST   /api/jobs/                 submit {"entrypoint", "submission_id", "runtime_env", "metadata", ...}
    GET    /api/jobs/                 list the jobs of this head service
    GET    /api/jobs/<id>             job details (404 when unknown: KubeRay's HTTPMode then submits)
    GET    /api/jobs/<id>/logs        {"logs": "..."}
    POST   /api/jobs/<id>/stop        {"stopped": bool}
    DELETE /api/jobs/<id>             {"deleted": true}; 400 while the job is not terminal
    GET    /api/version               what ``ray job submit`` checks first

Control API, for tests (see tests/support/rayjobapi.py for the client)::

    GET    /_control/healthz
    PUT    /_control/jobs/<id>          {"timeline": [...], "logs": "...", "auto_submit": bool, "backend": ...}
    GET    /_control/jobs[?namespace=]  jobs as this server sees them now
    GET    /_control/jobs/<id>
    PUT    /_control/namespaces/<ns>    {"timeline": [...], "logs": "...", "auto_submit": bool, "backend": ...}
    DELETE /_control/namespaces/<ns>    forget that namespace's jobs, requests and settings
    GET    /_control/requests[?namespace=]  every Ray API request received, with its parsed body
    POST   /_control/reset              forget everything

A timeline is a list of ``[status, seconds]`` or ``[status, seconds, message]``: the job has that
status from that many seconds after the timeline starts (its submission, or the moment a timeline
is put on a job that already exists); before the first step it is PENDING. Settings for a job id
win over settings for its namespace (taken from the head service's host name), which win over
``--default-timeline`` (RUNNING forever). ``auto_submit`` makes an unknown job id count as
submitted on its first GET, as the submitter pod of KubeRay's K8sJobMode would have done.

Backends. A job is ``scripted`` (the timeline above, the default) or ``real``: forwarded to a real
Ray head on loopback that runs its entrypoint (real.py; needs ``--ray-dashboard`` and the
virtualenv's lightkube, and hack/cluster-up.sh passes both). Which one, per field like the other
settings: ``backend`` set for the job id, then for the namespace, then the namespace's label
``grpo.dev/ray-backend`` (``real`` or ``scripted``), then scripted. A job keeps the backend it
was submitted to. A third backend, ``pod`` (pods.py), forwards every request for a head service
to its head pod, where Ray heads run as pods on the real node (hack/node-up.sh).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import secrets
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, parse_qs, urlsplit

if TYPE_CHECKING:  # real.py needs lightkube; a scripted-only server runs on any Python 3.11
    from .real import RealBackend

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
STATUSES = frozenset({"PENDING", "RUNNING"}) | TERMINAL
# Ray's own messages (dashboard/modules/job/job_manager.py), used when a step gives none.
DEFAULT_MESSAGES = {
    "PENDING": "Job has not started yet. It may be waiting for resources to become available.",
    "RUNNING": "Job is currently running.",
    "SUCCEEDED": "Job finished successfully.",
    "FAILED": "Job entrypoint command failed with exit code 1.",
    "STOPPED": "Job was intentionally stopped.",
}
RAY_VERSION = "2.52.0"  # what /api/version claims; nothing here depends on it
MAX_RECORDED_REQUESTS = 10_000
BACKENDS = ("scripted", "real", "pod")


class InvalidRequestError(ValueError):
    """A control or API request that cannot be honoured; answered with HTTP 400."""


@dataclass(frozen=True)
class Step:
    status: str
    at: float
    message: str


Timeline = tuple[Step, ...]


def parse_timeline(raw: Any) -> Timeline:
    if not isinstance(raw, list) or not raw:
        raise InvalidRequestError("timeline must be a non-empty list of [status, seconds(, message)]")
    steps = []
    for entry in raw:
        if not isinstance(entry, list) or len(entry) not in (2, 3):
            raise InvalidRequestError(f"timeline step {entry!r} is not [status, seconds(, message)]")
        status, at, *rest = entry
        if status not in STATUSES:
            raise InvalidRequestError(f"timeline status {status!r} is not one of {sorted(STATUSES)}")
        if not isinstance(at, int | float) or at < 0:
            raise InvalidRequestError(f"timeline offset {at!r} must be a number of seconds >= 0")
        message = rest[0] if rest else DEFAULT_MESSAGES[status]
        steps.append(Step(status, float(at), str(message)))
    return tuple(sorted(steps, key=lambda s: s.at))


@dataclass(frozen=True)
class Settings:
    """What a test configured for one job id or one namespace."""

    timeline: Timeline | None = None
    logs: str | None = None
    auto_submit: bool = False
    backend: str | None = None  # scripted or real; None: decided further down (namespace label)

    @classmethod
    def parse(cls, body: Any) -> Settings:
        if not isinstance(body, dict):
            raise InvalidRequestError("body must be a JSON object")
        unknown = set(body) - {"timeline", "logs", "auto_submit", "backend"}
        if unknown:
            raise InvalidRequestError(f"unknown fields {sorted(unknown)}")
        timeline = parse_timeline(body["timeline"]) if "timeline" in body else None
        backend = body.get("backend")
        if backend is not None and backend not in BACKENDS:
            raise InvalidRequestError(f"backend {backend!r} is not one of {list(BACKENDS)}")
        return cls(
            timeline=timeline,
            logs=body.get("logs"),
            auto_submit=bool(body.get("auto_submit", False)),
            backend=backend,
        )


@dataclass
class Job:
    submission_id: str
    host: str  # head service host:port the job was submitted to ("" when not proxied)
    namespace: str | None
    request: dict[str, Any]  # the submission body as received; {} when auto-submitted
    submitted_at: float
    timeline: Timeline
    timeline_start: float
    logs: str
    auto_submitted: bool
    stopped_at: float | None = None

    def _reached(self, now: float) -> tuple[Step | None, float | None, float | None]:
        """The current step, when the job started RUNNING and when it became terminal (seconds)."""
        current, started, ended = None, None, None
        for step in self.timeline:
            t = self.timeline_start + step.at
            if t > now or (self.stopped_at is not None and t > self.stopped_at):
                break
            current = step
            if step.status == "RUNNING" and started is None:
                started = t
            if step.status in TERMINAL:
                ended = t
                break
        return current, started, ended

    def status(self, now: float) -> tuple[str, str, float | None, float | None]:
        step, started, ended = self._reached(now)
        if self.stopped_at is not None and ended is None:
            return "STOPPED", DEFAULT_MESSAGES["STOPPED"], started, self.stopped_at
        if step is None:
            return "PENDING", DEFAULT_MESSAGES["PENDING"], None, None
        return step.status, step.message, started, ended

    def ray_details(self, now: float) -> dict[str, Any]:
        """The job as Ray's JobDetails model renders it (dashboard/modules/job/pydantic_models.py)."""
        status, message, started, ended = self.status(now)
        return {
            "type": "SUBMISSION",
            "job_id": self.submission_id,
            "submission_id": self.submission_id,
            "driver_info": None,
            "status": status,
            "entrypoint": self.request.get("entrypoint", ""),
            "message": message,
            "error_type": "JOB_ENTRYPOINT_COMMAND_ERROR" if status == "FAILED" else None,
            "start_time": _ms(started) if started is not None else _ms(self.submitted_at),
            "end_time": _ms(ended) if ended is not None else None,
            "metadata": self.request.get("metadata") or {},
            "runtime_env": self.request.get("runtime_env") or {},
            "driver_agent_http_address": None,
            "driver_node_id": None,
            "driver_exit_code": (0 if status == "SUCCEEDED" else 1) if status in TERMINAL else None,
        }

    def control_view(self, now: float) -> dict[str, Any]:
        status, message, _, _ = self.status(now)
        return {
            "backend": "scripted",
            "submission_id": self.submission_id,
            "namespace": self.namespace,
            "host": self.host,
            "status": status,
            "message": message,
            "request": self.request,
            "auto_submitted": self.auto_submitted,
            "submitted_at": self.submitted_at,
            "timeline": [[s.status, s.at, s.message] for s in self.timeline],
            "timeline_start": self.timeline_start,
            "stopped_at": self.stopped_at,
        }


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def namespace_of(host: str) -> str | None:
    """``<svc>.<namespace>.svc.cluster.local:8265`` -> ``<namespace>``; None when not a service name."""
    parts = host.split(":", 1)[0].split(".")
    return parts[1] if len(parts) >= 3 and parts[2] == "svc" else None


@dataclass
class JobStore:
    default_timeline: Timeline
    jobs: dict[str, Job] = field(default_factory=dict)
    job_settings: dict[str, Settings] = field(default_factory=dict)
    namespace_settings: dict[str, Settings] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _seq: int = 0

    # -- what tests see -------------------------------------------------------------------------

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self._seq += 1
            self.requests.append({"seq": self._seq, **entry})
            del self.requests[:-MAX_RECORDED_REQUESTS]

    def settings_for(self, submission_id: str, namespace: str | None) -> Settings:
        """Per-field precedence: job id settings, then namespace settings, then the default."""
        job = self.job_settings.get(submission_id, Settings())
        ns = self.namespace_settings.get(namespace or "", Settings())
        return Settings(
            timeline=job.timeline or ns.timeline or self.default_timeline,
            logs=job.logs if job.logs is not None else ns.logs,
            auto_submit=job.auto_submit or ns.auto_submit,
            backend=job.backend or ns.backend,
        )

    def configure_job(self, submission_id: str, settings: Settings) -> dict[str, Any]:
        now = time.time()
        with self.lock:
            self.job_settings[submission_id] = settings
            job = self.jobs.get(submission_id)
            if job is None:
                return {"submission_id": submission_id, "status": "NOT_SUBMITTED"}
            # A new timeline for a running job starts now: "succeed in 2 s" means from this call.
            if settings.timeline is not None:
                job.timeline, job.timeline_start = settings.timeline, now
            if settings.logs is not None:
                job.logs = settings.logs
            return job.control_view(now)

    def configure_namespace(self, namespace: str, settings: Settings) -> None:
        with self.lock:
            self.namespace_settings[namespace] = settings

    def forget_namespace(self, namespace: str) -> None:
        with self.lock:
            self.namespace_settings.pop(namespace, None)
            for sid in [sid for sid, job in self.jobs.items() if job.namespace == namespace]:
                del self.jobs[sid]
                self.job_settings.pop(sid, None)
            self.requests = [r for r in self.requests if r.get("namespace") != namespace]

    def reset(self) -> None:
        with self.lock:
            self.jobs.clear()
            self.job_settings.clear()
            self.namespace_settings.clear()
            self.requests.clear()

    # -- what Ray would do ----------------------------------------------------------------------

    def submit(self, host: str, submission_id: str, body: dict[str, Any]) -> tuple[HTTPStatus, Any]:
        with self.lock:
            if submission_id in self.jobs:
                # Ray answers 500 with this wording, and KubeRay's client looks for it.
                return HTTPStatus.INTERNAL_SERVER_ERROR, (
                    f"Job with submission_id {submission_id} already exists. "
                    "Please use a different submission_id."
                )
            self._create(submission_id, host, body, auto_submitted=False)
        return HTTPStatus.OK, {"job_id": submission_id, "submission_id": submission_id}

    def _create(self, submission_id: str, host: str, body: dict[str, Any], *, auto_submitted: bool) -> Job:
        namespace = namespace_of(host)
        settings = self.settings_for(submission_id, namespace)
        now = time.time()
        job = Job(
            submission_id=submission_id,
            host=host,
            namespace=namespace,
            request=body,
            submitted_at=now,
            timeline=settings.timeline or self.default_timeline,
            timeline_start=now,
            logs=settings.logs or "",
            auto_submitted=auto_submitted,
        )
        self.jobs[submission_id] = job
        return job

    def get(self, host: str, submission_id: str) -> Job | None:
        with self.lock:
            job = self.jobs.get(submission_id)
            if job is None and self.settings_for(submission_id, namespace_of(host)).auto_submit:
                job = self._create(submission_id, host, {}, auto_submitted=True)
            return job

    def list(self, host: str) -> list[Job]:
        with self.lock:
            return [job for job in self.jobs.values() if job.host == host]

    def stop(self, submission_id: str) -> bool | None:
        """True if stopped now, False if it had already ended, None if unknown."""
        now = time.time()
        with self.lock:
            job = self.jobs.get(submission_id)
            if job is None:
                return None
            if job.status(now)[0] in TERMINAL:
                return False
            job.stopped_at = now
            return True

    def delete(self, submission_id: str) -> HTTPStatus:
        with self.lock:
            job = self.jobs.get(submission_id)
            if job is None:
                return HTTPStatus.NOT_FOUND
            if job.status(time.time())[0] not in TERMINAL:
                return HTTPStatus.BAD_REQUEST
            del self.jobs[submission_id]
            return HTTPStatus.OK


@dataclass(frozen=True)
class Request:
    """One request as the routes see it."""

    server: Server
    host: str  # the head service's host:port for a proxied request, "" for a direct one
    body: Any
    query: dict[str, list[str]]
    submission_id: str | None = None  # the job a Ray API request is about (a new one's, for a submit)

    @property
    def store(self) -> JobStore:
        return self.server.store

    @property
    def real(self) -> RealBackend:
        assert self.server.real is not None
        return self.server.real

    def real_list(self) -> list[dict[str, Any]]:
        return self.server.real.list(self.host) if self.server.real is not None else []


Action = Callable[..., tuple[int, Any]]
Route = tuple[str, str, Action]
"""(method, path pattern, action): ``{name}`` segments of the pattern are passed to the action."""


def route(routes: Sequence[Route], method: str, segments: list[str]) -> tuple[Action, list[str]] | None:
    """The action for a request and the path segments its pattern captures; None when none matches."""
    for verb, pattern, action in routes:
        parts = pattern.split("/")
        if verb != method or len(parts) != len(segments):
            continue
        if all(p == s or p.startswith("{") for p, s in zip(parts, segments, strict=True)):
            return action, [s for p, s in zip(parts, segments, strict=True) if p.startswith("{")]
    return None


# --- the Ray job API, scripted ---------------------------------------------------------------


def _version(request: Request) -> tuple[int, Any]:
    return HTTPStatus.OK, {"version": "4", "ray_version": RAY_VERSION, "ray_commit": "fake"}


def _submit(request: Request) -> tuple[int, Any]:
    assert request.submission_id is not None
    return request.store.submit(request.host, request.submission_id, request.body)


def _list(request: Request) -> tuple[int, Any]:
    """Every job of this head service, of both backends."""
    scripted = [job.ray_details(time.time()) for job in request.store.list(request.host)]
    return HTTPStatus.OK, scripted + request.real_list()


def _details(request: Request, submission_id: str) -> tuple[int, Any]:
    job = request.store.get(request.host, submission_id)
    if job is None:
        return HTTPStatus.NOT_FOUND, f"Job {submission_id} does not exist"
    # The clock is read after the lookup, which may just have created the job.
    return HTTPStatus.OK, job.ray_details(time.time())


def _logs(request: Request, submission_id: str) -> tuple[int, Any]:
    job = request.store.get(request.host, submission_id)
    if job is None:
        return HTTPStatus.NOT_FOUND, f"Job {submission_id} does not exist"
    return HTTPStatus.OK, {"logs": job.logs}


def _stop(request: Request, submission_id: str) -> tuple[int, Any]:
    stopped = request.store.stop(submission_id)
    if stopped is None:
        return HTTPStatus.NOT_FOUND, f"Job {submission_id} does not exist"
    return HTTPStatus.OK, {"stopped": stopped}


def _delete(request: Request, submission_id: str) -> tuple[int, Any]:
    status = request.store.delete(submission_id)
    if status is HTTPStatus.OK:
        return status, {"deleted": True}
    return status, f"Job {submission_id} cannot be deleted: {status.phrase}"


SCRIPTED_ROUTES: tuple[Route, ...] = (
    ("GET", "api/version", _version),
    ("POST", "api/jobs", _submit),
    ("GET", "api/jobs", _list),
    ("GET", "api/jobs/{id}", _details),
    ("GET", "api/jobs/{id}/logs", _logs),
    ("POST", "api/jobs/{id}/stop", _stop),
    ("DELETE", "api/jobs/{id}", _delete),
)


# --- the same calls, answered by the real Ray head (real.py); its HTTP errors pass through ----


def _real_submit(request: Request) -> tuple[int, Any]:
    namespace = namespace_of(request.host)
    if namespace is None or request.submission_id is None:
        return HTTPStatus.BAD_REQUEST, (
            "the real Ray backend takes jobs sent to a head service "
            "(<cluster>-head-svc.<namespace>.svc.cluster.local)"
        )
    return request.real.submit(namespace, request.host, request.submission_id, request.body)


REAL_ROUTES: tuple[Route, ...] = (
    ("GET", "api/version", lambda request: request.real.version()),
    ("POST", "api/jobs", _real_submit),
    ("GET", "api/jobs", _list),
    ("GET", "api/jobs/{id}", lambda request, job_id: request.real.get(job_id)),
    ("GET", "api/jobs/{id}/logs", lambda request, job_id: request.real.logs(job_id)),
    ("POST", "api/jobs/{id}/stop", lambda request, job_id: request.real.stop(job_id)),
    ("DELETE", "api/jobs/{id}", lambda request, job_id: request.real.delete(job_id)),
)


# --- the control API, for tests --------------------------------------------------------------


def _namespace_query(request: Request) -> str | None:
    return request.query.get("namespace", [None])[0]


def _checked(request: Request) -> Settings:
    settings = Settings.parse(request.body)
    if settings.backend == "real" and request.server.real is None:
        raise InvalidRequestError("this server has no real Ray head: start it with --ray-dashboard")
    return settings


def _healthz(request: Request) -> tuple[int, Any]:
    return HTTPStatus.OK, {"ok": True}


def _configure_job(request: Request, submission_id: str) -> tuple[int, Any]:
    settings = _checked(request)
    real = request.server.real
    if real is not None and real.knows(submission_id):
        return HTTPStatus.OK, real.control_view(submission_id)
    return HTTPStatus.OK, request.store.configure_job(submission_id, settings)


def _control_jobs(request: Request) -> tuple[int, Any]:
    store, real, namespace = request.store, request.server.real, _namespace_query(request)
    now = time.time()
    with store.lock:
        jobs = [j.control_view(now) for j in store.jobs.values()]
    jobs = [j for j in jobs if namespace is None or j["namespace"] == namespace]
    return HTTPStatus.OK, jobs + (real.control_views(namespace) if real is not None else [])


def _control_job(request: Request, submission_id: str) -> tuple[int, Any]:
    store, real = request.store, request.server.real
    with store.lock:
        job = store.jobs.get(submission_id)
        view = job.control_view(time.time()) if job else None
    if view is None and real is not None:
        view = real.control_view(submission_id)
    return (HTTPStatus.OK, view) if view else (HTTPStatus.NOT_FOUND, {"error": "not submitted"})


def _configure_namespace(request: Request, namespace: str) -> tuple[int, Any]:
    request.store.configure_namespace(namespace, _checked(request))
    return HTTPStatus.OK, {"namespace": namespace}


def _forget_namespace(request: Request, namespace: str) -> tuple[int, Any]:
    request.store.forget_namespace(namespace)
    if request.server.real is not None:
        request.server.real.forget_namespace(namespace)
    return HTTPStatus.OK, {"namespace": namespace}


def _requests(request: Request) -> tuple[int, Any]:
    namespace = _namespace_query(request)
    with request.store.lock:
        recorded = list(request.store.requests)
    return HTTPStatus.OK, [r for r in recorded if namespace is None or r["namespace"] == namespace]


def _reset(request: Request) -> tuple[int, Any]:
    request.store.reset()
    if request.server.real is not None:
        request.server.real.reset()
    return HTTPStatus.OK, {"reset": True}


CONTROL_ROUTES: tuple[Route, ...] = (
    ("GET", "healthz", _healthz),
    ("PUT", "jobs/{id}", _configure_job),
    ("GET", "jobs", _control_jobs),
    ("GET", "jobs/{id}", _control_job),
    ("PUT", "namespaces/{ns}", _configure_namespace),
    ("DELETE", "namespaces/{ns}", _forget_namespace),
    ("GET", "requests", _requests),
    ("POST", "reset", _reset),
)


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keeps connections alive, as Go's client expects of a proxy.
    protocol_version = "HTTP/1.1"
    server: Server

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        # Proxied requests carry an absolute URL; direct ones only a path.
        url = urlsplit(self.path)
        host = url.netloc if url.scheme else ""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if host and self.server.real is not None and self._backend(host, None) == "pod":
            self._forward_to_pod(method, host, url, raw)
            return
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        segments = [s for s in url.path.split("/") if s]
        request = Request(self.server, host, body, parse_qs(url.query))
        try:
            if segments[:1] == ["_control"]:
                status, payload = self._control(method, segments[1:], request)
            else:
                status, payload = self._ray(method, segments, request)
        except InvalidRequestError as e:
            status, payload = HTTPStatus.BAD_REQUEST, {"error": str(e)}
        except Exception as e:  # answer, as the dashboard would, rather than drop KubeRay's connection
            traceback.print_exc()
            status, payload = HTTPStatus.INTERNAL_SERVER_ERROR, f"the fake Ray job API failed: {e!r}"
        if segments[:1] != ["_control"]:
            self._record(method, host, url, body, int(status))
        self._reply(status, payload)

    def _record(self, method: str, host: str, url: SplitResult, body: Any, status: int, **extra: str) -> None:
        """One request KubeRay made, for the tests' `requests` view."""
        self.server.store.record(
            {
                "time": time.time(),
                "method": method,
                "url": self.path,
                "host": host,
                "namespace": namespace_of(host),
                "path": url.path,
                "body": body,
                "status": status,
                **extra,
            }
        )

    def _forward_to_pod(self, method: str, host: str, url: SplitResult, raw: bytes) -> None:
        from .pods import forward  # lightkube, like the real backend

        path = url.path + (f"?{url.query}" if url.query else "")
        reply = forward(self.server.real.client, host, method, path, raw, dict(self.headers.items()))  # type: ignore[union-attr]
        self._record(method, host, url, None, reply.status, backend="pod")
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def _backend(self, host: str, submission_id: str | None) -> str:
        """scripted or real: where a job already is, else the settings, else the namespace label."""
        real, store = self.server.real, self.server.store
        if real is None:
            return "scripted"
        if submission_id is not None:
            if real.knows(submission_id):
                return "real"
            with store.lock:
                if submission_id in store.jobs:
                    return "scripted"
        namespace = namespace_of(host)
        configured = store.settings_for(submission_id or "", namespace).backend
        return configured or real.namespace_backend(namespace) or "scripted"

    def _ray(self, method: str, segments: list[str], request: Request) -> tuple[int, Any]:
        body = request.body
        submission_id = segments[2] if len(segments) >= 3 and segments[:2] == ["api", "jobs"] else None
        if method == "POST" and segments == ["api", "jobs"]:
            if not isinstance(body, dict):
                return HTTPStatus.BAD_REQUEST, {"error": "body must be a JSON object"}
            if not isinstance(body.get("entrypoint"), str):
                return HTTPStatus.BAD_REQUEST, {"error": "entrypoint is required"}
            submission_id = body.get("submission_id") or f"raysubmit_{secrets.token_hex(8)}"
        request = dataclasses.replace(request, submission_id=submission_id)
        routes = REAL_ROUTES if self._backend(request.host, submission_id) == "real" else SCRIPTED_ROUTES
        found = route(routes, method, segments)
        if found is None:
            return (
                HTTPStatus.NOT_FOUND,
                f"{method} {'/'.join(segments)} is not served by the fake Ray job API",
            )
        action, captured = found
        return action(request, *captured)

    def _control(self, method: str, segments: list[str], request: Request) -> tuple[int, Any]:
        found = route(CONTROL_ROUTES, method, segments)
        if found is None:
            return HTTPStatus.NOT_FOUND, {
                "error": f"no control endpoint {method} /_control/{'/'.join(segments)}"
            }
        action, captured = found
        return action(request, *captured)

    def _reply(self, status: int, payload: Any) -> None:
        if isinstance(payload, str):
            data, content_type = payload.encode(), "text/plain; charset=utf-8"
        else:
            data, content_type = json.dumps(payload).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.log_date_time_string()} {format % args}\n")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], store: JobStore, real: RealBackend | None = None) -> None:
        super().__init__(address, Handler)
        self.store = store
        self.real = real


def real_backend(args: argparse.Namespace) -> RealBackend:
    """The real backend, imported only when asked for: it needs lightkube (the virtualenv)."""
    import logging

    from lightkube import Client
    from lightkube.config.kubeconfig import KubeConfig

    from .credentials import ApiEndpoint
    from .real import Dashboard, RealBackend

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for chatty in ("httpx", "httpx2", "httpcore"):  # one line per API call otherwise
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if not args.kubeconfig or not args.pods_dir:
        raise SystemExit("--ray-dashboard needs --kubeconfig and --pods-dir")
    return RealBackend(
        Dashboard(args.ray_dashboard),
        Client(config=KubeConfig.from_file(args.kubeconfig)),
        ApiEndpoint.from_kubeconfig(args.kubeconfig),
        args.pods_dir,
        args.job_path,
        keep_finished=args.keep_finished,
        watch_interval=args.watch_interval,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", default="127.0.0.1:18265", help="host:port; port 0 picks a free one")
    parser.add_argument(
        "--default-timeline",
        default='[["RUNNING", 0]]',
        help="JSON timeline for jobs nobody configured (default: RUNNING forever)",
    )
    group = parser.add_argument_group("the real backend (real.py)")
    group.add_argument("--ray-dashboard", help="URL of a real Ray head's dashboard; enables the real backend")
    group.add_argument("--kubeconfig", type=Path, help="admin kubeconfig: RayJobs, Secrets, tokens")
    group.add_argument("--pods-dir", type=Path, help="where the head pods' views are built")
    group.add_argument(
        "--job-path", default="", help="folder put first on the jobs' PATH (the virtualenv's bin)"
    )
    group.add_argument("--keep-finished", type=int, default=5, help="view folders of finished jobs kept")
    group.add_argument(
        "--watch-interval", type=float, default=3.0, help="seconds between checks of running jobs"
    )
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    store = JobStore(default_timeline=parse_timeline(json.loads(args.default_timeline)))
    backend = real_backend(args) if args.ray_dashboard else None
    server = Server((host, int(port)), store, backend)
    if backend is not None:
        backend.start_watching()
    # The first line of stdout tells a parent which port was bound (useful with port 0).
    print(f"listening on http://{host}:{server.server_address[1]}", flush=True)
    # SIGTERM (cluster-down) ends the process without a traceback; KubeRay's stops already went
    # to the real head, which cluster-down stops next.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
