"""The job's status tells the truth, and a job never waits in silence: against the real API
server, KubeRay and the operator, with the real kubectl.

- `kubectl wait` works on every condition after the job's spec or labels were edited;
- a finished job's spec is frozen at admission, its labels are not;
- every timestamp form the schema admits in the trainer's fields is read;
- a normal start posts no Warning Event; the dashboard address goes with the cluster.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from grpo_operator.health import HEALTHY_MESSAGE
from support.cluster import Cluster
from support.jobs import apply_job, condition, create_source_claims, example, phase_is
from support.operator_process import OperatorProcess
from support.rayjobapi import RayJobAPI

pytestmark = pytest.mark.cluster


def _patch(cluster: Cluster, namespace: str, job: str, patch: dict, *, status: bool = False, check=True):
    args = ["patch", "grpojob", job, "-n", namespace, "--type=merge", "-p", json.dumps(patch)]
    return cluster.kubectl(*args, *(["--subresource=status"] if status else []), check=check)


def _wait_every_condition(cluster: Cluster, namespace: str, job: str) -> list[str]:
    """`kubectl wait` for each condition as the job's status has it; returns what was waited for."""
    obj = cluster.get("grpojob", job, namespace)
    waited = []
    for cond in obj["status"]["conditions"]:
        wanted = f"condition={cond['type']}={cond['status']}"
        cluster.kubectl("wait", f"--for={wanted}", f"grpojob/{job}", "-n", namespace, "--timeout=15s")
        waited.append(wanted)
    return waited


def test_conditions_are_waitable_after_edits_and_a_finished_spec_is_frozen(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    job_api.configure_namespace(namespace, (("RUNNING", 0), ("SUCCEEDED", 20, "Job finished successfully.")))
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    # A spec edit while it runs: the generation moves on, and every condition must follow it.
    _patch(cluster, namespace, job, {"spec": {"runPolicy": {"backoffLimit": 5}}})
    cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: o["status"].get("observedGeneration") == 2,
        timeout=30,
        what="observedGeneration 2",
    )
    running = _wait_every_condition(cluster, namespace, job)
    assert {"condition=Created=True", "condition=Running=True"} <= set(running), running
    done = cluster.wait_for("grpojob", job, namespace, phase_is("Succeeded"), timeout=120, what="Succeeded")
    assert done["metadata"]["generation"] == 2
    assert done["status"]["observedGeneration"] == 2
    # Once it has ended, the conditions of its end: Created and Running would only repeat the phase.
    waited = _wait_every_condition(cluster, namespace, job)
    assert waited == ["condition=Succeeded=True"]

    # Labels may change on a finished job (metadata, no new generation); waits still answer.
    cluster.kubectl("label", "grpojob", job, "-n", namespace, "team=vision")
    assert _wait_every_condition(cluster, namespace, job) == waited

    # Its spec may not: the API server says why, and nothing changes.
    refused = _patch(cluster, namespace, job, {"spec": {"runPolicy": {"suspend": True}}}, check=False)
    assert refused.returncode != 0
    assert "the job has finished (status.phase is Succeeded or Failed), so its spec can no longer change" in (
        refused.stderr
    )
    after = cluster.get("grpojob", job, namespace)
    assert after["metadata"]["generation"] == 2
    assert after["spec"].get("runPolicy", {}).get("suspend") is not True


def test_a_normal_start_posts_no_warning(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    """The RayJob comes after its ServiceAccount, Role and ConfigMap: KubeRay has nothing to retry.
    Once the cluster is gone, so are its dashboard address and its name."""
    job_api.configure_namespace(namespace, (("RUNNING", 0), ("SUCCEEDED", 8, "Job finished successfully.")))
    job = apply_job(cluster, namespace, example("safegrpo-nvidia"))
    running = cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    assert running["status"].get("dashboardURL"), "KubeRay's dashboard address while the cluster lives"
    cluster.wait_for("grpojob", job, namespace, phase_is("Succeeded"), timeout=120, what="Succeeded")
    cluster.wait_gone("rayclusters.ray.io", running["status"]["rayClusterName"], namespace, timeout=60)
    done = cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: "dashboardURL" not in o["status"],
        timeout=30,
        what="no dashboardURL once the cluster is gone",
    )
    assert done["status"]["phase"] == "Succeeded"
    assert "rayClusterName" not in done["status"], "nor the name of a cluster that is gone"
    warnings = [
        f"{e['involvedObject']['kind']}/{e['involvedObject']['name']}: {e['reason']}: {e['message']}"
        for e in cluster.events(namespace)
        if e["type"] == "Warning"
        # The scheduler's own first tries, which it retries itself within seconds: the head, which
        # must follow its worker onto one node (a ReadWriteOnce claim), tried before the worker is
        # placed; and a pod tried in the second before the provisioner binds the new checkpoint
        # claim. Neither reaches the job's status (startup.py waits 20 s before reporting).
        and not (
            e["reason"] == "FailedScheduling"
            and e["involvedObject"]["kind"] == "Pod"
            and ("pod affinity" in e["message"] or "unbound immediate PersistentVolumeClaims" in e["message"])
        )
        # KubeRay's RayJob controller racing its own cache (seen once in a full run): two of its
        # reconciles 41 ms apart, the second not yet seeing the RayCluster the first made, so it
        # tries to create it again, is told it exists, and carries on with that one (the job
        # Succeeded). The ordering this test holds, RBAC and ConfigMap before the RayJob, is not
        # involved.
        and not (
            e["reason"] == "FailedToCreateRayCluster"
            and e["involvedObject"]["kind"] == "RayJob"
            and e["message"].endswith("already exists")
        )
    ]
    assert warnings == []


