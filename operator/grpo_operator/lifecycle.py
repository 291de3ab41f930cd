"""From what is observed to what should be: the GRPOJob lifecycle as one pure function.

`plan()` takes the job (with the status the operator last wrote), the RayJob of its current
attempt (or None), the validation problems and the time, and returns the operator's status
fields plus the one action to take (create a RayJob, delete one, or nothing). The handlers only
carry the plan out, so every transition — retries, suspend, deadlines — is unit-tested here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from .api import contract
from .api.problem import Problem
from .api.timestamps import parse_rfc3339, rfc3339
from .api.v1alpha1 import GRPOJob
from .api.v1alpha1.status import (
    CONDITION_MESSAGE_LIMIT,
    FAILED_ATTEMPT_MESSAGE_LIMIT,
    FAILED_ATTEMPTS_LIMIT,
    NAME_LIMIT,
    OPERATOR_STATUS_FIELDS,
    Phase,
    current_eta_seconds,
    cut,
    duration,
    reason,
)
from .children.meta import rayjob_name
from .children.paths import job_paths
from .children.rayjob import cluster_ttl
from .health import at_rest, judge
from .rayjob_status import DEPLOYMENT_FAILED, FINISHED_JOB, RayJobStatus
from .startup import Trouble
from .validation import describe

TERMINAL: frozenset[str] = frozenset({"Succeeded", "Failed"})
CONDITION_TYPES = ("Created", "Running", "Restarting", "Suspended", "Succeeded", "Failed", "Healthy")
ENDED_CONDITIONS = ("Succeeded", "Failed", "Suspended", "Healthy")
"""The conditions a finished job keeps: how it ended, and how it was. Created, Running and
Restarting described an attempt on its way; once the job has ended they say nothing its phase
and Succeeded or Failed do not (`kubectl wait` the end on those)."""
_SIGNATURE = re.compile(contract.SIGNATURE_PATTERN)


@dataclass(frozen=True)
class Outcome:
    """What the current attempt's RayJob says."""

    state: Literal["starting", "queued", "running", "succeeded", "failed", "yielded"]
    reason: str = ""
    message: str = ""
    retryable: bool = False
    signature: str = ""
    """The trainer's signature of a crash (its root exception and place), when it gave one."""


@dataclass(frozen=True)
class Plan:
    """The operator's status fields to write and the action to carry out."""

    status: dict[str, Any]
    create_attempt: int | None = None
    delete_rayjob: str | None = None
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, reason, message) — one per phase change."""
    on_created: list[tuple[str, str, str]] = field(default_factory=list)
    """Events that say `create_attempt`'s RayJob exists: posted once it does, never before (a
    build or a create that fails drops them)."""
    keep_driver: bool = False
    """`delete_rayjob` is a planned stop that saves first: the RayJob goes without KubeRay's stop of
    the Ray job, so its pods' preStop hooks and grace period let the trainer save
    (k8s/api.py, delete_rayjob)."""


def observe_rayjob(rayjob: dict[str, Any]) -> Outcome:
    """Read a RayJob's status (KubeRay v1.x) into an outcome."""
    seen = RayJobStatus.of(rayjob)
    if seen.job == "SUCCEEDED" and seen.deployment in ("Complete", "Running", ""):
        return Outcome("succeeded", "RayJobSucceeded", seen.message)
    if seen.job in ("FAILED", "STOPPED") or seen.deployment in DEPLOYMENT_FAILED:
        retryable = seen.deployment != "ValidationFailed" and contract.is_retryable(seen.message)
        code = contract.exit_code_in(seen.message)
        told = contract.failure_in(seen.message)
        if code == contract.YIELDED or (told is not None and told.get("exitCode") == contract.YIELDED):
            # A planned stop: the trainer saved and ended as its pods asked (stopping.py).
            said = told.get("message", "") if told is not None else contract.describe_exit(code or 0)
            return Outcome("yielded", "Yielded", f"trainer: {said}".strip(), True)
        if told is not None:
            # The trainer said what went wrong (OutOfMemory, CollectiveTimeout, ConfigError...).
            signature = told.get("signature")
            return Outcome(
                "failed",
                reason(told["reason"], "TrainerFailed"),
                f"trainer: {told.get('message', '')}".strip(),
                retryable,
                signature if isinstance(signature, str) and _SIGNATURE.fullmatch(signature) else "",
            )
        if code is not None:
            why = "TrainerFailed" if not retryable else "TrainerCrashed"
            detail = f"trainer exited: {contract.describe_exit(code)}"
        else:
            why = reason(seen.reason, "RayJobFailed") if seen.reason else "RayJobFailed"
            detail = "Ray job failed"
        return Outcome("failed", why, f"{detail}. {seen.message}".strip(), retryable)
    if seen.deployment == "Suspended" or seen.suspended:
        return Outcome("queued", "Queued", "waiting for admission by Kueue")
    if seen.job == "RUNNING":
        return Outcome("running", "RayJobRunning", "the trainer is running")
    return Outcome("starting", "RayClusterStarting", f"Ray cluster {seen.deployment or 'being created'}")


