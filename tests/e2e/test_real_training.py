"""GRPOJobs that really train: the operator, KubeRay, a real Ray head and the real trainer, on CPU.

The namespace is routed to the local cluster's real Ray head (hack/README.md, "The real Ray
head"): KubeRay's job-API calls reach it, and it runs the unchanged entrypoint `grpo-train run`
against a host folder that mirrors the head pod (the spec ConfigMap, the claims, the environment,
the job's own ServiceAccount token). The job is examples/colours-cpu.yaml: the offline tiny
Qwen3-VL learning to name a square's colour through the TRL engine, its model and data staged onto
claims as a user would. Nothing here is scripted: every status field, checkpoint and exit code is
the trainer's own.

What only this path shows quickly: a job's success with every status field, the export and the
trainer's own ServiceAccount checked; a reward the job cannot call; a configuration error (fails at
once, no retry). The lives that need a running trainer to act on (killed after a checkpoint and
resumed in attempt 2, suspend and resume, deleted mid-run) run in Ray pods of the trainer image on
the real node (tests/e2e/test_real_pods.py, the same scenarios from tests/support/colour_lives.py).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_operator.api.contract import job_dir
from grpo_trainer.testing.colour_job import stage
from support import colour_lives as lives
from support.cluster import Cluster
from support.colour_lives import (
    assert_history_covers_every_step_once,
    colour_job,
    phase_is,
)
from support.namespaces import create_namespace, delete_namespace, stage_colour_claims
from support.operator_process import OperatorProcess

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "colours-cpu.yaml"
# Long enough that a test acts mid-run, short enough for CI: about 0.5 s a step on two idle cores.
STEPS = 40
SAVE_EVERY = 5
# Each attempt starts a Python process that imports torch and TRL: tens of seconds on two cores.
ATTEMPT_TIMEOUT = 300


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model and the colour dataset, as a user would have them before staging."""
    return stage(tmp_path_factory.mktemp("colours"), train_rows=128, validation_rows=16)


@pytest.fixture(scope="module")
def namespace(cluster: Cluster, staged: Path) -> Iterator[str]:
    """A namespace routed to the real Ray head, with the model and data claims staged."""
    name = create_namespace(cluster, "real")
    cluster.kubectl("label", "namespace", name, "grpo.dev/ray-backend=real")
    stage_colour_claims(cluster, name, staged)
    yield name
    delete_namespace(cluster, name)


