"""One release of the chart with its default RBAC (cluster-wide), through its whole life.

In order: install and what it creates; what its ServiceAccount may do; every example's life
(running, a failed attempt and its resume, success, deletion) with the operator running as that
ServiceAccount; `helm upgrade` with new settings; uninstall while a job exists.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.access import Access, accesses, assert_access, never_granted, service_account_user
from support.cluster import Cluster
from support.jobs import EXAMPLES, example, owned_children
from support.life import (
    CHILD_KINDS,
    apply_example,
    condition_status,
    event_reasons,
    eventually,
    ray_job_id,
    row_of,
    wait_condition,
    writers,
)
from support.namespaces import being_deleted, create_namespace, delete_namespace, foreign_grpojobs
from support.operator_process import OperatorProcess
from support.out_of_cluster import (
    apply_cleanup_hook_objects,
    assert_operator_log_clean,
    run_cleanup_hook,
    start_operator,
    stop_operator,
    write_settings,
)
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI
from support.release import Helm, Release, describe, existing, only
from support.rules import CLEANUP_RULES, OPERATOR_RULES

pytestmark = pytest.mark.cluster

# Our operator's field manager: children it applied carry it, whichever other operator may run.
FIELD_MANAGER = f"grpo-e2e-{secrets.token_hex(3)}"
VALUES = {
    "settings": {"resyncSeconds": 5, "fieldManager": FIELD_MANAGER},
    "cleanup": {"timeoutSeconds": 90},
}
RETRYABLE_FAILURE = "Job entrypoint command failed with exit code 75."
UPGRADED_IMAGE = "registry.example/grpo/trainer-cuda:e2e-upgrade"


def assert_alone(cluster: Cluster) -> None:
    foreign = foreign_grpojobs(cluster)
    assert not foreign, (
        "a cluster-wide release acts on every GRPOJob and its cleanup hook deletes them all, but "
        f"{len(foreign)} belong to someone else ({', '.join(foreign[:5])}...). "
        "Run the e2e tests alone on their cluster."
    )


@pytest.fixture(scope="module")
def release(cluster: Cluster, helm: Helm) -> Iterator[Release]:
    assert_alone(cluster)
    namespace = create_namespace(cluster, "cluster-wide")
    installed = Release(helm, f"e2e-{secrets.token_hex(3)}", namespace)
    installed.install(VALUES)
    yield installed
    installed.uninstall(check=False)
    delete_namespace(cluster, namespace)


@pytest.fixture(scope="module")
def operator(
    cluster: Cluster, release: Release, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    process = start_operator(cluster, release, tmp_path_factory.mktemp("operator"))
    yield process
    stop_operator(cluster, process, None)


def test_install_creates_the_operator_and_its_identity(cluster: Cluster, release: Release) -> None:
    manifest = release.manifest()
    assert sorted(d["kind"] for d in manifest) == [
        "ClusterRole",
        "ClusterRole",  # <release>-editor, aggregated into edit and admin
        "ClusterRole",  # <release>-logreader (the reader pod of kubectl grpo logs), the same
        "ClusterRole",  # <release>-viewer, aggregated into view
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Role",  # the leader Lease's, in the release namespace
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",  # the trainers' status fields
        "ValidatingAdmissionPolicyBinding",
    ]
    assert existing(cluster, manifest) == describe(manifest)

    deployment = cluster.get(
        "deployment", only(manifest, "Deployment")["metadata"]["name"], release.namespace
    )
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"  # leader election: no overlap
    assert deployment["status"].get("availableReplicas") == 1, deployment["status"]
    pod = deployment["spec"]["template"]["spec"]
    account = release.operator_account()
    assert cluster.get("serviceaccount", account, release.namespace) is not None

    binding = cluster.get("clusterrolebinding", only(manifest, "ClusterRoleBinding")["metadata"]["name"])
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": release.namespace}
    ]
    operator_role = only(manifest, "ClusterRole", binding["roleRef"]["name"])
    assert not any(
        k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in operator_role["metadata"]["labels"]
    )

    # The settings the pod mounts and names in $GRPO_OPERATOR_CONFIG, as the values set them.
    [container] = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "settings")
    config = {"name": "GRPO_OPERATOR_CONFIG", "value": f"{mount['mountPath']}/settings.yaml"}
    assert config in container["env"]
    settings = release.settings()
    assert settings["namespaces"] == []
    assert settings["resyncSeconds"] == 5
    assert settings["fieldManager"] == FIELD_MANAGER
    assert set(settings["profiles"]) == {"nvidia", "ascend", "cpu"}

    # The metrics Service reaches the operator pod's metrics port.
    service = cluster.get("service", only(manifest, "Service")["metadata"]["name"], release.namespace)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    [port] = service["spec"]["ports"]
    assert port["targetPort"] == "metrics"
    metrics_port = {"name": "metrics", "containerPort": settings["metricsPort"], "protocol": "TCP"}
    assert metrics_port in container["ports"]
    pods = cluster.get("pods", namespace=release.namespace)["items"]
    selected = [p for p in pods if service["spec"]["selector"].items() <= p["metadata"]["labels"].items()]
    assert [p["status"]["phase"] for p in selected] == ["Running"]

    crd = cluster.get("crd", "grpojobs.grpo.dev")
    assert condition_status(crd, "Established") == "True"


def test_operator_account_may_do_exactly_what_the_operator_does(
    cluster: Cluster, release: Release, namespace: str
) -> None:
    user = service_account_user(release.namespace, release.operator_account())
    expected = {
        # In any namespace (a fresh one here), each verb it uses and none it does not.
        **accesses(OPERATOR_RULES, namespace),
        # Its watches span every namespace.
        Access("list", "grpojobs.grpo.dev"): True,
        Access("watch", "grpojobs.grpo.dev"): True,
        Access("list", "rayjobs.ray.io"): True,
        Access("watch", "rayjobs.ray.io"): True,
        # A job's priorityClassName is looked up before anything is made.
        Access("get", "priorityclasses.scheduling.k8s.io"): True,
        Access("create", "priorityclasses.scheduling.k8s.io"): False,
        # Leader election: a Lease in the release namespace only.
        Access("create", "leases.coordination.k8s.io", namespace=release.namespace): True,
        Access("create", "leases.coordination.k8s.io", namespace=namespace): False,
        Access("delete", "leases.coordination.k8s.io", namespace=release.namespace): False,
        **never_granted(namespace),
    }
    assert_access(cluster, user, expected)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_whole_life(
    cluster: Cluster, namespace: str, job_api: RayJobAPI, operator: OperatorProcess, name: str
) -> None:
    job_api.configure_namespace(namespace, RUNNING_FOREVER)
    job = apply_example(cluster, namespace, name)
    accelerator = example(name)["spec"]["resources"]["accelerator"]

    running = wait_condition(cluster, namespace, job, "Running")
    assert running["status"]["attempt"] == 1
    row = row_of(cluster, namespace, job)
    assert (row["PHASE"], row["ATTEMPT"], row["ACCELERATOR"], row["RAYJOB"]) == (
        "Running",
        "1",
        accelerator,
        f"{job}-1",
    )
    assert FIELD_MANAGER in writers(cluster, "rayjobs.ray.io", f"{job}-1", namespace), (
        "the operator run with the chart's credentials did not apply the RayJob"
    )
    # Everything a running attempt needs, the trainer's status credentials included.
    missing = CHILD_KINDS - set(owned_children(cluster, namespace, job))
    assert not missing, f"Running without its {sorted(missing)}"

    # Attempt 1 crashes with a retryable exit code; attempt 2's Ray job waits until we say.
    job_api.configure_namespace(namespace, (("PENDING", 0),))
    job_api.finish(ray_job_id(cluster, namespace, f"{job}-1"), "FAILED", RETRYABLE_FAILURE)
    restarting = wait_condition(cluster, namespace, job, "Restarting")
    assert restarting["status"]["attempt"] == 2
    assert condition_status(restarting, "Running") == "False"
    [failed] = restarting["status"]["failedAttempts"]
    assert (failed["attempt"], failed["retryable"]) == (1, True)
    assert "exit code 75" in failed["message"]
    # The status names attempt 2's RayJob only once it exists (children_created), a moment after
    # Restarting; the attempt's Ray job is held PENDING, so the job is still Restarting then.
    cluster.wait_for(
        "grpojobs",
        job,
        namespace,
        lambda o: (o.get("status") or {}).get("rayJobName") == f"{job}-2",
        what=f"status.rayJobName {job}-2",
    )
    row = row_of(cluster, namespace, job)
    assert (row["PHASE"], row["ATTEMPT"], row["RAYJOB"]) == ("Restarting", "2", f"{job}-2")

    second = ray_job_id(cluster, namespace, f"{job}-2")
    job_api.configure_job(second, RUNNING_FOREVER)
    resumed = wait_condition(cluster, namespace, job, "Running")
    assert resumed["status"]["attempt"] == 2
    assert condition_status(resumed, "Restarting") == "False"

    job_api.finish(second, "SUCCEEDED")
    done = wait_condition(cluster, namespace, job, "Succeeded")
    assert done["status"]["completionTime"]
    # A finished job keeps only the conditions of its end: Running=False would only repeat it.
    kept = {c["type"] for c in done["status"]["conditions"]}
    assert "Succeeded" in kept, kept
    assert not kept & {"Running", "Created", "Restarting"}, kept
    row = row_of(cluster, namespace, job)
    assert (row["PHASE"], row["ATTEMPT"]) == ("Succeeded", "2")
    reasons = event_reasons(cluster, namespace, job)
    assert reasons.get("Created") == "Normal", reasons
    assert reasons.get("Retrying") == "Warning", reasons
    assert reasons.get("TrainingSucceeded") == "Normal", reasons

    # Deleted as it was created; only the checkpoint claim (retention Retain) outlives it.
    cluster.kubectl("delete", "--namespace", namespace, "-f", str(EXAMPLES[name]), "--wait", "--timeout=90s")
    wait_until_only_checkpoints_left(cluster, namespace, job)
    assert_operator_log_clean(operator, namespace)


def wait_until_only_checkpoints_left(cluster: Cluster, namespace: str, job: str) -> None:
    kept = {"persistentvolumeclaims": [f"{job}-checkpoints"]}

    def left() -> dict[str, list[str]]:
        children = owned_children(cluster, namespace, job)
        ray_clusters = cluster.get("rayclusters.ray.io", namespace=namespace)["items"]
        if ray_clusters:
            children["rayclusters.ray.io"] = [c["metadata"]["name"] for c in ray_clusters]
        return children

    eventually(lambda: left() == kept, timeout=90, what=lambda: f"only {kept} left of {job}, not {left()}")


def test_upgrade_rolls_out_new_settings(
    cluster: Cluster, release: Release, operator: OperatorProcess, namespace: str
) -> None:
    deployment = release.deployment()["metadata"]["name"]
    before = cluster.get("deployment", deployment, release.namespace)
    settings_before = release.settings()
    revision = release.revision()

    release.upgrade("settings.resyncSeconds=10", f"profiles.nvidia.image={UPGRADED_IMAGE}")

    assert release.revision() == revision + 1
    settings = release.settings()
    assert settings["resyncSeconds"] == 10
    assert settings["profiles"]["nvidia"]["image"] == UPGRADED_IMAGE
    # --reuse-values keeps the rest; only the changed key of the profile moves.
    assert settings["fieldManager"] == FIELD_MANAGER
    assert settings["profiles"]["ascend"] == settings_before["profiles"]["ascend"]
    unchanged = {k: v for k, v in settings_before["profiles"]["nvidia"].items() if k != "image"}
    assert unchanged.items() <= settings["profiles"]["nvidia"].items()

    after = cluster.get("deployment", deployment, release.namespace)
    checksum = "checksum/settings"
    assert (
        after["spec"]["template"]["metadata"]["annotations"][checksum]
        != before["spec"]["template"]["metadata"]["annotations"][checksum]
    )
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    cluster.kubectl("rollout", "status", f"deployment/{deployment}", "-n", release.namespace, "--timeout=60s")

    # The operator reads its settings once, at start-up: restarted as the new pod would be, it
    # gives new jobs the upgraded image.
    operator.stop()
    write_settings(release, operator)
    operator.start()
    job = apply_example(cluster, namespace, "lora-single-gpu")
    rayjob = cluster.wait_for(
        "rayjobs.ray.io", f"{job}-1", namespace, lambda _: True, timeout=60, what="existence"
    )
    cluster_spec = rayjob["spec"]["rayClusterSpec"]
    images = {
        c["image"]
        for group in [cluster_spec["headGroupSpec"], *cluster_spec["workerGroupSpecs"]]
        for c in group["template"]["spec"]["containers"]
    }
    assert images == {UPGRADED_IMAGE}
    assert_operator_log_clean(operator, namespace)


def test_uninstall_leaves_nothing_behind(
    cluster: Cluster,
    release: Release,
    helm: Helm,
    operator: OperatorProcess,
    namespace: str,
    job_api: RayJobAPI,
    tmp_path: Path,
) -> None:
    job_api.configure_namespace(namespace, RUNNING_FOREVER)
    job = apply_example(cluster, namespace, "geo3k-ascend-910b")
    wait_condition(cluster, namespace, job, "Running")
    manifest, hooks = release.manifest(), release.hooks()

    assert_alone(cluster)
    # `helm uninstall` creates the hook's identity and script, then runs its Job; under KWOK the
    # Job's pod does nothing, so its script runs here, as its ServiceAccount, with its environment.
    hook_job = apply_cleanup_hook_objects(cluster, release)
    hook_user = service_account_user(
        release.namespace, hook_job["spec"]["template"]["spec"]["serviceAccountName"]
    )
    hook_access = {
        **accesses(CLEANUP_RULES, namespace),
        Access("list", "grpojobs.grpo.dev"): True,
        Access("list", "rayjobs.ray.io"): True,
        Access("patch", "grpojobs.grpo.dev", "status", namespace): False,
    }
    assert_access(cluster, hook_user, hook_access)
    ran = run_cleanup_hook(cluster, release, hook_job, tmp_path)
    assert ran.returncode == 0, f"the cleanup hook failed:\n{ran.stdout}\n{ran.stderr}"
    assert f"deleted GRPOJob {namespace}/{job}" in ran.stdout
    assert "no GRPOJob or RayJob left" in ran.stdout
    assert cluster.get("grpojobs", namespace=namespace)["items"] == []
    assert cluster.get("rayjobs.ray.io", namespace=namespace)["items"] == []
    assert cluster.get("persistentvolumeclaim", f"{job}-checkpoints", namespace) is not None
    assert_operator_log_clean(operator, namespace)

    # Helm deletes the operator's Deployment next: the operator stops before its RBAC goes.
    operator.stop()
    release.uninstall()
    assert existing(cluster, manifest + hooks) == []
    assert being_deleted(cluster, None) == [], "GRPOJobs stuck in deletion"
    listed = helm("list", "--namespace", release.namespace, "--all", "--short").stdout.split()
    assert release.name not in listed
    # CRDs in the chart's crds/ are never deleted by Helm: the users' data stays.
    assert cluster.get("crd", "grpojobs.grpo.dev") is not None