def _set_condition(
    conditions: list[dict[str, Any]],
    ctype: str,
    status: bool | None,
    reason: str,
    message: str,
    now: str,
    generation: int | None,
) -> list[dict[str, Any]]:
    """Conditions with `ctype` set (None: Unknown); lastTransitionTime moves only when the status flips."""
    wanted = "Unknown" if status is None else "True" if status else "False"
    before = next((c for c in conditions if c["type"] == ctype), None)
    cond = {
        "type": ctype,
        "status": wanted,
        "reason": reason,
        "message": message,
        "lastTransitionTime": (
            before["lastTransitionTime"] if before is not None and before["status"] == wanted else now
        ),
        **({"observedGeneration": generation} if generation is not None else {}),
    }
    out = [c for c in conditions if c["type"] != ctype] + [cond]
    return sorted(out, key=lambda c: CONDITION_TYPES.index(c["type"]))


def _observed(conditions: list[dict[str, Any]], generation: int | None) -> list[dict[str, Any]]:
    """Every condition as judged at `generation`.

    Each pass re-judges the whole status from the spec it read, so a condition the pass left as
    it was still holds for that spec: without this, `kubectl wait` ignores a condition whose
    observedGeneration is older than the job's generation, and waits forever after any edit.
    """
    if generation is None:
        return conditions
    return [{**c, "observedGeneration": generation} for c in conditions]


class _Status:
    """A mutable working copy of the operator-owned status fields."""

    def __init__(self, job: GRPOJob, now: datetime, fields: dict[str, Any] | None = None) -> None:
        wire = job.status.to_wire() if fields is None else fields
        self.fields: dict[str, Any] = {k: v for k, v in wire.items() if k in OPERATOR_STATUS_FIELDS}
        self.fields.setdefault("conditions", [])
        self.moment = now
        self.now = rfc3339(now)
        self.generation = job.metadata.get("generation")
        self.events: list[tuple[str, str, str]] = []
        self.on_created: list[tuple[str, str, str]] = []
        self.progress = job.status.progress.to_wire() if job.status.progress else None

    def condition(self, ctype: str, status: bool | None, why: str, message: str) -> None:
        self.fields["conditions"] = _set_condition(
            self.fields["conditions"],
            ctype,
            status,
            reason(why),
            cut(message, CONDITION_MESSAGE_LIMIT),
            self.now,
            self.generation,
        )

    def clear(self, *ctypes: str, reason: str, message: str = "") -> None:
        """Set conditions to False, but only those that exist (no noise on fresh jobs)."""
        for ctype in ctypes:
            if any(c["type"] == ctype and c["status"] == "True" for c in self.fields["conditions"]):
                self.condition(ctype, False, reason, message)

    def phase(self, phase: Phase, why: str, message: str, *, once_created: bool = False) -> None:
        """Set the phase, with an Event when it changes; `once_created`: the Event tells of the
        attempt's RayJob, so it waits until the RayJob exists (Plan.on_created)."""
        if self.fields.get("phase") != phase:
            warning = phase in ("Failed", "Restarting")
            event = ("Warning" if warning else "Normal", reason(why), message)
            (self.on_created if once_created else self.events).append(event)
        self.fields["phase"] = phase

    def finish(self, phase: Literal["Succeeded", "Failed"], why: str, message: str) -> None:
        self.phase(phase, why, message)
        self.condition(phase, True, why, message)
        self.clear("Running", "Restarting", reason=why, message=message)
        if not self.fields.get("completionTime"):
            self.fields["completionTime"] = self.now

    def ray_names(self, seen: RayJobStatus) -> None:
        """Copy the Ray cluster's name and dashboard address from KubeRay, within the schema's bounds."""
        if seen.cluster_name:
            self.fields["rayClusterName"] = cut(seen.cluster_name, NAME_LIMIT)
        if seen.dashboard_url:
            self.fields["dashboardURL"] = cut(seen.dashboard_url, NAME_LIMIT)

    def plan(
        self,
        *,
        create_attempt: int | None = None,
        delete_rayjob: str | None = None,
        keep_driver: bool = False,
    ) -> Plan:
        return Plan(
            self.observed(),
            create_attempt,
            delete_rayjob,
            self.events,
            self.on_created,
            keep_driver and bool(delete_rayjob),
        )

    def observed(self) -> dict[str, Any]:
        """The fields, stamped with the generation they were computed from."""
        fields = dict(self.fields)
        conditions = fields["conditions"]
        if fields.get("phase") in TERMINAL:
            conditions = [c for c in conditions if c["type"] in ENDED_CONDITIONS]
        fields["conditions"] = _observed(conditions, self.generation)
        if not fields.get("failedAttempts"):
            # None failed: no empty list for `kubectl describe` to print (an absent one deletes it).
            fields.pop("failedAttempts", None)
        if self.generation is not None:
            fields["observedGeneration"] = self.generation
        # The ETA column follows the phase this pass decided: empty while suspended, restarting or
        # finished, and after a resume until the new attempt reports its own pace.
        eta = duration(current_eta_seconds({**fields, "progress": self.progress}))
        if eta:
            fields["eta"] = eta
        else:
            fields.pop("eta", None)
        return fields


