"""`kubectl grpo` where no cluster is needed: the volume as a folder, plots, errors, the reader pod."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml
from grpo_kubectl.cli import main
from grpo_kubectl.cluster import PluginError, stored_job
from grpo_kubectl.history import history_from_metrics
from grpo_kubectl.reader import build_reader_pod, cat_script
from grpo_kubectl.show import describe
from grpo_kubectl.volume import LocalVolume
from grpo_operator.api.v1alpha1 import GRPOJob
from support.operator_inputs import minimal_body

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "lora-single-gpu.yaml"
JOB = "lora-vision-grpo"


@pytest.fixture
def no_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def _job() -> GRPOJob:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"].update(namespace="team-a", uid="u-1")
    body["spec"]["pods"] = {"imagePullSecrets": ["mirror-creds"]}
    return GRPOJob.model_validate(body)


def _metrics_dir(workdir: Path) -> Path:
    folder = workdir / "grpo" / "checkpoints" / JOB / "metrics"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _steps(first: int, last: int, val_every: int = 5) -> str:
    lines = []
    for step in range(first, last + 1):
        data = {
            "critic/score/mean": step / 100,
            "response_length/mean": 200.0 + step,
            "training/global_step": step,
        }
        if step % val_every == 0:
            data["val-core/colours/acc/mean@1"] = step / 200
        lines.append(json.dumps({"step": step, "data": data}))
    return "\n".join(lines) + "\n"


# --- logs --------------------------------------------------------------------------------------


def test_logs_of_an_attempt_from_the_volume_rolled_over_part_first(tmp_path, capsys, no_cluster):
    metrics = _metrics_dir(tmp_path)
    (metrics / "attempt-2.log.1").write_text("older line\n")
    (metrics / "attempt-2.log").write_text("newer line\nGRPO_FAILURE {}\n")
    assert main(["logs", JOB, "--attempt", "2", "--workdir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == ["older line", "newer line", "GRPO_FAILURE {}"]


def test_logs_of_an_attempt_that_left_none_is_one_line(tmp_path, capsys, no_cluster):
    _metrics_dir(tmp_path)
    assert main(["logs", JOB, "--attempt", "7", "--workdir", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: no such file: ")
    assert err.count("\n") == 1


def test_follow_prints_what_is_written_across_a_roll_over(tmp_path):
    metrics = _metrics_dir(tmp_path)
    log = metrics / "attempt-1.log"
    log.write_text("one\n")
    done = threading.Event()

    def trainer() -> None:
        time.sleep(0.3)
        with log.open("a") as handle:
            handle.write("two\n")
        time.sleep(0.3)
        log.rename(str(log) + ".1")  # what RotatingSink does when the file is full
        log.write_text("three\n")
        time.sleep(0.5)
        done.set()

    thread = threading.Thread(target=trainer)
    thread.start()
    volume = LocalVolume(str(tmp_path), poll_seconds=0.05)
    seen = list(volume.follow(f"/grpo/checkpoints/{JOB}/metrics/attempt-1.log", done.is_set))
    thread.join()
    assert seen == ["one", "two", "three"]


# --- plot --------------------------------------------------------------------------------------


def test_plot_from_metrics_files_writes_a_png_and_draws_the_curves(tmp_path, capsys, no_cluster):
    metrics = _metrics_dir(tmp_path)
    (metrics / "attempt-1.jsonl").write_text(_steps(1, 30))
    (metrics / "attempt-2.jsonl").write_text(_steps(21, 40))  # a retry from step 20's checkpoint
    png = tmp_path / "curves.png"
    files = [str(metrics / "attempt-1.jsonl"), str(metrics / "attempt-2.jsonl")]
    assert main(["plot", "--metrics-file", files[0], "--metrics-file", files[1], "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "step 1 .. 40   reward (mean per response): last 0.4" in out
    assert "step 5 .. 40   validation score (mean accuracy): last 0.2" in out
    assert "step 1 .. 40   response length (tokens): last 240" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000


def test_a_retry_replaces_the_steps_it_repeats_at_full_resolution():
    history = history_from_metrics([*_steps(1, 10).splitlines(), *_steps(6, 8).splitlines()])
    assert [p["step"] for p in history] == list(range(1, 11))
    assert history[4] == {"step": 5, "reward": 0.05, "valScore": 0.025, "responseLength": 205.0}


def test_plot_with_nothing_to_draw_is_one_line(tmp_path, capsys, no_cluster):
    empty = tmp_path / "attempt-1.jsonl"
    empty.write_text("")
    assert main(["plot", "--metrics-file", str(empty), "--png", "none"]) == 1
    assert capsys.readouterr().err.startswith("error: no points to plot yet")


def test_a_file_of_no_metrics_is_said_to_be_none_rather_than_early(tmp_path, capsys, no_cluster):
    garbage = tmp_path / "notes.jsonl"
    garbage.write_text("step one went well\n{not json\n")
    for output in ([], ["-o", "json"]):
        assert main(["plot", "--metrics-file", str(garbage), "--png", "none", *output]) == 1
        assert capsys.readouterr().err == (
            f"error: {garbage} is not a metrics file: none of its 2 lines is a step's metrics "
            "(the trainer writes them to attempt-N.jsonl)\n"
        )


def test_the_png_is_written_where_the_message_says(tmp_path, capsys, no_cluster):
    metrics = _metrics_dir(tmp_path) / "attempt-1.jsonl"
    metrics.write_text(_steps(1, 10))
    plot = ["plot", "--metrics-file", str(metrics), "--no-terminal", "--png"]
    assert main([*plot, str(tmp_path / "curves")]) == 0
    assert capsys.readouterr().err == f"wrote {tmp_path / 'curves.png'}\n"
    assert (tmp_path / "curves.png").is_file()
    assert main([*plot, str(tmp_path)]) == 0  # a folder: the default name inside it
    assert capsys.readouterr().err == f"wrote {tmp_path / 'metrics-curves.png'}\n"
    assert main([*plot, str(tmp_path / "nowhere" / "c.png")]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: --png {tmp_path / 'nowhere' / 'c.png'}: there is no folder"
    )
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("kubeconfig", "expected"),
    [
        (
            "clusters: [\n",
            "error: cannot read the kubeconfig: not valid YAML: line 2, column 1: expected the node content",
        ),
        ("apiVersion: v1\n", "error: cannot read the kubeconfig: it has no 'clusters'"),
    ],
)
def test_a_broken_kubeconfig_is_one_line(tmp_path, capsys, kubeconfig, expected):
    path = tmp_path / "config"
    path.write_text(kubeconfig)
    assert main(["--kubeconfig", str(path), "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(expected), err
    assert len(err.splitlines()) == 1


def test_a_kubeconfig_that_is_a_folder_says_so(tmp_path, capsys):
    assert main(["--kubeconfig", str(tmp_path), "list"]) == 1
    assert (
        capsys.readouterr().err == f"error: cannot read the kubeconfig: {tmp_path} is a folder, not a file\n"
    )


def test_an_unreachable_server_is_named_on_every_read_of_a_kept_claim(tmp_path, capsys):
    path = tmp_path / "config"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    for command, extra in (("logs", []), ("checkpoints", []), ("plot", ["--png", "none"])):
        assert main(["--kubeconfig", str(path), command, "gone", "--claim", "kept", *extra]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: cannot reach the API server at https://127.0.0.1:1"), err
        assert "internal error" not in err


def test_plan_wants_a_job_or_a_file_and_not_both(capsys, no_cluster):
    assert main(["plan"]) == 2
    assert capsys.readouterr().err == "error: give a job name or -f FILE\n"
    assert main(["plan", "job", "-f", str(EXAMPLE)]) == 2
    assert capsys.readouterr().err == "error: give a job name or -f FILE (not both)\n"
    assert main(["plan", "-f", str(EXAMPLE), "--verl-version", "banana"]) == 2
    assert capsys.readouterr().err == (
        "error: --verl-version: not a verl version: 'banana' (a release such as 0.9.1)\n"
    )


# --- checkpoints -------------------------------------------------------------------------------


def test_checkpoints_on_the_volume_in_step_order(tmp_path, capsys, no_cluster):
    folder = tmp_path / "grpo" / "checkpoints" / JOB / "checkpoints"
    for step in (100, 20, 40):
        (folder / f"global_step_{step}").mkdir(parents=True)
    (folder / "latest_checkpointed_iteration.txt").write_text("100")
    assert main(["checkpoints", JOB, "--workdir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["STEP", "SAVED", "(UTC)", "PATH"]
    assert [line.split()[0] for line in lines[1:]] == ["20", "40", "100"]
    assert lines[-1].endswith(f"/grpo/checkpoints/{JOB}/checkpoints/global_step_100")


# --- one-line errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["status", JOB], ["suspend", JOB], ["resume", JOB], ["logs", JOB]])
def test_no_kubeconfig_is_one_line(command, capsys, no_cluster):
    assert main(command) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no cluster to talk to: ")
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_a_typo_in_a_setting_is_a_problem_naming_it(tmp_path, capsys, no_cluster):
    manifest = yaml.safe_load(EXAMPLE.read_text())
    manifest["spec"]["algorithm"]["learningRat"] = 1e-5
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert main(["validate", "-f", str(path)]) == 3
    out, err = capsys.readouterr()
    assert out == "problem: spec.algorithm.learningRat: unknown field\n"
    assert "checked offline (no cluster to talk to" in err


def test_validate_offline_accepts_an_example(capsys, no_cluster):
    assert main(["validate", "-f", str(EXAMPLE), "--offline"]) == 0
    assert capsys.readouterr().out.startswith("ok: checked offline")


def test_a_file_that_is_not_a_grpojob_is_one_line(tmp_path, capsys, no_cluster):
    path = tmp_path / "pod.yaml"
    path.write_text("kind: Pod\n")
    assert main(["validate", "-f", str(path)]) == 1
    assert capsys.readouterr().err == f"error: {path} holds a Pod, not a GRPOJob (kind: GRPOJob)\n"


def test_plan_of_a_manifest_is_the_trainers_plan(capsys, no_cluster):
    assert main(["plan", "-f", str(EXAMPLE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# image: ghcr.io/grpo-operator/trainer-cuda:0.1.0")
    assert lines[1].startswith("# save on stop: ")
    assert lines[2].startswith("# TRL GRPOTrainer + peft LoRA on one device")


# --- pieces ------------------------------------------------------------------------------------


def test_the_reader_pod_mounts_the_claim_read_only_and_cleans_up_after_itself():
    pod = build_reader_pod(
        _job(), cat_script("/grpo/checkpoints/x/metrics/attempt-1.log"), image="mirror/busybox"
    )
    spec = pod["spec"]
    assert pod["metadata"]["generateName"] == f"{JOB}-read-"
    assert pod["metadata"]["namespace"] == "team-a"
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("GRPOJob", JOB, "u-1")
    assert spec["volumes"][0]["persistentVolumeClaim"] == {
        "claimName": f"{JOB}-checkpoints",
        "readOnly": True,
    }
    assert spec["containers"][0]["volumeMounts"][0] == {
        "name": "checkpoints",
        "mountPath": "/grpo/checkpoints",
        "readOnly": True,
    }
    assert spec["containers"][0]["image"] == "mirror/busybox"
    assert spec["imagePullSecrets"] == [{"name": "mirror-creds"}]
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == 600
    assert spec["automountServiceAccountToken"] is False
    # Where it may run (tolerations, affinity): tests/unit/kubectl/test_reader_pod.py.


def test_status_reads_like_a_report():
    body = {
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"resources": {"accelerator": "nvidia", "devicesPerNode": 8, "nodes": 2}},
        "status": {
            "phase": "Running",
            "attempt": 2,
            "rayJobName": "j-2",
            "progress": {
                "steps": "40/300",
                "percent": 13.3,
                "etaSeconds": 9000,
                "epoch": 1,
                "attempt": 2,
                "startupSeconds": 193,
            },
            "metrics": {"reward": 0.8209, "valScore": 0.61},
            "log": {"attempt": 2, "path": "/grpo/checkpoints/j/metrics/attempt-2.log"},
            "failedAttempts": [
                {
                    "attempt": 1,
                    "reason": "OutOfMemory",
                    "message": "CUDA out of memory",
                    "retryable": True,
                    "logFile": "/grpo/checkpoints/j/metrics/attempt-1.log",
                }
            ],
        },
    }
    text = describe(body)
    assert text.splitlines()[0] == "ns/j: Running"
    assert "step 40/300 (13.3%), epoch 1, ETA 2h30m, start-up 3m13s (attempt 2)" in text
    assert "reward 0.8209  val 0.61" in text
    assert "1: OutOfMemory (retried as attempt 2): CUDA out of memory" in text
    assert "kubectl grpo logs j --attempt 1" in text
    # The estimate of an attempt that is not the current one, or of a job that does not train, is
    # not shown as if it were true now.
    for stale in ({"attempt": 1}, {"phase": "Suspended"}, {"phase": "Succeeded"}):
        old = {**body, "status": {**body["status"], "progress": {**body["status"]["progress"]}}}
        old["status"].update({k: v for k, v in stale.items() if k == "phase"})
        old["status"]["progress"].update({k: v for k, v in stale.items() if k == "attempt"})
        assert ", ETA -" in describe(old), stale


# --- kubectl's habits ----------------------------------------------------------------------------


def test_the_failed_attempts_say_what_followed_each():
    def text(phase: str, attempt: int, retryable: bool, failed_reason: str | None = None) -> str:
        conditions = (
            [{"type": "Failed", "status": "True", "reason": failed_reason, "message": ""}]
            if failed_reason
            else []
        )
        status = {
            "phase": phase,
            "attempt": attempt,
            "conditions": conditions,
            "failedAttempts": [
                {"attempt": 1, "reason": "NodeLost", "retryable": True},
                {"attempt": 2, "reason": "OutOfMemory", "retryable": retryable, "message": "m"},
            ],
        }
        return describe({"metadata": {"name": "j", "namespace": "ns"}, "status": status})

    ended = text("Failed", 2, True, "BackoffLimitExceeded")
    assert "1: NodeLost (retried as attempt 2)" in ended
    assert "2: OutOfMemory (retryable, not retried: BackoffLimitExceeded): m" in ended
    assert "2: OutOfMemory (not retryable): m" in text("Failed", 2, False, "ConfigError")
    assert "2: OutOfMemory (retrying): m" in text("Restarting", 2, True)
    assert "2: OutOfMemory (retried as attempt 3): m" in text("Running", 3, True)


def test_list_table_with_namespaces_and_wide_columns():
    from datetime import UTC, datetime

    from grpo_kubectl.listing import table

    bodies = [
        {
            "metadata": {"name": "a", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {
                "phase": "Running",
                "attempt": 1,
                "progress": {"steps": "3/10", "etaSeconds": 7200, "attempt": 1},
                "eta": "2h00m",
                "metrics": {"reward": 0.123456},
                "conditions": [{"type": "Running", "reason": "TrainerStarted", "lastTransitionTime": "x"}],
            },
        },
        {"metadata": {"name": "longer-name", "namespace": "b"}},
    ]
    lines = table(
        bodies, namespaces=True, wide=True, now=datetime(2026, 1, 1, 2, 30, tzinfo=UTC)
    ).splitlines()
    assert lines[0].split() == [
        "NAMESPACE",
        "NAME",
        "PHASE",
        "STEP",
        "REWARD",
        "VAL",
        "ATTEMPT",
        "AGE",
        "ETA",
        "REASON",
    ]
    assert lines[1].split() == [
        "team-a",
        "a",
        "Running",
        "3/10",
        "0.1235",
        "-",
        "1",
        "2h30m",
        "2h00m",
        "TrainerStarted",
    ]
    assert lines[2].split() == ["b", "longer-name", "-", "-", "-", "-", "-", "-", "-", "-"]
    assert lines[0].index("NAME ") == lines[1].index(" a ") + 1  # columns line up


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["statu", "x"], "error: argument COMMAND: invalid choice: 'statu'"),
        (
            ["logs", "x", "-o", "yaml"],
            "error: unrecognized arguments: -o yaml (see kubectl grpo logs --help)",
        ),
        (
            ["-o", "yaml", "logs", "x"],
            "error: -o yaml: not an output of `kubectl grpo logs` (it prints text only)",
        ),
        (["-A", "status", "x"], "error: -A: `kubectl grpo status` works on one job; give -n NAMESPACE"),
        (["list", "-A", "-n", "x"], "error: give -n NAMESPACE or -A, not both"),
        (["logs", "x", "--attempt", "two"], "error: argument --attempt: expected a whole number, got 'two'"),
        (["dashboard", "x", "--port", "70000"], "error: argument --port: expected a port from 0 to 65535"),
    ],
)
def test_usage_mistakes_are_one_line_and_exit_2(argv, message, capsys, no_cluster):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1


def test_flags_go_before_or_after_the_command(tmp_path, capsys, no_cluster):
    metrics = _metrics_dir(tmp_path)
    (metrics / "attempt-1.log").write_text("hello\n")
    kubeconfig = str(tmp_path / "nothing")
    for argv in (
        [
            "-n",
            "team-a",
            "--kubeconfig",
            kubeconfig,
            "logs",
            JOB,
            "--attempt",
            "1",
            "--workdir",
            str(tmp_path),
        ],
        [
            "logs",
            JOB,
            "-n",
            "team-a",
            "--attempt",
            "1",
            "--workdir",
            str(tmp_path),
            "--kubeconfig",
            kubeconfig,
        ],
    ):
        assert main(argv) == 0
        assert capsys.readouterr().out == "hello\n"


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("kubectl-grpo ")


def test_plot_points_as_json(tmp_path, capsys, no_cluster):
    metrics = _metrics_dir(tmp_path)
    (metrics / "attempt-1.jsonl").write_text(_steps(1, 3))
    assert main(["plot", "--metrics-file", str(metrics / "attempt-1.jsonl"), "-o", "json"]) == 0
    points = json.loads(capsys.readouterr().out)
    assert [p["step"] for p in points] == [1, 2, 3]


def test_the_dashboard_service_from_the_status():
    from grpo_kubectl.cluster import PluginError
    from grpo_kubectl.portforward import dashboard_service

    url = {"status": {"dashboardURL": "j-1-raycluster-x-head-svc.ns.svc.cluster.local:8265"}}
    assert dashboard_service("j", url) == ("j-1-raycluster-x-head-svc", 8265)
    assert dashboard_service("j", {"status": {"dashboardURL": "http://h.ns.svc:9000"}}) == ("h", 9000)
    assert dashboard_service("j", {"status": {"rayClusterName": "j-2-rc"}}) == ("j-2-rc-head-svc", 8265)
    with pytest.raises(PluginError, match=r"has no Ray cluster now \(Suspended\)"):
        dashboard_service("j", {"status": {"phase": "Suspended"}})


def test_the_head_pod_is_looked_for_by_the_clusters_labels_and_must_run():
    from grpo_kubectl.portforward import head_labels, head_problem

    by_url = {"status": {"phase": "Running", "dashboardURL": "j-1-rc-head-svc.ns.svc.cluster.local:8265"}}
    assert head_labels(by_url) == {"ray.io/cluster": "j-1-rc", "ray.io/node-type": "head"}
    assert head_labels({"status": {"rayClusterName": "j-2-rc"}}) == {
        "ray.io/cluster": "j-2-rc",
        "ray.io/node-type": "head",
    }
    assert head_labels({"status": {"phase": "Pending"}}) is None

    def pod(phase: str, **status: object) -> dict:
        return {"metadata": {"name": "j-1-rc-head-x"}, "spec": {}, "status": {"phase": phase, **status}}

    assert head_problem("j", by_url, [pod("Running")]) is None
    assert "has no Ray head pod (Ray cluster j-1-rc, job Running)" in head_problem("j", by_url, [])
    gone = {**pod("Running"), "metadata": {"name": "old", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert "has no Ray head pod" in head_problem("j", by_url, [gone])
    pulling = pod("Pending", containerStatuses=[{"state": {"waiting": {"reason": "ImagePullBackOff"}}}])
    assert head_problem("j", by_url, [pulling]) == (
        "the Ray head pod j-1-rc-head-x of grpojob j is not running (Pending: ImagePullBackOff)"
    )
    assert head_problem("j", by_url, [pod("Pending")]).endswith("(Pending: not scheduled yet)")


# --- a deleted job's kept claim ------------------------------------------------------------------


def _claim_copy(tmp_path: Path, folder: str) -> Path:
    metrics = tmp_path / "grpo" / "checkpoints" / folder / "metrics"
    metrics.mkdir(parents=True)
    (metrics / "attempt-1.log").write_text("first attempt\n")
    (metrics / "attempt-2.log").write_text("second attempt\n")
    (metrics / "attempt-1.jsonl").write_text(_steps(1, 4))
    (metrics / "attempt-2.jsonl").write_text(_steps(3, 6))
    (tmp_path / "grpo" / "checkpoints" / folder / "checkpoints" / "global_step_6").mkdir(parents=True)
    return metrics


def test_a_copy_of_a_claim_without_its_job_finds_the_jobs_folder_and_newest_attempt(
    tmp_path, capsys, no_cluster
):
    _claim_copy(tmp_path, f"{JOB}-0123abcd")
    (tmp_path / "grpo" / "checkpoints" / "another-job-99999999").mkdir()
    claim = ["--workdir", str(tmp_path)]
    assert main(["logs", JOB, *claim]) == 0
    assert capsys.readouterr().out == "second attempt\n"
    assert main(["logs", "--job", f"{JOB}-0123abcd", "--attempt", "1", *claim]) == 0
    assert capsys.readouterr().out == "first attempt\n"
    assert main(["checkpoints", JOB, *claim]) == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[1]
        .endswith(f"/grpo/checkpoints/{JOB}-0123abcd/checkpoints/global_step_6")
    )
    assert main(["plot", JOB, *claim, "-o", "json"]) == 0
    assert [p["step"] for p in json.loads(capsys.readouterr().out)] == [1, 2, 3, 4, 5, 6]


def test_a_name_used_twice_on_a_copy_asks_which(tmp_path, capsys, no_cluster):
    _claim_copy(tmp_path, f"{JOB}-0123abcd")
    _claim_copy(tmp_path, f"{JOB}-fedc9876")
    assert main(["logs", JOB, "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: 2 jobs named {JOB} in {tmp_path} ({JOB}-0123abcd, {JOB}-fedc9876): give --job with one\n"
    )
    assert main(["logs", "nobody", "--workdir", str(tmp_path)]) == 3
    assert capsys.readouterr().err == f"error: no folder of a job named nobody in {tmp_path}\n"
    assert main(["logs", "--job", "x-12345678"]) == 2
    assert capsys.readouterr().err == "error: --job NAME-UID8 goes with --claim CLAIM or --workdir DIR\n"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["logs", JOB, "--claim", "kept", "--workdir", "{tmp}"],
            "--claim and --workdir do not go together: --claim reads a kept claim through a pod, "
            "--workdir reads a folder here",
        ),
        (
            ["checkpoints", JOB, "--claim", "kept", "--workdir", "{tmp}"],
            "--claim and --workdir do not go together",
        ),
        (["plot", JOB, "--claim", "kept", "--workdir", "{tmp}"], "--claim and --workdir do not go together"),
        (
            ["logs", JOB, "--image", "mirror/busybox", "--workdir", "{tmp}"],
            "--image and --workdir do not go together: --image is the reader pod's, and --workdir reads "
            "a folder with no pod",
        ),
        (
            ["validate", "-f", "{example}", "--offline", "--context", "prod"],
            "--offline and --context do not go together: --offline asks no cluster",
        ),
        (
            ["validate", "-f", "{example}", "--offline", "--kubeconfig", "{tmp}/config"],
            "--offline and --kubeconfig do not go together",
        ),
        *(
            (
                ["plot", "--metrics-file", "{tmp}/attempt-1.jsonl", *extra],
                f"--metrics-file and {extra[0]} do not go together: --metrics-file plots those files, "
                "not a job's volume",
            )
            for extra in (
                ["--claim", "kept"],
                ["--workdir", "{tmp}"],
                ["--full"],
                ["--image", "mirror/busybox"],
                ["--job", f"{JOB}-0123abcd"],
            )
        ),
        (
            ["plot", "--metrics-file", "{tmp}/attempt-1.jsonl", "-o", "json", "--png", "{tmp}/c.png"],
            "-o and --png do not go together: -o prints the points and draws nothing",
        ),
        (
            ["plot", "--metrics-file", "{tmp}/attempt-1.jsonl", "-o", "yaml", "--no-terminal"],
            "-o and --no-terminal do not go together",
        ),
        (
            ["plot", JOB, "--image", "mirror/busybox"],
            "--image is the reader pod's, and plot reads the job's status unless --full or --claim",
        ),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_flags_a_command_would_drop_are_a_usage_mistake(
    argv, expected, tmp_path, capsys, no_cluster, monkeypatch
):
    """A flag silently ignored beside another reads as a result that is not what was asked
    (`logs --claim X --workdir D` read the folder and never the claim): exit 2, one line."""
    monkeypatch.chdir(tmp_path)  # a plot that ran anyway would write its PNG here
    _claim_copy(tmp_path, f"{JOB}-0123abcd")
    (tmp_path / "attempt-1.jsonl").write_text(_steps(1, 3))
    args = [a.format(tmp=tmp_path, example=EXAMPLE) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {expected}"), err
    assert err.count("\n") == 1


def test_the_reader_pod_passes_the_restricted_pod_security_level():
    from grpo_kubectl.reader import ReadTarget

    for target in (_job(), ReadTarget("team-a", "kept-claim", JOB)):
        pod = build_reader_pod(target, "true")
        spec, container = pod["spec"], pod["spec"]["containers"][0]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] == 1000
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert "fsGroup" not in spec["securityContext"]
    alone = build_reader_pod(ReadTarget("team-a", "kept-claim", JOB), "true")
    assert "ownerReferences" not in alone["metadata"]
    assert alone["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "kept-claim"


def test_a_stored_job_this_version_cannot_read_is_one_line_naming_the_field_and_its_claim():
    body = minimal_body()
    body["spec"]["image"] = ""  # an earlier version admitted it; these models refuse it
    with pytest.raises(PluginError) as refused:
        stored_job(body)
    assert str(refused.value) == (
        "grpojob team-a/demo: this version cannot read its spec (spec.image: must have at least 1 "
        "character, found 0); its files are on claim demo-checkpoints (--claim demo-checkpoints reads them)"
    )
    body["spec"]["checkpoint"] = {"claimName": "shared-ckpt"}
    with pytest.raises(PluginError, match="on claim shared-ckpt "):
        stored_job(body)
    body["spec"]["image"] = "registry.example/trainer:1"
    assert stored_job(body).spec.checkpoint.claim_name == "shared-ckpt"
