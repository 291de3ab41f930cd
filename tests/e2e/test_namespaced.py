"""A release limited to listed namespaces (rbac.clusterWide=false), installed, used and uninstalled.

Its operator gets a Role in each watched namespace and nothing elsewhere; run as that
ServiceAccount it takes a job to success in a watched namespace, leaves an unwatched one alone,
and the cleanup hook, limited the same way, empties the watched namespace before the uninstall.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.access import Access, accesses, assert_access, granted, never_granted, service_account_user
from support.cluster import Cluster
from support.jobs import owned_children
from support.life import (
    CHILD_KINDS,
    apply_example,
    ray_job_id,
    wait_condition,
    writers,
)
from support.namespaces import create_namespace, delete_namespace
from support.operator_process import OperatorProcess
from support.out_of_cluster import (
    apply_cleanup_hook_objects,
    assert_operator_log_clean,
    operator_log,
    run_cleanup_hook,
    start_operator,
    stop_operator,
)
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI
from support.release import Helm, Release, existing
from support.rules import CLEANUP_RULES, OPERATOR_RULES

pytestmark = pytest.mark.cluster

FIELD_MANAGER = f"grpo-e2e-{secrets.token_hex(3)}"
EXAMPLE = "lora-single-gpu"


@pytest.fixture(scope="module")
def watched(cluster: Cluster) -> Iterator[str]:
    name = create_namespace(cluster, "watched")
    yield name
    delete_namespace(cluster, name)


@pytest.fixture(scope="module")
def unwatched(cluster: Cluster) -> Iterator[str]:
    name = create_namespace(cluster, "unwatched")
    yield name
    delete_namespace(cluster, name)


@pytest.fixture(scope="module")
def release(cluster: Cluster, helm: Helm, watched: str) -> Iterator[Release]:
    namespace = create_namespace(cluster, "namespaced")
    installed = Release(helm, f"e2e-{secrets.token_hex(3)}", namespace)
    installed.install(
        {
            "rbac": {"clusterWide": False, "namespaces": [watched]},
            "settings": {"resyncSeconds": 5, "fieldManager": FIELD_MANAGER},
            "cleanup": {"timeoutSeconds": 90},
        }
    )
    yield installed
    installed.uninstall(check=False)
    delete_namespace(cluster, namespace)


@pytest.fixture(scope="module")
def operator(
    cluster: Cluster, release: Release, watched: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    process = start_operator(cluster, release, tmp_path_factory.mktemp("operator"))
    yield process
    stop_operator(cluster, process, [watched])


def test_rights_only_in_the_listed_namespaces(
    cluster: Cluster, release: Release, watched: str, unwatched: str
) -> None:
    manifest = release.manifest()
    for_users = "rbac.authorization.k8s.io/aggregate-to-"
    roles = sorted(
        (d["kind"], d["metadata"].get("namespace"))
        for d in manifest
        if "Role" in d["kind"] and not any(k.startswith(for_users) for k in d["metadata"]["labels"])
    )
    # The watched namespace's, and the leader Lease's in the release namespace.
    assert roles == sorted(
        [
            ("Role", watched),
            ("RoleBinding", watched),
            ("Role", release.namespace),
            ("RoleBinding", release.namespace),
        ]
    )
    # The users' editor, viewer and logreader roles are ClusterRoles that grant nothing until the
    # cluster's own edit/view bindings aggregate them; the chart binds them to no one.
    assert sorted(
        (d["kind"], d["metadata"]["name"].rsplit("-", 1)[-1])
        for d in manifest
        if any(k.startswith(for_users) for k in d["metadata"]["labels"])
    ) == [("ClusterRole", "editor"), ("ClusterRole", "logreader"), ("ClusterRole", "viewer")]
    assert release.settings()["namespaces"] == [watched]

    user = service_account_user(release.namespace, release.operator_account())
    expected = {
        **accesses(OPERATOR_RULES, watched),
        # What it may do in the listed namespaces, it may not do in any other, not even in the one
        # it runs in, nor in all namespaces at once.
        **dict.fromkeys(granted(OPERATOR_RULES, unwatched), False),
        **dict.fromkeys(granted(OPERATOR_RULES, release.namespace), False),
        **dict.fromkeys(granted(OPERATOR_RULES, None), False),
        **never_granted(watched),
        Access("create", "leases.coordination.k8s.io", namespace=release.namespace): True,
        Access("create", "leases.coordination.k8s.io", namespace=watched): False,
        # Nothing cluster-wide: the priorityClassName check is skipped in this mode.
        Access("get", "priorityclasses.scheduling.k8s.io"): False,
    }
    assert_access(cluster, user, expected)


def test_job_runs_only_where_watched_and_uninstall_cleans_up(
    cluster: Cluster,
    release: Release,
    operator: OperatorProcess,
    watched: str,
    unwatched: str,
    job_api: RayJobAPI,
    tmp_path: Path,
) -> None:
    ignored = apply_example(cluster, unwatched, EXAMPLE)
    job_api.configure_namespace(watched, RUNNING_FOREVER)
    job = apply_example(cluster, watched, EXAMPLE)
    wait_condition(cluster, watched, job, "Running")
    assert FIELD_MANAGER in writers(cluster, "rayjobs.ray.io", f"{job}-1", watched)
    missing = CHILD_KINDS - set(owned_children(cluster, watched, job))
    assert not missing, f"Running without its {sorted(missing)}"
    job_api.finish(ray_job_id(cluster, watched, f"{job}-1"), "SUCCEEDED")
    wait_condition(cluster, watched, job, "Succeeded")

    # The job applied first, in a namespace the release does not list, was never touched by it
    # (another operator on a shared cluster may have: only ours applies as FIELD_MANAGER).
    assert unwatched not in operator_log(operator)
    for rayjob in cluster.get("rayjobs.ray.io", namespace=unwatched)["items"]:
        assert FIELD_MANAGER not in writers(cluster, "rayjobs.ray.io", rayjob["metadata"]["name"], unwatched)

    manifest, hooks = release.manifest(), release.hooks()
    hook_job = apply_cleanup_hook_objects(cluster, release)
    hook_account = hook_job["spec"]["template"]["spec"]["serviceAccountName"]
    hook_access = {
        **accesses(CLEANUP_RULES, watched),
        **dict.fromkeys(granted(CLEANUP_RULES, unwatched), False),
        Access("list", "grpojobs.grpo.dev"): False,
    }
    assert_access(cluster, service_account_user(release.namespace, hook_account), hook_access)
    ran = run_cleanup_hook(cluster, release, hook_job, tmp_path)
    assert ran.returncode == 0, f"the cleanup hook failed:\n{ran.stdout}\n{ran.stderr}"
    assert f"deleted GRPOJob {watched}/{job}" in ran.stdout
    assert cluster.get("grpojobs", namespace=watched)["items"] == []
    assert cluster.get("rayjobs.ray.io", namespace=watched)["items"] == []
    # Outside the watched namespaces the hook deletes nothing.
    assert cluster.get("grpojob", ignored, unwatched) is not None
    assert_operator_log_clean(operator, watched)

    operator.stop()
    release.uninstall()
    assert existing(cluster, manifest + hooks) == []
    assert cluster.get("grpojob", ignored, unwatched) is not None
