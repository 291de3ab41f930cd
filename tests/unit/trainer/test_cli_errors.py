"""Bugs a workstation user met: flags the TRL route ignored, tracebacks for a missing kubeconfig."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from grpo_trainer import attempt as attempt_module
from grpo_trainer.cli import main
from grpo_trainer.data.user import VERL_COLUMNS
from grpo_trainer.failures import CONFIG_ERROR, DATA_ERROR
from grpo_trainer.supervisor import ATTEMPT_PROCESS_FLAG
from support.trainer_inputs import EXAMPLES


class Writers:
    """Stands in for the status client's constructor: records what credentials each run asked for."""

    def __init__(self) -> None:
        self.kubeconfigs: list[str | None] = []

    def __call__(self, name: str, namespace: str, kubeconfig: str | None = None):
        self.kubeconfigs.append(kubeconfig)
        raise RuntimeError("no cluster in a unit test")


def _trl_job_without_data(tmp_path: Path) -> str:
    """The TRL example with a training file that is not there: it fails fast, after the reporter's setup."""
    manifest = yaml.safe_load((EXAMPLES / "lora-single-gpu.yaml").read_text())
    manifest["spec"]["dataset"]["train"] = [str(tmp_path / "missing.parquet")]
    manifest["spec"]["model"]["source"] = str(tmp_path / "model")
    # Planned for the CPU image, whose stack a workstation's is (no bitsandbytes: adamw_torch).
    manifest["spec"]["image"] = "ghcr.io/grpo-operator/trainer-cpu:0.1.0"
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(manifest))
    return str(spec)


@pytest.fixture
def writers(monkeypatch: pytest.MonkeyPatch) -> Writers:
    recorder = Writers()
    monkeypatch.setattr(attempt_module, "KubeStatusWriter", recorder)
    return recorder


def test_no_report_means_no_status_client_for_a_trl_job(tmp_path, writers):
    spec = _trl_job_without_data(tmp_path)
    run = ["run", "--spec", spec, "--workdir", str(tmp_path / "w"), "--no-report", ATTEMPT_PROCESS_FLAG]
    assert main(run) == DATA_ERROR
    assert writers.kubeconfigs == [], "a workstation run with --no-report must not patch any job"


def test_kubeconfig_is_the_one_a_trl_job_reports_with(tmp_path, writers):
    spec = _trl_job_without_data(tmp_path)
    kubeconfig = str(tmp_path / "team.kubeconfig")
    assert (
        main(
            [
                "run",
                "--spec",
                spec,
                "--workdir",
                str(tmp_path / "w"),
                "--kubeconfig",
                kubeconfig,
                ATTEMPT_PROCESS_FLAG,
            ]
        )
        == DATA_ERROR
    )
    assert writers.kubeconfigs == [kubeconfig]


def test_report_without_a_kubeconfig_is_one_line(tmp_path, capsys, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    spec = str(EXAMPLES / "lora-single-gpu.yaml")
    assert main(["report", "--spec", spec, "--once"]) == CONFIG_ERROR
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the job's status: ")
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_the_trl_example_describes_the_columns_the_trainer_reads():
    """The example's comment once described columns the trainer does not accept."""
    text = (EXAMPLES / "lora-single-gpu.yaml").read_text()
    manifest = yaml.safe_load(text)
    comment = "\n".join(line for line in text.splitlines() if line.strip().startswith("#"))
    dataset = manifest["spec"]["dataset"]
    for column in (dataset.get("promptKey", "prompt"), dataset.get("imageKey", "images"), *VERL_COLUMNS):
        assert f"`{column}`" in comment, f"the example does not name the {column!r} column"
    assert "ground_truth" in comment


def test_report_names_the_kubeconfig_it_was_given(tmp_path, capsys):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    spec = str(EXAMPLES / "lora-single-gpu.yaml")
    assert main(["report", "--spec", spec, "--once", "--kubeconfig", str(kubeconfig)]) == CONFIG_ERROR
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the job's status: ")
    assert err.endswith(f"(with --kubeconfig {kubeconfig})\n")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["plan", "--attempt", "0"], "argument --attempt: expected 1 or more, got 0"),
        (["plan", "--attempt", "two"], "argument --attempt: expected a whole number, got 'two'"),
        (["validate", "--verl-version", "banana"], "argument --verl-version: not a verl version: 'banana'"),
        (
            ["validate", "--config-dir", "/nonexistent/config"],
            "argument --config-dir: no folder /nonexistent/config",
        ),
        (["report", "--interval", "-5"], "argument --interval: expected more than 0 seconds, got -5"),
    ],
)
def test_a_bad_flag_value_is_a_usage_mistake_naming_the_flag(argv, expected, capsys):
    with pytest.raises(SystemExit) as usage:
        main([*argv, "--spec", str(EXAMPLES / "colours-cpu.yaml")])
    assert usage.value.code == 2
    assert expected in capsys.readouterr().err