# Each is an RFC 3339 form the API server admits under `format: date-time` (checked first).
def _forms(moment: datetime) -> list[str]:
    east = moment.astimezone(timezone(timedelta(hours=5, minutes=45)))
    return [
        moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        moment.strftime("%Y-%m-%dT%H:%M:%S.%f789Z"),
        moment.strftime("%Y-%m-%dt%H:%M:%Sz"),
        moment.strftime("%Y-%m-%dT%H:%M:%S,%fZ"),
        east.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+05:45",
        moment.strftime("%Y-%m-%dT%H:%M:%S") + "-00:00",
    ]


def test_every_timestamp_form_the_schema_admits_is_read(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    job_api.configure_namespace(namespace, (("RUNNING", 0),))
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    for step, written in enumerate(_forms(datetime.now(UTC) + timedelta(seconds=5)), start=1):
        # A sick verdict first, then its recovery in the same patch as the step: Healthy turns True
        # again only in a pass that read this lastStepAt (one it could not read is Unknown).
        sick = {"attempt": 1, "healthy": False, "reason": "EntropyCollapse", "message": f"probe {step}"}
        _patch(cluster, namespace, job, {"status": {"health": sick}}, status=True)
        cluster.wait_for(
            "grpojob",
            job,
            namespace,
            lambda o, step=step: (condition(o, "Healthy") or {}).get("message") == f"probe {step}",
            timeout=30,
            what=f"Healthy=False, probe {step}",
        )
        recovered = {"health": None, "progress": {"step": step, "lastStepAt": written}}
        _patch(cluster, namespace, job, {"status": recovered}, status=True)
        healthy = cluster.wait_for(
            "grpojob",
            job,
            namespace,
            lambda o: (condition(o, "Healthy") or {}).get("status") != "False",
            timeout=30,
            what=f"Healthy from lastStepAt={written}",
        )
        assert condition(healthy, "Healthy")["status"] == "True", written
        assert condition(healthy, "Healthy")["message"] == HEALTHY_MESSAGE
    warnings = [e["reason"] for e in cluster.events(namespace) if e["type"] == "Warning"]
    assert "UnreadableProgress" not in warnings


def _created(obj: dict) -> dict:
    return condition(obj, "Created") or {}


def test_a_missing_claim_or_configmap_is_a_wait_that_says_so_then_the_job_starts(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    job_api.configure_namespace(namespace, (("RUNNING", 0),))
    body = example(
        "lora-single-gpu",
        **{"reward.builtin": None, "reward.custom": {"configMap": "my-reward", "key": "reward.py"}},
    )
    job = body["metadata"]["name"]
    cluster.apply(body, namespace=namespace)  # its data claim and reward ConfigMap do not exist yet
    waiting = cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: _created(o).get("reason") == "WaitingForInputs",
        timeout=60,
        what="Created=False, WaitingForInputs",
    )
    message = _created(waiting)["message"]
    assert "PersistentVolumeClaim 'visual-math' (spec.dataset.train[0])" in message
    assert "ConfigMap 'my-reward' (spec.reward.custom)" in message
    assert waiting["status"]["phase"] == "Pending"
    assert cluster.get("rayjobs.ray.io", f"{job}-1", namespace) is None, "no RayJob while it waits"
    warnings = [
        e for e in cluster.events(namespace) if e["type"] == "Warning" and e["reason"] == "WaitingForInputs"
    ]
    assert [e["message"] for e in warnings] == [message]

    apply_job(cluster, namespace, body)  # the claims, as a user's data pipeline would make them
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "my-reward"},
            "data": {
                "reward.py": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n"
            },
        },
        namespace=namespace,
    )
    cluster.wait_for(
        "grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running once they exist"
    )