DISRUPTION_CAUSES = {
    "EvictionByEvictionAPI": "Evicted",
    "PreemptionByScheduler": "Preempted",
    "DeletionByTaintManager": "NodeTainted",
    "TerminationByKubelet": "NodeShutdown",
}
"""A pod's DisruptionTarget condition reason (set by Kubernetes on the pods it stops) -> the cause
a planned stop's Event names."""


def stop_cause(disruption: str) -> str:
    """The cause of a stop the pods' DisruptionTarget reason names ("" when none did)."""
    return (
        DISRUPTION_CAUSES.get(disruption, reason(disruption, "PodsStopped")) if disruption else "PodsStopped"
    )


def _last_stop(job: GRPOJob, attempt: int) -> dict[str, Any] | None:
    """The trainer's account of attempt `attempt`'s planned stop (status.checkpoint.lastStop)."""
    checkpoint = job.status.checkpoint
    stop = checkpoint.last_stop if checkpoint is not None else None
    if stop is None or stop.attempt != attempt:
        return None
    return {"step": stop.step, "lost": stop.steps_lost, "seconds": stop.save_seconds, "why": stop.reason}


def _stop_words(attempt: int, stop: dict[str, Any], cause: str) -> tuple[str, str]:
    """(the condition's sentence, the Event's message) for a planned stop the trainer reported."""
    if stop["lost"]:
        saved = f"could not save before stop ({stop['why']}): resumes from step {stop['step']}, {stop['lost']} step(s) lost"
        return f"attempt {attempt} {saved}", f"{saved} ({cause})"
    took = f" in {stop['seconds']:.1f} s" if stop["seconds"] is not None else ""
    return (
        f"attempt {attempt} saved step {stop['step']}{took} before its pods stopped ({cause}); 0 steps lost",
        f"saved step {stop['step']} before stop ({cause})",
    )


_TOLD_CAUSE = re.compile(r"before its pods stopped \((\w+)\)")


def _tell_stop(
    st: _Status, job: GRPOJob, attempt: int, ctype: str, status: bool, why: str, message: str, cause: str
) -> None:
    """Set condition `ctype`, adding the trainer's account of attempt `attempt`'s planned stop
    once it has one; one Normal Event `SavedBeforeStop` the first time any condition says it.

    The trainer's report of the stop can come while the attempt's RayJob still runs (the Running
    condition says it) or after it has ended (Restarting, Suspended, Failed): whichever comes
    first names the cause, and a later one keeps it, since the pods that said it may be gone."""
    stop = _last_stop(job, attempt)
    if stop is None:
        st.condition(ctype, status, why, message)
        return
    core = _stop_words(attempt, stop, cause)[0].split(" (")[0]
    told = [c.get("message", "") for c in st.fields["conditions"] if core in c.get("message", "")]
    named = next((m.group(1) for m in map(_TOLD_CAUSE.search, told) if m), None)
    sentence, event = _stop_words(attempt, stop, named or cause)
    st.condition(ctype, status, why, f"{message}; {sentence}")
    if not told:
        st.events.append(("Normal", "SavedBeforeStop", event))


