"""`kubectl grpo` against a real API server, found by kubectl itself as a plugin on PATH.

The verdict test is the one-validation-everywhere check with the real judges: the API server
(`kubectl apply --dry-run=server`, strict field validation) and the operator's own `validate`,
compared case by case with `kubectl grpo validate`. On the local cluster pods run nothing (KWOK),
so reading the volume through a reader pod stops where a kubelet would serve its output; that
path's one-line error and its clean-up are what is tested here, and the reading itself with
`--workdir` in tests/unit/kubectl.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_operator.api.documents import job_document
from grpo_operator.config import Settings
from grpo_operator.validation import validate
from grpo_operator.verdict import parse
from support.cluster import Cluster
from support.jobs import create_inputs
from support.plugin import kubectl_grpo
from support.plugin import plugin_path as shim_path
from support.verdict_cases import CASES, Case

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    cluster.install_crds()


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PATH holding `kubectl-grpo`, as `pip install` puts it in a virtualenv's bin/."""
    return shim_path(tmp_path_factory.mktemp("bin"))


def server_verdict(cluster: Cluster, namespace: str, manifest: dict) -> str | None:
    """The API server's own answer: a server-side dry run with kubectl's strict field validation."""
    result = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest), check=False
    )
    return None if result.returncode == 0 else result.stderr


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_judge_gives_the_same_verdict(case: Case, cluster, namespace, crds, plugin_path):
    manifest = case.manifest()
    refused = server_verdict(cluster, namespace, manifest)
    if case.judge == "server":
        assert refused is not None, "the API server accepted it"
        assert case.field in refused, refused
    else:
        assert refused is None, f"the server refused what only the operator should: {refused}"
        job, _ = parse(manifest, namespace)
        assert job is not None
        assert case.field in [p.field for p in validate(job, Settings())]
    plugin = kubectl_grpo(
        cluster, plugin_path, "validate", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(manifest)
    )
    assert plugin.returncode == 3, plugin.stdout + plugin.stderr
    assert case.field in plugin.stdout
    assert "Traceback" not in plugin.stderr


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_examples_are_accepted_by_every_judge(example: Path, cluster, namespace, crds, plugin_path):
    manifest = job_document(example.read_text(), example.name)
    assert server_verdict(cluster, namespace, manifest) is None
    create_inputs(cluster, namespace, manifest)  # the claims and Secrets a user makes first
    plugin = kubectl_grpo(cluster, plugin_path, "validate", "-n", namespace, "-f", str(example))
    assert plugin.returncode == 0, plugin.stdout + plugin.stderr
    assert plugin.stdout.startswith("ok: the API server accepts it (dry run)")


def test_validate_against_a_cluster_checks_what_the_job_names(
    cluster, namespace, crds, plugin_path, tmp_path
):
    manifest = yaml.safe_load((REPO / "examples" / "lora-single-gpu.yaml").read_text())
    manifest["spec"]["reward"] = {"custom": {"configMap": "my-reward", "key": "reward.py"}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest))
    missing = kubectl_grpo(cluster, plugin_path, "validate", "-n", namespace, "-f", str(path))
    assert missing.returncode == 3, missing.stdout + missing.stderr
    assert (
        f"problem: spec.reward.custom: ConfigMap 'my-reward' does not exist in namespace {namespace} "
        "(the job would wait Pending for it)"
    ) in missing.stdout
    assert (
        f"problem: spec.dataset.train[0]: PersistentVolumeClaim 'visual-math' does not exist in namespace {namespace}"
        in (missing.stdout)
    )
    create_inputs(cluster, namespace, manifest)
    broken = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "my-reward", "namespace": namespace},
    }
    cluster.apply({**broken, "data": {"reward.py": "def score(a, b):\n    return 0.0\n"}})
    wrong = kubectl_grpo(cluster, plugin_path, "validate", "-n", namespace, "-f", str(path))
    assert wrong.returncode == 3
    assert (
        "problem: spec.reward.custom.function: my-reward/reward.py defines no 'compute_score' (its functions: score)"
        in (wrong.stdout)
    )
    # Sent along in the same file, the ConfigMap counts as there.
    fine = {**broken, "data": {"reward.py": "def compute_score(*a):\n    return 1.0\n"}}
    path.write_text(yaml.safe_dump_all([fine, manifest]))
    ok = kubectl_grpo(cluster, plugin_path, "validate", "-n", namespace, "-f", str(path))
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_status_suspend_and_resume(cluster, namespace, crds, plugin_path):
    manifest = yaml.safe_load((REPO / "examples" / "lora-single-gpu.yaml").read_text())
    cluster.apply({**manifest, "metadata": {"name": "steer", "namespace": namespace}})
    status = kubectl_grpo(cluster, plugin_path, "status", "steer", "-n", namespace)
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"{namespace}/steer: not reconciled yet")
    assert kubectl_grpo(cluster, plugin_path, "suspend", "steer", "-n", namespace).returncode == 0
    assert cluster.get("grpojob", "steer", namespace)["spec"]["runPolicy"]["suspend"] is True
    assert kubectl_grpo(cluster, plugin_path, "resume", "steer", "-n", namespace).returncode == 0
    assert cluster.get("grpojob", "steer", namespace)["spec"]["runPolicy"]["suspend"] is False


