"""The job the trainer runs: the resolved spec the operator mounts, plus this attempt's environment.

The operator writes the resolved job (spec with schema defaults, the absolute paths it chose, the
accelerator pool's facts) to `contract.SPEC_FILE` and sets the `contract.Env` variables on every
Ray pod. For planning and validating outside a cluster, a plain GRPOJob manifest (YAML or JSON)
is accepted as well: it is resolved with the operator's own function and default settings, so
what `grpo-train plan` prints is what would run.

Outside a pod (a workstation, the local test cluster) `contract.Env.WORKDIR` (or `--workdir`)
names the folder whose `grpo/` is the pod's /grpo tree; every pod path under /grpo is read there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import CACHE_HOMES, Env, checkpoint_events_file, metrics_file, under_workdir
from grpo_operator.api.documents import DocumentError, decode, job_document
from grpo_operator.api.problem import Problem
from grpo_operator.api.v1alpha1 import KIND, GRPOJob, GRPOJobStatus, ResolvedJob
from grpo_operator.children.resolved import resolve_job
from grpo_operator.config import Settings
from grpo_operator.verdict import parse, schema_problems
from pydantic import ValidationError

from .failures import ConfigError


def load_job(path: str | Path, workdir: str | None = None) -> ResolvedJob:
    """Read a resolved job (the operator's JSON) or a GRPOJob manifest; ConfigError says what is wrong.

    A manifest gets the offline verdict's schema checks (grpo_operator.verdict.parse: apiVersion,
    kind, field names and types, then the models), so a file the API server would refuse is
    refused here with the same fields named. With a `workdir`, `path` is a pod path when it lies
    under /grpo, and the job's paths are returned as seen from here.
    """
    path = Path(under_workdir(str(path), workdir))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the job spec {path}: {exc.strerror or exc}") from exc
    try:
        document = job_document(decode(data, str(path)), str(path))
    except DocumentError as exc:
        raise ConfigError(f"the job spec {exc}") from exc
    if isinstance(document, dict) and "paths" in document and "kind" not in document:
        try:
            job = ResolvedJob.model_validate(document)
        except ValidationError as exc:
            raise ConfigError(f"the job spec {path} is invalid: {_listed(schema_problems(exc))}") from exc
        return job.under(workdir)
    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise ConfigError(
            f"the job spec {path} is neither a GRPOJob (kind: {KIND}) nor the resolved job the operator writes"
        )
    parsed, problems = parse(document)
    if parsed is None:
        raise ConfigError(f"the job spec {path} is invalid: {_listed(problems)}")
    return _resolved(parsed).under(workdir)


def measured_status(path: str | Path, workdir: str | None = None) -> GRPOJobStatus:
    """The status a GRPOJob manifest carries (`kubectl grpo plan` of an existing job passes what
    it measured: its last save's and step's seconds); empty for the operator's resolved job or a
    manifest without one. Read after `load_job`, which has refused a file that does not parse."""
    path = Path(under_workdir(str(path), workdir))
    try:
        document = job_document(decode(path.read_bytes(), str(path)), str(path))
    except (OSError, DocumentError):
        return GRPOJobStatus()
    status = document.get("status") if isinstance(document, dict) and document.get("kind") == KIND else None
    try:
        return GRPOJobStatus.model_validate(status or {})
    except ValidationError:
        return GRPOJobStatus()


def _listed(problems: list[Problem]) -> str:
    return "; ".join(str(p) for p in problems)


POD_PATH_VARIABLES = (Env.SPEC_FILE, Env.METRICS_FILE, *CACHE_HOMES)
"""Variables the operator sets to pod paths; outside a pod they must point under the workdir."""


def localise_environment(environ: MutableMapping[str, str], workdir: str | None) -> None:
    """Point the pod-path variables under `workdir`, for this process and every one it starts.

    Anything that reads them directly (the hub clients' caches, verl's workers, the engine's
    metrics file) then reads and writes inside the workdir, never in a /grpo of the host.
    """
    if not workdir:
        return
    for name in POD_PATH_VARIABLES:
        value = environ.get(name)
        if value:
            environ[name] = under_workdir(value, workdir)


def resolve_manifest(
    manifest: dict[str, Any], namespace: str = "default", settings: Settings | None = None
) -> ResolvedJob:
    """A GRPOJob manifest as the operator would resolve it (same paths, default profiles)."""
    metadata = {"namespace": namespace, "uid": "", **manifest.get("metadata", {})}
    return _resolved(GRPOJob.model_validate({**manifest, "metadata": metadata}), settings)


def _resolved(job: GRPOJob, settings: Settings | None = None) -> ResolvedJob:
    try:
        return resolve_job(job, settings or Settings())
    except ValueError as exc:
        raise ConfigError(f"spec.resources.accelerator: {exc}") from exc


@dataclass(frozen=True)
class Attempt:
    """This attempt's identity and files, from the environment the operator sets on every pod."""

    job_name: str
    namespace: str
    number: int
    metrics_file: Path

    @property
    def checkpoint_events_file(self) -> Path:
        return Path(checkpoint_events_file(str(self.metrics_file)))

    @classmethod
    def from_env(cls, job: ResolvedJob, env: Mapping[str, str] | None = None) -> Attempt:
        """Read the attempt number and metrics file, falling back to the job's own paths.

        The fallback keeps `grpo-train run` usable by hand; under the operator the variables are
        always set, and the metrics file must be per attempt because verl's file logger truncates.
        """
        env = os.environ if env is None else env
        raw = env.get(Env.ATTEMPT, "1")
        try:
            number = int(raw)
        except ValueError as exc:
            raise ConfigError(f"{Env.ATTEMPT} must be an integer, found {raw!r}") from exc
        if number < 1:
            raise ConfigError(f"{Env.ATTEMPT} must be 1 or more, found {number}")
        given = env.get(Env.METRICS_FILE)
        metrics = job.local_path(given) if given else metrics_file(job.paths.metrics_dir, number)
        return cls(
            job_name=env.get(Env.JOB_NAME, job.name),
            namespace=env.get(Env.NAMESPACE, job.namespace),
            number=number,
            metrics_file=Path(metrics),
        )