def _start_attempt(st: _Status, job: GRPOJob, attempt: int) -> int:
    """Make `attempt` the current one. Its number goes into status before its RayJob is created
    (the RayJob's name follows from it, so a crash in between leaves nothing the status does not
    name); `rayJobName` only once the RayJob exists (children_created)."""
    st.fields["attempt"] = attempt
    st.fields.pop("rayJobName", None)
    st.fields.pop("rayClusterName", None)
    st.fields.pop("dashboardURL", None)
    st.fields.setdefault("startTime", st.now)
    return attempt


def _fail_attempt(
    st: _Status, job: GRPOJob, attempt: int, outcome: Outcome, rayjob: dict[str, Any] | None = None
) -> Plan:
    """Retry from the latest checkpoint while the budget lasts; otherwise fail the job.

    Only failures use the budget: attempts that ended in a suspension are not failures, so the
    retries used are the failed attempts recorded before this one. `rayjob`: the failed attempt's
    RayJob, when it is still there.
    """
    failed = [*st.fields.get("failedAttempts", [])]
    if not any(f["attempt"] == attempt for f in failed):
        failed.append(
            {
                "attempt": attempt,
                "reason": reason(outcome.reason, "AttemptFailed"),
                "message": cut(outcome.message, FAILED_ATTEMPT_MESSAGE_LIMIT),
                "retryable": outcome.retryable,
                **({"signature": outcome.signature} if outcome.signature else {}),
                "logFile": contract.attempt_log_file(job_paths(job).metrics_dir, attempt),
            }
        )
    st.fields["failedAttempts"] = failed[-FAILED_ATTEMPTS_LIMIT:]
    limit = job.spec.run_policy.backoff_limit
    retries_used = sum(1 for f in failed if f["attempt"] != attempt)
    repeated = _repeats_previous(failed, attempt, outcome)
    if repeated is not None:
        st.finish(
            "Failed",
            "RepeatedFailure",
            f"attempt {attempt} failed as attempt {repeated} did, so another attempt would too "
            f"(not retried): {cut(outcome.message, 600)}",
        )
        return st.plan()
    if outcome.retryable and retries_used < limit:
        # A failed attempt's cluster outlives it when KubeRay's TTL is set, or while KubeRay has
        # not finished the RayJob (with a submitter, until the submitter exits): the next attempt
        # needs its devices now, and under Kueue its queue's quota, which a RayJob holds until
        # KubeRay finishes it (the failure is in failedAttempts, its log on the volume).
        gone = cluster_ttl(job) or (rayjob is not None and not kuberay_finished(rayjob))
        lingering = rayjob_name(job.name, attempt) if gone else None
        nxt = _start_attempt(st, job, attempt + 1)
        message = (
            f"attempt {attempt} failed ({cut(outcome.message, 300)}); starting attempt {nxt} "
            f"(retry {retries_used + 1} of {limit}), resuming from the latest checkpoint"
        )
        st.phase("Restarting", "Retrying", message)
        st.condition("Restarting", True, "Retrying", message)
        st.clear("Running", reason="AttemptFailed", message=f"attempt {attempt} failed")
        return st.plan(create_attempt=nxt, delete_rayjob=lingering)
    if outcome.retryable:
        message = f"attempt {attempt} failed and backoffLimit={limit} retries are used up: {cut(outcome.message, 600)}"
        st.finish("Failed", "BackoffLimitExceeded", message)
    else:
        st.finish(
            "Failed",
            reason(outcome.reason, "AttemptFailed"),
            f"attempt {attempt} failed and will not be retried: {cut(outcome.message, 600)}",
        )
    return st.plan()


