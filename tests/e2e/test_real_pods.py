"""The product as shipped, on the real node of the cpu pool (hack/node-up.sh): `helm install`
starts the operator as a pod of its image, which reaches the API server through the `kubernetes`
Service with the chart's ServiceAccount and runs a job; examples/colours-cpu.yaml trains to
Succeeded in Ray pods of the CPU trainer image, in a namespace enforcing Pod Security
`restricted`, with its checkpoints and export on a real volume; the job's NetworkPolicy, enforced
by the node's kube-router, keeps other pods out of its Ray cluster; the real-path lives of a job
(tests/support/colour_lives.py) run in pods: a trainer killed after a checkpoint resumes in
attempt 2 (its logs read back through the plugin while it runs, once it ended and once it is
deleted), a suspension and an eviction each save the step in progress (save, then yield), a
deadline too, delete leaves nothing; the chart's pre-delete hook runs as a pod of the operator
image at uninstall. Each job's life proves several claims: a life is minutes of this machine.

Opt-in (marker ``real_node``): collected only with ``GRPO_REAL_NODE=1`` (``make test-real-node``).
"""

from __future__ import annotations

import json
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpo_operator.api.contract import job_dir
from grpo_operator.children.meta import JOB_LABEL, network_policy_name
from grpo_operator.children.networkpolicy import DASHBOARD_PORT
from support.cluster import Cluster
from support.colour_lives import (
    assert_history_covers_every_step_once,
    assert_resumed_after_a_kill,
    checkpoint_at_least,
    colour_job,
    complete_checkpoints,
    phase_is,
    step_at_least,
    wait_status,
)
from support.colour_lives import paced as pace
from support.life import apply_example, ray_job_id, wait_condition, writers
from support.namespaces import create_namespace, delete_namespace
from support.plugin import kubectl_grpo, plugin_path
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI
from support.real_node import NODE_SELECTOR, TOLERATIONS, image_tag, wait_reach
from support.real_node_release import (
    OPERATOR_IMAGE,
    REAL_NODE_VOLUMES,
    TRAINER_IMAGE,
    install_operator,
    training_namespace,
)
from support.release import Helm, Release, existing

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

FIELD_MANAGER = f"grpo-e2e-{secrets.token_hex(3)}"
STEPS = 6
# Long enough that the kill and the suspension land mid-run: 12 steps, each paced by the reward.
KILL_STEPS = 12
REWARD_PACE_S = 0.02
"""Seconds the paced jobs' reward sleeps per call: a step scores its 16 x 8 completions, so at
least 2.6 s a step, 23 s from the first checkpoint to the end (0.1 s made the three tests 11.5
minutes).

On an idle 2-core machine the colour job trains a step in well under a second, so a job of 12
steps could end between the test's seeing its first checkpoint and its kill, suspension or log
read (measured: all three failed so, on 2026-12-03); on a loaded one a step takes seconds. The
pace makes "mid-run" a property of the job, not of the machine's load."""
GCS_PORT = 6379  # Ray's GCS on the head (KubeRay's default)
METRICS_PORT = 8080  # Ray's metrics exporter on every Ray pod (KubeRay's default, settings.rayMetricsPort)
SCRAPER = {"grpo-e2e/scraper": "yes"}
SAVE_EVERY = 3
# The worker's share of the real node (support.real_node_release.HEAD: the head's).
WORKER = {"cpuPerNode": "1", "memoryPerNode": "6Gi"}


@pytest.fixture(scope="module")
def watched(cluster: Cluster) -> Iterator[str]:
    name = create_namespace(cluster, "real-watched")
    yield name
    delete_namespace(cluster, name)