def test_suspend_and_resume_refuse_a_finished_job_with_the_reason(cluster, namespace, crds, plugin_path):
    manifest = yaml.safe_load((REPO / "examples" / "lora-single-gpu.yaml").read_text())
    cluster.apply({**manifest, "metadata": {"name": "done", "namespace": namespace}})
    not_suspended = kubectl_grpo(cluster, plugin_path, "resume", "done", "-n", namespace)
    assert (not_suspended.returncode, not_suspended.stderr) == (
        1,
        "error: grpojob done is not suspended (phase Pending): nothing to resume\n",
    )
    finished = {"status": {"phase": "Succeeded", "completionTime": "2026-12-01T10:00:00Z"}}
    cluster.kubectl(
        "patch",
        "grpojob",
        "done",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(finished),
    )
    for verb in ("suspend", "resume"):
        result = kubectl_grpo(cluster, plugin_path, verb, "done", "-n", namespace)
        assert result.returncode == 1, result.stdout
        assert result.stderr == (
            f"error: grpojob done has finished (Succeeded): there is nothing to {verb}, and a finished "
            "job's spec cannot change; to train again, apply the job under a new name\n"
        )
    assert cluster.get("grpojob", "done", namespace)["spec"].get("runPolicy", {}).get("suspend") is not True


def test_a_missing_job_is_one_line(cluster, namespace, crds, plugin_path):
    missing = f'error: grpojob "gone" not found in namespace "{namespace}"'
    # A command that reads the job's volume also says how to read a deleted job's kept claim.
    kept = "; if it was deleted and its claim kept, --claim gone-checkpoints (or the claim its spec named) reads its files"
    for command, said in (
        (["status", "gone"], missing),
        (["logs", "gone"], missing + kept),
        (["suspend", "gone"], missing),
        (["plot", "gone"], missing + kept),
    ):
        result = kubectl_grpo(cluster, plugin_path, *command, "-n", namespace)
        assert result.returncode == 1
        assert result.stderr == said + "\n"


KWOK_NODE = "kwok-cpu-0"
"""Where the reader tests' volumes live (hack/cluster/node-pools.yaml): a KWOK node, so the pod runs
nothing and the path under test ends where a kubelet would serve its output."""


@pytest.fixture
def local_claim(cluster: Cluster, namespace: str):
    """Makes claims bound to a local volume on `KWOK_NODE`, and deletes the volumes after the test.

    A local volume decides where the reader runs, as a user's local volume would: a KWOK node, which
    runs nothing, so the path under test ends where a kubelet would serve the pod's output. (The
    reader tolerates only its job's pool's taints: test_reader_placement.py.)
    """
    made: list[str] = []

    def make(name: str) -> None:
        volume = f"{namespace}-{name}"
        made.append(volume)
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": volume},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "local": {"path": f"/tmp/grpo-local-volumes/{volume}"},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/hostname",
                                            "operator": "In",
                                            "values": [KWOK_NODE],
                                        }
                                    ]
                                }
                            ]
                        }
                    },
                },
            }
        )
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "volumeName": volume,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        )
        cluster.wait_for("pvc", name, namespace, lambda c: c["status"].get("phase") == "Bound", what="Bound")

    yield make
    for volume in made:
        cluster.kubectl("delete", "pv", volume, "--ignore-not-found", "--wait=false")


