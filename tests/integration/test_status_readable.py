"""What a person reads of a job's status, against the real API server, KubeRay, the operator and
the real kubectl: `kubectl describe` of a finished job is not a page of history, and the ETA is
there only while the job's current attempt trains (not while suspended, not after a resume until
the new attempt reports, not once it has ended).

What Ray does comes from the fake Ray job API (tests/support/rayjobapi.py); the trainer's side is
the real reporter folding a metrics file into the job's status, as it does in a pod.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grpo_kubectl.client import GRPOClient
from grpo_operator.api.contract import job_dir
from grpo_operator.api.v1alpha1 import JobPaths
from grpo_operator.api.v1alpha1.status import HISTORY_LIMIT, Outputs, duration
from grpo_trainer import metric_keys as keys
from grpo_trainer.kube import KubeStatusWriter
from grpo_trainer.progress import TrainingState
from grpo_trainer.reporter import Reporter
from support.cluster import Cluster
from support.jobs import apply_job, create_source_claims, example, phase_is
from support.life import row_of
from support.operator_process import OperatorProcess
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI

pytestmark = pytest.mark.cluster

STEPS = 100
STATUS_LIMIT = 51
"""Lines of the Status part of `kubectl describe grpojob` for a finished job of STEPS steps: 49
(the history once made it 380). The conditions of its end only (Succeeded, Healthy: 12), the
history as four lines of numbers, the newest step's metrics that the history does not hold, the
progress, the newest checkpoint, one line per exported file, and the operator's attempt, times
and Ray job; no trainer verdict for a healthy run, no pace once the last step is trained, no Ray
cluster once it is gone, no empty failedAttempts."""
SPEC_LIMIT = 62
"""Lines of its Spec part: 59, what the single-GPU LoRA example writes (57 before it cut over-long
prompts as its recipe did: two dataset keys). The API server stores no defaults but those of the
immutable fields (they made it 104)."""
DESCRIBE_LIMIT = 121
"""Lines of the whole description before its Events: 119, the spec's 59, the status's 49 and the
object's metadata (143 before the status was cut down, 194 while the server stored every
default)."""


def _verl_line(step: int) -> dict:
    """One step as verl's file logger (and the TRL engine) writes it: the keys the status reads."""
    data = {
        keys.GLOBAL_STEP: step,
        keys.EPOCH: (step - 1) // 50,
        keys.REWARD: 0.2 + 0.6 * step / STEPS,
        keys.RESPONSE_LENGTH: 400.0 + 3.7 * step,
        keys.ENTROPY: 0.9 - 0.004 * step,
        keys.KL_LOSS: 0.0004 * step,
        keys.STEP_SECONDS: 41.5 + step % 7,
        keys.THROUGHPUT: 1234.5,
    }
    if step % 10 == 0:
        data[f"{keys.VALIDATION_PREFIX}visual-math/acc/mean@1"] = 0.3 + step / 400
    return {"step": step, "data": data}


def _train(
    cluster: Cluster, namespace: str, name: str, workdir: Path, steps: range, attempt: int = 1
) -> None:
    """What the trainer of `attempt` leaves after `steps`: its metrics file on the volume, its
    checkpoint events, and the status the reporter makes of them."""
    body = cluster.get("grpojob", name, namespace)
    pod = JobPaths.in_folder(job_dir(name, body["metadata"]["uid"]))
    folder = pod.under(str(workdir))
    metrics = Path(folder.metrics_dir)
    metrics.mkdir(parents=True, exist_ok=True)
    file = metrics / f"attempt-{attempt}.jsonl"
    with file.open("a") as handle:
        handle.writelines(json.dumps(_verl_line(s)) + "\n" for s in steps)
    with file.with_suffix(".events").open("a") as handle:
        handle.writelines(
            json.dumps(
                {"step": s, "path": f"{pod.checkpoint_dir}/checkpoint-{s}", "savedAt": "2026-12-01T10:00:00Z"}
            )
            + "\n"
            for s in steps
            if s % 20 == 0
        )
    reporter = Reporter(
        KubeStatusWriter(name, namespace, str(cluster.kubeconfig)),
        TrainingState(total_steps=STEPS, attempt=attempt),
        file,
        file.with_suffix(".events"),
        latest_checkpoint=lambda: None,
        min_interval=0.0,
        not_before=0.0,
    )
    reporter.poll()
    assert reporter.publish(), reporter._last_error


