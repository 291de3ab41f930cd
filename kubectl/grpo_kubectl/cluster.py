"""The plugin's view of a cluster: the user's own credentials, the job, a dry run, a reader Pod.

Everything goes through lightkube with the kubeconfig kubectl would use ($KUBECONFIG, else
~/.kube/config; `--kubeconfig`, `--context`), as the person running it: the plugin has no
privileges of its own. Errors become `PluginError`s with one line a person can act on.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx
import yaml
from grpo_operator.api.documents import yaml_message
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.meta import checkpoint_claim_name
from grpo_operator.preflight import UNREADABLE
from grpo_operator.verdict import schema_problems
from grpo_trainer.kube import GRPOJobResource
from lightkube import ApiError, Client, KubeConfig, codecs
from lightkube.core.exceptions import ConfigError
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, PersistentVolumeClaim, Pod, Secret
from lightkube.types import PatchType
from pydantic import ValidationError

from .reader import CONTAINER, ReadTarget, build_reader_pod

FIELD_MANAGER = "kubectl-grpo"
OPERATOR_LEASE = "grpo-system/grpo-operator"
"""The operator's leader Lease as the chart installs it (release grpo-operator in grpo-system,
settings.leaseName/leaseNamespace); $KUBECTL_GRPO_OPERATOR_LEASE=NAMESPACE/NAME names another."""
LEASE_SLACK = 15.0
"""Seconds past a Lease's duration before it counts as stale (clocks of two machines differ)."""


class PluginError(Exception):
    """A failure the user can act on; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def stored_job(body: dict[str, Any]) -> GRPOJob:
    """A stored job as this version's models read it. One an earlier version admitted and these
    models refuse (the operator fails it with InvalidSpec) is a one-line error naming the field and
    the claim its files are on, which `--claim` reads without the job's spec."""
    try:
        return GRPOJob.model_validate(body)
    except ValidationError as error:
        meta = body.get("metadata") or {}
        name = meta.get("name", "")
        checkpoint = (body.get("spec") or {}).get("checkpoint") or {}
        claim = checkpoint.get("claimName") or checkpoint_claim_name(name)
        problems = "; ".join(str(p) for p in schema_problems(error)[:3])
        raise PluginError(
            f"grpojob {meta.get('namespace', '')}/{name}: this version cannot read its spec ({problems}); "
            f"its files are on claim {claim} (--claim {claim} reads them)"
        ) from error


class JobNotFoundError(PluginError):
    """No GRPOJob of that name in the namespace."""


class NoVerdictError(PluginError):
    """No verdict from the cluster; the same rules can still run offline."""


def one_line(error: object) -> str:
    """An error (or the API server's message) on one line; an empty one by its type's name."""
    return " ".join(str(error).split()) or type(error).__name__