def test_reading_the_volume_through_a_pod(cluster, namespace, crds, plugin_path, local_claim):
    """The reader pod mounts the job's claim; KWOK runs it but serves no output: one line, pod gone."""
    manifest = yaml.safe_load((REPO / "examples" / "lora-single-gpu.yaml").read_text())
    cluster.apply({**manifest, "metadata": {"name": "reader", "namespace": namespace}})
    no_claim = kubectl_grpo(cluster, plugin_path, "logs", "reader", "--attempt", "1", "-n", namespace)
    assert no_claim.returncode == 1
    assert no_claim.stderr == (
        "error: the job's volume (claim reader-checkpoints) does not exist: the job has not started, "
        "or its claim was deleted with it\n"
    )
    local_claim("reader-checkpoints")
    result = kubectl_grpo(cluster, plugin_path, "logs", "reader", "--attempt", "1", "-n", namespace)
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot read the output of pod reader-read-")
    assert result.stderr.count("\n") == 1
    pods = cluster.kubectl("get", "pods", "-n", namespace, "-o", "name").stdout.split()
    assert [p for p in pods if "reader-read-" in p] == [] or all(
        cluster.get("pod", p.split("/")[1], namespace)["metadata"].get("deletionTimestamp") for p in pods
    )


# --- kubectl's habits -------------------------------------------------------------------------


def _job_named(cluster: Cluster, namespace: str, name: str, status: dict | None = None) -> None:
    manifest = yaml.safe_load((REPO / "examples" / "lora-single-gpu.yaml").read_text())
    cluster.apply({**manifest, "metadata": {"name": name, "namespace": namespace}})
    if status:
        cluster.kubectl(
            "patch",
            "grpojob",
            name,
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )


def test_list_in_every_output_and_flags_before_the_command(cluster, namespace, crds, plugin_path):
    _job_named(cluster, namespace, "first", {"phase": "Running", "attempt": 2, "metrics": {"reward": 0.5}})
    _job_named(cluster, namespace, "second")
    as_yaml = kubectl_grpo(cluster, plugin_path, "-n", namespace, "list", "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    listed = yaml.safe_load(as_yaml.stdout)
    assert listed["kind"] == "List"
    assert [item["metadata"]["name"] for item in listed["items"]] == ["first", "second"]
    assert listed["items"][0]["status"]["attempt"] == 2
    assert listed["items"][0]["kind"] == "GRPOJob"
    as_json = kubectl_grpo(cluster, plugin_path, "list", "--namespace", namespace, "-o", "json")
    assert [i["metadata"]["name"] for i in json.loads(as_json.stdout)["items"]] == ["first", "second"]
    table = kubectl_grpo(cluster, plugin_path, "list", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "STEP", "REWARD", "VAL", "ATTEMPT", "AGE"]
    assert table[1].split()[:6] == ["first", "Running", "-", "0.5", "-", "2"]
    everywhere = kubectl_grpo(cluster, plugin_path, "list", "-A", "-o", "wide").stdout.splitlines()
    assert everywhere[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert everywhere[0].split()[-2:] == ["ETA", "REASON"]
    assert [line.split()[:2] for line in everywhere if line.startswith(namespace + " ")] == [
        [namespace, "first"],
        [namespace, "second"],
    ]
    names = kubectl_grpo(cluster, plugin_path, "-n", namespace, "list", "-o", "name").stdout.split()
    assert names == ["grpojob.grpo.dev/first", "grpojob.grpo.dev/second"]
    before = kubectl_grpo(cluster, plugin_path, "-n", namespace, "status", "first", "-o", "yaml")
    assert yaml.safe_load(before.stdout)["phase"] == "Running"
    version = kubectl_grpo(cluster, plugin_path, "--version")
    assert version.returncode == 0
    assert version.stdout.startswith("kubectl-grpo ")


def test_an_empty_namespace_lists_nothing_in_one_line(cluster, namespace, crds, plugin_path):
    result = kubectl_grpo(cluster, plugin_path, "list", "-n", namespace)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == f"No GRPOJobs found in namespace {namespace}.\n"


def test_attempt_out_of_range_names_the_attempts_there_are(cluster, namespace, crds, plugin_path):
    _job_named(cluster, namespace, "ranged", {"phase": "Running", "attempt": 2})
    result = kubectl_grpo(cluster, plugin_path, "logs", "ranged", "--attempt", "3", "-n", namespace)
    assert result.returncode == 2
    assert (
        result.stderr == "error: --attempt 3: grpojob ranged has no such attempt (its attempts are 1 to 2)\n"
    )
    zero = kubectl_grpo(cluster, plugin_path, "-n", namespace, "logs", "ranged", "--attempt", "0")
    assert zero.returncode == 2
    assert zero.stderr.startswith("error: argument --attempt: expected 1 or more, got 0")
    assert zero.stderr.count("\n") == 1


def _head_pod(cluster: Cluster, namespace: str, ray_cluster: str, **spec: Any) -> str:
    """A pod with the labels KubeRay gives a Ray cluster's head (KWOK runs it if it has a node)."""
    name = f"{ray_cluster}-head-x"
    labels = {"ray.io/cluster": ray_cluster, "ray.io/node-type": "head"}
    container = {"name": "ray-head", "image": "ray", "ports": [{"name": "dashboard", "containerPort": 8265}]}
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"containers": [container], **spec},
        }
    )
    return name


