"""Every child of one attempt, built at once, before anything is created or written.

The reconciler builds them all first (pure), then creates them, and only then writes the status
and the Event that say so. A child that cannot be built from the spec (a quantity no exact
arithmetic should be asked to hold, a value a builder does not expect) is then a problem of the
job's, `Failed/InvalidSpec` naming the field, and never a status that claims a RayJob that was
never created while every later pass fails the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..api.problem import Problem, ProblemError
from ..api.v1alpha1 import GRPOJob
from ..config import Settings
from .configmap import build_spec_configmap
from .networkpolicy import build_network_policy
from .pvc import build_checkpoint_pvc
from .rayjob import build_rayjob
from .rbac import build_trainer_rbac

UNBUILDABLE_FIELD = "spec"
"""The field a build failure names when no builder said which one (the general guard)."""


@dataclass(frozen=True)
class AttemptChildren:
    """The job's children for one attempt, as the API server is to hold them."""

    spec_configmap: dict[str, Any]
    account: dict[str, Any]
    role: dict[str, Any]
    binding: dict[str, Any]
    claim: dict[str, Any] | None
    """None when the job names its own claim (checkpoint.claimName)."""
    policy: dict[str, Any] | None
    """None when the settings turn NetworkPolicies off."""
    rayjob: dict[str, Any]


def build_children(job: GRPOJob, settings: Settings, attempt: int) -> AttemptChildren:
    """Every child of `attempt`; ProblemError naming the field when one cannot be built.

    A builder that knows the field raises ProblemError itself; anything else a builder raises is
    caught here (the general guard: a bug, or a spec the schema admits that no builder foresaw)
    and named by the child it was building, so no exception from a spec escapes to the reconcile.
    """
    building = "the trainer's ServiceAccount, Role and RoleBinding"
    try:
        account, role, binding = build_trainer_rbac(job)
        building = "the spec ConfigMap"
        configmap = build_spec_configmap(job, settings)
        building = "the checkpoint claim"
        claim = build_checkpoint_pvc(job, settings)
        building = "the NetworkPolicy"
        policy = build_network_policy(job, settings)
        building = f"the RayJob of attempt {attempt}"
        rayjob = build_rayjob(job, settings, attempt)
    except ProblemError:
        raise
    except Exception as error:  # the general guard: see the docstring
        message = f"the operator cannot build {building} from this spec: {type(error).__name__}: {error}"
        raise ProblemError(Problem(UNBUILDABLE_FIELD, message.splitlines()[0][:512])) from error
    return AttemptChildren(configmap, account, role, binding, claim, policy, rayjob)