def _export(cluster: Cluster, namespace: str, name: str) -> None:
    """The trainer's last report: where the export of the single-GPU LoRA recipe went."""
    root = "/grpo/checkpoints/export"
    outputs = Outputs.model_validate(
        {
            "step": STEPS,
            "model": f"{root}/model",
            "loraAdapter": f"{root}/lora",
            "gguf": {"model": f"{root}/gguf/model-q4_k_m.gguf", "projector": f"{root}/gguf/mmproj.gguf"},
            "sampleFile": f"{root}/sample.json",
        }
    )
    KubeStatusWriter(name, namespace, str(cluster.kubeconfig)).patch_status(
        {"status": {"outputs": outputs.to_wire()}}
    )


def _lines_before_events(cluster: Cluster, namespace: str, name: str) -> list[str]:
    described = cluster.kubectl("describe", f"grpojob/{name}", "-n", namespace).stdout.splitlines()
    assert "Events:" in [line.split("  ")[0] for line in described], described[-5:]
    return described[: next(i for i, line in enumerate(described) if line.startswith("Events:"))]


def test_describe_of_a_finished_100_step_job_fits_and_its_curves_are_still_there(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI, tmp_path: Path
) -> None:
    job_api.configure_namespace(namespace, RUNNING_FOREVER)
    body = example("lora-single-gpu", **{"algorithm.totalSteps": STEPS})
    create_source_claims(cluster, namespace, body)
    name = apply_job(cluster, namespace, body)
    cluster.wait_for("grpojob", name, namespace, phase_is("Running"), timeout=120, what="Running")
    _train(cluster, namespace, name, tmp_path, range(1, STEPS + 1))
    _export(cluster, namespace, name)
    job_api.finish(job_api.wait_for_job(namespace)["submission_id"])
    done = cluster.wait_for("grpojob", name, namespace, phase_is("Succeeded"), timeout=120, what="Succeeded")
    assert done["status"]["progress"]["steps"] == f"{STEPS}/{STEPS}"

    lines = _lines_before_events(cluster, namespace, name)
    status = lines[lines.index("Status:") :]
    spec = lines[lines.index("Spec:") : lines.index("Status:")]
    history = status[status.index("  History:") :][:6]
    print(
        f"kubectl describe: {len(lines)} lines before Events, {len(spec)} the spec, {len(status)} the status"
    )
    assert len(status) < STATUS_LIMIT, "\n".join(status)
    assert len(spec) < SPEC_LIMIT, "\n".join(spec)
    # Only what the user wrote, and the immutable fields the server must store.
    assert not {"  Run Policy:", "  Health:", "    Seed:"} & set(spec), spec
    assert "  Failed Attempts:" not in status, status
    # Healthy to the end: the condition says it, the trainer wrote no verdict.
    assert "  Health:" not in status, status
    conditions = [line.split(":", 1)[1].strip() for line in status if line.strip().startswith("Type:")]
    assert conditions == ["Succeeded", "Healthy"], status
    # The pace of the last step and the Ray cluster's name are gone with the training and the cluster.
    for gone in ("Updated At:", "Last Step At:", "Step Seconds:", "Ray Cluster Name:", "Prompt:"):
        assert not any(line.strip().startswith(gone) for line in status), (gone, status)
    assert len(lines) < DESCRIBE_LIMIT, "\n".join(lines)
    # One line per series, each one line of numbers.
    assert [line.split(":")[0].strip() for line in history[1:5]] == [
        "Response Length",
        "Reward",
        "Steps",
        "Val Score",
    ], history
    assert not history[5].startswith("    "), history
    assert "TrainingSucceeded" in "\n".join(status)
    assert "/grpo/checkpoints/export/gguf/model-q4_k_m.gguf" in "\n".join(status)  # nothing cut away

    # The curves are still there for plots: the status's, decimated, and every step from the volume.
    client = GRPOClient(namespace, kubeconfig=str(cluster.kubeconfig), workdir=str(tmp_path))
    rows = client.get(name).history()
    assert len(rows) == HISTORY_LIMIT
    assert rows[-1]["step"] == STEPS
    assert rows[-1]["reward"] == pytest.approx(0.8, abs=0.01)
    assert [r["valScore"] for r in rows if "valScore" in r] == pytest.approx(
        [0.3 + s / 400 for s in range(10, 101, 10)], abs=1e-3
    )
    full = client.get(name).history(full=True)
    assert [r["step"] for r in full] == list(range(1, STEPS + 1))


