"""The trainer's status reporter against the real API server, with the operator's RBAC.

The trainer's credentials are exactly what the operator creates (`build_trainer_rbac`: a Role with
get/patch on `grpojobs/status`, resourceNames=[the job]) and a token from the TokenRequest API, in
a kubeconfig of their own. With them the reporter must patch its own job's status, leave the
operator's fields alone, and be refused on any other job.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.api.v1alpha1.status import history_points
from grpo_operator.children.meta import trainer_account_name
from grpo_operator.children.rbac import build_trainer_rbac
from grpo_trainer.cli import main as grpo_train
from grpo_trainer.engines.verl import checkpoints as verl_checkpoints
from grpo_trainer.kube import GRPOJobResource, KubeStatusWriter
from grpo_trainer.progress import TrainingState
from grpo_trainer.reporter import Reporter
from grpo_trainer.spec import resolve_manifest
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ServiceAccount
from lightkube.types import PatchType
from support.cluster import Cluster
from support.jobs import example

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    cluster.install_crds()


def create_job(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    body = example("geo3k-ascend-910b")
    body["metadata"] = {"name": name, "namespace": namespace}
    cluster.apply(body)
    return cluster.get("grpojob", name, namespace)


def trainer_kubeconfig(cluster: Cluster, job: dict[str, Any], folder: Path) -> Path:
    """The operator's trainer RBAC for `job`, and a kubeconfig holding only that account's token."""
    parsed = GRPOJob.model_validate(job)
    cluster.apply(build_trainer_rbac(parsed))
    admin = Client(KubeConfig.from_file(cluster.kubeconfig))
    account = trainer_account_name(parsed.name)
    request = ServiceAccount.Token(
        metadata=ObjectMeta(name=account, namespace=parsed.namespace),
        spec=TokenRequestSpec(audiences=[], expirationSeconds=600),
    )
    token = admin.create(request, name=account, namespace=parsed.namespace).status.token

    source = yaml.safe_load(cluster.kubeconfig.read_text())
    context = next(c for c in source["contexts"] if c["name"] == source["current-context"])["context"]
    server = next(c for c in source["clusters"] if c["name"] == context["cluster"])["cluster"]
    if "certificate-authority" in server:
        ca = Path(server["certificate-authority"])
        if not ca.is_absolute():
            server = {**server, "certificate-authority": str(cluster.kubeconfig.parent / ca)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": server}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [
            {
                "name": "trainer",
                "context": {"cluster": "test", "user": account, "namespace": parsed.namespace},
            }
        ],
        "current-context": "trainer",
    }
    path = folder / f"{account}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def publish_until_sent(reporter: Reporter, timeout: float = 30.0) -> None:
    """RBAC reaches the authorizer's cache within moments; the reporter retries until then."""
    deadline = time.monotonic() + timeout
    reporter.poll()
    while not reporter.publish():
        assert time.monotonic() < deadline, (
            f"no status patch accepted within {timeout}s: {reporter._last_error}"
        )
        time.sleep(0.2)