def test_dashboard_forwards_the_heads_service_or_says_why_not(cluster, namespace, crds, plugin_path):
    def dashboard(job: str) -> subprocess.CompletedProcess[str]:
        found = kubectl_grpo(cluster, plugin_path, "dashboard", job, "-n", namespace, "--port", "0")
        assert found.returncode == 1, found
        assert found.stderr.count("\n") == 1, found.stderr
        return found

    _job_named(cluster, namespace, "nocluster", {"phase": "Succeeded"})
    assert dashboard("nocluster").stderr.startswith(
        "error: grpojob nocluster has no Ray cluster now (Succeeded)"
    )
    ray_cluster = "live-1-raycluster-abcde"
    url = f"{ray_cluster}-head-svc.{namespace}.svc.cluster.local:8265"
    _job_named(cluster, namespace, "live", {"phase": "Running", "attempt": 1, "dashboardURL": url})
    # The cluster is in the status but KubeRay has made no head pod (yet).
    assert dashboard("live").stderr == (
        f"error: grpojob live has no Ray head pod (Ray cluster {ray_cluster}, job Running): "
        "KubeRay has not created it yet, or it is being replaced\n"
    )
    # A head pod no node can take: the scheduler's reason, on the pod's name.
    pending = _head_pod(cluster, namespace, ray_cluster, nodeSelector={"grpo.dev/pool": "none-such"})
    cluster.wait_for(
        "pod",
        pending,
        namespace,
        lambda p: any(c["type"] == "PodScheduled" for c in p.get("status", {}).get("conditions", [])),
        timeout=30,
        what="the scheduler's verdict",
    )
    refused = dashboard("live").stderr
    assert refused.startswith(
        f"error: the Ray head pod {pending} of grpojob live is not running (Pending: 0/"
    ), refused
    assert "node(s) didn't match Pod's node affinity/selector" in refused
    cluster.kubectl("delete", "pod", pending, "-n", namespace, "--wait=true")
    # A running head but no Service (KubeRay has not made it): kubectl's own refusal, in one line.
    running = _head_pod(cluster, namespace, ray_cluster, nodeName="kwok-cpu-0")
    cluster.wait_for(
        "pod", running, namespace, lambda p: p["status"].get("phase") == "Running", timeout=60, what="Running"
    )
    missing = dashboard("live").stderr
    assert missing.startswith(
        f"error: cannot forward the Ray dashboard (svc/{ray_cluster}-head-svc in {namespace}): "
    )
    assert "not found" in missing
    assert "): error:" not in missing  # kubectl's own "error: " is not repeated


# --- logs in hardened namespaces, and after the job ----------------------------------------------