def test_a_reward_file_that_cannot_work_fails_before_any_ray_cluster(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    body = example(
        "lora-single-gpu",
        **{"reward.builtin": None, "reward.custom": {"configMap": "bad-reward", "key": "reward.py"}},
    )
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "bad-reward"},
            "data": {"reward.py": "def compute_score(data_source, solution_str:\n    return 1.0\n"},
        },
        namespace=namespace,
    )
    job = apply_job(cluster, namespace, body)
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=60, what="Failed")
    message = condition(failed, "Failed")["message"]
    assert "spec.reward.custom: bad-reward/reward.py is not valid Python" in message
    assert cluster.get("rayjobs.ray.io", f"{job}-1", namespace) is None


def test_an_attempt_that_cannot_be_scheduled_says_why_and_fails_at_its_start_deadline(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    """The real scheduler's verdict (no node carries the label asked for), read from the pods."""
    body = example(
        "safegrpo-nvidia",
        **{"resources.nodeSelector": {"example.com/pool": "nowhere"}, "runPolicy.startDeadlineSeconds": 60},
    )
    job = apply_job(cluster, namespace, body)
    waiting = cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: (condition(o, "Running") or {}).get("reason") == "Unschedulable",
        timeout=60,
        what="Running=False, Unschedulable",
    )
    message = condition(waiting, "Running")["message"]
    assert message.startswith("attempt 1 has not started: ")
    assert "is unschedulable: 0/" in message
    assert "node affinity/selector" in message
    assert waiting["status"]["phase"] == "Pending"
    reasons = [e["reason"] for e in cluster.events(namespace) if e["involvedObject"].get("name") == job]
    assert "Unschedulable" in reasons
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=120, what="Failed")
    assert condition(failed, "Failed")["reason"] == "StartDeadlineExceeded"
    assert "not started within runPolicy.startDeadlineSeconds=60" in condition(failed, "Failed")["message"]
    cluster.wait_gone("rayjobs.ray.io", f"{job}-1", namespace, timeout=60)


def test_a_missing_secret_is_a_wait_and_a_secret_without_the_key_fails_naming_it(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    """An env var read from a Secret: a pod would sit in CreateContainerConfigError, saying nothing
    to the job. (The operator here may read Secrets, as with the chart's rbac.checkSecrets.)"""
    job_api.configure_namespace(namespace, (("RUNNING", 0),))
    env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "token"}}}]
    body = example("lora-single-gpu", env=env)
    create_source_claims(cluster, namespace, body)  # its data, but not the Secret
    job = body["metadata"]["name"]
    cluster.apply(body, namespace=namespace)
    waiting = cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: _created(o).get("reason") == "WaitingForInputs",
        timeout=60,
        what="Created=False, WaitingForInputs",
    )
    assert "Secret 'hub' (spec.env[0].valueFrom.secretKeyRef)" in _created(waiting)["message"]
    assert waiting["status"]["phase"] == "Pending"
    assert cluster.get("rayjobs.ray.io", f"{job}-1", namespace) is None

    # The Secret comes, but without the key the job names: that cannot fix itself.
    cluster.apply(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hub"}, "stringData": {"hf": "x"}},
        namespace=namespace,
    )
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=60, what="Failed")
    message = condition(failed, "Failed")["message"]
    assert "spec.env[0].valueFrom.secretKeyRef: Secret 'hub' has no key 'token' (it holds hf)" in message
    assert cluster.get("rayjobs.ray.io", f"{job}-1", namespace) is None


def test_an_apparmor_annotation_pod_security_refuses_says_so_and_fails_at_the_start_deadline(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    """spec.pods.annotations reach the Ray pods; an AppArmor profile the namespace's Pod Security
    level forbids makes the API server refuse every pod KubeRay asks for, so no pod ever exists."""
    job_api.configure_namespace(namespace, (("RUNNING", 0),))
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline")
    annotations = {"container.apparmor.security.beta.kubernetes.io/ray-head": "unconfined"}
    body = example(
        "safegrpo-nvidia", **{"pods.annotations": annotations, "runPolicy.startDeadlineSeconds": 60}
    )
    job = apply_job(cluster, namespace, body)
    waiting = cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: (condition(o, "Running") or {}).get("reason") == "PodSecurity",
        timeout=60,
        what="Running=False, PodSecurity",
    )
    message = condition(waiting, "Running")["message"]
    assert message.startswith("attempt 1 has not started: ")
    assert 'violates PodSecurity "baseline:latest"' in message
    assert "AppArmor" in message
    assert waiting["status"]["phase"] == "Pending"
    warnings = [e for e in cluster.events(namespace) if e["involvedObject"].get("name") == job]
    assert any(e["type"] == "Warning" and e["reason"] == "PodSecurity" for e in warnings)
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=120, what="Failed")
    assert condition(failed, "Failed")["reason"] == "StartDeadlineExceeded"
    assert "AppArmor" in condition(failed, "Failed")["message"]