@pytest.fixture(scope="module")
def training(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Where the colour job trains (support.real_node_release.training_namespace)."""
    name = training_namespace(cluster, "real-train", tmp_path_factory.mktemp("colours"))
    yield name
    delete_namespace(cluster, name)


@pytest.fixture(scope="module")
def release(cluster: Cluster, helm: Helm, watched: str, training: str, real_node: str) -> Iterator[Release]:
    installed = install_operator(
        cluster,
        helm,
        [watched, training],
        {
            "fieldManager": FIELD_MANAGER,
            # Pods labelled as this module's scraper, in any namespace: a Prometheus stand-in.
            "metricsScrapers": [{"namespaceSelector": {}, "podSelector": {"matchLabels": SCRAPER}}],
        },
    )
    yield installed
    installed.uninstall(check=False)
    delete_namespace(cluster, installed.namespace)


def _colour_job(name: str, steps: int = STEPS, *, paced: bool = False) -> list[dict[str, Any]]:
    """The colour job, its worker sized for the real node; `paced`: its reward sleeps
    REWARD_PACE_S a call, so the run lasts while a test acts on it."""
    documents = colour_job(name, steps, SAVE_EVERY, resources=WORKER, checkpoint=REAL_NODE_VOLUMES)
    return pace(documents, REWARD_PACE_S) if paced else documents


def _claim_folder(cluster: Cluster, namespace: str, claim: str) -> Path:
    """The host folder of a claim's volume (hack/provisioner: a hostPath on the real node)."""
    pvc = cluster.get("pvc", claim, namespace)
    pv = cluster.get("pv", pvc["spec"]["volumeName"])
    return Path(pv["spec"]["hostPath"]["path"])


def test_the_colour_job_trains_in_ray_pods_of_the_trainer_image(
    cluster: Cluster, release: Release, training: str, real_node: str
) -> None:
    name = f"colours-{secrets.token_hex(2)}"
    cluster.apply(_colour_job(name), training)
    seen: dict[str, dict[str, Any]] = {}

    def final_and_record(job: dict[str, Any]) -> bool:
        # The Ray pods go with the cluster when the job ends: keep what each pod's status said.
        for pod in cluster.get("pods", namespace=training)["items"]:
            if pod["status"].get("containerStatuses"):
                seen[pod["metadata"]["name"]] = pod
        return (job.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    done = cluster.wait_for("grpojob", name, training, final_and_record, timeout=900, what="a final phase")
    status = done["status"]
    assert status["phase"] == "Succeeded", json.dumps(status.get("conditions"), indent=1)

    heads = [p for p in seen.values() if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
    workers = [p for p in seen.values() if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
    assert heads, f"no head pod seen among {sorted(seen)}"
    assert workers, f"no worker pod seen among {sorted(seen)}"
    for pod in heads + workers:
        assert pod["spec"]["nodeName"] == real_node
        ray = next(
            s
            for s in pod["status"]["containerStatuses"]
            if s["name"] == "ray-head" or s["name"].startswith("ray")
        )
        assert ray["image"].endswith(f"{TRAINER_IMAGE}:{image_tag()}"), ray
        assert ray["containerID"].startswith("containerd://"), ray
        assert ray["imageID"], ray
        assert pod["spec"]["securityContext"].get("runAsNonRoot") or all(
            c.get("securityContext", {}).get("runAsNonRoot") for c in pod["spec"]["containers"]
        )

    assert status["progress"]["step"] == STEPS
    assert status["checkpoint"]["latestStep"] == STEPS
    path = job_dir(name, done["metadata"]["uid"])
    assert status["outputs"]["model"] == f"{path}/export/model"
    # On the real volume of the job's checkpoint claim: the trainer in the pod wrote them there.
    folder = _job_folder(cluster, training, name)
    assert (folder / "checkpoints" / f"checkpoint-{STEPS}").is_dir()
    assert (folder / "export" / "model" / "config.json").is_file()
    assert (folder / "export" / "lora-adapter" / "adapter_config.json").is_file()
    assert (folder / "checkpoints").stat().st_uid == 1000  # written by the trainer's user


def _ray_pods(cluster: Cluster, namespace: str, job: str) -> dict[str, dict[str, Any]]:
    """The job's running Ray pods by node type (head, worker), each with its address."""
    pods = cluster.get("pods", namespace=namespace)["items"]
    return {
        p["metadata"]["labels"]["ray.io/node-type"]: p
        for p in pods
        if p["metadata"]["labels"].get(JOB_LABEL) == job
        and p["status"].get("phase") == "Running"
        and p["status"].get("podIP")
    }


def _operator_pods(cluster: Cluster, release: Release) -> list[dict[str, Any]]:
    """The release's operator pods, terminating ones too (not its hooks' Job pods)."""
    pods = cluster.get("pods", namespace=release.namespace)["items"]
    return [
        p
        for p in pods
        if p["metadata"]["name"].startswith(release.name) and "job-name" not in p["metadata"]["labels"]
    ]


def _operator_pod(cluster: Cluster, release: Release) -> str:
    [pod] = [p["metadata"]["name"] for p in _operator_pods(cluster, release)]
    return pod


def _outsider(
    cluster: Cluster, namespace: str, name: str = "outsider", labels: dict[str, str] | None = None
) -> str:
    """A pod of no job on the real node, in another namespace: what a neighbour's workload is (or,
    with `labels`, a metrics scraper the settings name)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "nodeSelector": NODE_SELECTOR,
            "tolerations": TOLERATIONS,
            "terminationGracePeriodSeconds": 0,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "main",
                    "image": f"{OPERATOR_IMAGE}:{image_tag()}",
                    "command": ["sleep", "3600"],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }
    cluster.apply(pod, namespace)
    cluster.wait_for(
        "pod",
        name,
        namespace,
        lambda p: p["status"].get("phase") == "Running",
        timeout=120,
        what="Running",
    )
    return name


def _scale_operator(cluster: Cluster, release: Release, replicas: int) -> None:
    deployment = release.deployment()["metadata"]["name"]
    cluster.kubectl(
        "scale", "deployment", deployment, "--namespace", release.namespace, f"--replicas={replicas}"
    )
    cluster.wait_for(
        "deployment",
        deployment,
        release.namespace,
        lambda d: (
            (d["status"].get("readyReplicas") or 0) == replicas and d["status"].get("replicas", 0) == replicas
        ),
        timeout=180,
        what=f"{replicas} ready replicas",
    )
    deadline = time.monotonic() + 120
    while len(_operator_pods(cluster, release)) != replicas:  # none left terminating
        assert time.monotonic() < deadline, [p["metadata"]["name"] for p in _operator_pods(cluster, release)]
        time.sleep(1)


def _left_of(cluster: Cluster, namespace: str, job: str) -> list[str]:
    """Whatever of job ``job`` still exists: its pods, Ray cluster, RayJob, Services, policy."""
    selector = f"{JOB_LABEL}={job}"
    kinds = "pods,services,networkpolicies,rayclusters.ray.io,rayjobs.ray.io,grpojobs"
    out = cluster.kubectl("get", kinds, "--namespace", namespace, "-l", selector, "-o", "name").stdout
    named = cluster.kubectl("get", "grpojobs", "--namespace", namespace, "-o", "name").stdout
    return sorted({*out.split(), *(n for n in named.split() if n.endswith(f"/{job}"))})


# Before the last test, which uninstalls the release; it stops and restarts the operator.
def test_the_jobs_network_policy_closes_its_ray_cluster_to_other_pods(
    cluster: Cluster, release: Release, training: str, watched: str, real_node: str
) -> None:
    """The job's NetworkPolicy, enforced on the real node (kube-router's firewall, hack/node-up.sh):
    a pod of no job cannot reach the head's job API (8265), GCS (6379) or metrics (8080); a pod
    the settings name as a metrics scraper reaches the metrics port of every Ray pod and nothing
    else; the operator reaches the job API only, the job's worker the GCS, this host (where
    KubeRay runs) the job API. Without the
    policy the same pod gets through, and the operator's re-created policy closes it again. Then
    deleting the job leaves nothing of it."""
    name = f"closed-{secrets.token_hex(2)}"
    # Long enough to stay Running while the test probes; deleted at the end.
    cluster.apply(_colour_job(name, steps=1000), training)
    cluster.wait_for(
        "grpojob",
        name,
        training,
        lambda j: ((j.get("status") or {}).get("progress") or {}).get("step", 0) >= 1,
        timeout=600,
        what="a first step (KubeRay submitted through the job API, the worker joined the GCS)",
    )
    pods = _ray_pods(cluster, training, name)
    assert set(pods) == {"head", "worker"}, sorted(pods)
    head = pods["head"]["status"]["podIP"]
    closed = {DASHBOARD_PORT: False, GCS_PORT: False, METRICS_PORT: False}
    outsider = _outsider(cluster, watched)
    wait_reach(cluster, outsider, watched, head, closed)
    # The scrapers the settings name reach Ray's metrics port of every Ray pod, and nothing else.
    scraper = _outsider(cluster, watched, "scraper", SCRAPER)
    for pod in pods.values():
        wait_reach(
            cluster,
            scraper,
            watched,
            pod["status"]["podIP"],
            {METRICS_PORT: True, DASHBOARD_PORT: False, GCS_PORT: False},
            timeout=120,
        )
    # The paths the product needs: the operator's pod to the job API only; the worker to the GCS.
    wait_reach(
        cluster,
        _operator_pod(cluster, release),
        release.namespace,
        head,
        {DASHBOARD_PORT: True, GCS_PORT: False},
    )
    worker = pods["worker"]["metadata"]["name"]
    wait_reach(cluster, worker, training, head, {DASHBOARD_PORT: True, GCS_PORT: True})
    # This host, where KubeRay and the fake job API's pod backend run.
    socket.create_connection((head, DASHBOARD_PORT), timeout=3).close()

    # Without the policy (the operator stopped, so it does not re-create it) the outsider gets in.
    _scale_operator(cluster, release, 0)
    policy = network_policy_name(name)
    cluster.kubectl("delete", "networkpolicy", policy, "--namespace", training)
    wait_reach(cluster, outsider, watched, head, {DASHBOARD_PORT: True, GCS_PORT: True})
    # The operator back: its reconcile re-creates the policy, and the enforcer closes the door.
    _scale_operator(cluster, release, 1)
    cluster.wait_for("networkpolicy", policy, training, lambda _: True, timeout=120, what="re-created")
    wait_reach(cluster, outsider, watched, head, closed)

    # Deleting the job stops everything of it: no pod, Ray cluster, RayJob, Service or policy.
    cluster.kubectl("delete", "grpojob", name, "--namespace", training, "--wait=true", timeout=180)
    deadline = time.monotonic() + 120
    while left := _left_of(cluster, training, name):
        assert time.monotonic() < deadline, f"left of {name} after its deletion: {left}"
        time.sleep(2)


# What a test runs in a Ray pod to SIGKILL the trainer there: every `grpo-train` process (the
# driver the job API started, and whatever of it runs in that pod), printing their pids.
_KILL_TRAINER = (
    "import os, signal\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        command = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
    "    except OSError:\n"
    "        continue\n"
    "    if b'grpo-train' in command and int(pid) != os.getpid():\n"
    "        os.kill(int(pid), signal.SIGKILL)\n"
    "        print(pid)\n"
)


def _job_folder(cluster: Cluster, namespace: str, name: str) -> Path:
    """The job's folder on its checkpoint claim's volume, as this host sees it."""
    job = cluster.get("grpojob", name, namespace)
    claim = next(
        v for v in cluster.get("pvc", namespace=namespace)["items"] if v["metadata"]["name"].startswith(name)
    )
    path = job_dir(name, job["metadata"]["uid"])
    return _claim_folder(cluster, namespace, claim["metadata"]["name"]) / Path(path).name


def test_a_trainer_killed_after_a_checkpoint_resumes_in_attempt_2_and_its_logs_read_back(
    cluster: Cluster, release: Release, training: str, real_node: str, tmp_path: Path
) -> None:
    """The real-path scenario (tests/support/colour_lives.py) with the trainer in Ray pods: its
    processes SIGKILLed inside the pods after a checkpoint, the operator's attempt 2 (a new Ray
    cluster of pods) resumes from that checkpoint on the same volume.

    The same job's logs through `kubectl grpo logs` (and `checkpoints`), in a namespace that
    enforces `restricted`: the plugin's reader pod (its image the trainer's: nothing else can be
    pulled here) mounts the job's claim read-only on the real node and prints the attempt's log,
    while the job runs, once it finished, and from the claim alone once the job is deleted (the
    claim's record of the pool's tolerations reaches the tainted node). What it prints is the file
    on the volume."""
    path = plugin_path(tmp_path)
    image = ["--image", f"{TRAINER_IMAGE}:{image_tag()}"]
    name = f"kill-{secrets.token_hex(2)}"
    cluster.apply(_colour_job(name, steps=KILL_STEPS, paced=True), training)
    wait_status(cluster, training, name, checkpoint_at_least(SAVE_EVERY), "a first checkpoint", timeout=600)
    folder = _job_folder(cluster, training, name)

    running = kubectl_grpo(cluster, path, "logs", name, "-n", training, *image, timeout=300)
    assert running.returncode == 0, running.stderr
    assert running.stdout.strip(), "the running job's log read back empty"
    # The file as it was then, up to where the read stopped: the plugin prints its last line with a
    # newline, whether or not the trainer had finished writing that line.
    [first_log] = folder.rglob("attempt-1.log")
    assert first_log.read_text().startswith(running.stdout.removesuffix("\n")), (
        "the reader printed what the volume does not hold"
    )

    killed = [
        cluster.kubectl(
            "exec", pod["metadata"]["name"], "-n", training, "--", "python", "-c", _KILL_TRAINER
        ).stdout
        for pod in _ray_pods(cluster, training, name).values()
    ]
    assert "".join(killed).split(), "no trainer process found in the job's Ray pods"
    # What attempt 2 must resume from: the newest checkpoint complete at the moment of the kill.
    resume_step = max(complete_checkpoints(folder))
    done = wait_status(cluster, training, name, phase_is("Succeeded", "Failed"), "a final phase", timeout=900)
    assert_resumed_after_a_kill(done, folder, resume_step, KILL_STEPS)

    # The trainer's last lines may follow its final status: read once its Ray pods are gone.
    deadline = time.monotonic() + 120
    while pods := [p for p in _left_of(cluster, training, name) if p.startswith("pod/")]:
        assert time.monotonic() < deadline, f"pods of finished {name}: {pods}"
        time.sleep(2)
    [last_log] = folder.rglob("attempt-2.log")
    finished = kubectl_grpo(cluster, path, "logs", name, "-n", training, *image, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == _as_printed(last_log.read_text())
    # The volume's listing through the same pod: every complete checkpoint, by its step.
    listed = kubectl_grpo(cluster, path, "checkpoints", name, "-n", training, *image, timeout=300)
    assert listed.returncode == 0, listed.stderr
    steps = complete_checkpoints(folder)
    assert steps
    for step in steps:
        assert str(step) in listed.stdout.split(), listed.stdout

    claim = next(
        v["metadata"]["name"]
        for v in cluster.get("pvc", namespace=training)["items"]
        if v["metadata"]["name"].startswith(name)
    )
    cluster.kubectl("delete", "grpojob", name, "-n", training, "--wait=true", "--timeout=180s")
    for attempt, log in (("1", first_log), ("2", last_log)):
        deleted = kubectl_grpo(
            cluster,
            path,
            "-n",
            training,
            "logs",
            name,
            "--claim",
            claim,
            "--job",
            folder.name,
            "--attempt",
            attempt,
            *image,
            timeout=300,
        )
        assert deleted.returncode == 0, deleted.stderr
        # The killed attempt's log ends mid-line; the plugin ends every line it prints.
        assert deleted.stdout == _as_printed(log.read_text())
    # The reader pods go with their reads; the claim stays (checkpoint.retention: Retain).
    deadline = time.monotonic() + 60
    while readers := [
        p["metadata"]["name"]
        for p in cluster.get("pods", namespace=training)["items"]
        if p["metadata"]["name"].startswith(f"{name}-read-")
    ]:
        assert time.monotonic() < deadline, f"reader pods left: {readers}"
        time.sleep(2)
    cluster.kubectl("delete", "pvc", claim, "-n", training, "--wait=false")


def _as_printed(text: str) -> str:
    """A file as `kubectl grpo logs` prints it: its last line ended with a newline."""
    return text if not text or text.endswith("\n") else text + "\n"


def _steps_in_metrics_files(folder: Path) -> list[int]:
    """Every trained step of every attempt, from the metrics files on the volume, in file order."""
    steps = []
    for path in sorted((folder / "metrics").glob("attempt-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line) if line.strip() else {}
            if "data" in record and not any(k.startswith("val-") for k in record["data"]):
                steps.append(int(record["step"]))
    return steps


def _saved_before_stop(cluster: Cluster, namespace: str, name: str) -> list[str]:
    events = cluster.get("events", namespace=namespace)["items"]
    return [
        e["message"]
        for e in events
        if e["involvedObject"].get("name") == name
        and e["reason"] == "SavedBeforeStop"
        and e["type"] == "Normal"
    ]


def _stop_step(after: int = 0) -> int:
    """A random step after `after` to stop at, not one the periodic save (every SAVE_EVERY) would
    save anyway, with steps left after it for a later stop or the end."""
    steps = [s for s in range(max(2, after + 2), KILL_STEPS - 2) if s % SAVE_EVERY]
    return secrets.choice(steps) if steps else min(after + 1, KILL_STEPS - 2)


def test_a_job_suspended_then_evicted_at_random_steps_saves_each_and_loses_no_step(
    cluster: Cluster, release: Release, training: str, real_node: str
) -> None:
    """Save, then yield, twice in one job's life. Suspended mid-run, the trainer saves the step it
    is on before its pods go (their preStop hook), and the suspended job holds no pod; resumed,
    attempt 2 starts at the next step. Then the Eviction API (what a drain and the cluster
    autoscaler use) on attempt 2's head pod: its hook has the trainer save again, and the job
    goes on from there. Every step is trained exactly once. Without the feature each stop loses
    the steps since the periodic checkpoint, which the next attempt trains again."""
    name = f"yield-{secrets.token_hex(2)}"
    at = secrets.choice([s for s in range(2, 6) if s % SAVE_EVERY])
    cluster.apply(_colour_job(name, steps=KILL_STEPS, paced=True), training)
    wait_status(cluster, training, name, step_at_least(at), f"step {at}", timeout=600)
    asked = time.monotonic()
    suspend = {"spec": {"runPolicy": {"suspend": True}}}
    cluster.kubectl("patch", "grpojob", name, "-n", training, "--type=merge", "-p", json.dumps(suspend))

    def told(status: dict[str, Any]) -> bool:
        stop = (status.get("checkpoint") or {}).get("lastStop") or {}
        return status.get("phase") == "Suspended" and stop.get("attempt") == 1

    suspended = wait_status(cluster, training, name, told, "Suspended with its stop reported", timeout=300)
    stop = suspended["checkpoint"]["lastStop"]
    assert stop["stepsLost"] == 0, stop
    assert stop["reason"] == "SavedOnStop", stop
    assert stop["step"] >= at
    deadline = time.monotonic() + 300
    while [p for p in _left_of(cluster, training, name) if p.startswith("pod/")]:
        assert time.monotonic() < deadline, "pods of the suspended job stay"
        time.sleep(1)
    gone = time.monotonic() - asked
    folder = _job_folder(cluster, training, name)
    assert stop["step"] in complete_checkpoints(folder)
    assert f"saved step {stop['step']} before stop (Suspended)" in _saved_before_stop(cluster, training, name)
    assert gone < 300

    resume = {"spec": {"runPolicy": {"suspend": False}}}
    cluster.kubectl("patch", "grpojob", name, "-n", training, "--type=merge", "-p", json.dumps(resume))
    later = _stop_step(after=stop["step"])

    def training_again(status: dict[str, Any]) -> bool:
        return status.get("attempt") == 2 and (status.get("progress") or {}).get("step", 0) >= later

    wait_status(cluster, training, name, training_again, f"attempt 2 at step {later}", timeout=600)
    head = _ray_pods(cluster, training, name)["head"]["metadata"]["name"]
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": head, "namespace": training},
    }
    cluster.kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/{training}/pods/{head}/eviction",
        "-f",
        "-",
        input=json.dumps(eviction),
    )
    done = wait_status(cluster, training, name, phase_is("Succeeded", "Failed"), "a final phase", timeout=900)
    assert done["phase"] == "Succeeded", done.get("conditions")
    evicted = done["checkpoint"]["lastStop"]
    assert (evicted["attempt"], evicted["stepsLost"], evicted["reason"]) == (2, 0, "SavedOnStop"), evicted
    assert evicted["step"] >= later
    assert done["checkpoint"]["resumedFromStep"] == evicted["step"]
    assert done["progress"]["step"] == KILL_STEPS
    assert _steps_in_metrics_files(folder) == list(range(1, KILL_STEPS + 1)), "every step exactly once"
    assert_history_covers_every_step_once(done, KILL_STEPS)
    saved = _saved_before_stop(cluster, training, name)
    assert any(f"saved step {evicted['step']} before stop" in m for m in saved), saved


def test_a_deadline_that_expires_mid_run_saves_the_step_in_progress(
    cluster: Cluster, release: Release, training: str, real_node: str
) -> None:
    """runPolicy.activeDeadlineSeconds running out mid-run fails the job DeadlineExceeded, and its
    pods' hooks have the trainer save the step it is on first."""
    name = f"deadline-{secrets.token_hex(2)}"
    at = _stop_step()
    cluster.apply(_colour_job(name, steps=KILL_STEPS, paced=True), training)
    wait_status(cluster, training, name, step_at_least(at), f"step {at}", timeout=600)
    expire = {"spec": {"runPolicy": {"activeDeadlineSeconds": 1}}}
    cluster.kubectl("patch", "grpojob", name, "-n", training, "--type=merge", "-p", json.dumps(expire))

    def told(status: dict[str, Any]) -> bool:
        return status.get("phase") == "Failed" and bool((status.get("checkpoint") or {}).get("lastStop"))

    failed = wait_status(cluster, training, name, told, "Failed with its stop reported", timeout=300)
    reason = next(c for c in failed["conditions"] if c["type"] == "Failed")["reason"]
    assert reason == "DeadlineExceeded"
    stop = failed["checkpoint"]["lastStop"]
    assert (stop["stepsLost"], stop["reason"]) == (0, "SavedOnStop"), stop
    assert stop["step"] >= at
    assert stop["step"] in complete_checkpoints(_job_folder(cluster, training, name))
    assert f"saved step {stop['step']} before stop (DeadlineExceeded)" in _saved_before_stop(
        cluster, training, name
    )


