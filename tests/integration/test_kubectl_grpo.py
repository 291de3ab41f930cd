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
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from grpo_operator.config import Settings
from grpo_operator.validation import validate
from grpo_operator.verdict import parse
from grpo_trainer.spec import grpojob_document
from support.cluster import Cluster
from support.jobs import create_inputs
from support.verdict_cases import CASES, Case

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/grpojobs.grpo.dev", "--timeout=60s")


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PATH holding `kubectl-grpo`, as `pip install` puts it in a virtualenv's bin/."""
    folder = tmp_path_factory.mktemp("bin")
    shim = folder / "kubectl-grpo"
    shim.write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "import sys; from grpo_kubectl.cli import main; sys.exit(main())" "$@"\n'
    )
    shim.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def kubectl_grpo(
    cluster: Cluster, plugin_path: str, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **cluster.env,
        "PATH": plugin_path,
        "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), str(REPO / "trainer"), str(REPO / "kubectl")]),
    }
    return subprocess.run(
        [cluster.kubectl_path, "grpo", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


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
    manifest = grpojob_document(example.read_text())
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
    assert cluster.get("grpojob", "done", namespace)["spec"]["runPolicy"].get("suspend") is not True


def test_a_missing_job_is_one_line(cluster, namespace, crds, plugin_path):
    for command in (["status", "gone"], ["logs", "gone"], ["suspend", "gone"], ["plot", "gone"]):
        result = kubectl_grpo(cluster, plugin_path, *command, "-n", namespace)
        assert result.returncode == 1
        assert result.stderr == f'error: grpojob "gone" not found in namespace "{namespace}"\n'


def test_reading_the_volume_through_a_pod(cluster, namespace, crds, plugin_path):
    """The reader pod mounts the job's claim; KWOK runs it but serves no output: one line, pod gone."""
    manifest = yaml.safe_load((REPO / "examples" / "lora-single-gpu.yaml").read_text())
    cluster.apply({**manifest, "metadata": {"name": "reader", "namespace": namespace}})
    no_claim = kubectl_grpo(cluster, plugin_path, "logs", "reader", "--attempt", "1", "-n", namespace)
    assert no_claim.returncode == 1
    assert no_claim.stderr == (
        "error: the job's volume (claim reader-checkpoints) does not exist: the job has not started, "
        "or its claim was deleted with it\n"
    )
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "reader-checkpoints", "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }
    )
    result = kubectl_grpo(cluster, plugin_path, "logs", "reader", "--attempt", "1", "-n", namespace)
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot read the output of pod reader-read-")
    assert result.stderr.count("\n") == 1
    pods = cluster.kubectl("get", "pods", "-n", namespace, "-o", "name").stdout.split()
    assert [p for p in pods if "reader-read-" in p] == [] or all(
        cluster.get("pod", p.split("/")[1], namespace)["metadata"].get("deletionTimestamp") for p in pods
    )
