"""One verdict on a GRPOJob, wherever it is asked for: `kubectl grpo validate`, `grpo-train plan`
and `validate`, and what the API server and the operator together decide.

Admission runs the CRD's schema and CEL rules; the operator then runs `validation.validate`.
Offline, the same steps run here in the same order: the manifest's shape against the generated
CRD (`api/wire.py`: apiVersion, kind, field names, JSON types), the pydantic models (the schema's
source: patterns, bounds), the CRD's CEL rules (`api/rules.py`, evaluated from the generated CRD
itself), and `validation.validate` with the operator's settings. Each problem names its field the way the
server and the operator do, so a user reads the same field wherever a rule fires.

What only the cluster knows stays with it: an existing claim's access mode (checked by the
operator, which reads the claim) and the operator's own settings when they differ from the
defaults (`kubectl grpo validate` with a cluster uses the server's dry run instead).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .api.problem import Problem, error_field, error_words
from .api.rules import rule_violations
from .api.v1alpha1 import GRPOJob
from .api.v1alpha1.base import PATTERN_WORDS
from .api.v1alpha1.spec import SOURCE_PATTERN_WORDS
from .api.wire import pruned, wire_problems
from .config import Settings
from .validation import validate

_PATTERNS = {**PATTERN_WORDS, **SOURCE_PATTERN_WORDS}
"""Each pattern of the schema, in words: a person reads what to write, not a regular expression."""


def schema_problems(error: ValidationError) -> list[Problem]:
    """Pydantic's errors as the API server words them: the field's path, then what is wrong."""
    return [
        Problem(error_field(item["loc"]) or "spec", error_words(item, _PATTERNS)) for item in error.errors()
    ]


def parse(manifest: dict[str, Any], namespace: str = "default") -> tuple[GRPOJob | None, list[Problem]]:
    """The manifest as the operator would read it, or the schema's problems with it."""
    shape = wire_problems(manifest)
    if shape:
        return None, shape
    manifest = pruned(manifest)
    metadata = {"namespace": namespace, "uid": "", **(manifest.get("metadata") or {})}
    if not metadata.get("name"):
        return None, [Problem("metadata.name", "a GRPOJob needs a name")]
    try:
        return GRPOJob.model_validate({**manifest, "metadata": metadata}), []
    except ValidationError as error:
        return None, schema_problems(error)


def job_problems(
    job: GRPOJob,
    settings: Settings,
    *,
    claim_access_modes: list[str] | None = None,
    priority_class_exists: bool | None = None,
) -> list[Problem]:
    """Everything that refuses a parsed job: the CRD's CEL rules, then the operator's checks.

    Without `claim_access_modes` (offline) an existing claim is taken to be what the job needs;
    the operator, which reads the claim, decides that one.
    """
    if claim_access_modes is None and job.spec.checkpoint.claim_name:
        claim_access_modes = ["ReadWriteMany"]
    checks = validate(
        job, settings, claim_access_modes=claim_access_modes, priority_class_exists=priority_class_exists
    )
    # The batch arithmetic is both CEL and validate(); validate() words it as the server does
    # (with the numbers), so its problem stands for the rule's.
    covered = {p.field for p in checks}
    rules = [p for p in rule_violations(job.spec.to_wire()) if p.field not in covered]
    return rules + checks


def manifest_problems(
    manifest: dict[str, Any], settings: Settings | None = None, namespace: str = "default"
) -> list[Problem]:
    """The whole offline verdict on a manifest: empty when the cluster would accept and run it."""
    job, problems = parse(manifest, namespace)
    if job is None:
        return problems
    return job_problems(job, settings or Settings())