def test_a_job_whose_image_does_not_pull_says_why_in_its_status(
    cluster: Cluster, release: Release, training: str, real_node: str
) -> None:
    """A wrong trainer tag: the node's kubelet fails to pull it (the node's registry has no such
    tag), and the job's Running condition and a Warning Event carry that, in the pods' own words,
    within a minute and a half of the create on this 2-core machine."""
    name = f"badtag-{secrets.token_hex(2)}"
    missing = f"{TRAINER_IMAGE}:no-such-tag"
    documents = _colour_job(name)
    documents[-1]["spec"]["image"] = missing

    def pull_reason(status: dict[str, Any]) -> bool:
        running = next((c for c in status.get("conditions") or [] if c["type"] == "Running"), {})
        return running.get("status") == "False" and running.get("reason") in (
            "ErrImagePull",
            "ImagePullBackOff",
        )

    cluster.apply(documents, training)
    try:
        status = wait_status(cluster, training, name, pull_reason, "Running=False for the pull", timeout=90)
        running = next(c for c in status["conditions"] if c["type"] == "Running")
        assert running["message"].startswith("attempt 1 has not started: "), running
        assert "no-such-tag" in running["message"], running
        events = cluster.get("events", namespace=training)["items"]
        assert any(
            e["involvedObject"].get("kind") == "GRPOJob"
            and e["involvedObject"]["name"] == name
            and e["type"] == "Warning"
            and e["reason"] == running["reason"]
            for e in events
        ), [(e["involvedObject"]["name"], e["reason"]) for e in events]
        assert status["phase"] not in ("Failed", "Succeeded")
    finally:
        cluster.kubectl(
            "delete", "grpojob", name, "-n", training, "--wait=true", "--timeout=120s", check=False
        )


