"""The operator-trainer contract: paths outside a pod, the failure line, exit codes in Ray's words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grpo_operator.api import contract
from grpo_operator.api.contract import Env, Failure
from grpo_trainer.spec import Attempt, load_job, localise_environment

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.parametrize(
    ("path", "moved"),
    [
        ("/grpo/spec/job.json", "/w/grpo/spec/job.json"),
        ("/grpo", "/w/grpo"),
        ("/grpo-other/x", "/grpo-other/x"),
        ("/models/qwen", "/models/qwen"),
        ("/dev/shm", "/dev/shm"),
    ],
)
def test_only_pod_paths_under_grpo_move_under_the_workdir(path: str, moved: str) -> None:
    assert contract.under_workdir(path, "/w/") == moved
    assert contract.under_workdir(path, None) == path


def test_a_workdir_run_reads_the_spec_and_every_job_path_under_it(tmp_path: Path) -> None:
    spec = tmp_path / "grpo" / "spec" / "job.json"
    spec.parent.mkdir(parents=True)
    example = load_job(EXAMPLES / "lora-single-gpu.yaml")
    spec.write_text(example.model_dump_json(by_alias=True))
    job = load_job(contract.SPEC_FILE, str(tmp_path))
    assert job.paths.checkpoint_dir == f"{tmp_path}{example.paths.checkpoint_dir}"
    assert all(value.startswith(str(tmp_path)) for value in job.paths.model_dump().values() if value)
    assert job.local_path("/grpo/sources/models/qwen") == f"{tmp_path}/grpo/sources/models/qwen"
    assert "workdir" not in json.loads(job.model_dump_json(by_alias=True)), "never written to a ConfigMap"
    attempt = Attempt.from_env(
        job, {Env.ATTEMPT: "2", Env.METRICS_FILE: "/grpo/checkpoints/j/metrics/a.jsonl"}
    )
    assert attempt.metrics_file == Path(f"{tmp_path}/grpo/checkpoints/j/metrics/a.jsonl")


def test_checkpoint_events_sit_beside_the_metrics_file() -> None:
    assert contract.checkpoint_events_file("/m/attempt-2.jsonl") == "/m/attempt-2.checkpoints.jsonl"


def test_the_failure_line_reads_back_from_a_ray_message() -> None:
    failure = Failure(contract.CONFIG_ERROR, "ConfigError", "x" * 2000)
    message = f"Job entrypoint command failed with exit code 3, last available logs: ...\n{failure.line()}\n"
    told = contract.failure_in(message)
    assert told == {"reason": "ConfigError", "retryable": False, "exitCode": 3, "message": "x" * 512}
    assert contract.exit_code_in(message) == 3
    assert not contract.is_retryable(message)


@pytest.mark.parametrize(
    ("code", "phrase", "retried"),
    [
        (contract.UNKNOWN, "crashed", True),
        (contract.CONFIG_ERROR, "configuration error", False),
        (contract.DATA_ERROR, "data error", False),
        (contract.RETRYABLE, "transient failure (OOM, collective timeout or lost node)", True),
        (137, "killed by signal 9 (SIGKILL: the kernel's out-of-memory killer, or a forced stop)", True),
        (-9, "killed by signal 9 (SIGKILL: the kernel's out-of-memory killer, or a forced stop)", True),
        (143, "killed by signal 15 (SIGTERM: stopped from outside)", True),
        (134, "killed by signal 6", True),
    ],
)
def test_exit_codes_in_rays_words(code: int, phrase: str, retried: bool) -> None:
    message = f"Job entrypoint command failed with exit code {code}"
    assert contract.exit_code_in(message) == code
    assert contract.describe_exit(code) == phrase
    assert contract.is_retryable(message) is retried


def test_outside_a_pod_the_pod_path_variables_point_under_the_workdir() -> None:
    environ = {
        Env.METRICS_FILE: "/grpo/checkpoints/j/metrics/attempt-1.jsonl",
        "HF_HOME": "/grpo/checkpoints/j/cache/huggingface",
        "PATH": "/usr/bin",
    }
    localise_environment(environ, "/w")
    assert environ == {
        Env.METRICS_FILE: "/w/grpo/checkpoints/j/metrics/attempt-1.jsonl",
        "HF_HOME": "/w/grpo/checkpoints/j/cache/huggingface",
        "PATH": "/usr/bin",
    }


@pytest.mark.parametrize(
    ("path", "on_the_pod"),
    [
        ("/w/grpo/checkpoints/j/export/model", "/grpo/checkpoints/j/export/model"),
        ("/w/grpo", "/grpo"),
        ("/w/grpoother/x", "/w/grpoother/x"),
        ("/models/qwen", "/models/qwen"),
    ],
)
def test_paths_reported_from_outside_a_pod_are_named_as_on_the_pod(path: str, on_the_pod: str) -> None:
    assert contract.pod_path(path, "/w") == on_the_pod
    assert contract.pod_path(contract.under_workdir(on_the_pod, "/w"), "/w") == on_the_pod