@pytest.fixture(scope="module")
def operator(
    cluster: Cluster, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The operator, watching this module's namespace only."""
    cluster.install_crds()
    process = OperatorProcess(
        cluster.kubeconfig,
        tmp_path_factory.mktemp("operator") / "operator.log",
        extra_env={"GRPO_NAMESPACES": namespace},
    )
    process.start()
    yield process
    process.stop()


def apply_job(cluster: Cluster, namespace: str, name: str, **changes: Any) -> None:
    cluster.apply(colour_job(name, STEPS, SAVE_EVERY, **changes), namespace)


def wait_status(
    cluster: Cluster,
    namespace: str,
    name: str,
    condition: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float = ATTEMPT_TIMEOUT,
) -> dict[str, Any]:
    return lives.wait_status(cluster, namespace, name, condition, what, timeout)


def pod_root(cluster: Cluster, namespace: str, status_: dict[str, Any]) -> Path:
    """The host folder standing for the head pod of the job's current attempt."""
    assert cluster.log_dir is not None
    rayjob = cluster.get("rayjob", status_["rayJobName"], namespace)
    assert rayjob is not None
    return cluster.log_dir.parent / "pods" / namespace / rayjob["status"]["jobId"]


def job_path(cluster: Cluster, namespace: str, name: str) -> str:
    """The job's folder as its pods see it: its name and uid (a re-created job gets its own)."""
    return job_dir(name, cluster.get("grpojob", name, namespace)["metadata"]["uid"])


def job_folder(cluster: Cluster, namespace: str, name: str, status_: dict[str, Any]) -> Path:
    return pod_root(cluster, namespace, status_) / "root" / job_path(cluster, namespace, name).lstrip("/")


def test_a_job_trains_reports_and_exports(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    name = f"ok-{secrets.token_hex(2)}"
    apply_job(cluster, namespace, name)
    done = wait_status(cluster, namespace, name, phase_is("Succeeded", "Failed"), "a final phase")
    assert done["phase"] == "Succeeded", done.get("conditions")

    # Progress, metrics, history and checkpoints, all reported by the trainer while it trained.
    assert done["progress"]["step"] == STEPS
    assert done["progress"]["totalSteps"] == STEPS
    assert done["progress"]["percent"] == 100.0
    assert 0.0 <= float(done["metrics"]["reward"]) <= 1.0
    assert_history_covers_every_step_once(done, STEPS)
    assert done["checkpoint"]["latestStep"] == STEPS
    path = job_path(cluster, namespace, name)
    assert path.startswith(f"/grpo/checkpoints/{name}-")
    assert done["checkpoint"]["path"] == f"{path}/checkpoints/checkpoint-{STEPS}"
    assert done["attempt"] == 1
    assert not done.get("failedAttempts")

    # The export is on the claim, named in status as the pods see it.
    folder = job_folder(cluster, namespace, name, done)
    outputs = dict(done["outputs"])
    assert outputs == {
        "step": STEPS,
        "model": f"{path}/export/model",
        "loraAdapter": f"{path}/export/lora-adapter",
        # The post-training check (on by default, spec.export.sample): its text is in the file.
        "sampleFile": f"{path}/export/sample.json",
    }
    sample = json.loads((folder / "export" / "sample.json").read_text())
    assert sample["prompt"] == "what colour is the square ?"
    assert 0.0 <= float(sample["reward"]) <= 1.0
    assert (folder / "export" / "model" / "config.json").is_file()
    assert (folder / "export" / "lora-adapter" / "adapter_config.json").is_file()

    # The trainer's status writes came with the job's own ServiceAccount token, as field manager
    # grpo-trainer on the status subresource.
    shown = cluster.kubectl("get", "grpojob", name, "-n", namespace, "-o", "json", "--show-managed-fields")
    job = json.loads(shown.stdout)
    trainer_fields = [
        entry["fieldsV1"]["f:status"]
        for entry in job["metadata"]["managedFields"]
        if entry["manager"] == "grpo-trainer" and entry.get("subresource") == "status"
    ]
    assert trainer_fields
    assert {"f:progress", "f:metrics", "f:history", "f:checkpoint", "f:outputs"} <= set(trainer_fields[0])
    # The trainer judged every step: finite rewards and losses, so it left no (sick) verdict,
    # and the Healthy condition says so.
    assert "health" not in done
    healthy = next(c for c in done["conditions"] if c["type"] == "Healthy")
    assert healthy["status"] == "True", healthy
    kubeconfig = yaml.safe_load((pod_root(cluster, namespace, done) / "kubeconfig").read_text())
    token = kubeconfig["users"][0]["user"]["token"]
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == f"system:serviceaccount:{namespace}:{name}-trainer"


def test_a_reward_the_job_cannot_call_fails_before_any_ray_cluster(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    name = f"bad-{secrets.token_hex(2)}"
    apply_job(
        cluster,
        namespace,
        name,
        reward={"custom": {"configMap": "colour-reward", "function": "no_such_score"}},
    )
    done = wait_status(cluster, namespace, name, phase_is("Succeeded", "Failed"), "a final phase")
    assert done["phase"] == "Failed"
    failed = next(c for c in done["conditions"] if c["type"] == "Failed")
    assert "spec.reward.custom" in failed["message"]
    assert "no_such_score" in failed["message"]
    # The operator's preflight read the reward file: no attempt, no Ray cluster was spent on it.
    assert not done.get("attempt")
    assert cluster.get("rayjobs.ray.io", f"{name}-1", namespace) is None


def test_a_configuration_error_fails_at_once_with_the_trainers_reason(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # A claim that exists (the preflight's part) without the file the job names (the trainer's).
    name = f"bad-{secrets.token_hex(2)}"
    apply_job(cluster, namespace, name, dataset={"train": ["pvc://demo-data/colours/missing.parquet"]})
    done = wait_status(cluster, namespace, name, phase_is("Succeeded", "Failed"), "a final phase")
    assert done["phase"] == "Failed"
    assert done["attempt"] == 1, "a configuration error is not retried"
    failed = next(c for c in done["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DataError"
    assert "missing.parquet" in failed["message"]
    assert done["failedAttempts"][0]["retryable"] is False

    # The attempt's whole output outlives its Ray cluster, on the claim, where status says; the
    # plugin reads it from a folder standing for the pods' / (no kubelet serves a reader pod here).
    log_file = f"{job_path(cluster, namespace, name)}/metrics/attempt-1.log"
    assert done["failedAttempts"][0]["logFile"] == log_file
    assert done["log"] == {"attempt": 1, "path": log_file}
    root = pod_root(cluster, namespace, done) / "root"
    logs = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpo_kubectl",
            "logs",
            name,
            "-n",
            namespace,
            "--attempt",
            "1",
            "--workdir",
            str(root),
        ],
        env={**cluster.env, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.strip().splitlines()
    assert lines[0].startswith("=== ")
    assert f"attempt 1 of {namespace}/{name}" in lines[0]
    assert lines[-1].startswith("GRPO_FAILURE ")
    assert '"DataError"' in lines[-1]
