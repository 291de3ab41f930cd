"""Before the first RayJob: does everything the job names exist, and can the trainer use it?

A pod that mounts a missing claim or ConfigMap, or reads a missing Secret key, sits in Pending or
ContainerCreating with nothing in the job's status; a reward file that cannot be imported burns
every attempt. So the operator looks first: `references` lists every object a job names, the
reconciler reads them (with the operator's own rights), and `judge` turns what it found into
problems (the job fails, naming the field) or waits (the job stays Pending with a condition saying
what it waits for). Pure: the reading is the caller's, so every verdict is tested without a cluster
and `kubectl grpo validate` gives the same one with the user's credentials.

What is a wait and what is a failure: an object that does not exist yet may be on its way (a
`kubectl apply -f folder/` creates the job and its ConfigMap in any order; a claim is provisioned);
an object that exists but lacks the key, or a reward file that does not parse, will not fix itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .api import reward_source
from .api.problem import Problem
from .api.sources import parse_source
from .api.v1alpha1 import GRPOJob

Kind = Literal["PersistentVolumeClaim", "ConfigMap", "Secret"]
API_VERSION = "v1"
UNREADABLE = object()
"""What the caller passes for an object it may not read (no RBAC for it): not judged."""


@dataclass(frozen=True)
class Reference:
    """One object the job names, and where."""

    kind: Kind
    name: str
    field: str
    """The spec field that names it, as a problem names it."""
    key: str | None = None
    """A key the object must hold (ConfigMap and Secret)."""
    optional: bool = False
    """An env reference marked optional: a missing object or key is fine."""

    @property
    def manifest(self) -> dict[str, Any]:
        """Enough of the object to read it by (`Api.read`)."""
        return {"apiVersion": API_VERSION, "kind": self.kind, "metadata": {"name": self.name}}


@dataclass
class Verdict:
    problems: list[Problem] = field(default_factory=list)
    missing: list[Reference] = field(default_factory=list)
    """What the job waits for: referenced objects that do not exist (yet)."""

    @property
    def waiting(self) -> list[str]:
        """One phrase per missing object (`PersistentVolumeClaim 'data' (spec.model.source)`)."""
        phrases: list[str] = []
        for ref in self.missing:
            phrase = f"{ref.kind} {ref.name!r} ({ref.field})"
            if phrase not in phrases:
                phrases.append(phrase)
        return phrases

    @property
    def message(self) -> str:
        return "waiting for " + "; ".join(self.waiting) + " to exist in the job's namespace"


def references(job: GRPOJob) -> list[Reference]:
    """Every claim, ConfigMap and Secret the job's pods would read, in spec order."""
    spec = job.spec
    out: list[Reference] = []
    sources = [("spec.model.source", spec.model.source)]
    sources += [(f"spec.dataset.train[{i}]", uri) for i, uri in enumerate(spec.dataset.train or [])]
    sources += [(f"spec.dataset.validation[{i}]", uri) for i, uri in enumerate(spec.dataset.validation or [])]
    for where, uri in sources:
        ref = parse_source(uri)
        if ref.scheme == "pvc":
            out.append(Reference("PersistentVolumeClaim", ref.authority, where))
    if spec.checkpoint.claim_name:
        out.append(
            Reference("PersistentVolumeClaim", spec.checkpoint.claim_name, "spec.checkpoint.claimName")
        )
    custom = spec.reward.custom
    if custom is not None:
        out.append(Reference("ConfigMap", custom.config_map, "spec.reward.custom", custom.key))
    for where, secret in (
        ("spec.model.credentialsSecret", spec.model.credentials_secret),
        ("spec.dataset.credentialsSecret", spec.dataset.credentials_secret),
    ):
        if secret:
            out.append(Reference("Secret", secret, where))
    wandb = spec.logging.wandb
    if wandb is not None and wandb.secret_name:
        out.append(Reference("Secret", wandb.secret_name, "spec.logging.wandb", wandb.secret_key))
    for i, var in enumerate(spec.env):
        source = var.value_from
        if source is None:
            continue
        for kind, selector in (("Secret", source.secret_key_ref), ("ConfigMap", source.config_map_key_ref)):
            if selector is not None:
                where = f"spec.env[{i}].valueFrom.{'secretKeyRef' if kind == 'Secret' else 'configMapKeyRef'}"
                out.append(Reference(kind, selector.name, where, selector.key, bool(selector.optional)))  # type: ignore[arg-type]
    return out


def judge(job: GRPOJob, found: dict[tuple[str, str], Any]) -> Verdict:
    """The verdict on what the caller read: `found[(kind, name)]` is the object, None when it does
    not exist, or UNREADABLE when the caller may not read it."""
    verdict = Verdict()
    for ref in references(job):
        obj = found.get((ref.kind, ref.name), UNREADABLE)
        if obj is UNREADABLE:
            continue
        if obj is None:
            if not ref.optional:
                verdict.missing.append(ref)
            continue
        problem = _object_problem(job, ref, obj)
        if problem is not None:
            verdict.problems.append(problem)
    return verdict


def _object_problem(job: GRPOJob, ref: Reference, obj: dict[str, Any]) -> Problem | None:
    if ref.kind == "PersistentVolumeClaim":
        if (obj.get("status") or {}).get("phase") == "Lost":
            return Problem(ref.field, f"claim {ref.name!r} is Lost: its volume is gone")
        return None
    if ref.key is None:
        return None
    keys = set(obj.get("data") or {}) | set(obj.get("binaryData") or {})
    if ref.kind == "Secret":
        keys |= set(obj.get("stringData") or {})
    if ref.key not in keys:
        if ref.optional:
            return None
        held = ", ".join(sorted(keys)[:10]) or "no keys"
        return Problem(ref.field, f"{ref.kind} {ref.name!r} has no key {ref.key!r} (it holds {held})")
    if ref.field == "spec.reward.custom":
        return reward_problem(job, (obj.get("data") or {}).get(ref.key))
    return None


def reward_problem(job: GRPOJob, source: str | None) -> Problem | None:
    """Does the custom reward file parse, and define the function the job names?

    Only the syntax and the module-level names (api/reward_source.py, which the trainer's own
    check shares): importing it would run the user's code in the operator. What the import itself
    finds (a missing module), and what the checker does not judge (a file too large or too deep
    for it, a star import), the trainer reports before Ray starts (grpo-train prepare-data), as a
    configuration error naming the file. Never raises: a file no reconcile can get past would
    leave the job with no phase, condition or Event.
    """
    custom = job.spec.reward.custom
    if custom is None:
        return None
    where = f"{custom.config_map}/{custom.key}"
    if source is None:
        return Problem("spec.reward.custom", f"{where} is binary data, not a Python file")
    found = reward_source.read(source, custom.function, filename=custom.key)
    if found.error:
        at = f" at line {found.line}" if found.line else ""
        return Problem("spec.reward.custom", f"{where} is not valid Python: {found.error}{at}")
    if found.defined is False:
        return Problem(
            "spec.reward.custom.function",
            f"{where} defines no {custom.function!r} (its functions: {', '.join(found.functions) or 'none'})",
        )
    return None  # defined, or not judged (found.why_unjudged): the trainer's import will tell