def _yield_attempt(
    st: _Status, job: GRPOJob, attempt: int, outcome: Outcome, rayjob: dict[str, Any], cause: str
) -> Plan:
    """A planned stop the operator did not make (an eviction, a drain, a preemption of the pods):
    the next attempt resumes after the saved step. Not a failure: no retry of backoffLimit, no
    failedAttempts entry."""
    gone = cluster_ttl(job) or not kuberay_finished(rayjob)
    lingering = rayjob_name(job.name, attempt) if gone else None
    nxt = _start_attempt(st, job, attempt + 1)
    message = f"attempt {attempt} yielded ({cut(outcome.message, 300)}); starting attempt {nxt}, resuming after its last step"
    if st.fields.get("phase") != "Restarting":
        st.events.append(("Normal", "Yielded", message))
    st.fields["phase"] = "Restarting"
    _tell_stop(st, job, attempt, "Restarting", True, "Yielded", message, cause)
    st.clear("Running", reason="Yielded", message=f"attempt {attempt} yielded ({cause})")
    return st.plan(create_attempt=nxt, delete_rayjob=lingering)


def _repeats_previous(failed: list[dict[str, Any]], attempt: int, outcome: Outcome) -> int | None:
    """The attempt before this one, when it failed with this crash's signature (a deterministic
    crash: the same exception at the same place, whatever the sizes in its message)."""
    if not outcome.retryable or not outcome.signature:
        return None
    before = [f for f in failed if f["attempt"] < attempt]
    if before and before[-1]["attempt"] == attempt - 1 and before[-1].get("signature") == outcome.signature:
        return attempt - 1
    return None


def _health(st: _Status, job: GRPOJob, now: datetime) -> None:
    """The Healthy condition from health.judge, and an Event whenever it flips."""
    running = next((c for c in st.fields["conditions"] if c["type"] == "Running"), None)
    since = parse_rfc3339(running["lastTransitionTime"]) if running else None
    verdict = judge(job, since, now)
    if verdict is None:
        return
    before = next((c for c in st.fields["conditions"] if c["type"] == "Healthy"), None)
    was = "True" if before is None else before["status"]
    st.condition("Healthy", verdict.healthy, verdict.reason, verdict.message)
    now = next(c for c in st.fields["conditions"] if c["type"] == "Healthy")["status"]
    if now != was and now in ("False", "Unknown"):
        st.events.append(("Warning", reason(verdict.reason), verdict.message))
    elif now != was and now == "True" and before is not None:
        st.events.append(("Normal", "Recovered", verdict.message))


def saves_on_stop(job: GRPOJob) -> bool:
    """Whether the job's pods save before a planned stop (spec.checkpoint.saveOnStop.enabled)."""
    return job.spec.checkpoint.save_on_stop.enabled


def holds_cluster(rayjob: dict[str, Any] | None) -> bool:
    """Whether a RayJob may still hold a Ray cluster (and its devices) that nobody else removes.

    KubeRay tears a cluster down itself once the Ray job has finished (shutdownAfterJobFinishes,
    after its TTL); a RayJob whose Ray job has not finished keeps its cluster until it is deleted.
    """
    if rayjob is None:
        return False
    seen = RayJobStatus.of(rayjob)
    return seen.job not in FINISHED_JOB and seen.deployment not in ("Complete", *DEPLOYMENT_FAILED)


def kuberay_finished(rayjob: dict[str, Any]) -> bool:
    """Whether KubeRay is done with a RayJob (jobDeploymentStatus Complete or Failed): only then
    does it tear the cluster down, and Kueue finish the RayJob's Workload and release its quota.

    In HTTPMode KubeRay writes this with the Ray job's end; with a submitter (K8sJobMode,
    SidecarMode) only once the submitter has exited too, so a failed Ray job can come first.
    """
    return RayJobStatus.of(rayjob).deployment in ("Complete", *DEPLOYMENT_FAILED)


def being_deleted(rayjob: dict[str, Any] | None) -> bool:
    return bool(rayjob and (rayjob.get("metadata") or {}).get("deletionTimestamp"))


def _success_goes_early(job: GRPOJob) -> bool:
    """KubeRay's one TTL is the failure retention when that is the longer: a successful cluster
    is deleted by the operator instead, at once."""
    policy = job.spec.run_policy
    return policy.failed_cluster_retention_seconds > (policy.ttl_seconds_after_finished or 0)