def _eta_everywhere(cluster: Cluster, namespace: str, name: str) -> tuple[str, str | None]:
    """The ETA column of `kubectl get grpojobs -o wide`, and status.eta."""
    cell = row_of(cluster, namespace, name)["ETA"]
    return cell, cluster.get("grpojob", name, namespace)["status"].get("eta")


def _wait_eta(cluster: Cluster, namespace: str, name: str, wanted, what: str) -> dict:
    return cluster.wait_for("grpojob", name, namespace, lambda o: wanted(o["status"]), timeout=30, what=what)


def _suspend(cluster: Cluster, namespace: str, name: str, value: bool) -> None:
    patch = json.dumps({"spec": {"runPolicy": {"suspend": value}}})
    cluster.kubectl("patch", "grpojob", name, "-n", namespace, "--type=merge", "-p", patch)


def test_the_eta_shows_only_while_the_current_attempt_trains(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI, tmp_path: Path
) -> None:
    job_api.configure_namespace(namespace, RUNNING_FOREVER)
    body = example("lora-single-gpu", **{"algorithm.totalSteps": STEPS})
    create_source_claims(cluster, namespace, body)
    name = apply_job(cluster, namespace, body)
    cluster.wait_for("grpojob", name, namespace, phase_is("Running"), timeout=120, what="Running")
    assert _eta_everywhere(cluster, namespace, name) == ("", None)  # no step yet

    # Attempt 1 trains 10 steps: the trainer's estimate, as the column shows it.
    _train(cluster, namespace, name, tmp_path, range(1, 11))
    running = _wait_eta(cluster, namespace, name, lambda s: s.get("eta"), "an ETA while attempt 1 trains")
    first = running["status"]["progress"]["etaSeconds"]
    assert first > 0
    assert _eta_everywhere(cluster, namespace, name) == (duration(first), duration(first))

    # Suspended: nothing trains, so nothing is estimated (the trainer's last estimate stays its own).
    _suspend(cluster, namespace, name, True)
    cluster.wait_for("grpojob", name, namespace, phase_is("Suspended"), timeout=60, what="Suspended")
    suspended = _wait_eta(cluster, namespace, name, lambda s: "eta" not in s, "no ETA while suspended")
    assert suspended["status"]["progress"]["etaSeconds"] == first
    assert _eta_everywhere(cluster, namespace, name) == ("", None)

    # Resumed: attempt 2 runs, and until its trainer reports, attempt 1's estimate is not shown.
    _suspend(cluster, namespace, name, False)
    cluster.wait_for(
        "grpojob",
        name,
        namespace,
        lambda o: phase_is("Running")(o) and o["status"]["attempt"] == 2,
        timeout=120,
        what="Running attempt 2",
    )
    assert _eta_everywhere(cluster, namespace, name) == ("", None)
    _train(cluster, namespace, name, tmp_path, range(11, 41), attempt=2)
    resumed = _wait_eta(
        cluster,
        namespace,
        name,
        lambda s: s.get("eta") and s["progress"].get("attempt") == 2,
        "attempt 2's own ETA",
    )
    second = resumed["status"]["progress"]["etaSeconds"]
    assert second < first  # 60 steps left, not 90
    assert _eta_everywhere(cluster, namespace, name) == (duration(second), duration(second))

    # Succeeded: nothing left to estimate.
    attempt_2 = next(
        j
        for j in job_api.jobs(namespace)
        if j["submission_id"] != job_api.wait_for_job(namespace)["submission_id"]
    )
    job_api.finish(attempt_2["submission_id"])
    cluster.wait_for("grpojob", name, namespace, phase_is("Succeeded"), timeout=120, what="Succeeded")
    _wait_eta(cluster, namespace, name, lambda s: "eta" not in s, "no ETA once the job has ended")
    assert _eta_everywhere(cluster, namespace, name) == ("", None)
