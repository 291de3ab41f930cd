"""Names, labels and owner references shared by every child object."""

from __future__ import annotations

from typing import Any, Literal

from ..api.v1alpha1 import API_VERSION, GROUP, KIND, GRPOJob

JOB_LABEL = "grpo.dev/job"
COMPONENT_LABEL = "grpo.dev/component"
ATTEMPT_LABEL = "grpo.dev/attempt"
MANAGED_BY = "grpo-operator"


def rayjob_name(job_name: str, attempt: int) -> str:
    return f"{job_name}-{attempt}"


def spec_configmap_name(job_name: str) -> str:
    return f"{job_name}-spec"


def checkpoint_claim_name(job_name: str) -> str:
    return f"{job_name}-checkpoints"


def trainer_account_name(job_name: str) -> str:
    return f"{job_name}-trainer"


def network_policy_name(job_name: str) -> str:
    return f"{job_name}-ray"


def labels(job: GRPOJob, component: str) -> dict[str, str]:
    """Our label taxonomy: selectable by job and component, recognisable by the usual app labels."""
    return {
        JOB_LABEL: job.name,
        COMPONENT_LABEL: component,
        "app.kubernetes.io/name": "grpo-job",
        "app.kubernetes.io/instance": job.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def owner_reference(job: GRPOJob) -> dict[str, Any]:
    """Makes the garbage collector delete the child with its GRPOJob."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_meta(job: GRPOJob, name: str, component: str, *, owned: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": job.namespace, "labels": labels(job, component)}
    if owned:
        meta["ownerReferences"] = [owner_reference(job)]
    return meta


Ownership = Literal["ours", "earlier", "foreign"]


def ownership(existing: dict[str, Any], job: GRPOJob) -> Ownership:
    """Whose an existing object with one of `job`'s child names is (`ownership_by`)."""
    return ownership_by(existing, job.uid, job.name)


def ownership_by(existing: dict[str, Any], uid: str, name: str) -> Ownership:
    """Whose an existing object with one of the child names of the job `name` (uid `uid`) is; by
    uid and name alone, for a job the models cannot read too.

    - ours: controlled by this job (its uid), or a retained checkpoint volume made for a job of
      this name (it has no owner on purpose, so that a re-created job finds its checkpoints);
    - earlier: controlled by an earlier job of the same name, which the garbage collector is
      removing;
    - foreign: anything else. It is never adopted: server-side apply would take it over, and
      deleting the job would then delete someone else's object.
    """
    meta = existing.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if not ref.get("controller"):
            continue
        if ref.get("kind") == KIND and str(ref.get("apiVersion", "")).startswith(f"{GROUP}/"):
            if ref.get("uid") == uid:
                return "ours"
            if ref.get("name") == name:
                return "earlier"
        return "foreign"
    found = meta.get("labels") or {}
    if (
        existing.get("kind") == "PersistentVolumeClaim"
        and found.get(JOB_LABEL) == name
        and found.get(COMPONENT_LABEL) == "checkpoints"
        and found.get("app.kubernetes.io/managed-by") == MANAGED_BY
    ):
        return "ours"
    return "foreign"
