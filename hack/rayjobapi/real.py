"""Jobs that the fake Ray job API hands to a real Ray head on loopback, so their entrypoint runs.

server.py routes a job here when a test or a namespace label asks for the real backend. KubeRay
still talks to server.py as if it were the head pod's dashboard; this module turns each of its calls
into one to the real head's job API (``ray start --head`` by hack/cluster-up.sh):

- submit: answered at once, as Ray answers, with the job PENDING. In the background the head pod's
  view is built (podview.py: volumes, environment, the ServiceAccount's token), then the job goes to
  the real head with the original entrypoint, its submission id mapped to ``<namespace>_<id>`` (one
  head serves every namespace), and ``runtime_env.env_vars`` = the pod's environment, the RayJob's
  own env_vars, ``GRPO_WORKDIR`` (the view's root), ``KUBECONFIG`` and a PATH with the virtualenv
  first. KubeRay waits at most 2 s for an answer, which building the view and Ray's first
  submission can exceed; and KubeRay v1.5.0 retries a failed submission forever without failing
  the RayJob. So a view that cannot be built (RayJob not found, claim unbound, Secret missing)
  makes the job FAILED, with the reason as its message, the way Ray fails a job whose runtime env
  cannot be set up; KubeRay copies that message into the RayJob's status.
- get, list, logs, stop, delete, version: forwarded, ids mapped back; the answers show the
  submission as KubeRay sent it (its own runtime_env and metadata, not what was added here).

KubeRay stops a job through the API only when its RayJob is deleted; on suspend it just deletes the
RayCluster. So a watcher checks every few seconds that the RayJob and RayCluster of each running job
still exist, stops the job when either is gone or being deleted, and prunes the view folders of
finished jobs, keeping the newest few for debugging.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Namespace

from .credentials import ApiEndpoint
from .podview import PodView, PodViewError, RayCluster, RayJob, materialise

log = logging.getLogger("rayjobapi.real")

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
BACKEND_LABEL = "grpo.dev/ray-backend"
BACKENDS = ("scripted", "real", "pod")
LABEL_CACHE_SECONDS = 5.0
# A job's phases on this side: preparing -> submitting -> submitted, or failed / stopped before
# the real head got it. Submitted jobs answer from the real head.
PREPARING = "preparing"
SUBMITTING = "submitting"
SUBMITTED = "submitted"
FAILED = "failed"
STOPPED = "stopped"
PREPARING_MESSAGE = "Job has not started yet: the local Ray backend is preparing the head pod's view."
STOPPED_MESSAGE = "Job was intentionally stopped."


class Dashboard:
    """The real head's job API: plain HTTP on loopback, never through a proxy."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(HTTP status, parsed JSON or text); 503 when the head cannot be reached."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except OSError as e:
            return HTTPStatus.SERVICE_UNAVAILABLE, f"the local Ray head at {self.url} cannot be reached: {e}"
        try:
            return status, json.loads(raw)
        except json.JSONDecodeError:
            return status, raw.decode(errors="replace")


@dataclass
class RealJob:
    submission_id: str  # as KubeRay knows it
    namespace: str
    host: str
    request: dict[str, Any]  # the submission body as KubeRay sent it
    submitted_at: float
    phase: str = PREPARING
    message: str = ""  # why it failed or was stopped here
    view: PodView | None = None
    stop_requested: bool = False
    status: str | None = None  # the last status the real head reported
    ended_at: float | None = None

    @property
    def real_id(self) -> str:
        """The id on the real head. Kubernetes names have no ``_``, so the split stays readable."""
        return f"{self.namespace}_{self.submission_id}"

    @property
    def ended(self) -> bool:
        return self.phase in (FAILED, STOPPED) or self.ended_at is not None

    def local_details(self) -> dict[str, Any]:
        """Ray's JobDetails for a job the real head has not (or never) got."""
        if self.phase == FAILED:
            status, message = "FAILED", self.message
        elif self.phase == STOPPED or self.stop_requested:
            status, message = "STOPPED", self.message or STOPPED_MESSAGE
        else:
            status, message = "PENDING", PREPARING_MESSAGE
        return {
            "type": "SUBMISSION",
            "job_id": None,
            "submission_id": self.submission_id,
            "driver_info": None,
            "status": status,
            "entrypoint": self.request.get("entrypoint", ""),
            "message": message,
            # Ray's nearest kind: the job never started because its environment could not be made.
            "error_type": "RUNTIME_ENV_SETUP_FAILED" if status == "FAILED" else None,
            "start_time": int(self.submitted_at * 1000),
            "end_time": int(self.ended_at * 1000) if self.ended_at else None,
            "metadata": self.request.get("metadata") or {},
            "runtime_env": self.request.get("runtime_env") or {},
            "driver_agent_http_address": None,
            "driver_node_id": None,
            "driver_exit_code": None,
        }

    def as_sent(self, details: dict[str, Any]) -> dict[str, Any]:
        """The real head's JobDetails with the submission as KubeRay sent it."""
        return {
            **details,
            "submission_id": self.submission_id,
            "metadata": self.request.get("metadata") or {},
            "runtime_env": self.request.get("runtime_env") or {},
        }


