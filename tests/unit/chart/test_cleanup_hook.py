"""The pre-delete hook: it deletes the release's GRPOJobs while the operator and KubeRay still run.

Its behaviour against a cluster is the end-to-end tests' (helm uninstall); here: how it is wired
(hook order, identity, image, scope) and the pure parts of its script.
"""

from __future__ import annotations

import functools
from pathlib import PurePosixPath
from types import ModuleType
from typing import Any

import pytest
from support.helm import CHART, NAMESPACED, of_kind, only, render
from support.scripts import load_script

SCRIPT = CHART / "files" / "pre_delete.py"


@functools.cache
def _script() -> ModuleType:
    """The chart's script as a module (registered first: its dataclass looks itself up)."""
    return load_script(SCRIPT, "grpo_chart_pre_delete")


def _hook_objects(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if "helm.sh/hook" in (d["metadata"].get("annotations") or {})]


def _weight(doc: dict[str, Any]) -> int:
    return int(doc["metadata"]["annotations"].get("helm.sh/hook-weight", "0"))


@pytest.mark.parametrize("values", [None, NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_hook_objects_run_before_uninstall_and_the_job_last(values: dict | None) -> None:
    hooks = _hook_objects(render(values))
    assert {d["kind"] for d in hooks} >= {"ServiceAccount", "ConfigMap", "Job"}
    job = only(hooks, "Job")
    for doc in hooks:
        annotations = doc["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "pre-delete"
        assert set(annotations["helm.sh/hook-delete-policy"].split(",")) == {
            "before-hook-creation",
            "hook-succeeded",
        }
        if doc is not job:
            assert _weight(doc) < _weight(job), f"{doc['kind']} must exist before the Job runs"


def test_only_the_hook_is_a_hook() -> None:
    docs = render()
    for doc in docs:
        if doc not in _hook_objects(docs):
            assert not doc["metadata"]["name"].endswith("-cleanup")


def test_the_job_runs_the_shipped_script_with_the_operator_image_as_the_hook_account() -> None:
    docs = render()
    job = only(docs, "Job")
    pod = job["spec"]["template"]["spec"]
    operator = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    (container,) = pod["containers"]
    assert container["image"] == operator["image"]
    assert pod["restartPolicy"] == "Never"
    account = only(_hook_objects(docs), "ServiceAccount")
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    # The command runs the script the ConfigMap carries, byte for byte the chart's file.
    script = PurePosixPath(container["command"][-1])
    mount = next(m for m in container["volumeMounts"] if PurePosixPath(m["mountPath"]) == script.parent)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    config_map = only(_hook_objects(docs), "ConfigMap")
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert config_map["data"][script.name] == SCRIPT.read_text()


def test_the_hook_cleans_the_namespaces_the_operator_watches() -> None:
    def env(values: dict | None) -> dict[str, str]:
        container = only(render(values), "Job")["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e["value"] for e in container["env"]}

    assert env(None)["GRPO_CLEANUP_NAMESPACES"] == ""
    assert env(NAMESPACED)["GRPO_CLEANUP_NAMESPACES"] == "team-a,team-b"
    assert _script().namespaces_from(env(NAMESPACED)) == ["team-a", "team-b"]
    assert _script().namespaces_from(env(None)) is None


def test_the_job_outlives_the_scripts_own_timeout() -> None:
    job = only(render({"cleanup": {"timeoutSeconds": 600}}), "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    timeout = int(next(e["value"] for e in container["env"] if e["name"] == "GRPO_CLEANUP_TIMEOUT"))
    assert timeout == 600
    assert job["spec"]["activeDeadlineSeconds"] > timeout
    assert job["spec"]["backoffLimit"] == 0


def test_cleanup_can_be_turned_off() -> None:
    docs = render({"cleanup": {"enabled": False}})
    assert not _hook_objects(docs)
    assert not of_kind(docs, "Job")


def test_the_report_says_what_is_left_and_how_to_free_it() -> None:
    script = _script()
    left = [
        script.leftover(
            "GRPOJob",
            {
                "metadata": {
                    "namespace": "team-a",
                    "name": "geo3k",
                    "finalizers": ["example.com/backup-hold"],
                    "deletionTimestamp": "2026-12-01T10:00:00Z",
                }
            },
        ),
        script.leftover("RayJob", {"metadata": {"namespace": "team-a", "name": "geo3k-1"}}),
    ]
    report = script.report(left, 240)
    assert "240s" in report
    assert "GRPOJob team-a/geo3k: being deleted, held by finalizers example.com/backup-hold" in report
    assert "RayJob team-a/geo3k-1: not deleted yet" in report
    assert (
        """kubectl patch rayjob <name> -n <namespace> --type=merge -p '{"metadata":{"finalizers":null}}'"""
        in report
    )


def test_the_script_needs_nothing_but_lightkube_at_import() -> None:
    """It runs in the operator image; importing it must not pull the operator package or a client."""
    source = SCRIPT.read_text()
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert all(
        line.split()[1] in {"__future__", "os", "sys", "time", "collections.abc", "dataclasses", "typing"}
        for line in top_level
    ), top_level
    assert "from lightkube import Client" in source


def test_it_waits_only_for_rayjobs_a_grpojob_owns() -> None:
    """The garbage collector deletes those; a RayJob without a GRPOJob owner would block for ever."""
    script = _script()
    owner = {
        "apiVersion": "grpo.dev/v1alpha1",
        "kind": "GRPOJob",
        "name": "geo3k",
        "uid": "u",
        "controller": True,
    }
    assert script.owned_by_a_grpojob({"metadata": {"ownerReferences": [owner]}})
    assert not script.owned_by_a_grpojob({"metadata": {"labels": {"grpo.dev/job": "geo3k"}}})
    other = {**owner, "apiVersion": "example.com/v1"}
    assert not script.owned_by_a_grpojob({"metadata": {"ownerReferences": [other]}})
