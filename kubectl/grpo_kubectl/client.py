"""A Python client for GRPOJobs, for notebooks and scripts (what `kubectl grpo` does, as calls).

    from grpo_kubectl.client import GRPOClient

    client = GRPOClient(namespace="team-a")              # your kubeconfig, as kubectl uses it
    job = client.create("examples/lora-single-gpu.yaml")  # a file, a dict or a GRPOJob model
    job.wait("Running", timeout=600)
    for line in job.logs(follow=True):                   # the attempt's output until the job ends
        print(line)
    job.wait("Succeeded", timeout=12 * 3600)             # raises JobFailedError if it fails instead
    job.metrics()                                        # {"reward": 0.82, "valScore": 0.61, ...}
    job.history()                                        # [{"step": 1, "reward": ...}, ...] rows

Everything goes through the same pieces as the plugin (cluster.py for the API server, volume.py
for the job's files), with the user's own credentials. Errors are `GRPOClientError`s with one
line a person can act on; a job the API server refuses raises `JobRefusedError` carrying the server's
admission message, which names the field.
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from grpo_operator.api.contract import attempt_log_file, job_dir
from grpo_operator.api.documents import DocumentError, decode, grpojob_manifest
from grpo_operator.api.v1alpha1 import GROUP, KIND, VERSION, GRPOJob, JobPaths
from grpo_operator.api.v1alpha1.status import history_points, latest_response_length
from grpo_trainer.kube import GRPOJobResource
from lightkube import ApiError
from lightkube.types import PatchType

from . import client_inputs as check
from .client_errors import (
    GRPOClientError,
    JobFailedError,
    JobFinishedError,
    JobRefusedError,
    WaitTimeoutError,
)
from .cluster import Cluster, PluginError, one_line, stored_job
from .companions import companions
from .history import history_from_metrics
from .reader import DEFAULT_IMAGE, ReadTarget
from .version import extra_for
from .volume import LocalVolume, PodVolume, Volume

TERMINAL = ("Succeeded", "Failed")
CONDITIONS = ("Created", "Running", "Restarting", "Suspended", "Succeeded", "Failed", "Healthy")
PASSED_ON_THE_WAY = ("Created", "Running")
"""What every job that succeeded has been: waiting for one of them on a finished job is done."""

__all__ = [
    "GRPOClient",
    "GRPOClientError",
    "Job",
    "JobFailedError",
    "JobFinishedError",
    "JobRefusedError",
    "WaitTimeoutError",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _client_errors(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """The plugin's pieces (cluster.py, volume.py) raise `PluginError`; a caller of the client
    catches `GRPOClientError`, so each of them is raised again as one, with the same line."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except GRPOClientError:
            raise
        except PluginError as error:
            raise GRPOClientError(str(error), error.code) from error

    return wrapper


def _lines(lines: Iterator[str]) -> Iterator[str]:
    """An iterator's own errors, which come while it is read, as `GRPOClientError`s too."""
    try:
        yield from lines
    except GRPOClientError:
        raise
    except PluginError as error:
        raise GRPOClientError(str(error), error.code) from error