class RealBackend:
    """The jobs routed to the real head, the calls KubeRay makes about them, and their watcher."""

    def __init__(
        self,
        dashboard: Dashboard,
        client: Client,
        api: ApiEndpoint,
        pods_dir: Path,
        job_path: str,
        *,
        keep_finished: int = 5,
        watch_interval: float = 3.0,
    ) -> None:
        self.dashboard = dashboard
        self.client = client
        self.api = api
        self.pods_dir = pods_dir
        self.job_path = job_path
        self.keep_finished = keep_finished
        self.watch_interval = watch_interval
        self.jobs: dict[str, RealJob] = {}
        self.lock = threading.Lock()
        self._labels: dict[str, tuple[float, str | None]] = {}
        self._closing = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="real-jobs-watcher", daemon=True)

    # -- routing ---------------------------------------------------------------------------------

    def knows(self, submission_id: str) -> bool:
        with self.lock:
            return submission_id in self.jobs

    def namespace_backend(self, namespace: str | None) -> str | None:
        """The namespace's ``grpo.dev/ray-backend`` label (real or scripted), read every few seconds."""
        if not namespace:
            return None
        now = time.monotonic()
        cached = self._labels.get(namespace)
        if cached and now - cached[0] < LABEL_CACHE_SECONDS:
            return cached[1]
        try:
            labels = self.client.get(Namespace, namespace).metadata.labels or {}
            value = labels.get(BACKEND_LABEL)
        except ApiError as error:
            if error.status.code != 404:
                log.warning("cannot read namespace %s: %s", namespace, error.status.message)
            value = None
        if value is not None and value not in BACKENDS:
            log.warning(
                "namespace %s: label %s=%r is not one of %s", namespace, BACKEND_LABEL, value, BACKENDS
            )
            value = None
        self._labels[namespace] = (now, value)
        return value

    # -- the Ray job API -------------------------------------------------------------------------

    def submit(self, namespace: str, host: str, submission_id: str, body: dict[str, Any]) -> tuple[int, Any]:
        with self.lock:
            if submission_id in self.jobs:
                # Ray's status and wording: KubeRay's client looks for them.
                return HTTPStatus.INTERNAL_SERVER_ERROR, (
                    f"Job with submission_id {submission_id} already exists. "
                    "Please use a different submission_id."
                )
            job = RealJob(submission_id, namespace, host, body, time.time())
            self.jobs[submission_id] = job
        threading.Thread(
            target=self._prepare_and_submit, args=(job,), name=f"submit-{submission_id}", daemon=True
        ).start()
        return HTTPStatus.OK, {"job_id": submission_id, "submission_id": submission_id}

    def get(self, submission_id: str) -> tuple[int, Any]:
        job = self._job(submission_id)
        if job is None:
            return HTTPStatus.NOT_FOUND, f"Job {submission_id} does not exist"
        if job.phase != SUBMITTED:
            return HTTPStatus.OK, job.local_details()
        status, details = self.dashboard.call("GET", f"/api/jobs/{job.real_id}")
        if status == HTTPStatus.NOT_FOUND:
            self._fail(job, f"the local Ray head no longer knows job {job.real_id} (was it restarted?)")
            return HTTPStatus.OK, job.local_details()
        if status != HTTPStatus.OK:
            return status, details
        self._observe(job, details.get("status"))
        return HTTPStatus.OK, job.as_sent(details)

    def list(self, host: str) -> list[dict[str, Any]]:
        with self.lock:
            jobs = [job for job in self.jobs.values() if job.host == host]
        real = self._real_jobs() if any(job.phase == SUBMITTED for job in jobs) else {}
        return [
            job.as_sent(real[job.real_id]) if job.real_id in real else job.local_details() for job in jobs
        ]

    def logs(self, submission_id: str) -> tuple[int, Any]:
        job = self._job(submission_id)
        if job is None:
            return HTTPStatus.NOT_FOUND, f"Job {submission_id} does not exist"
        if job.phase != SUBMITTED:
            return HTTPStatus.OK, {"logs": job.message}
        return self.dashboard.call("GET", f"/api/jobs/{job.real_id}/logs")

    def stop(self, submission_id: str) -> tuple[int, Any]:
        with self.lock:
            job = self.jobs.get(submission_id)
            if job is None:
                return HTTPStatus.NOT_FOUND, f"Job {submission_id} does not exist"
            if job.phase in (PREPARING, SUBMITTING):
                # The submitting thread sees the flag: it does not submit, or stops what it submitted.
                stopped = not job.stop_requested
                job.stop_requested = True
                return HTTPStatus.OK, {"stopped": stopped}
            if job.phase != SUBMITTED:
                return HTTPStatus.OK, {"stopped": False}
        log.info("stopping %s on the real head (asked through the job API)", job.real_id)
        return self.dashboard.call("POST", f"/api/jobs/{job.real_id}/stop")

    def delete(self, submission_id: str) -> tuple[int, Any]:
        job = self._job(submission_id)
        if job is None:
            return HTTPStatus.NOT_FOUND, f"Job {submission_id} does not exist"
        if job.phase == SUBMITTED:
            status, payload = self.dashboard.call("DELETE", f"/api/jobs/{job.real_id}")
            if status != HTTPStatus.OK:
                return status, payload
        elif not job.ended:
            return HTTPStatus.BAD_REQUEST, f"Job {submission_id} cannot be deleted: it has not ended"
        with self.lock:
            self.jobs.pop(submission_id, None)
        return HTTPStatus.OK, {"deleted": True}

    def version(self) -> tuple[int, Any]:
        return self.dashboard.call("GET", "/api/version")

    # -- what tests see --------------------------------------------------------------------------

    def control_views(self, namespace: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            jobs = [job for job in self.jobs.values() if namespace is None or job.namespace == namespace]
        real = self._real_jobs() if any(job.phase == SUBMITTED for job in jobs) else {}
        return [self._control_view(job, real.get(job.real_id)) for job in jobs]

    def control_view(self, submission_id: str) -> dict[str, Any] | None:
        job = self._job(submission_id)
        if job is None:
            return None
        details = None
        if job.phase == SUBMITTED:
            status, payload = self.dashboard.call("GET", f"/api/jobs/{job.real_id}")
            details = payload if status == HTTPStatus.OK else None
        return self._control_view(job, details)

    @staticmethod
    def _control_view(job: RealJob, details: dict[str, Any] | None) -> dict[str, Any]:
        shown = job.as_sent(details) if details else job.local_details()
        view = job.view
        return {
            "backend": "real",
            "submission_id": job.submission_id,
            "namespace": job.namespace,
            "host": job.host,
            "status": shown["status"],
            "message": shown["message"],
            "request": job.request,
            "submitted_at": job.submitted_at,
            "phase": job.phase,
            "real_id": job.real_id,
            "rayjob": view.rayjob if view else None,
            "workdir": str(view.root) if view else None,
            "kubeconfig": str(view.kubeconfig) if view else None,
            "ended_at": job.ended_at,
        }

    def forget_namespace(self, namespace: str) -> None:
        """Stop what still runs there and forget its jobs (their folders are pruned later)."""
        with self.lock:
            jobs = [job for job in self.jobs.values() if job.namespace == namespace]
        for job in jobs:
            if not job.ended:
                self._stop_orphan(job, f"namespace {namespace} was forgotten")
        with self.lock:
            for job in jobs:
                self.jobs.pop(job.submission_id, None)

    def reset(self) -> None:
        with self.lock:
            namespaces = {job.namespace for job in self.jobs.values()}
        for namespace in namespaces:
            self.forget_namespace(namespace)

    # -- submitting --------------------------------------------------------------------------------

    def _job(self, submission_id: str) -> RealJob | None:
        with self.lock:
            return self.jobs.get(submission_id)

    def _prepare_and_submit(self, job: RealJob) -> None:
        try:
            view = materialise(
                self.client, self.api, self.pods_dir, job.namespace, job.submission_id, job.host
            )
        except PodViewError as error:
            self._fail(job, f"the local Ray backend could not build the head pod's view: {error}")
            return
        except Exception as error:  # the job must end, whatever went wrong here
            log.exception("building the view of %s failed", job.real_id)
            self._fail(job, f"the local Ray backend could not build the head pod's view: {error!r}")
            return
        with self.lock:
            job.view = view
            if job.stop_requested:
                job.phase, job.ended_at = STOPPED, time.time()
                return
            job.phase = SUBMITTING
        status, payload = self.dashboard.call("POST", "/api/jobs/", self._real_request(job, view))
        if status != HTTPStatus.OK:
            self._fail(job, f"the local Ray head refused the job: {payload}")
            return
        with self.lock:
            job.phase = SUBMITTED
            stop_now = job.stop_requested
        log.info("submitted %s to the real head (workdir %s)", job.real_id, view.root)
        if stop_now:
            self.dashboard.call("POST", f"/api/jobs/{job.real_id}/stop")

    def _real_request(self, job: RealJob, view: PodView) -> dict[str, Any]:
        """The submission for the real head: the same entrypoint, in the pod's environment."""
        request = dict(job.request)
        runtime_env = dict(request.get("runtime_env") or {})
        env_vars = {
            **view.env,
            **(runtime_env.get("env_vars") or {}),
            "GRPO_WORKDIR": str(view.root),
            "KUBECONFIG": str(view.kubeconfig),
        }
        path = os.environ.get("PATH", "")
        env_vars["PATH"] = f"{self.job_path}:{path}" if self.job_path else path
        runtime_env["env_vars"] = env_vars
        metadata = {
            **(request.get("metadata") or {}),
            "grpo.dev/namespace": job.namespace,
            "grpo.dev/submission-id": job.submission_id,
            "grpo.dev/rayjob": view.rayjob,
        }
        request.update(submission_id=job.real_id, runtime_env=runtime_env, metadata=metadata)
        return request

    def _fail(self, job: RealJob, message: str) -> None:
        with self.lock:
            job.phase, job.message, job.ended_at = FAILED, message, time.time()
        log.warning("%s failed: %s", job.real_id, message)

    def _observe(self, job: RealJob, status: str | None) -> None:
        with self.lock:
            job.status = status
            if status in TERMINAL and job.ended_at is None:
                job.ended_at = time.time()

    def _real_jobs(self) -> dict[str, dict[str, Any]]:
        """Every job on the real head by its real id, in one call."""
        status, payload = self.dashboard.call("GET", "/api/jobs/")
        if status != HTTPStatus.OK or not isinstance(payload, list):
            return {}
        return {details["submission_id"]: details for details in payload if details.get("submission_id")}

    # -- the watcher -----------------------------------------------------------------------------

    def start_watching(self) -> None:
        self._watcher.start()

    def close(self) -> None:
        self._closing.set()

    def _watch(self) -> None:
        while not self._closing.wait(self.watch_interval):
            try:
                self.watch_once()
            except Exception:  # keep watching: one failed pass must not leave jobs running for good
                log.exception("watching the real jobs failed")

    def watch_once(self) -> None:
        """Note finished jobs, stop those whose RayJob or RayCluster is gone, prune old folders."""
        with self.lock:
            running = [job for job in self.jobs.values() if not job.ended]
        if any(job.phase == SUBMITTED for job in running):
            real = self._real_jobs()
            for job in running:
                if job.real_id in real:
                    self._observe(job, real[job.real_id].get("status"))
        for job in running:
            reason = None if job.ended else self._orphaned(job)
            if reason:
                self._stop_orphan(job, reason)
        self._prune_folders()

    def _orphaned(self, job: RealJob) -> str | None:
        """Why the job should no longer run, or None while its RayJob and RayCluster are there."""
        view = job.view
        if view is None:  # still being prepared: nothing to compare with yet
            return None
        try:
            rayjob = self.client.get(RayJob, view.rayjob, namespace=job.namespace)
            if rayjob.metadata.uid != view.rayjob_uid:
                return f"RayJob {job.namespace}/{view.rayjob} was replaced"
            if rayjob.metadata.deletionTimestamp:
                return f"RayJob {job.namespace}/{view.rayjob} is being deleted"
            if view.cluster:
                cluster = self.client.get(RayCluster, view.cluster, namespace=job.namespace)
                if cluster.metadata.deletionTimestamp:
                    return f"RayCluster {job.namespace}/{view.cluster} is being deleted"
        except ApiError as error:
            if error.status.code == 404:
                return f"the RayJob or RayCluster of {job.namespace}/{view.rayjob} is gone"
            raise
        return None

    def _stop_orphan(self, job: RealJob, reason: str) -> None:
        with self.lock:
            if job.stop_requested:
                return
            if job.phase != SUBMITTED:
                job.stop_requested = True
                job.message = f"Job was stopped: {reason}"
                return
        log.info("stopping %s on the real head: %s", job.real_id, reason)
        status, payload = self.dashboard.call("POST", f"/api/jobs/{job.real_id}/stop")
        if status == HTTPStatus.OK:
            with self.lock:
                job.stop_requested = True  # once is enough; a failed stop is tried again next pass
        else:
            log.warning("stopping %s failed: %s %s", job.real_id, status, payload)

    def _prune_folders(self) -> None:
        """Keep the view folders of running jobs and of the newest few finished ones."""
        if not self.pods_dir.is_dir():
            return
        with self.lock:
            live = {
                self.pods_dir / job.namespace / job.submission_id
                for job in self.jobs.values()
                if not job.ended
            }
        finished = [f for f in self.pods_dir.glob("*/*") if f.is_dir() and f not in live]
        finished.sort(key=lambda f: f.stat().st_mtime, reverse=True)
        for folder in finished[self.keep_finished :]:
            # rmtree unlinks the symlinks into claims' folders; it never follows them.
            shutil.rmtree(folder, ignore_errors=True)
            if not any(folder.parent.iterdir()):
                folder.parent.rmdir()