def _end(st: _Status, job: GRPOJob, current: str | None, rayjob: dict[str, Any] | None) -> Plan:
    """A finished job's plan: its current attempt's Ray cluster goes if it still runs (or, after a
    success, if KubeRay's TTL would keep it for the failure retention).

    Called on every reconcile of a finished job, so a delete that failed is sent again.
    """
    succeeded = st.fields.get("phase") == "Succeeded" and rayjob is not None
    wanted_gone = holds_cluster(rayjob) or (succeeded and _success_goes_early(job))
    if not _cluster_may_live(st, job, rayjob, going=wanted_gone):
        # Neither the cluster's address nor its name is true of anything once it has gone.
        st.fields.pop("dashboardURL", None)
        st.fields.pop("rayClusterName", None)
    if not wanted_gone or being_deleted(rayjob):
        return st.plan()
    return st.plan(delete_rayjob=current)


def _cluster_may_live(st: _Status, job: GRPOJob, rayjob: dict[str, Any] | None, *, going: bool) -> bool:
    """Whether a finished job's Ray cluster may still be there (so its dashboard address is true):
    not once its RayJob is gone or going, nor after KubeRay's TTL for it has run out."""
    if rayjob is None or being_deleted(rayjob) or going:
        return False
    ended = parse_rfc3339(st.fields.get("completionTime"))
    ttl = cluster_ttl(job)
    return bool(ttl) and ended is not None and (st.moment - ended).total_seconds() < ttl


def _over_deadline(st: _Status, job: GRPOJob, now: datetime) -> str:
    """Why the job is past runPolicy.activeDeadlineSeconds; empty while it is not."""
    deadline = job.spec.run_policy.active_deadline_seconds
    started = parse_rfc3339(st.fields.get("startTime"))
    if not started or not deadline:
        return ""
    elapsed = (now - started).total_seconds()
    if elapsed <= deadline:
        return ""
    return f"the job ran {int(elapsed)} s, over runPolicy.activeDeadlineSeconds={deadline}"


def plan(
    job: GRPOJob,
    rayjob: dict[str, Any] | None,
    problems: list[Problem],
    now: datetime,
    waiting: str = "",
    trouble: Trouble | None = None,
    disruption: str = "",
) -> Plan:
    """The next status and action for `job`, given its current attempt's RayJob.

    `waiting`: what the job's first attempt waits for (preflight.py: a claim, ConfigMap or
    Secret it names that does not exist yet); the RayJob is not made until it is there.
    `trouble`: what keeps the current attempt's pods from running (startup.py), while its Ray
    cluster starts. `disruption`: the DisruptionTarget reason on the current attempt's pods (a
    stop the operator did not make), once the trainer has reported a planned stop."""
    st = _Status(job, now)
    phase = st.fields.get("phase")
    attempt = st.fields.get("attempt") or 0
    current = rayjob_name(job.name, attempt) if attempt else None
    if phase in TERMINAL:
        return _ended(st, job, attempt, current, rayjob)
    if problems:
        st.finish("Failed", "InvalidSpec", describe(problems))
        return _end(st, job, current, rayjob)

    run_policy = job.spec.run_policy

    over = _over_deadline(st, job, now)
    if over:
        st.finish("Failed", "DeadlineExceeded", over)
        ended = _end(st, job, current, rayjob)
        return replace(ended, keep_driver=saves_on_stop(job) and bool(ended.delete_rayjob))

    if run_policy.suspend:
        message = "runPolicy.suspend is true: the Ray cluster is torn down and the checkpoints are kept"
        st.fields.pop("dashboardURL", None)
        st.phase("Suspended", "Suspended", message)
        _tell_stop(st, job, attempt, "Suspended", True, "Suspended", message, "Suspended")
        st.clear("Running", "Restarting", reason="Suspended", message=message)
        healthy = next((c for c in st.fields["conditions"] if c["type"] == "Healthy"), None)
        if (rest := at_rest(healthy, "suspended")) is not None:
            st.condition("Healthy", rest.healthy, rest.reason, rest.message)
        return st.plan(
            delete_rayjob=current if rayjob is not None and not being_deleted(rayjob) else None,
            keep_driver=saves_on_stop(job),
        )

    if phase == "Suspended":
        nxt = _start_attempt(st, job, attempt + 1)
        message = f"resumed: attempt {nxt} continues from the latest checkpoint"
        st.phase("Pending", "Resumed", message, once_created=True)
        st.condition("Suspended", False, "Resumed", message)
        return st.plan(create_attempt=nxt)

    if not attempt:
        return _first_attempt(st, job, waiting)

    if rayjob is None:
        if phase in ("Running", "Restarting", "Pending") and st.fields.get("rayClusterName"):
            # The attempt had started and its RayJob is gone: someone deleted it. Treat it like a
            # lost cluster, which a new attempt from the checkpoint recovers from.
            return _fail_attempt(
                st, job, attempt, Outcome("failed", "RayJobDeleted", f"Ray job {current} was deleted", True)
            )
        # Not created yet (or the create was lost): create it again, idempotently.
        return st.plan(create_attempt=attempt)

    st.ray_names(RayJobStatus.of(rayjob))
    outcome = _attempt_outcome(job, attempt, rayjob)
    if outcome.state == "succeeded":
        st.finish("Succeeded", "TrainingSucceeded", f"attempt {attempt} finished training")
        return _end(st, job, current, rayjob)
    if outcome.state == "failed":
        return _fail_attempt(st, job, attempt, outcome, rayjob)
    if outcome.state == "yielded":
        return _yield_attempt(st, job, attempt, outcome, rayjob, stop_cause(disruption))
    if outcome.state == "running":
        return _running(st, job, attempt, now, stop_cause(disruption))
    return _waiting(st, job, attempt, phase, outcome, rayjob, trouble, now)