class GRPOClient:
    """GRPOJobs of one namespace (the kubeconfig context's unless given)."""

    def __init__(
        self,
        namespace: str | None = None,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        workdir: str | None = None,
        reader_image: str = DEFAULT_IMAGE,
    ) -> None:
        config = None if kubeconfig is None else str(check.path(kubeconfig, "kubeconfig"))
        context = check.text(context, "context", optional=True)
        try:
            self.cluster = Cluster(config, context, check.namespace(namespace))
        except PluginError as error:
            raise GRPOClientError(str(error), error.code) from error
        self.namespace = self.cluster.namespace
        self.workdir = check.folder(workdir, "workdir")
        self.reader_image = str(check.text(reader_image, "reader_image"))

    def __repr__(self) -> str:
        where = f", workdir={self.workdir!r}" if self.workdir else ""
        return f"GRPOClient(namespace={self.namespace!r}, server={self.cluster.server!r}{where})"

    @_client_errors
    def create(self, job: str | Path | dict[str, Any] | GRPOJob, *, name: str | None = None) -> Job:
        """Creates a job from a YAML/JSON file, a manifest dict or the pydantic model.

        A file's ConfigMaps, Secrets and claims beside the job (an example's reward ConfigMap)
        are applied with it, as `kubectl apply -f` would: server-side, in this client's
        namespace, once the API server has accepted the job in a dry run; a file holding any
        other kind is refused in one sentence and nothing is created."""
        manifest, along = _manifest(job, self.namespace)
        meta = dict(manifest.get("metadata") or {})
        if name is not None:
            meta["name"] = check.name(name, "name")
        if not meta.get("name"):
            raise GRPOClientError("the job has no name: give metadata.name or create(..., name=...)")
        check.name(meta["name"], "metadata.name")
        if meta.get("namespace") not in (None, self.namespace):
            # As `kubectl apply -n`: a file meant for another namespace is not quietly moved.
            raise GRPOClientError(
                f"metadata.namespace {meta['namespace']!r} is not this client's namespace "
                f"{self.namespace!r}: use GRPOClient(namespace={meta['namespace']!r})"
            )
        meta["namespace"] = self.namespace
        manifest = {"apiVersion": f"{GROUP}/{VERSION}", **manifest, "kind": KIND, "metadata": meta}
        resource = GRPOJobResource.from_dict(manifest)
        if along:  # the job's verdict first: a refused job leaves no ConfigMap behind
            self._create(resource, meta["name"], dry_run=True)
            for document in along:
                self.cluster.apply(document)
        self._create(resource, meta["name"])
        if (absent := self.operator_problem()) is not None:  # it will wait, and nothing else says why
            warnings.warn(f"grpojob {meta['name']} is created, but {absent}", RuntimeWarning, stacklevel=3)
        return Job(self, meta["name"])

    def _create(self, resource: Any, name: str, *, dry_run: bool = False) -> None:
        try:
            self.cluster._call("creating the job", self.cluster.client.create, resource, dry_run=dry_run)
        except ApiError as error:
            if error.status.code == 409:
                raise GRPOClientError(
                    f'grpojob "{name}" already exists in namespace "{self.namespace}": '
                    "get(name) it, or delete it first"
                ) from error
            if error.status.code in (400, 422):
                raise JobRefusedError(one_line(error.status.message)) from error
            raise GRPOClientError(
                f"cannot create grpojob {self.namespace}/{name}: {error.status.message}"
            ) from error

    def operator_problem(self) -> str | None:
        """ "no operator is running (its Lease was last renewed N min ago)" when the operator's
        leader Lease is stale, else None (also when these credentials may not read it)."""
        return self.cluster.no_operator()

    @_client_errors
    def get(self, name: str) -> Job:
        self.cluster.job_body(check.name(name, "name"))  # a clear "not found" now, not on first use
        return Job(self, name)

    @_client_errors
    def list(self) -> list[Job]:
        return [Job(self, body["metadata"]["name"]) for body in self.cluster.list_jobs()]