def test_a_relative_workdir_is_the_same_folder_for_every_path(tmp_path, monkeypatch, capsys, verl_configs):
    from grpo_trainer.engines.verl.configs import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(next(iter(verl_configs.values())).parents[3]))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wd").mkdir()
    assert main(["validate", "--spec", str(EXAMPLES / "geo3k-two-node-nvidia.yaml"), "--workdir", "wd"]) == 0
    assert "must be absolute" not in capsys.readouterr().out


@pytest.mark.parametrize("command", ["plan", "validate", "export"])
def test_a_missing_workdir_is_refused_by_the_commands_that_only_read_it(tmp_path, capsys, command):
    spec = str(EXAMPLES / "colours-cpu.yaml")
    with pytest.raises(SystemExit) as usage:
        main([command, "--spec", spec, "--workdir", str(tmp_path / "typo")])
    assert usage.value.code == 2
    err = capsys.readouterr().err
    assert f"--workdir (or $GRPO_WORKDIR) {tmp_path / 'typo'}: no such folder; {command} reads" in err
    assert not (tmp_path / "typo").exists()
    (tmp_path / "typo").mkdir()
    assert main(["plan", "--spec", spec, "--workdir", str(tmp_path / "typo")]) == 0


def test_run_of_a_manifest_without_a_name_is_a_configuration_error(tmp_path, capsys):
    manifest = yaml.safe_load((EXAMPLES / "lora-single-gpu.yaml").read_text())
    del manifest["metadata"]["name"]
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(manifest))
    assert main(["run", "--spec", str(spec), "--workdir", str(tmp_path), "--no-report"]) == CONFIG_ERROR
    err = capsys.readouterr().err
    assert "metadata.name: a GRPOJob needs a name" in err
    assert '"reason": "ConfigError", "retryable": false' in err
    assert "Traceback" not in err


def test_a_verl_release_pip_cannot_find_says_pips_reason():
    import subprocess

    from grpo_trainer.engines.verl.configs import _why

    failed = subprocess.CalledProcessError(
        1,
        ["pip", "download"],
        stderr="Looking in indexes\nERROR: No matching distribution found for verl==9.9.9\n",
    )
    assert _why(failed) == "pip: No matching distribution found for verl==9.9.9"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (None, "reward.custom: cannot read the reward file"),
        ("def compute_score(:\n", "reward.custom: reward.py line 1: invalid syntax"),
        (
            "def score(*args):\n    return 0.0\n",
            "reward.custom.function: reward.py defines no 'compute_score'",
        ),
    ],
)
def test_validate_with_a_workdir_parses_the_jobs_reward_file(tmp_path, capsys, source, expected):
    reward = tmp_path / "grpo" / "reward" / "reward.py"
    reward.parent.mkdir(parents=True)
    if source is not None:
        reward.write_text(source)
    spec = str(EXAMPLES / "colours-cpu.yaml")
    assert main(["validate", "--spec", spec, "--workdir", str(tmp_path)]) == CONFIG_ERROR
    assert f"problem: {expected}" in capsys.readouterr().out
    reward.write_text("def compute_score(*args, **kwargs):\n    return 0.0\n")
    assert main(["validate", "--spec", spec, "--workdir", str(tmp_path)]) == 0
