"""One reconcile of one GRPOJob: read, validate, plan, then act on the plan.

Every handler (create, update, resume, timers, RayJob events) ends here, so there is one code
path to reason about. A per-job lock keeps two triggers for the same job from interleaving;
deterministic names and server-side apply make a repeat after a crash harmless.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from ..api.v1alpha1 import GRPOJob
from ..api.v1alpha1.status import OPERATOR_STATUS_FIELDS
from ..children.configmap import build_spec_configmap
from ..children.meta import rayjob_name
from ..children.pvc import build_checkpoint_pvc
from ..children.rayjob import build_rayjob
from ..children.rbac import build_trainer_rbac
from ..config import Settings
from ..k8s import Api
from ..lifecycle import TERMINAL, Plan, diff, parse_time, plan, rfc3339
from ..metrics import Metrics
from ..validation import Problem, validate
from .urgency import Urgency

log = logging.getLogger(__name__)


class Reconciler:
    """Holds what reconciles share: the API, the settings, the metrics and per-job locks."""

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
        self._locks: defaultdict[tuple[str, str], asyncio.Lock] = defaultdict(asyncio.Lock)
        self.urgency = Urgency()
        # Unfinished jobs with an activeDeadlineSeconds: the deadline pass visits only these.
        self.with_deadline: set[tuple[str, str]] = set()

    async def reconcile(
        self,
        namespace: str,
        name: str,
        *,
        trigger: str,
        owner_uid: str | None = None,
        body: dict[str, Any] | None = None,
        rayjob: dict[str, Any] | None = None,
    ) -> None:
        """Bring one job forward.

        `owner_uid`, from a child's owner reference, must match the job's: a RayJob left over from
        an earlier job of the same name must not drive the new one. `body` (a just-created job) and
        `rayjob` (from a RayJob event) each save a read when they are current; a burst of new jobs
        is mostly made of such round trips.
        """
        # A job without status is new: its reconcile leads to a RayJob and goes first. Following a
        # RayJob's status and the resync pass wait their turn; a user's change to a job does not.
        new_job = body is not None and not body.get("status")
        if trigger != "job":
            await self.urgency.wait_turn()
        started = self.clock()
        outcome = "error"
        try:
            async with self._locks[(namespace, name)]:
                # Held only inside the lock, so work queued on this lock is never counted urgent.
                release = self.urgency.hold() if new_job else None
                try:
                    outcome = await self._reconcile(namespace, name, owner_uid, body, rayjob, release)
                finally:
                    if release is not None:
                        release()
        finally:
            elapsed = (self.clock() - started).total_seconds()
            self.metrics.handler_seconds.labels(trigger, outcome).observe(elapsed)

    async def _reconcile(
        self,
        namespace: str,
        name: str,
        owner_uid: str | None,
        body: dict[str, Any] | None,
        event_rayjob: dict[str, Any] | None,
        release: Callable[[], None] | None,
    ) -> str:
        key = (namespace, name)
        if body is None or body.get("status"):
            # Read afresh under the lock: a handler's body may predate our last status write.
            body = await self.api.get_job(namespace, name)
        if body is None:
            self.metrics.forget(namespace, name)
            self._locks.pop(key, None)
            self.with_deadline.discard(key)
            return "gone"
        if owner_uid is not None and body["metadata"].get("uid") != owner_uid:
            return "stale"
        if body["metadata"].get("deletionTimestamp"):
            # Being deleted: its RayJob vanishing now is the cascade, not a lost attempt.
            return "deleting"
        if (body.get("status") or {}).get("phase") in TERMINAL:
            self.metrics.phases[key] = body["status"]["phase"]
            self.with_deadline.discard(key)
            return "terminal"
        try:
            job = GRPOJob.model_validate(body)
        except ValidationError as error:
            # The schema admitted it but the models do not (an older CRD, say): fail it visibly.
            problems = [
                Problem("spec." + ".".join(str(p) for p in e["loc"]), e["msg"]) for e in error.errors()[:5]
            ]
            await self._fail_unparseable(body, problems)
            return "invalid"
        if job.spec.run_policy.active_deadline_seconds:
            self.with_deadline.add(key)
        else:
            self.with_deadline.discard(key)
        problems = await self._problems(job)
        attempt = job.status.attempt
        rayjob = None
        if attempt:
            current = rayjob_name(name, attempt)
            if event_rayjob is not None and event_rayjob["metadata"]["name"] == current:
                rayjob = event_rayjob
            else:
                rayjob = await self.api.get_rayjob(namespace, current)
        now = self.clock()
        result = plan(job, rayjob, problems, now)
        await self._carry_out(job, body, result, release)
        self.metrics.phases[key] = result.status.get("phase", "Pending")
        return "invalid" if problems else "ok"

    async def _problems(self, job: GRPOJob) -> list[Problem]:
        modes = None
        if job.spec.checkpoint.claim_name and job.spec.resources.nodes > 1:
            modes = await self.api.claim_access_modes(job.namespace, job.spec.checkpoint.claim_name)
        return validate(job, self.settings, claim_access_modes=modes)

    async def _carry_out(
        self, job: GRPOJob, body: dict[str, Any], result: Plan, release: Callable[[], None] | None
    ) -> None:
        current = {k: v for k, v in (body.get("status") or {}).items() if k in OPERATOR_STATUS_FIELDS}
        patch = diff(current, result.status)
        # Child names go into status before the children exist, so a crash in between is
        # recovered by the next reconcile instead of leaving an orphan the status never named.
        if patch:
            await self.api.patch_job_status(job.namespace, job.name, patch)
        if result.delete_rayjob:
            await self.api.delete_rayjob(job.namespace, result.delete_rayjob)
        if result.create_attempt:
            await self._start_attempt(job, result.create_attempt, release)
        for event_type, reason, message in result.events:
            await self.api.post_event(body, event_type, reason, message)

    async def _start_attempt(self, job: GRPOJob, attempt: int, release: Callable[[], None] | None) -> None:
        """Apply the attempt's RayJob, then the job's other children.

        The RayJob is urgent (handlers/urgency.py): in a burst of new jobs every RayJob is created
        before any job's ConfigMap, PVC and RBAC, so KubeRay starts provisioning clusters while
        the rest follows. A pod just waits for its claim, and KubeRay retries a pod whose service
        account is not there yet.
        """
        release = release or self.urgency.hold()
        try:
            # Ahead of queued requests too: the status writes of newer jobs wait behind it.
            await self.api.apply(build_rayjob(job, self.settings, attempt), first=True)
            created = parse_time(job.metadata.get("creationTimestamp"))
            if attempt == 1 and created:
                self.metrics.create_to_rayjob_seconds.observe((self.clock() - created).total_seconds())
        finally:
            release()
        await self.urgency.wait_turn()
        account, role, binding = build_trainer_rbac(job)
        pvc = build_checkpoint_pvc(job, self.settings)
        await asyncio.gather(
            self.api.apply(build_spec_configmap(job, self.settings)),
            self.api.apply(account),
            self.api.apply(role),
            *([self.api.create_if_absent(pvc)] if pvc is not None else []),
        )
        # Only after its Role: without the `bind` verb, the API server lets us bind a Role only
        # when it exists (and we hold what it grants).
        await self.api.apply(binding)
        log.info(
            "created Ray job %s", rayjob_name(job.name, attempt), extra={"job": job.name, "attempt": attempt}
        )

    async def _fail_unparseable(self, body: dict[str, Any], problems: list[Problem]) -> None:
        message = "; ".join(str(p) for p in problems)
        now = rfc3339(self.clock())
        meta = body["metadata"]
        status = {
            "phase": "Failed",
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "InvalidSpec",
                    "message": message,
                    "lastTransitionTime": now,
                }
            ],
            "completionTime": now,
        }
        await self.api.patch_job_status(meta["namespace"], meta["name"], status)
        await self.api.post_event(body, "Warning", "InvalidSpec", message)
