"""One reconcile pass of one GRPOJob: read, validate, plan, then act on the plan.

Every trigger (a job's event, a RayJob's, a retry, the resync) ends in `Reconciler.once`, through
the queue (handlers/queue.py), which runs one pass per job at a time and tries a failed one again;
so there is one code path to reason about. Deterministic names and server-side apply make a
repeat after a crash harmless.

Level-triggered throughout: every pass over an unfinished job makes sure each of its children
exists (from memory when this process has seen them all for the current attempt within
CHILDREN_CHECK_PERIODS resync periods, by asking the API server otherwise), and a finished job
is looked at until its Ray cluster is gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from .. import preflight
from ..api.problem import Problem, ProblemError
from ..api.timestamps import parse_rfc3339, rfc3339
from ..api.v1alpha1 import GRPOJob
from ..api.v1alpha1.status import CONDITION_MESSAGE_LIMIT, OPERATOR_STATUS_FIELDS, cut, diff, readable
from ..children.attempt import AttemptChildren, build_children
from ..children.configmap import is_pinned
from ..children.meta import ATTEMPT_LABEL, JOB_LABEL, ownership, ownership_by, rayjob_name
from ..config import Settings
from ..k8s import Api, ApiError
from ..lifecycle import (
    TERMINAL,
    Plan,
    children_created,
    children_waiting,
    fail,
    holds_cluster,
    observe_rayjob,
    plan,
    start_deadline,
)
from ..metrics import Metrics
from ..rayjob_status import RayJobStatus
from ..startup import Trouble, grace_ends, trouble
from ..validation import validate
from ..verdict import schema_problems
from .startup_checks import StartupChecks, WarningEvents
from .urgency import Urgency
from .watched import Watched

log = logging.getLogger(__name__)

REJECTED = frozenset({400, 413, 422})
"""Answers that refuse a child as written: sending it again cannot help."""
UNREADABLE_STATUS = "UnreadableStatus"
"""The Warning's reason when part of a job's status is left unread (written by another version)."""
CHILDREN_CHECK_PERIODS = 5
"""Resync periods between two reads of a job's children (ConfigMap, claim, RBAC, NetworkPolicy).

