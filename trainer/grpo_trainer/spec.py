"""The job the trainer runs: the resolved spec the operator mounts, plus this attempt's environment.

The operator writes the resolved job (spec with schema defaults, plus the absolute paths it chose)
to `/grpo/spec/job.json` and sets `GRPO_*` variables on every Ray pod. For planning and validating
outside a cluster, a plain GRPOJob manifest (YAML or JSON) is accepted as well: its paths are
derived with the operator's own `job_paths`, so what `grpo-train plan` prints is what would run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from grpo_operator.api.v1alpha1 import GRPOJob, ResolvedJob
from grpo_operator.build.paths import job_paths
from pydantic import ValidationError

from .exitcodes import ConfigError


def load_job(path: str | Path) -> ResolvedJob:
    """Read a resolved job (the operator's JSON) or a GRPOJob manifest; ConfigError says what is wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the job spec {path}: {exc.strerror or exc}") from exc
    try:
        document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"the job spec {path} is not valid JSON/YAML: {exc}") from exc
    if not isinstance(document, dict):
        raise ConfigError(f"the job spec {path} must hold an object, found {type(document).__name__}")
    try:
        if document.get("kind") == "GRPOJob":
            return resolve_manifest(document)
        return ResolvedJob.model_validate(document)
    except ValidationError as exc:
        raise ConfigError(f"the job spec {path} is invalid: {_errors(exc)}") from exc


def resolve_manifest(manifest: dict[str, Any], namespace: str = "default") -> ResolvedJob:
    """A GRPOJob manifest as the operator would resolve it (same paths), for local plan/validate."""
    metadata = {"namespace": namespace, "uid": "", **manifest.get("metadata", {})}
    job = GRPOJob.model_validate({**manifest, "metadata": metadata})
    return ResolvedJob(
        name=job.name, namespace=job.namespace, uid=job.uid, spec=job.spec, paths=job_paths(job)
    )


def _errors(exc: ValidationError) -> str:
    """Pydantic's errors as `field.path: message` pairs, the form a person can act on."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def checkpoint_events_file(metrics_file: str | Path) -> Path:
    """Where verl's driver-side checkpoint callback appends save events for the reporter.

    Derived from the per-attempt metrics file, so the callback (in a Ray actor on any node, which
    sees only the pod's environment) and the reporter agree without another variable.
    """
    metrics_file = Path(metrics_file)
    return metrics_file.with_name(metrics_file.stem + ".checkpoints.jsonl")


@dataclass(frozen=True)
class Attempt:
    """This attempt's identity and files, from the environment the operator sets on every pod."""

    job_name: str
    namespace: str
    number: int
    metrics_file: Path

    @property
    def checkpoint_events_file(self) -> Path:
        return checkpoint_events_file(self.metrics_file)

    @classmethod
    def from_env(cls, job: ResolvedJob, env: Mapping[str, str] | None = None) -> Attempt:
        """Read GRPO_ATTEMPT / GRPO_METRICS_FILE, falling back to the job's own paths.

        The fallback keeps `grpo-train run` usable by hand; under the operator the variables are
        always set, and the metrics file must be per attempt because verl's file logger truncates.
        """
        env = os.environ if env is None else env
        raw = env.get("GRPO_ATTEMPT", "1")
        try:
            number = int(raw)
        except ValueError as exc:
            raise ConfigError(f"GRPO_ATTEMPT must be an integer, found {raw!r}") from exc
        if number < 1:
            raise ConfigError(f"GRPO_ATTEMPT must be 1 or more, found {number}")
        metrics = env.get("GRPO_METRICS_FILE") or f"{job.paths.metrics_dir}/attempt-{number}.jsonl"
        return cls(
            job_name=env.get("GRPO_JOB_NAME", job.name),
            namespace=env.get("GRPO_NAMESPACE", job.namespace),
            number=number,
            metrics_file=Path(metrics),
        )