class Job:
    """One GRPOJob; every property reads the API server afresh."""

    def __init__(self, client: GRPOClient, name: str) -> None:
        self.client, self.name = client, name

    def __repr__(self) -> str:
        return f"Job({self.name!r}, namespace={self.client.namespace!r})"

    # --- reading ------------------------------------------------------------------------------

    @_client_errors
    def body(self) -> dict[str, Any]:
        return self.client.cluster.job_body(self.name)

    @property
    def status(self) -> dict[str, Any]:
        return dict(self.body().get("status") or {})

    @property
    def phase(self) -> str | None:
        return self.status.get("phase")

    def condition(self, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.status.get("conditions") or [] if c.get("type") == type_), None)

    @_client_errors
    def metrics(self) -> dict[str, Any]:
        """The newest step's metrics as the trainer reported them (reward, valScore, kl,
        responseLength...)."""
        status = self.status
        length = latest_response_length(status)
        return {
            **(status.get("metrics") or {}),
            **({"responseLength": length} if length is not None else {}),
            "step": (status.get("progress") or {}).get("step"),
        }

    @_client_errors
    def history(self, *, full: bool = False) -> list[dict[str, Any]]:
        """Rows of {"step", "reward", "valScore", "responseLength"}: the status's bounded series,
        or with `full=True` every step from the metrics files on the job's volume."""
        body = self.body()
        if not full:
            return history_points(body.get("status") or {})
        status = body.get("status") or {}
        lines = self._volume(body).metrics_lines(self._paths(body).metrics_dir, status.get("attempt") or 1)
        return history_from_metrics(lines)

    @_client_errors
    def plot(
        self, path: str | Path | None = None, *, full: bool = False, baseline: float | None = None
    ) -> Path:
        """The curves as a PNG (what `kubectl grpo plot` draws: the reward with its moving average
        and an optional `baseline`, validation score, response length; entropy and KL with
        `full=True`); its path."""
        from . import drawing  # matplotlib, only when drawing

        target = Path(f"{self.name}-curves.png") if path is None else check.path(path, "path")
        found = drawing.curves(self.history(full=full))
        if not found:
            raise GRPOClientError(
                f"no points to plot yet for {self.name}: the trainer has not reported a step"
            )
        try:
            title = f"{self.client.namespace}/{self.name}"
            return drawing.write_png(found, target, title, baseline=check.number(baseline, "baseline"))
        except ModuleNotFoundError as error:
            if extra_for(error.name) != "plot":
                raise
            raise GRPOClientError(
                "Job.plot() needs grpo-kubectl[plot] (pip install 'grpo-kubectl[plot]')"
            ) from error

    @_client_errors
    def logs(self, *, follow: bool = False, attempt: int | None = None, poll: float = 5.0) -> Iterator[str]:
        """An attempt's output from the job's volume (default: the current attempt); with
        `follow=True` also what is written next, until the job ends."""
        attempt = check.attempt(attempt)
        poll = check.seconds(poll, "poll", positive=True)
        body = self.body()
        current = (body.get("status") or {}).get("attempt")
        attempt = attempt or current
        if not attempt:
            raise GRPOClientError(f"grpojob {self.name} has not started an attempt yet")
        if current and not 1 <= attempt <= current:
            raise GRPOClientError(f"attempt {attempt}: grpojob {self.name} has attempts 1 to {current}")
        path = attempt_log_file(self._paths(body).metrics_dir, attempt)
        volume = self._volume(body)
        if not follow:
            return _lines(volume.read(path))
        last = [0.0, False]

        def ended() -> bool:
            if time.monotonic() - last[0] >= poll:
                last[0], last[1] = time.monotonic(), self.phase in TERMINAL
            return bool(last[1])

        return _lines(volume.follow(path, ended))

    # --- waiting ------------------------------------------------------------------------------

    @_client_errors
    def wait(
        self, condition: str = "Succeeded", timeout: float = 3600.0, *, poll: float = 2.0
    ) -> dict[str, Any]:
        """Waits until `condition` (Running, Succeeded, Suspended, Healthy...) is True; the status.

        Waiting for anything but Failed raises `JobFailedError` when the job fails first (with the
        operator's reason and message), and `WaitTimeoutError` after `timeout` seconds. On a job
        that has succeeded it returns at once for Running or Created (it got there, and past),
        and raises `JobFinishedError` at once for what it never will be (Failed, Suspended...):
        a short job must not hold its caller for the whole timeout."""
        if not isinstance(condition, str) or condition not in CONDITIONS:
            raise GRPOClientError(f"condition {condition!r}: expected one of {', '.join(CONDITIONS)}")
        timeout = check.seconds(timeout, "timeout")
        poll = check.seconds(poll, "poll", positive=True)
        deadline = time.monotonic() + timeout
        while True:
            status = self.status
            found = next((c for c in status.get("conditions") or [] if c.get("type") == condition), None)
            if (found and found.get("status") == "True") or status.get("phase") == condition:
                return status
            failed = next((c for c in status.get("conditions") or [] if c.get("type") == "Failed"), None)
            if condition != "Failed" and failed and failed.get("status") == "True":
                raise JobFailedError(
                    f"grpojob {self.name} failed ({failed.get('reason')}): {failed.get('message', '')}"
                )
            if status.get("phase") == "Succeeded":  # (Running and Created are cleared at the end)
                if condition in PASSED_ON_THE_WAY:
                    return status
                raise JobFinishedError(
                    f"grpojob {self.name} has finished (Succeeded): it will not be {condition}"
                )
            if time.monotonic() > deadline:
                absent = self.client.operator_problem()
                raise WaitTimeoutError(
                    f"grpojob {self.name} is not {condition} after {timeout:g} s "
                    f"(phase {status.get('phase') or 'not reconciled yet'})"
                    + (f": {absent}" if absent else "")
                )
            time.sleep(poll)

    # --- steering -----------------------------------------------------------------------------

    @_client_errors
    def suspend(self) -> None:
        """Tears the Ray cluster down and keeps the checkpoints."""
        self.client.cluster.set_suspend(self.name, True)

    @_client_errors
    def resume(self) -> None:
        """A new attempt continues from the latest checkpoint."""
        self.client.cluster.set_suspend(self.name, False)

    @_client_errors
    def delete(self, *, wait: bool = False, timeout: float = 120.0) -> None:
        """Deletes the job (its claim is kept unless checkpoint.retention says Delete)."""
        timeout = check.seconds(timeout, "timeout")
        cluster = self.client.cluster
        try:
            cluster._call(
                "deleting the job",
                cluster.client.delete,
                GRPOJobResource,
                self.name,
                namespace=cluster.namespace,
            )
        except ApiError as error:
            if error.status.code == 404:
                return
            raise GRPOClientError(
                f"cannot delete grpojob {cluster.namespace}/{self.name}: {error.status.message}"
            ) from error
        deadline = time.monotonic() + timeout
        while wait:
            try:
                cluster.job_body(self.name)
            except PluginError:
                return
            if time.monotonic() > deadline:
                raise WaitTimeoutError(f"grpojob {self.name} is still there after {timeout:g} s (finalizers)")
            time.sleep(1.0)

    @_client_errors
    def patch(self, spec: dict[str, Any]) -> None:
        """A merge patch of the spec (what `kubectl patch --type=merge` does)."""
        if not isinstance(spec, dict):
            raise GRPOClientError(
                f"spec: expected a mapping of the fields to change, got {check.shown(spec)}"
            )
        check.json_value(spec, "spec")
        cluster = self.client.cluster
        try:
            cluster._call(
                "patching the job",
                cluster.client.patch,
                GRPOJobResource,
                self.name,
                {"spec": spec},
                namespace=cluster.namespace,
                patch_type=PatchType.MERGE,
            )
        except ApiError as error:
            raise JobRefusedError(one_line(error.status.message)) from error

    # --- the job's files ----------------------------------------------------------------------

    def _paths(self, body: dict[str, Any]) -> JobPaths:
        return JobPaths.in_folder(job_dir(self.name, (body.get("metadata") or {}).get("uid", "")))

    def _volume(self, body: dict[str, Any]) -> Volume:
        if self.client.workdir:
            return LocalVolume(self.client.workdir)
        target = ReadTarget.of_job(stored_job(body))
        return PodVolume(self.client.cluster, target, self.client.reader_image)


def _manifest(
    job: str | Path | dict[str, Any] | GRPOJob, namespace: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The job's manifest, and a file's objects to apply with it (none for a dict or a model)."""
    if isinstance(job, GRPOJob):
        # Only what the user set: the API server applies the defaults, as for a YAML file.
        return job.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"status"}), []
    if isinstance(job, dict):
        return check.manifest(job, "the manifest"), []
    if isinstance(job, bool) or not isinstance(job, str | os.PathLike):
        raise GRPOClientError(
            f"create(job): expected a file path, a manifest dict or a GRPOJob model, got {check.shown(job)}"
        )
    path = check.path(job, "create(job)")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise GRPOClientError(f"cannot read {path}: {error.strerror or error}") from error
    try:
        manifest = check.manifest(grpojob_manifest(data, str(path)), str(path))
    except DocumentError as error:
        raise GRPOClientError(str(error)) from error
    along = companions(decode(data, str(path)), str(path), namespace)
    if along.refused:
        raise GRPOClientError(along.refused)
    return manifest, along.objects