Nothing but a person or another controller deletes them, and their reads were most of what the
resync cost per quiet job: read every period, a burst that waits long for its Ray clusters paid
six GETs per job per period. A child deleted by hand comes back within this many periods (the
operator's restart and a Lease takeover read every child at once). Also the longest wait between
two looks at a starting job's pods while its RayJob stands still (handlers/startup_checks.py)."""


class ChildRefusedError(Exception):
    """A child the job cannot have as written: the job fails with this reason and message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class ChildWaitingError(Exception):
    """A child that cannot be made yet (an earlier job's object of its name is still going)."""


class StaleReadError(Exception):
    """The job changed since it was read (another writer, or a replica that was not the leader):
    the status computed from that read is not written; the reconcile starts over from a fresh one."""


def plan_with_children(
    job: GRPOJob,
    rayjob: dict[str, Any] | None,
    problems: list[Problem],
    now: datetime,
    settings: Settings,
    *,
    waiting: str = "",
    trouble: Trouble | None = None,
    disruption: str = "",
    due: Callable[[Plan], bool],
) -> tuple[Plan, AttemptChildren | None, list[Problem]]:
    """The pass's plan, and its attempt's children built before any status names them (when
    `due` says the plan makes sure of them); with the problems it was planned from.

    Pure. A child the spec cannot make is a problem of the job's (ProblemError, naming the
    field): the plan is made again with it, and fails the job with `InvalidSpec`, so no status
    or Event claims a RayJob that was never created and no later pass fails on the same build.
    """
    result = plan(job, rayjob, problems, now, waiting, trouble, disruption)
    if not due(result):
        return result, None, problems
    try:
        return result, build_children(job, settings, int(result.status["attempt"])), problems
    except ProblemError as error:
        problems = [*problems, error.problem]
        return plan(job, rayjob, problems, now, waiting, trouble, disruption), None, problems


def _kind_name(manifest: dict[str, Any]) -> str:
    return f"{manifest['kind']} {manifest['metadata']['name']}"


class Reconciler:
    """One pass over one job, and what passes share: the API, the settings, the metrics, the
    urgency gate and what this process knows of each job."""

    def __init__(
        self,
        api: Api,
        settings: Settings,
        metrics: Metrics,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        # What a starting job's pods say, looked at when due; the Warning Events shared by namespace.
        self.startup_checks = StartupChecks()
        self.warning_events = WarningEvents(api.warning_events)
        self.urgency = Urgency()
        self.watched = Watched()
        """What the watches last delivered (wiring.py feeds it), for the resync's visits."""
        # Unfinished jobs with an activeDeadlineSeconds: the deadline pass visits only these.
        self.with_deadline: set[tuple[str, str]] = set()
        # Finished jobs whose current RayJob may still hold a Ray cluster: visited as often.
        self.draining: set[tuple[str, str]] = set()
        # Jobs this process last saw unfinished: the resync visits those that go quiet.
        self.unfinished: set[tuple[str, str]] = set()
        # Per job whose children this process has seen exist: (uid, attempt), and when it looked.
        self._ensured: dict[tuple[str, str], tuple[str, int, datetime]] = {}
        # Per job: the status fields last left out as unreadable (one Warning per change).
        self._unread: dict[tuple[str, str], list[str]] = {}

    @property
    def due_often(self) -> set[tuple[str, str]]:
        """Jobs the frequent pass visits: deadlines to enforce and Ray clusters to take down."""
        return self.with_deadline | self.draining

    def forget_children(self) -> None:
        """Check every job's children with the API server again (taking the Lease over calls this)."""
        self._ensured.clear()

    def forget(self, key: tuple[str, str]) -> None:
        """The job is gone: drop what this process knew of it."""
        self.metrics.forget(*key)
        self.with_deadline.discard(key)
        self.draining.discard(key)
        self.unfinished.discard(key)
        self._ensured.pop(key, None)
        self._unread.pop(key, None)
        self.startup_checks.forget(key)
        self.watched.job_gone(key)

    async def once(
        self,
        namespace: str,
        name: str,
        owner_uid: str | None,
        body: dict[str, Any] | None,
        event_rayjob: dict[str, Any] | None,
        release: Callable[[], None] | None,
        *,
        trigger: str = "job",
        watched: bool = False,
    ) -> str:
        """One pass; returns its outcome (a metrics label). StaleReadError: start over from a fresh read.

        `owner_uid`, from a child's owner reference, must match the job's: a RayJob left over from
        an earlier job of the same name must not drive the new one. `body` (a just-created job) and
        `event_rayjob` (from a RayJob event) each save a read when they are current. `release`
        ends this pass's hold on the urgency gate once its RayJob is created. `trigger` names what
        brought the job here, for the count of RayJobs by trigger. `watched` (the resync's visits):
        plan from the bodies the watches last delivered where they have one (handlers/watched.py);
        a stale one is refused on write, and the pass started over with `watched` off.
        """
        key = (namespace, name)
        seen = self.watched.job(key) if watched and body is None else None
        if seen is not None:
            body = seen
        elif body is None or body.get("status"):
            # Read afresh under the lock: a handler's body may predate our last status write.
            body = await self.api.get_job(namespace, name)
        else:
            body = {**body, "metadata": dict(body["metadata"])}  # our writes move its resourceVersion
        if body is None:
            return "gone"  # the queue calls forget
        if owner_uid is not None and body["metadata"].get("uid") != owner_uid:
            return "stale"
        if body["metadata"].get("deletionTimestamp"):
            # Being deleted: its RayJob vanishing now is the cascade, not a lost attempt.
            return "deleting"
        body = await self._readable(key, body)
        try:
            job = GRPOJob.model_validate(body)
        except ValidationError as error:
            # The schema admitted it but the models do not (an older CRD, say): fail it visibly,
            # and stop its attempt, on this pass and every later one until the cluster is gone.
            phase, outcome = (body.get("status") or {}).get("phase"), "terminal"
            if phase not in TERMINAL:
                await self._fail_unparseable(body, schema_problems(error)[:5])
                phase, outcome = "Failed", "invalid"
            await self._stop_unparseable(key, body)
            self.metrics.phases[key] = phase
            return outcome
        terminal = job.status.phase in TERMINAL
        if job.spec.run_policy.active_deadline_seconds and not terminal:
            self.with_deadline.add(key)
        else:
            self.with_deadline.discard(key)
        problems = [] if terminal else await self._problems(job)
        waiting = ""
        if not terminal and not problems and not job.status.attempt:
            problems, waiting = await self._preflight(job)
        rayjob = await self._current_rayjob(job, event_rayjob, watched=seen is not None)
        trouble = await self._startup_trouble(job, rayjob) if not terminal else None
        disruption = await self._disruption(job) if not terminal else ""
        now = self.clock()
        result, children, problems = plan_with_children(
            job,
            rayjob,
            problems,
            now,
            self.settings,
            waiting=waiting,
            trouble=trouble,
            disruption=disruption,
            due=lambda planned: self._children_due(job, planned, now),
        )
        phase = result.status.get("phase", "Pending")
        if phase in TERMINAL:
            self._finished(key, holds_cluster(rayjob))  # before carrying out the delete
        else:
            self.draining.discard(key)
            self.unfinished.add(key)
        await self._carry_out(job, body, rayjob, result, children, release, trigger)
        self.metrics.phases[key] = phase
        if terminal:
            return "terminal"
        return "invalid" if problems else "ok"

    def _children_due(self, job: GRPOJob, result: Plan, now: datetime) -> bool:
        """Whether this pass makes sure of the current attempt's children: when it starts the
        attempt, or when this process has not seen them exist within CHILDREN_CHECK_PERIODS
        resync periods (a child deleted by hand comes back within as many)."""
        status = result.status
        attempt = int(status.get("attempt") or 0)
        if status.get("phase") in TERMINAL or not attempt:
            return False  # finished, or waiting before its first attempt (preflight)
        if result.create_attempt:
            return True
        ensured = self._ensured.get((job.namespace, job.name))
        return not (
            ensured is not None
            and ensured[:2] == (job.uid, attempt)
            and (now - ensured[2]).total_seconds() < self.settings.resync_seconds * CHILDREN_CHECK_PERIODS
        )

    async def _readable(self, key: tuple[str, str], body: dict[str, Any]) -> dict[str, Any]:
        """The job without the trainer's status fields this version cannot read (an older
        trainer's shapes), and one Warning each time what is left out changes."""
        status, unread = readable(body.get("status") or {})
        if self._unread.get(key, []) != unread:
            if unread:
                message = "ignored what this operator cannot read of its status: " + "; ".join(unread)
                await self.api.post_event(
                    body, "Warning", UNREADABLE_STATUS, cut(message, CONDITION_MESSAGE_LIMIT)
                )
            self._unread[key] = unread
        return {**body, "status": status} if unread else body

    async def _current_rayjob(
        self, job: GRPOJob, event_rayjob: dict[str, Any] | None, *, watched: bool = False
    ) -> dict[str, Any] | None:
        attempt = job.status.attempt
        if not attempt:
            return None
        current = rayjob_name(job.name, attempt)
        if event_rayjob is not None and event_rayjob["metadata"]["name"] == current:
            return event_rayjob
        seen = self.watched.rayjob((job.namespace, current)) if watched else None
        if seen is not None and ownership(seen, job) == "ours":
            return seen
        found = await self.api.get_rayjob(job.namespace, current)
        if found is not None and ownership(found, job) != "ours":
            # An earlier job's of the same name, on its way out: not this job's attempt. Planned as
            # missing, its creation waits (ChildWaitingError) until the garbage collector is done.
            return None
        return found

    async def _problems(self, job: GRPOJob) -> list[Problem]:
        modes = None
        if job.spec.checkpoint.claim_name and job.spec.resources.nodes > 1:
            modes = await self.api.claim_access_modes(job.namespace, job.spec.checkpoint.claim_name)
        # Both classes are looked up before the first attempt only: a class deleted later does
        # not fail a job that already runs (its pods and its Kueue Workload have their priority).
        first = not job.status.attempt
        priority = job.spec.resources.priority_class_name
        exists = await self.api.priority_class_exists(priority) if priority and first else None
        workload_priority = job.spec.resources.workload_priority_class
        workload_exists = (
            await self.api.workload_priority_class_exists(workload_priority)
            if workload_priority and first
            else None
        )
        return validate(
            job,
            self.settings,
            claim_access_modes=modes,
            priority_class_exists=exists,
            workload_priority_class_exists=workload_exists,
        )

    async def _startup_trouble(self, job: GRPOJob, rayjob: dict[str, Any] | None) -> Trouble | None:
        """While the current attempt's cluster starts: what its pods and Warning Events say.

        Looked at when due (handlers/startup_checks.py: at once when the RayJob moved, ever less
        often while it stands still); in between, the last look's verdict stands."""
        key = (job.namespace, job.name)
        if rayjob is None or observe_rayjob(rayjob).state != "starting":
            self.startup_checks.forget(key)
            return None
        attempt = job.status.attempt or 0
        which = (job.uid, attempt)
        status = rayjob.get("status") or {}
        now = self.clock()
        deadline = start_deadline(job, rayjob)
        due = self.startup_checks.due(
            key, which, status, now.timestamp(), deadline=None if deadline is None else deadline.timestamp()
        )
        if not due:
            return self.startup_checks.last(key)
        pods = await self.api.attempt_pods(job.namespace, f"{JOB_LABEL}={job.name},{ATTEMPT_LABEL}={attempt}")
        events = await self.warning_events.of(job.namespace)
        owners = {rayjob_name(job.name, attempt), RayJobStatus.of(rayjob).cluster_name} - {""}
        found = trouble(pods, events, frozenset(owners), now)
        period = self.settings.resync_seconds
        grace = grace_ends(pods, now)
        self.startup_checks.checked(
            key,
            which,
            status,
            now.timestamp(),
            found,
            first=period,
            longest=period * CHILDREN_CHECK_PERIODS,
            by=None if grace is None else grace.timestamp(),
        )
        return found

    async def _disruption(self, job: GRPOJob) -> str:
        """Why Kubernetes stopped the current attempt's pods (their DisruptionTarget condition:
        an eviction, a preemption, a tainted node), read only once the trainer has reported a
        planned stop of that attempt and while no cause of the operator's own explains it."""
        attempt = job.status.attempt or 0
        checkpoint = job.status.checkpoint
        stop = checkpoint.last_stop if checkpoint is not None else None
        if stop is None or stop.attempt != attempt or job.spec.run_policy.suspend:
            return ""
        if any(f"attempt {attempt} " in c.message and "before" in c.message for c in job.status.conditions):
            return ""  # told already (lifecycle._tell_stop): the cause is in that condition
        pods = await self.api.attempt_pods(job.namespace, f"{JOB_LABEL}={job.name},{ATTEMPT_LABEL}={attempt}")
        for pod in pods:
            for condition in (pod.get("status") or {}).get("conditions") or []:
                if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
                    return str(condition.get("reason") or "")
        return ""

    async def _preflight(self, job: GRPOJob) -> tuple[list[Problem], str]:
        """Before the first RayJob: what the job names, read (preflight.py judges it)."""
        found: dict[tuple[str, str], Any] = {}
        for ref in preflight.references(job):
            if (ref.kind, ref.name) in found:
                continue
            manifest = {**ref.manifest, "metadata": {"name": ref.name, "namespace": job.namespace}}
            try:
                found[(ref.kind, ref.name)] = await self.api.read(manifest)
            except ApiError as error:
                if error.code != 403:
                    raise
                found[(ref.kind, ref.name)] = preflight.UNREADABLE  # no right to look: not judged
        verdict = preflight.judge(job, found)
        return verdict.problems, verdict.message if verdict.waiting else ""

    async def _write(self, job: GRPOJob, body: dict[str, Any], result: Plan) -> dict[str, Any]:
        """Patch the operator's status fields to the plan's; returns them as now stored.

        Only onto the version of the job the plan was made from (`body`'s resourceVersion, moved
        on by each write): a stale view is never written over a newer status.
        """
        current = {k: v for k, v in (body.get("status") or {}).items() if k in OPERATOR_STATUS_FIELDS}
        patch = diff(current, result.status)
        if patch:
            await self._patch(job, body, patch)
        return dict(result.status)

    async def _patch(self, job: GRPOJob, body: dict[str, Any], patch: dict[str, Any]) -> None:
        """One status write, preconditioned on `body`'s resourceVersion; `body` follows the write."""
        meta = body.setdefault("metadata", {})
        try:
            stored = await self.api.patch_job_status(
                job.namespace, job.name, patch, resource_version=meta.get("resourceVersion")
            )
        except ApiError as error:
            if error.code == 409:
                raise StaleReadError(str(error)) from error
            raise
        meta["resourceVersion"] = (stored.get("metadata") or {}).get("resourceVersion")
        body["status"] = stored.get("status") or {}

    async def _carry_out(
        self,
        job: GRPOJob,
        body: dict[str, Any],
        rayjob: dict[str, Any] | None,
        result: Plan,
        children: AttemptChildren | None,
        release: Callable[[], None] | None,
        trigger: str,
    ) -> None:
        """Write the plan's status, then make the children (`children`, built already), then say
        so: `Created`, `rayJobName` and the Events that tell of the RayJob only once it exists.

        The attempt's number goes into status before its children exist (their names follow
        from it), so a crash in between is recovered by the next reconcile instead of leaving an
        orphan the status never named."""
        status = await self._write(job, body, result)
        if result.delete_rayjob:
            await self.api.delete_rayjob(job.namespace, result.delete_rayjob, keep_driver=result.keep_driver)
        events = list(result.events)
        try:
            if children is not None:
                try:
                    await self._children(job, status, children, result.create_attempt, release, trigger)
                except ChildRefusedError as refused:
                    failed = fail(job, status, rayjob, refused.reason, refused.message, self.clock())
                    await self._write(job, body, failed)
                    if failed.delete_rayjob:
                        await self.api.delete_rayjob(job.namespace, failed.delete_rayjob)
                    events += failed.events
                except (ChildWaitingError, ApiError) as error:
                    # Tried again with backoff (the caller); meanwhile the job says why it waits.
                    why = (
                        "WaitingForPreviousJob" if isinstance(error, ChildWaitingError) else "ChildNotCreated"
                    )
                    waiting = children_waiting(job, status, self.clock(), why, cut(str(error), 1024))
                    if waiting:
                        await self._patch(job, body, waiting)
                        events.append(("Warning", why, str(error)))
                    raise
                else:
                    created = children_created(job, status, self.clock())
                    if created:
                        await self._patch(job, body, created)
                    events += result.on_created
        finally:
            for event_type, reason, message in events:
                await self.api.post_event(body, event_type, reason, message)

    async def _children(
        self,
        job: GRPOJob,
        status: dict[str, Any],
        children: AttemptChildren,
        create_attempt: int | None,
        release: Callable[[], None] | None,
        trigger: str,
    ) -> None:
        """Make sure every child of the current attempt exists; start `create_attempt` when asked.
        Called only when due (`_children_due`), with the children built for the attempt."""
        attempt = int(status.get("attempt") or 0)
        now = self.clock()
        if create_attempt:
            await self._start_attempt(job, children, create_attempt, release, trigger)
        else:
            await self._put_others(job, children, create=False)
        self._ensured[(job.namespace, job.name)] = (job.uid, attempt, now)

    async def _start_attempt(
        self,
        job: GRPOJob,
        children: AttemptChildren,
        attempt: int,
        release: Callable[[], None] | None,
        trigger: str,
    ) -> None:
        """Create the job's other children, then the attempt's RayJob.

        The RayJob comes last: its pods name the trainer's ServiceAccount, mount the spec
        ConfigMap and the checkpoint claim, so a RayJob made first has KubeRay post a Warning
        (`FailedToCreateHeadPod ... serviceaccount not found`) and retry on every normal start.
        The whole start is urgent (handlers/urgency.py): in a burst of new jobs, each job's
        requests go ahead of the status writes of newer jobs, so clusters start provisioning early.
        """
        release = release or self.urgency.hold()
        made = False
        try:
            await self._put_others(job, children, create=True, first=True)
            made = await self._put(job, children.rayjob, create=True, first=True)
            if made:
                self.metrics.rayjobs_created.labels(trigger).inc()
            created = parse_rfc3339(job.metadata.get("creationTimestamp"))
            if attempt == 1 and created:
                self.metrics.create_to_rayjob_seconds.observe((self.clock() - created).total_seconds())
        finally:
            release()
        if made:
            log.info(
                "created Ray job %s",
                rayjob_name(job.name, attempt),
                extra={"job": job.name, "attempt": attempt},
            )

    async def _put_others(
        self, job: GRPOJob, children: AttemptChildren, *, create: bool, first: bool = False
    ) -> None:
        """The spec ConfigMap, the trainer's ServiceAccount, Role and RoleBinding, the claim and the
        NetworkPolicy.

        The spec ConfigMap is brought up to date only when the spec as written changed since it was
        rendered (children/configmap.py): a later attempt of the same spec keeps its defaults.
        """
        account, role, binding = children.account, children.role, children.binding
        pvc, policy = children.claim, children.policy
        await asyncio.gather(
            self._put(
                job,
                children.spec_configmap,
                create=create,
                first=first,
                keep=lambda existing: is_pinned(existing, job),
            ),
            self._put(job, account, create=create, first=first),
            self._put(job, role, create=create, first=first),
            # A claim's spec is immutable once bound: it is only ever created.
            *([self._put(job, pvc, create=create, update=False, first=first)] if pvc is not None else []),
            *([self._put(job, policy, create=create, first=first)] if policy is not None else []),
        )
        # Only after its Role: without the `bind` verb, the API server lets us bind a Role only
        # when it exists (and we hold what it grants).
        await self._put(job, binding, create=create, first=first)

    async def _put(
        self,
        job: GRPOJob,
        manifest: dict[str, Any],
        *,
        create: bool,
        update: bool = True,
        first: bool = False,
        keep: Callable[[dict[str, Any]], bool] | None = None,
    ) -> bool:
        """Make `manifest` exist as this job's own object, never taking over someone else's; True
        when this call created it.

        `create`: this is when the object is expected to be new, so it is created straight away
        (one request in a burst), and an existing one of ours is brought up to date by server-side
        apply, unless `keep` says it is to stay as it is. Otherwise it is read first and only
        created when missing.
        """
        existing: dict[str, Any] | None = None
        try:
            if create:
                try:
                    await self.api.create(manifest, first=first)
                    return True
                except ApiError as error:
                    if error.code != 409:
                        raise
                existing = await self.api.read(manifest)
            else:
                existing = await self.api.read(manifest)
                if existing is None:
                    await self.api.create(manifest, first=first)
                    return True
            if existing is None:
                raise ChildWaitingError(f"{_kind_name(manifest)} vanished while it was being created")
            owner = ownership(existing, job)
            if owner == "earlier":
                raise ChildWaitingError(
                    f"{_kind_name(manifest)} of an earlier job named {job.name} is still being deleted"
                )
            if owner == "foreign":
                raise ChildRefusedError(
                    "ChildConflict",
                    f"{_kind_name(manifest)} already exists and was not created by this GRPOJob; "
                    "the operator does not take over objects it did not create: delete or rename it",
                )
            if update and create and not (keep is not None and keep(existing)):
                await self.api.apply(manifest, first=first)
            return False
        except ApiError as error:
            if error.code in REJECTED:
                raise ChildRefusedError(
                    "ChildRejected",
                    cut(
                        f"the API server refused {_kind_name(manifest)}: {error.message}",
                        CONDITION_MESSAGE_LIMIT,
                    ),
                ) from error
            raise

    def _finished(self, key: tuple[str, str], holds: bool) -> None:
        """A job at its end: no children to ensure or start-up to check again; visited by the
        frequent pass while its RayJob may still hold a cluster (`holds`), so that a delete that
        failed is sent again."""
        self._ensured.pop(key, None)
        self.startup_checks.forget(key)
        self.unfinished.discard(key)
        if holds:
            self.draining.add(key)
        else:
            self.draining.discard(key)

    async def _stop_unparseable(self, key: tuple[str, str], body: dict[str, Any]) -> None:
        """Delete the current attempt's RayJob of a job the models cannot read: failed, it would
        otherwise train on and hold its devices with nobody to stop it (its spec, retention
        included, cannot be read, so the cluster goes at once; checkpoints stay on the volume)."""
        meta = body["metadata"]
        attempt = (body.get("status") or {}).get("attempt")
        name, current = "", None
        if isinstance(attempt, int) and attempt > 0:
            name = rayjob_name(meta["name"], attempt)
            found = await self.api.get_rayjob(meta["namespace"], name)
            if found is not None and ownership_by(found, meta.get("uid", ""), meta["name"]) == "ours":
                current = found
        holds = holds_cluster(current)
        self._finished(key, holds)
        self.with_deadline.discard(key)
        if holds:
            await self.api.delete_rayjob(meta["namespace"], name)

    async def _fail_unparseable(self, body: dict[str, Any], problems: list[Problem]) -> None:
        message = cut("; ".join(str(p) for p in problems), CONDITION_MESSAGE_LIMIT)
        now = rfc3339(self.clock())
        meta = body["metadata"]
        generation = {"observedGeneration": meta["generation"]} if meta.get("generation") else {}
        status = {
            "phase": "Failed",
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "InvalidSpec",
                    "message": message,
                    "lastTransitionTime": now,
                    **generation,
                }
            ],
            "completionTime": now,
            **generation,
        }
        await self.api.patch_job_status(
            meta["namespace"], meta["name"], status, resource_version=meta.get("resourceVersion")
        )
        await self.api.post_event(body, "Warning", "InvalidSpec", message)