def test_the_reader_pod_is_admitted_where_restricted_is_enforced(
    cluster, namespace, crds, plugin_path, local_claim
):
    """The API server's Pod Security admission is real here: it refuses a pod as the reader used to
    be (root allowed, no seccomp profile) and admits the reader, for a live job and for a claim
    whose job is gone. KWOK then runs the pod but serves no output: that one line is the end."""
    cluster.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted", "--overwrite"
    )
    unhardened = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "unhardened", "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "read",
                    "image": "busybox:1.36",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ]
        },
    }
    refused = cluster.kubectl(
        "create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(unhardened), check=False
    )
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted' in refused.stderr

    _job_named(cluster, namespace, "kept", {"phase": "Succeeded", "attempt": 1})
    local_claim("kept-checkpoints")
    live = kubectl_grpo(cluster, plugin_path, "logs", "kept", "-n", namespace)
    assert live.returncode == 1
    assert live.stderr.startswith("error: cannot read the output of pod kept-read-"), live.stderr
    assert "PodSecurity" not in live.stderr

    cluster.kubectl("delete", "grpojob", "kept", "-n", namespace, "--wait=true")
    alone = kubectl_grpo(
        cluster,
        plugin_path,
        "-n",
        namespace,
        "logs",
        "--claim",
        "kept-checkpoints",
        "--job",
        "kept-0123abcd",
        "--attempt",
        "1",
    )
    assert alone.returncode == 1
    assert alone.stderr.startswith("error: cannot read the output of pod kept-read-"), alone.stderr
    missing = kubectl_grpo(
        cluster, plugin_path, "-n", namespace, "checkpoints", "--claim", "nope", "--job", "kept-0123abcd"
    )
    assert missing.stderr == (
        f"error: the job's volume (claim nope) does not exist: no such claim in namespace {namespace}\n"
    )


def _user_kubeconfig(cluster: Cluster, namespace: str, account: str, folder: Path) -> str:
    """A kubeconfig holding only `account`'s token: the plugin as a person with just their roles."""
    cluster.kubectl("create", "serviceaccount", account, "-n", namespace)
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=10m").stdout.strip()
    source = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    context = next(c for c in source["contexts"] if c["name"] == source["current-context"])["context"]
    server = next(c for c in source["clusters"] if c["name"] == context["cluster"])["cluster"]
    if "certificate-authority" in server and not Path(server["certificate-authority"]).is_absolute():
        server = {
            **server,
            "certificate-authority": str(Path(cluster.kubeconfig).parent / server["certificate-authority"]),
        }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": server}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [
            {"name": account, "context": {"cluster": "test", "user": account, "namespace": namespace}}
        ],
        "current-context": account,
    }
    path = folder / f"{account}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_the_charts_logreader_role_is_what_logs_needs(
    cluster, namespace, crds, plugin_path, tmp_path, local_claim
):
    """The chart's viewer role alone cannot make the reader pod (one line saying so); with its
    logreader role bound too, the plugin gets as far as KWOK lets it (the pod's output)."""
    from support.helm import only, render

    docs = render()
    roles = {}
    for suffix in ("-viewer", "-logreader"):
        role = only(docs, "ClusterRole", suffix)
        role["metadata"] = {"name": f"{namespace}{suffix}"}  # cluster-wide names of this test's own
        cluster.apply(role)
        roles[suffix] = role["metadata"]["name"]
    try:
        _job_named(cluster, namespace, "mine", {"phase": "Running", "attempt": 1})
        local_claim("mine-checkpoints")
        kubeconfig = _user_kubeconfig(cluster, namespace, "alice", tmp_path)
        cluster.kubectl(
            "create",
            "rolebinding",
            "alice-view",
            "-n",
            namespace,
            f"--clusterrole={roles['-viewer']}",
            f"--serviceaccount={namespace}:alice",
        )
        viewer = kubectl_grpo(cluster, plugin_path, "--kubeconfig", kubeconfig, "logs", "mine")
        assert viewer.returncode == 1
        assert viewer.stderr.startswith("error: cannot create a pod to read the job's volume: "), (
            viewer.stderr
        )
        assert viewer.stderr.count("\n") == 1
        cluster.kubectl(
            "create",
            "rolebinding",
            "alice-logs",
            "-n",
            namespace,
            f"--clusterrole={roles['-logreader']}",
            f"--serviceaccount={namespace}:alice",
        )
        deadline = time.monotonic() + 30  # RBAC reaches the authorizer's cache within moments
        while True:
            reader = kubectl_grpo(cluster, plugin_path, "--kubeconfig", kubeconfig, "logs", "mine")
            if "cannot create a pod" not in reader.stderr or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert reader.stderr.startswith("error: cannot read the output of pod mine-read-"), reader.stderr
    finally:
        for name in roles.values():
            cluster.kubectl("delete", "clusterrole", name, "--ignore-not-found")
