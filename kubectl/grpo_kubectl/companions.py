"""The objects a job's file holds beside its GRPOJob: what `GRPOClient.create(path)` applies with
the job, and what `kubectl grpo validate -f` counts as there.

An example keeps its reward ConfigMap in the job's file (examples/colours-cpu.yaml), and `kubectl
apply -f` creates both. The client does the same for the kinds a job names (the ConfigMaps,
Secrets and claims of `preflight.references`): server-side apply under the plugin's field manager,
in the job's namespace. A file holding anything else, or an object meant for another namespace,
is refused in one sentence before anything is created, rather than applied in part. `validate -f`
counts exactly the objects `create` would apply as present, so the two agree on the same file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml
from grpo_operator.api.v1alpha1 import KIND

KINDS = ("ConfigMap", "Secret", "PersistentVolumeClaim")
"""What a GRPOJob names (its reward file, credentials, claims), so what may travel with it."""


@dataclass(frozen=True)
class Companions:
    """The objects to apply with the job (namespace set), or why the file is refused."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    refused: str | None = None

    def present(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The objects by (kind, name), as the preflight looks them up."""
        return {(d["kind"], d["metadata"]["name"]): d for d in self.objects}


def companions(text: str, source: str, namespace: str) -> Companions:
    """The companions of a job file's text (read already by `grpojob_manifest`, so it parses)."""
    try:
        json.loads(text)
        return Companions()  # a JSON file is one document: the job alone
    except ValueError:
        pass
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return Companions()
    found: list[dict[str, Any]] = []
    for document in documents:
        if isinstance(document, dict) and document.get("kind") == KIND:
            continue
        problem = _problem(document, source, namespace)
        if problem:
            return Companions(refused=problem)
        meta = {**document["metadata"], "namespace": namespace}
        found.append({**document, "metadata": meta})
    return Companions(found)


def _problem(document: Any, source: str, namespace: str) -> str | None:
    kind = document.get("kind") if isinstance(document, dict) else None
    meta = document.get("metadata") if isinstance(document, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if kind not in KINDS or document.get("apiVersion") != "v1" or not isinstance(name, str) or not name:
        what = f"a {kind} {name}" if isinstance(kind, str) and isinstance(name, str) else "a document"
        return (
            f"{source} holds {what} beside its GRPOJob: only v1 ConfigMaps, Secrets and "
            "PersistentVolumeClaims with a name are applied with a job; apply the rest with kubectl apply -f"
        )
    other = meta.get("namespace") if isinstance(meta, dict) else None
    if other not in (None, namespace):
        return (
            f"{source}: {kind} {name} is meant for namespace {other!r}, not the job's {namespace!r}: "
            "a job reads objects of its own namespace only"
        )
    return None