class Cluster:
    def __init__(
        self, kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None
    ) -> None:
        if kubeconfig and Path(kubeconfig).is_dir():
            raise PluginError(f"cannot read the kubeconfig: {kubeconfig} is a folder, not a file")
        try:
            config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
            single = config.get(context_name=context)
            if single is None:  # only where a `default` is passed: without one, a missing context raises
                raise ConfigError("no current context")
        except ConfigError as error:
            raise PluginError(
                f"no cluster to talk to: {one_line(error)} (set $KUBECONFIG or --kubeconfig)"
            ) from error
        except (OSError, ValueError) as error:
            raise PluginError(f"cannot read the kubeconfig: {one_line(error)}") from error
        except yaml.YAMLError as error:
            raise PluginError(f"cannot read the kubeconfig: not valid YAML: {yaml_message(error)}") from error
        except (KeyError, TypeError, AttributeError) as error:
            # A YAML file that is no kubeconfig (no `clusters`, a list where a map belongs).
            what = f"it has no {error.args[0]!r}" if isinstance(error, KeyError) else one_line(error)
            raise PluginError(f"cannot read the kubeconfig: {what}") from error
        self.server = single.cluster.server
        self.namespace = namespace or single.namespace or "default"
        self.client = Client(
            config=single, namespace=self.namespace, field_manager=FIELD_MANAGER, timeout=httpx.Timeout(15.0)
        )

    def _call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except ApiError:
            raise
        except httpx.HTTPError as error:
            raise PluginError(
                f"cannot reach the API server at {self.server} ({what}): {one_line(error)}"
            ) from error

    # --- the job ------------------------------------------------------------------------------

    def no_operator(self, now: datetime | None = None) -> str | None:
        """ "no operator is running (...)" when the operator's leader Lease has not been renewed
        within its duration: jobs are then not reconciled, and nothing else says so. None when
        it is fresh, or when it cannot be read with these credentials or is not there (another
        release name, leader election off): then nothing is known, and nothing is said."""
        namespace, _, name = os.environ.get("KUBECTL_GRPO_OPERATOR_LEASE", OPERATOR_LEASE).partition("/")
        try:
            lease = self.client.get(Lease, name, namespace=namespace)
        except (ApiError, httpx.HTTPError):
            return None
        spec = lease.spec
        if spec is None or spec.renewTime is None:
            return None
        age = ((now or datetime.now(UTC)) - spec.renewTime).total_seconds()
        if spec.holderIdentity and age <= (spec.leaseDurationSeconds or 15) + LEASE_SLACK:
            return None
        ago = f"{age:.0f} s" if age < 90 else f"{age / 60:.0f} min"
        return f"no operator is running (its Lease {namespace}/{name} was last renewed {ago} ago)"

    def job_body(self, name: str) -> dict[str, Any]:
        try:
            found = self._call(
                "reading the job", self.client.get, GRPOJobResource, name, namespace=self.namespace
            )
        except ApiError as error:
            if error.status.code == 404:
                raise JobNotFoundError(
                    f'grpojob "{name}" not found in namespace "{self.namespace}"'
                ) from error
            raise PluginError(
                f"cannot read grpojob {self.namespace}/{name}: {error.status.message}"
            ) from error
        return found.to_dict() if hasattr(found, "to_dict") else dict(found)

    def list_jobs(self, *, all_namespaces: bool = False) -> list[dict[str, Any]]:
        """The jobs of this namespace (or of every one), sorted as kubectl sorts them."""
        where = "*" if all_namespaces else self.namespace
        try:
            found = self._call(
                "listing jobs", lambda: list(self.client.list(GRPOJobResource, namespace=where))
            )
        except ApiError as error:
            scope = "any namespace" if all_namespaces else f"namespace {self.namespace}"
            raise PluginError(f"cannot list grpojobs in {scope}: {error.status.message}") from error
        bodies = [item.to_dict() if hasattr(item, "to_dict") else dict(item) for item in found]
        return sorted(bodies, key=lambda b: (b["metadata"].get("namespace", ""), b["metadata"]["name"]))

    def pods(self, labels: dict[str, str]) -> list[dict[str, Any]] | None:
        """The pods of this namespace with these labels; None where the user may not list pods
        (then the caller leaves it to kubectl to say what it can)."""
        try:
            # A copy as lightkube's selector type (a dict of wider values; dict is invariant).
            found = self._call(
                "listing pods",
                lambda: list(self.client.list(Pod, namespace=self.namespace, labels=dict(labels))),
            )
        except ApiError as error:
            if error.status.code == 403:
                return None
            raise PluginError(
                f"cannot list pods in namespace {self.namespace}: {error.status.message}"
            ) from error
        return [pod.to_dict() for pod in found]

    def set_suspend(self, name: str, suspend: bool) -> None:
        """Suspend or resume; refused with the reason when it would change nothing."""
        body = self.job_body(name)  # a clear "not found" first
        phase = (body.get("status") or {}).get("phase")
        verb = "suspend" if suspend else "resume"
        if phase in ("Succeeded", "Failed"):
            raise PluginError(
                f"grpojob {name} has finished ({phase}): there is nothing to {verb}, and a finished "
                "job's spec cannot change; to train again, apply the job under a new name"
            )
        if not suspend and not ((body.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
            raise PluginError(
                f"grpojob {name} is not suspended (phase {phase or 'Pending'}): nothing to resume"
            )
        try:
            self._call(
                "patching the job",
                self.client.patch,
                GRPOJobResource,
                name,
                {"spec": {"runPolicy": {"suspend": suspend}}},
                namespace=self.namespace,
                patch_type=PatchType.MERGE,
            )
        except ApiError as error:
            raise PluginError(
                f"cannot patch grpojob {self.namespace}/{name}: {error.status.message}"
            ) from error

    def dry_run(self, manifest: dict[str, Any]) -> str | None:
        """The API server's verdict on creating `manifest` (strict field validation): its refusal
        message, or None when it would accept it. `NoVerdictError` when no verdict can be had (no
        server, no CRD, no right to create GRPOJobs here): the caller checks offline instead."""
        body = {**manifest, "metadata": {**(manifest.get("metadata") or {}), "namespace": self.namespace}}
        try:
            # lightkube's private generic client, on purpose: its public `create(..., dry_run=True)`
            # sends `dryRun=All` but no `fieldValidation` (lightkube 1.0 has no parameter for it, and
            # no public call takes extra query parameters), and without `Strict` the API server
            # drops an unknown or misspelt field with a warning lightkube does not surface, so a
            # spec `kubectl apply` refuses would pass here. tests/unit/kubectl pins this call's
            # shape against the installed lightkube.
            self.client._client.request(
                "post",
                res=GRPOJobResource,
                obj=GRPOJobResource.from_dict(body),
                namespace=self.namespace,
                params={"dryRun": "All", "fieldValidation": "Strict"},
            )
        except ApiError as error:
            code, message = error.status.code, str(error.status.message)
        except httpx.HTTPStatusError as error:  # the raw request's error: the server's metav1.Status
            code, message = error.response.status_code, _status_message(error.response)
        except httpx.HTTPError as error:
            raise NoVerdictError(
                f"cannot reach the API server at {self.server}: {one_line(error)}"
            ) from error
        else:
            return None
        if code == 409:
            return None  # a job of that name exists; its spec passed validation before that
        if code == 404:
            raise NoVerdictError("the GRPOJob CRD is not installed in this cluster")
        if code in (401, 403):
            raise NoVerdictError(f"not allowed to create grpojobs in {self.namespace}: {message}")
        if code in (400, 422):
            return message
        raise NoVerdictError(f"the dry run failed: {code} {message}")

    def apply(self, document: dict[str, Any]) -> None:
        """Server-side apply of a ConfigMap, Secret or claim of this namespace, under the plugin's
        field manager (`kubectl apply --server-side` without --force: a field another manager
        owns with another value is a conflict, named, not taken over)."""
        meta = document["metadata"]
        what = f"{document['kind']} {self.namespace}/{meta['name']}"
        try:
            self._call(f"applying {what}", self.client.apply, codecs.from_dict(document))
        except ApiError as error:
            raise PluginError(f"cannot apply {what}: {one_line(error.status.message)}") from error

    def read_object(self, kind: str, name: str) -> Any:
        """A claim, ConfigMap or Secret of this namespace as a dict; None when it does not exist,
        preflight.UNREADABLE when these credentials may not read it (then it is not judged)."""
        resource = {"PersistentVolumeClaim": PersistentVolumeClaim, "ConfigMap": ConfigMap, "Secret": Secret}[
            kind
        ]
        try:
            found = self._call(
                f"reading {kind} {name}", self.client.get, resource, name, namespace=self.namespace
            )
        except ApiError as error:
            if error.status.code == 404:
                return None
            if error.status.code == 403:
                return UNREADABLE
            raise PluginError(
                f"cannot read {kind} {self.namespace}/{name}: {error.status.message}"
            ) from error
        return found.to_dict()

    def claim_access_modes(self, name: str) -> list[str]:
        try:
            claim = self.client.get(PersistentVolumeClaim, name, namespace=self.namespace)
        except (ApiError, httpx.HTTPError):
            return []
        return list((claim.spec.accessModes if claim.spec else None) or [])

    # --- reading the volume through a Pod ------------------------------------------------------

    def read_through_pod(
        self,
        target: ReadTarget,
        script: str,
        *,
        image: str,
        follow: bool = False,
        start_timeout: float = 120.0,
    ) -> Iterator[str]:
        """Lines a reader Pod prints; the Pod is deleted however the reading ends."""
        claim = target.claim
        found = None
        try:
            found = self._call(
                f"reading claim {claim}",
                self.client.get,
                PersistentVolumeClaim,
                claim,
                namespace=self.namespace,
            )
        except ApiError as error:
            if error.status.code == 404:
                why = (
                    "the job has not started, or its claim was deleted with it"
                    if target.job is not None
                    else f"no such claim in namespace {self.namespace}"
                )
                raise PluginError(f"the job's volume (claim {claim}) does not exist: {why}") from error
        # Where the claim cannot be read (another error than 404), the job's spec places the pod.
        if found is not None and found.metadata is not None:
            target = target.with_claim(found.metadata.annotations)
        manifest = build_reader_pod(target, script, image=image, deadline=86400 if follow else 600)
        try:
            pod = self._call("creating a reader pod", self.client.create, Pod.from_dict(manifest))
        except ApiError as error:
            raise PluginError(
                f"cannot create a pod to read the job's volume: {error.status.message}"
            ) from error
        name = pod.metadata.name
        try:
            self._wait_started(name, start_timeout)
            try:
                # Lines without their newline, as every reader of these lines expects (print adds
                # one; a listing's names must not end in one).
                yield from self.client.log(
                    name, namespace=self.namespace, container=CONTAINER, follow=follow, newlines=False
                )
            except (ApiError, httpx.HTTPError) as error:
                message = error.status.message if isinstance(error, ApiError) else one_line(error)
                raise PluginError(
                    f"cannot read the output of pod {name} (the node's kubelet must serve logs): {message}"
                ) from error
        finally:
            with contextlib.suppress(ApiError, httpx.HTTPError):
                self.client.delete(Pod, name, namespace=self.namespace, grace_period=0)

    def _wait_started(self, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            pod = self._call(f"waiting for pod {name}", self.client.get, Pod, name, namespace=self.namespace)
            phase = pod.status.phase if pod.status else None
            if phase in ("Running", "Succeeded", "Failed"):
                return
            waiting = _waiting_reason(pod)
            if waiting in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName"):
                raise PluginError(f"the reader pod {name} cannot pull its image ({waiting}); pass --image")
            if time.monotonic() > deadline:
                why = waiting or _unschedulable(pod) or phase or "not started"
                raise PluginError(f"the reader pod {name} did not start in {timeout:.0f} s: {why}")
            time.sleep(1.0)


def _status_message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message") or response.text)
    except ValueError:
        return response.text[:500]


def _waiting_reason(pod: Pod) -> str | None:
    for status in (pod.status.containerStatuses if pod.status else None) or []:
        if status.state and status.state.waiting:
            return status.state.waiting.reason
    return None


def _unschedulable(pod: Pod) -> str | None:
    for condition in (pod.status.conditions if pod.status else None) or []:
        if condition.type == "PodScheduled" and condition.status == "False":
            return condition.message
    return None