def _attempt_outcome(job: GRPOJob, attempt: int, rayjob: dict[str, Any]) -> Outcome:
    """The attempt's RayJob read into an outcome, and the trainer's word over it: once the trainer
    has reported this attempt's planned stop its driver has ended, whatever the RayJob still says.
    KubeRay does not recreate the head of a RayJob's cluster, so after the head's eviction the
    RayJob reads RUNNING for ever; the next attempt then resumes after the saved step."""
    outcome = observe_rayjob(rayjob)
    if outcome.state == "running" and _last_stop(job, attempt) is not None:
        return Outcome("yielded", "Yielded", "trainer: stopped as its pods asked", True)
    return outcome


def _waiting(
    st: _Status,
    job: GRPOJob,
    attempt: int,
    phase: str | None,
    outcome: Outcome,
    rayjob: dict[str, Any],
    trouble: Trouble | None,
    now: datetime,
) -> Plan:
    """An attempt whose Ray job is not running: its cluster starts, or Kueue holds its RayJob."""
    # starting or queued: keep Restarting while a retry spins up, Pending otherwise
    if phase != "Restarting":
        st.phase("Pending", outcome.reason, outcome.message)
    if outcome.state == "queued" and _last_stop(job, attempt) is not None:
        # Kueue suspended the attempt's RayJob (a preemption) and its pods saved before they went.
        _tell_stop(st, job, attempt, "Running", False, "Queued", outcome.message, "PreemptedByKueue")
    if outcome.state == "starting":
        return _starting(st, job, attempt, rayjob, trouble, now)
    return st.plan()


def _ended(
    st: _Status, job: GRPOJob, attempt: int, current: str | None, rayjob: dict[str, Any] | None
) -> Plan:
    """A finished job; one that ran out of time says what its last attempt saved on the way out."""
    phase = st.fields["phase"]
    ended = next((c for c in st.fields["conditions"] if c["type"] == phase), None)
    if ended is not None and ended["reason"] == "DeadlineExceeded":
        message = ended["message"].split("; attempt ")[0]
        _tell_stop(st, job, attempt, phase, True, "DeadlineExceeded", message, "DeadlineExceeded")
    return _end(st, job, current, rayjob)


def _running(st: _Status, job: GRPOJob, attempt: int, now: datetime, cause: str) -> Plan:
    message = f"attempt {attempt} is training"
    st.phase("Running", "Running", message)
    _tell_stop(st, job, attempt, "Running", True, "RayJobRunning", message, cause)
    st.clear("Restarting", reason="AttemptRunning", message=message)
    st.clear("Suspended", reason="Resumed", message=message)
    _health(st, job, now)
    return st.plan()


