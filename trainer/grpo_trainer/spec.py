"""The job the trainer runs: the resolved spec the operator mounts, plus this attempt's environment.

The operator writes the resolved job (spec with schema defaults, the absolute paths it chose, the
accelerator pool's facts) to `contract.SPEC_FILE` and sets the `contract.Env` variables on every
Ray pod. For planning and validating outside a cluster, a plain GRPOJob manifest (YAML or JSON)
is accepted as well: it is resolved with the operator's own function and default settings, so
what `grpo-train plan` prints is what would run.

Outside a pod (a workstation, the local test cluster) `contract.Env.WORKDIR` (or `--workdir`)
names the folder that stands for the pod's /grpo tree; every pod path is read under it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from grpo_operator.api.contract import CACHE_HOMES, Env, checkpoint_events_file, metrics_file, under_workdir
from grpo_operator.api.v1alpha1 import GRPOJob, ResolvedJob
from grpo_operator.children.resolved import resolve_job
from grpo_operator.config import Settings
from pydantic import ValidationError

from .failures import ConfigError


def load_job(path: str | Path, workdir: str | None = None) -> ResolvedJob:
    """Read a resolved job (the operator's JSON) or a GRPOJob manifest; ConfigError says what is wrong.

    With a `workdir`, `path` is a pod path when it lies under /grpo, and the job's paths are
    returned as seen from here.
    """
    path = Path(under_workdir(str(path), workdir))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the job spec {path}: {exc.strerror or exc}") from exc
    try:
        document = json.loads(text) if path.suffix == ".json" else grpojob_document(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"the job spec {path} is not valid JSON/YAML: {exc}") from exc
    if not isinstance(document, dict):
        raise ConfigError(f"the job spec {path} must hold an object, found {type(document).__name__}")
    try:
        if document.get("kind") == "GRPOJob":
            job = resolve_manifest(document)
        else:
            job = ResolvedJob.model_validate(document)
    except ValidationError as exc:
        raise ConfigError(f"the job spec {path} is invalid: {_errors(exc)}") from exc
    return job.under(workdir)


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


def grpojob_document(text: str) -> Any:
    """The GRPOJob of a YAML file that may hold several documents (an example with its ConfigMap),
    else its only document."""
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    jobs = [d for d in documents if isinstance(d, dict) and d.get("kind") == "GRPOJob"]
    if len(jobs) == 1:
        return jobs[0]
    if len(documents) == 1:
        return documents[0]
    raise yaml.YAMLError(f"expected one GRPOJob among {len(documents)} documents, found {len(jobs)}")


def resolve_manifest(
    manifest: dict[str, Any], namespace: str = "default", settings: Settings | None = None
) -> ResolvedJob:
    """A GRPOJob manifest as the operator would resolve it (same paths, default profiles)."""
    metadata = {"namespace": namespace, "uid": "", **manifest.get("metadata", {})}
    job = GRPOJob.model_validate({**manifest, "metadata": metadata})
    try:
        return resolve_job(job, settings or Settings())
    except ValueError as exc:
        raise ConfigError(f"spec.resources.accelerator: {exc}") from exc


def _errors(exc: ValidationError) -> str:
    """Pydantic's errors as `field.path: message` pairs, the form a person can act on."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


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