# Last: it uninstalls the release the module shares.
def test_the_operator_is_a_pod_of_its_image_and_runs_a_job(
    cluster: Cluster, release: Release, watched: str, job_api: RayJobAPI, real_node: str
) -> None:
    pods = cluster.get("pods", namespace=release.namespace)["items"]
    [pod] = [
        p
        for p in pods
        if p["metadata"]["name"].startswith(release.name) and "job-name" not in p["metadata"]["labels"]
    ]
    assert pod["spec"]["nodeName"] == real_node
    [status] = pod["status"]["containerStatuses"]
    assert status["image"].endswith(f"{OPERATOR_IMAGE}:{image_tag()}")
    assert status["imageID"], status  # the container runtime ran it from an image it holds
    assert status["containerID"].startswith("containerd://")
    assert "running" in status["state"]
    assert status["ready"] is True  # the kubelet probed its /healthz over the pod network

    # The operator pod reaches the API server (the `kubernetes` Service) with the chart's
    # ServiceAccount: it creates the attempt's RayJob as its own field manager and follows it.
    job_api.configure_namespace(watched, RUNNING_FOREVER)
    job = apply_example(cluster, watched, "lora-single-gpu")
    wait_condition(cluster, watched, job, "Running", timeout=180)
    assert FIELD_MANAGER in writers(cluster, "rayjobs.ray.io", f"{job}-1", watched)
    job_api.finish(ray_job_id(cluster, watched, f"{job}-1"), "SUCCEEDED")
    wait_condition(cluster, watched, job, "Succeeded")
    logs = cluster.kubectl("logs", pod["metadata"]["name"], "--namespace", release.namespace).stdout
    assert job in logs  # its own log, as the kubelet keeps it

    # The pre-delete hook is a Job of the same image, on the same node: it empties the watched
    # namespace, then the release's objects go.
    manifest, hooks = release.manifest(), release.hooks()
    release.uninstall()
    assert cluster.get("grpojobs", namespace=watched)["items"] == []
    assert existing(cluster, manifest + hooks) == []