def _starting(
    st: _Status, job: GRPOJob, attempt: int, rayjob: dict[str, Any], trouble: Trouble | None, now: datetime
) -> Plan:
    """An attempt whose cluster has not started: say why (Running=False with the pods' reason and
    one Warning per new reason), and fail it at runPolicy.startDeadlineSeconds."""
    if trouble is not None:
        before = next((c for c in st.fields["conditions"] if c["type"] == "Running"), None)
        message = f"attempt {attempt} has not started: {trouble.message}"
        st.condition("Running", False, trouble.reason, message)
        if before is None or (before["status"], before["reason"]) != ("False", reason(trouble.reason)):
            st.events.append(("Warning", reason(trouble.reason), message))
    limit = job.spec.run_policy.start_deadline_seconds
    deadline = start_deadline(job, rayjob)
    if deadline is None or now <= deadline:
        return st.plan()
    why = trouble.message if trouble else "its Ray cluster never became ready (no pod reported a reason)"
    return _fail_attempt(
        st,
        job,
        attempt,
        Outcome(
            "failed",
            "StartDeadlineExceeded",
            f"not started within runPolicy.startDeadlineSeconds={limit}: {why}",
            retryable=False,
        ),
    )


def start_deadline(job: GRPOJob, rayjob: dict[str, Any]) -> datetime | None:
    """When an attempt that has not started fails: runPolicy.startDeadlineSeconds after KubeRay's
    startTime, when it began deploying this RayJob (again after a Kueue admission)."""
    made = parse_rfc3339(
        (rayjob.get("status") or {}).get("startTime")
        or (rayjob.get("metadata") or {}).get("creationTimestamp")
    )
    return None if made is None else made + timedelta(seconds=job.spec.run_policy.start_deadline_seconds)


WAITING_FOR_INPUTS = "WaitingForInputs"


def _first_attempt(st: _Status, job: GRPOJob, waiting: str) -> Plan:
    if waiting:
        return _wait_for_inputs(st, waiting)
    nxt = _start_attempt(st, job, 1)
    # `Created`, `rayJobName` and this Event wait until the children exist (children_created,
    # Plan.on_created): a RayJob that cannot be built or created is never said to be.
    st.phase("Pending", "Created", f"created Ray job {rayjob_name(job.name, nxt)}", once_created=True)
    return st.plan(create_attempt=nxt)


def _wait_for_inputs(st: _Status, waiting: str) -> Plan:
    """Pending, with `Created=False` saying what is missing, and one Warning each time that changes."""
    before = next((c for c in st.fields["conditions"] if c["type"] == "Created"), None)
    st.fields["phase"] = "Pending"
    st.condition("Created", False, WAITING_FOR_INPUTS, waiting)
    if before is None or (before["reason"], before["message"]) != (WAITING_FOR_INPUTS, waiting):
        st.events.append(("Warning", WAITING_FOR_INPUTS, waiting))
    return st.plan()


def children_created(job: GRPOJob, status: dict[str, Any], now: datetime) -> dict[str, Any] | None:
    """The status patch that marks the job's children as existing, and names the attempt's
    RayJob in `rayJobName`; None when the status says so already.

    The reconciler calls it once every child of the current attempt is there (`status`: the
    operator's fields as just written): `Created` and `rayJobName` mean they exist, not that they
    were asked for.
    """
    attempt = status.get("attempt") or 0
    name = rayjob_name(job.name, attempt)
    message = f"Ray job {name} and the job's other children exist"
    patch = _created(job, status, now, True, "ChildrenCreated", message) or {}
    if status.get("rayJobName") != name:
        patch["rayJobName"] = name
    return patch or None


def children_waiting(
    job: GRPOJob, status: dict[str, Any], now: datetime, why: str, message: str
) -> dict[str, Any] | None:
    """The status patch saying why the children cannot be made yet; None when it says so already."""
    return _created(job, status, now, False, why, message)


def _created(
    job: GRPOJob, status: dict[str, Any], now: datetime, value: bool, why: str, message: str
) -> dict[str, Any] | None:
    st = _Status(job, now, status)
    before = list(st.fields["conditions"])
    st.condition("Created", value, why, message)
    if st.fields["conditions"] == before:
        return None
    return {"conditions": st.observed()["conditions"]}


def fail(
    job: GRPOJob,
    status: dict[str, Any],
    rayjob: dict[str, Any] | None,
    why: str,
    message: str,
    now: datetime,
) -> Plan:
    """Fail the job for something the operator ran into (a child the API server refused, an object
    of a child's name that is not ours), taking down a Ray cluster it may have started.

    `status`: the operator's fields as last written."""
    st = _Status(job, now, status)
    if st.fields.get("phase") in TERMINAL:
        return st.plan()
    attempt = st.fields.get("attempt") or 0
    st.finish("Failed", why, message)
    st.condition("Created", False, why, message)
    return _end(st, job, rayjob_name(job.name, attempt) if attempt else None, rayjob)
