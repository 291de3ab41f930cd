"""The Python client (grpo_kubectl.client) against the real API server, the operator and KubeRay.

The test reads as a notebook would: create a job from its YAML, wait for it to run, stream its
log while it trains, wait for it to succeed, read its metrics and history as rows. What Ray
does comes from the fake Ray job API (tests/support/rayjobapi.py); the trainer's side is the
real reporter patching the job's status, and the attempt's log is written where the trainer
writes it on the volume, which the client reads as a folder (`workdir`): KWOK pods serve no
output for a reader pod (tests/integration/test_kubectl_grpo.py tests that path's refusal).
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest
import yaml
from grpo_kubectl.client import GRPOClient, GRPOClientError, JobFailedError, JobRefusedError, WaitTimeoutError
from grpo_operator.api.contract import attempt_log_file, job_dir
from grpo_operator.api.v1alpha1 import GRPOJob, JobPaths
from grpo_trainer.kube import KubeStatusWriter
from grpo_trainer.progress import TrainingState
from grpo_trainer.reporter import Reporter
from support.cluster import Cluster
from support.jobs import create_source_claims
from support.operator_process import OperatorProcess
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI, fails_after
from support.verdict_cases import CASES

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "lora-single-gpu.yaml"


def _trainer_writes(cluster: Cluster, namespace: str, name: str, workdir: Path, log: list[str]) -> Reporter:
    """What the trainer of attempt 1 leaves: its log on the volume, three steps in its status."""
    body = cluster.get("grpojob", name, namespace)
    folder = JobPaths.in_folder(job_dir(name, body["metadata"]["uid"])).under(str(workdir))
    metrics = Path(folder.metrics_dir)
    metrics.mkdir(parents=True, exist_ok=True)
    (metrics / Path(attempt_log_file(folder.metrics_dir, 1)).name).write_text("".join(f"{x}\n" for x in log))
    steps = metrics / "attempt-1.jsonl"
    steps.write_text(
        "".join(
            json.dumps(
                {
                    "step": s,
                    "data": {
                        "training/global_step": s,
                        "critic/score/mean": s / 10,
                        "actor/kl_loss": 0.01 * s,
                    },
                }
            )
            + "\n"
            for s in (1, 2, 3)
        )
    )
    reporter = Reporter(
        KubeStatusWriter(name, namespace, str(cluster.kubeconfig)),
        TrainingState(total_steps=10),
        steps,
        steps.with_suffix(".events"),
        latest_checkpoint=lambda: None,
        min_interval=0.0,
        not_before=0.0,
    )
    reporter.poll()
    assert reporter.publish(), reporter._last_error
    return reporter


def test_a_notebook_creates_waits_streams_logs_and_reads_metrics(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI, tmp_path: Path
) -> None:
    job_api.configure_namespace(namespace, RUNNING_FOREVER)
    create_source_claims(cluster, namespace, yaml.safe_load(EXAMPLE.read_text()))

    # --- the notebook ---
    client = GRPOClient(namespace, kubeconfig=str(cluster.kubeconfig), workdir=str(tmp_path))
    job = client.create(EXAMPLE, name="notebook")
    job.wait("Running", timeout=120, poll=0.5)
    _trainer_writes(cluster, namespace, "notebook", tmp_path, ["loading the model", "step 1", "step 2"])

    def train_on() -> None:  # the rest of the run: more output, then Ray reports success
        body = cluster.get("grpojob", "notebook", namespace)
        log = Path(
            attempt_log_file(
                JobPaths.in_folder(job_dir("notebook", body["metadata"]["uid"]))
                .under(str(tmp_path))
                .metrics_dir,
                1,
            )
        )
        time.sleep(1.0)
        with log.open("a") as handle:
            handle.write("step 3\nexporting\n")
        job_api.finish(job_api.wait_for_job(namespace)["submission_id"])

    threading.Thread(target=train_on, daemon=True).start()
    streamed = list(job.logs(follow=True, poll=0.5))
    status = job.wait("Succeeded", timeout=120, poll=0.5)
    metrics = job.metrics()
    rows = job.history()
    # --- end of the notebook ---

    assert streamed == ["loading the model", "step 1", "step 2", "step 3", "exporting"]
    assert status["phase"] == "Succeeded"
    assert metrics["step"] == 3
    assert metrics["reward"] == pytest.approx(0.3)
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert rows[-1]["reward"] == pytest.approx(0.3)
    # The metrics files carry the step's KL too (actor/kl_loss), which the status keeps no series of.
    assert job.history(full=True)[-1] == {"step": 3, "reward": pytest.approx(0.3), "kl": pytest.approx(0.03)}
    assert [j.name for j in client.list()] == ["notebook"]
    png = job.plot(tmp_path / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    job.delete(wait=True)
    with pytest.raises(GRPOClientError, match='grpojob "notebook" not found'):
        client.get("notebook")


def test_a_refused_job_names_the_field_and_creates_nothing(
    cluster: Cluster, namespace: str, operator
) -> None:
    client = GRPOClient(namespace, kubeconfig=str(cluster.kubeconfig))
    case = next(c for c in CASES if c.judge == "server")
    with pytest.raises(JobRefusedError) as refused:
        client.create(case.manifest())
    assert case.field in str(refused.value)
    assert "\n" not in str(refused.value)
    assert cluster.kubectl("get", "grpojobs", "-n", namespace, "-o", "name").stdout == ""


def test_the_model_and_a_dict_create_the_same_job_and_steer_it(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    job_api.configure_namespace(namespace, RUNNING_FOREVER)
    manifest = yaml.safe_load(EXAMPLE.read_text())
    create_source_claims(cluster, namespace, manifest)
    client = GRPOClient(namespace, kubeconfig=str(cluster.kubeconfig))
    # As `kubectl apply -n`: a job meant for another namespace is refused, not quietly moved.
    foreign = GRPOJob.model_validate(
        {**manifest, "metadata": {"name": "from-model", "namespace": "elsewhere"}}
    )
    with pytest.raises(
        GRPOClientError,
        match=(
            rf"^metadata\.namespace 'elsewhere' is not this client's namespace '{re.escape(namespace)}': "
            r"use GRPOClient\(namespace='elsewhere'\)$"
        ),
    ):
        client.create(foreign)
    assert cluster.kubectl("get", "grpojobs", "-n", namespace, "-o", "name").stdout == ""
    model = GRPOJob.model_validate({**manifest, "metadata": {"name": "from-model", "namespace": namespace}})
    from_model = client.create(model)
    from_dict = client.create(manifest, name="from-dict")
    assert (
        cluster.get("grpojob", "from-model", namespace)["spec"]
        == cluster.get("grpojob", "from-dict", namespace)["spec"]
    )
    with pytest.raises(GRPOClientError, match="already exists"):
        client.create(manifest, name="from-dict")

    from_model.wait("Running", timeout=120, poll=0.5)
    from_model.suspend()
    from_model.wait("Suspended", timeout=120, poll=0.5)
    assert from_model.status["phase"] == "Suspended"
    from_model.resume()
    from_model.wait("Running", timeout=120, poll=0.5)
    with pytest.raises(WaitTimeoutError, match="is not Succeeded after 1 s"):
        from_dict.wait("Succeeded", timeout=1, poll=0.5)
    with pytest.raises(GRPOClientError, match="condition 'Done': expected one of"):
        from_dict.wait("Done")


def test_waiting_for_success_of_a_job_that_fails_says_why(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    job_api.configure_namespace(namespace, fails_after(1, "Job entrypoint command failed with exit code 3."))
    manifest = yaml.safe_load(EXAMPLE.read_text())
    create_source_claims(cluster, namespace, manifest)
    job = GRPOClient(namespace, kubeconfig=str(cluster.kubeconfig)).create(manifest, name="doomed")
    with pytest.raises(JobFailedError, match=r"^grpojob doomed failed \("):
        job.wait("Succeeded", timeout=120, poll=0.5)