def test_reporter_patches_its_own_job_and_nothing_else(cluster, namespace, crds, tmp_path):
    mine = create_job(cluster, namespace, "reporter-mine")
    other = create_job(cluster, namespace, "reporter-other")
    kubeconfig = trainer_kubeconfig(cluster, mine, tmp_path)

    # An operator-owned field, set first: the trainer's merge patch must leave it alone.
    admin = Client(KubeConfig.from_file(cluster.kubeconfig))
    admin.patch(
        GRPOJobResource.Status,
        "reporter-mine",
        {"status": {"phase": "Running", "attempt": 2}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )

    metrics = tmp_path / "metrics" / "attempt-2.jsonl"
    metrics.parent.mkdir()
    lines = [
        {"step": s, "data": {"training/global_step": s, "critic/score/mean": s / 10, "timing_s/step": 180.0}}
        for s in range(21, 25)
    ]
    lines[-1]["data"]["val-core/hiyouga/geometry3k/acc/mean@1"] = 0.47
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines))
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "global_step_24").mkdir(parents=True)
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("24")

    writer = KubeStatusWriter("reporter-mine", namespace, str(kubeconfig))
    # This attempt's trainer started 400 s ago; its first step (180 s) is read now.
    state = TrainingState(total_steps=60, resumed_from_step=20, attempt=2, started_at=time.time() - 400)
    reporter = Reporter(
        writer,
        state,
        metrics,
        metrics.with_suffix(".events"),
        latest_checkpoint=lambda: verl_checkpoints.latest(checkpoints),
        min_interval=0.0,
        not_before=0.0,
    )
    publish_until_sent(reporter)

    status = cluster.get("grpojob", "reporter-mine", namespace)["status"]
    assert status["phase"] == "Running"
    assert status["attempt"] == 2
    assert status["progress"]["steps"] == "24/60"
    assert status["progress"]["percent"] == 40.0
    assert status["metrics"]["reward"] == pytest.approx(2.4)
    assert status["metrics"]["valScore"] == pytest.approx(0.47)
    assert [p["step"] for p in history_points(status)] == [21, 22, 23, 24]
    assert status["checkpoint"]["latestStep"] == 24
    assert status["checkpoint"]["resumedFromStep"] == 20
    assert 218 <= status["progress"]["startupSeconds"] <= 240  # 400 - 180, kept by the schema

    # The next attempt's first patch, before its first step: the last attempt's start-up is gone.
    next_metrics = tmp_path / "metrics" / "attempt-3.jsonl"
    next_metrics.touch()
    restarted = TrainingState(total_steps=60, resumed_from_step=24, attempt=3, started_at=time.time())
    publish_until_sent(
        Reporter(writer, restarted, next_metrics, next_metrics.with_suffix(".events"), min_interval=0.0)
    )
    progress = cluster.get("grpojob", "reporter-mine", namespace)["status"]["progress"]
    assert progress["attempt"] == 3
    assert "startupSeconds" not in progress

    # The same credentials on another job's status, and on the job object itself: refused.
    with pytest.raises(ApiError) as refused:
        KubeStatusWriter("reporter-other", namespace, str(kubeconfig)).patch_status(
            {"status": {"progress": {"step": 99}}}
        )
    assert refused.value.status.code == 403
    trainer = Client(KubeConfig.from_file(kubeconfig))
    with pytest.raises(ApiError) as spec_refused:
        trainer.patch(
            GRPOJobResource,
            "reporter-mine",
            {"spec": {"runPolicy": {"suspend": True}}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
    assert spec_refused.value.status.code == 403
    assert "progress" not in (cluster.get("grpojob", "reporter-other", namespace).get("status") or {})
    assert other["metadata"]["name"] == "reporter-other"


def test_report_command_once(cluster, namespace, crds, tmp_path, monkeypatch):
    job = create_job(cluster, namespace, "reporter-cli")
    kubeconfig = trainer_kubeconfig(cluster, job, tmp_path)
    manifest = {**example("geo3k-ascend-910b"), "metadata": {"name": "reporter-cli"}}
    resolved = resolve_manifest(manifest, namespace=namespace)
    paths = resolved.paths.model_copy(
        update={
            "job_dir": str(tmp_path),
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "metrics_dir": str(tmp_path / "metrics"),
            "data_dir": str(tmp_path / "data"),
            "cache_dir": str(tmp_path / "cache"),
        }
    )
    spec = tmp_path / "job.json"
    spec.write_text(resolved.model_copy(update={"paths": paths}).model_dump_json(by_alias=True))
    metrics = tmp_path / "metrics" / "attempt-1.jsonl"
    metrics.parent.mkdir()
    metrics.write_text(json.dumps({"step": 3, "data": {"critic/score/mean": 0.25}}) + "\n")
    monkeypatch.setenv("GRPO_ATTEMPT", "1")
    monkeypatch.delenv("GRPO_METRICS_FILE", raising=False)
    # What the attempt's own reporter wrote: by hand, the attempt's start is not known, so its
    # start-up stays as that reporter measured it.
    Client(KubeConfig.from_file(cluster.kubeconfig)).patch(
        GRPOJobResource.Status,
        "reporter-cli",
        {"status": {"progress": {"step": 2, "attempt": 1, "startupSeconds": 193}}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )

    deadline = time.monotonic() + 30
    while grpo_train(["report", "--spec", str(spec), "--kubeconfig", str(kubeconfig), "--once"]) != 0:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    status = cluster.get("grpojob", "reporter-cli", namespace)["status"]
    assert status["progress"]["step"] == 3
    assert status["progress"]["startupSeconds"] == 193
    assert status["metrics"]["reward"] == 0.25


def test_report_for_a_job_that_is_not_there_is_one_line(cluster, namespace, crds, capsys, monkeypatch):
    monkeypatch.setenv("GRPO_NAMESPACE", namespace)
    monkeypatch.setenv("GRPO_JOB_NAME", "no-such-job")
    spec = str(REPO / "examples" / "lora-single-gpu.yaml")
    assert grpo_train(["report", "--spec", spec, "--kubeconfig", str(cluster.kubeconfig), "--once"]) == 3
    err = capsys.readouterr().err
    assert (
        err
        == f"error: no GRPOJob {namespace}/no-such-job to report to (set $GRPO_NAMESPACE and $GRPO_JOB_NAME)\n"
    )
