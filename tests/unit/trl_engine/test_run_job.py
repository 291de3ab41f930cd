"""`grpo-train run` with engine: trl, end to end on CPU through the attempt driver: spec -> data ->
training -> export."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest
import trl  # noqa: F401  (the trl-cpu extra; make install brings it, CI never skips)
from grpo_operator.api.v1alpha1 import GRPOJob, JobPaths, ResolvedJob
from grpo_operator.children.resolved import resolve_job
from grpo_operator.config import Settings
from grpo_trainer.attempt import Options, run
from grpo_trainer.engines.base import engine_for
from grpo_trainer.spec import Attempt
from grpo_trainer.testing.colour_task import QUESTION, make_rows
from support.processes import gone, processes_with


def verl_parquet(path: Path, count: int) -> Path:
    """Colour rows in the verl format the data step produces (prompt with <image>, image bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for row in make_rows(count):
        buffer = io.BytesIO()
        row["image"].save(buffer, format="PNG")
        rows.append(
            {
                "prompt": [{"role": "user", "content": f"<image>{QUESTION}"}],
                "images": [{"bytes": buffer.getvalue(), "path": None}],
                "reward_model": {"style": "rule", "ground_truth": row["answer"]},
                "data_source": "colours",
                "extra_info": {"split": "train"},
            }
        )
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def job(tmp_path: Path, model_dir: Path, data: Path) -> ResolvedJob:
    manifest = GRPOJob.model_validate(
        {
            "apiVersion": "grpo.dev/v1alpha1",
            "kind": "GRPOJob",
            "metadata": {"name": "colours", "namespace": "default", "uid": "u"},
            "spec": {
                "model": {"source": str(model_dir)},
                "dataset": {"train": [str(data)], "maxPromptLength": 64, "maxResponseLength": 16},
                "reward": {"builtin": "reasoning-format"},
                "resources": {"accelerator": "nvidia", "devicesPerNode": 1, "nodes": 1},
                "algorithm": {"groupSize": 4, "trainBatchSize": 2, "miniBatchSize": 2, "totalSteps": 2},
                "engine": {
                    "name": "trl",
                    "lora": {"rank": 4, "alpha": 8},
                    "overrides": ["bf16=false", "gradient_checkpointing=false"],
                },
                "checkpoint": {"saveInterval": 1, "keep": 1},
                "evaluation": {"interval": 0},
            },
        }
    )
    paths = JobPaths.in_folder(str(tmp_path / "job"))
    return resolve_job(manifest, Settings()).model_copy(update={"paths": paths})


def test_run_job_trains_reports_checkpoints_and_exports(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRPO_METRICS_FILE", raising=False)
    resolved = job(tmp_path, tiny_model_dir, verl_parquet(tmp_path / "train.parquet", 8))
    attempt = Attempt("colours", "default", 1, Path(resolved.paths.metrics_dir) / "attempt-1.jsonl")

    assert run(resolved, attempt, Options(report=False)) == 0

    lines = [json.loads(line) for line in attempt.metrics_file.read_text().splitlines()]
    steps = [line["step"] for line in lines if "data" in line]
    assert steps == [1, 2]
    assert all("critic/score/mean" in line["data"] for line in lines if "data" in line)
    events = [json.loads(line) for line in attempt.checkpoint_events_file.read_text().splitlines()]
    assert [e["step"] for e in events] == [1, 2]
    assert sorted(p.name for p in Path(resolved.paths.checkpoint_dir).glob("checkpoint-*")) == [
        "checkpoint-2"
    ]
    record = json.loads((Path(resolved.paths.export_dir) / "export.json").read_text())
    assert record["step"] == 2
    assert Path(record["model"], "config.json").is_file()
    assert Path(record["loraAdapter"], "adapter_config.json").is_file()
    # The post-training check (on by default): the exported model's answer to row 0, scored.
    sample = json.loads((Path(resolved.paths.export_dir) / "sample.json").read_text())
    assert sample["source"] == "training row 0 (the job has no validation set)"
    assert (sample["step"], sample["model"]) == (2, record["model"])
    assert sample["prompt"] == QUESTION
    assert set(sample["rewards"]) == {"formatting_reward_func", "correctness_reward_func"}
    assert sample["reward"] == sum(sample["rewards"].values())
    assert sample["generation"]["max_new_tokens"] == 16  # dataset.maxResponseLength
    # A later attempt (training complete, say the status patch was lost) reports the same export.
    again = engine_for("trl").export(resolved)
    assert again is not None
    assert again.skipped
    assert again.sample is not None
    assert (again.sample.response, again.sample.reward) == (sample["response"], sample["reward"])


def test_a_bad_override_is_a_configuration_error(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    resolved = job(tmp_path, tiny_model_dir, verl_parquet(tmp_path / "train.parquet", 4))
    resolved.spec.engine.overrides.append("no_such_option=1")
    attempt = Attempt("colours", "default", 1, tmp_path / "attempt-1.jsonl")
    assert run(resolved, attempt, Options(report=False)) == 3
    assert "GRPO_FAILURE" in capsys.readouterr().err


def test_gguf_without_the_tools_fails_before_training(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from grpo_operator.api.v1alpha1.spec import GgufExport

    monkeypatch.setenv("GRPO_LLAMA_CPP_DIR", str(tmp_path / "no-tools"))
    resolved = job(tmp_path, tiny_model_dir, verl_parquet(tmp_path / "train.parquet", 4))
    export = resolved.spec.export.model_copy(update={"gguf": GgufExport()})
    resolved = resolved.model_copy(update={"spec": resolved.spec.model_copy(update={"export": export})})
    attempt = Attempt("colours", "default", 1, tmp_path / "attempt-1.jsonl")
    assert run(resolved, attempt, Options(report=False)) == 3
    failure = json.loads(capsys.readouterr().err.split("GRPO_FAILURE ", 1)[1].splitlines()[0])
    assert failure["message"].startswith("export.gguf: llama.cpp's GGUF tools are not installed here")
    assert not Path(resolved.paths.checkpoint_dir).exists() or not any(
        Path(resolved.paths.checkpoint_dir).iterdir()
    )


def custom_job(tmp_path: Path, model_dir: Path, source: str, **reward_kwargs: str) -> ResolvedJob:
    """The colour job scored by a user's file (the mounted ConfigMap key)."""
    reward_file = tmp_path / "reward.py"
    reward_file.write_text(source)
    resolved = job(tmp_path, model_dir, verl_parquet(tmp_path / "train.parquet", 4))
    reward = resolved.spec.reward.model_validate(
        {"custom": {"configMap": "colour-reward"}, "kwargs": reward_kwargs}
    )
    spec = resolved.spec.model_copy(update={"reward": reward})
    paths = JobPaths.in_folder(str(tmp_path / "job"), reward_file=str(reward_file))
    return resolved.model_copy(update={"spec": spec, "paths": paths})


EXITING_REWARD = """
import sys

def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    sys.exit(0)
"""


def test_a_reward_that_calls_sys_exit_fails_the_run_naming_the_reward(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit code 0 from the trainer would read as Succeeded with no model: the run must fail."""
    monkeypatch.delenv("GRPO_METRICS_FILE", raising=False)
    resolved = custom_job(tmp_path, tiny_model_dir, EXITING_REWARD)
    attempt = Attempt("colours", "default", 1, tmp_path / "attempt-1.jsonl")
    assert run(resolved, attempt, Options(report=False)) == 3
    failure = json.loads(capsys.readouterr().err.split("GRPO_FAILURE ", 1)[1].splitlines()[0])
    assert failure["reason"] == "RewardFunctionFailed"
    assert f"{tmp_path / 'reward.py'}::compute_score" in failure["message"]
    assert "SystemExit" in failure["message"]
    assert not Path(resolved.paths.export_dir, "export.json").exists()


FORKING_NAN_REWARD = """
import subprocess, sys

def compute_score(data_source, solution_str, ground_truth, extra_info=None, marker="", **kwargs):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker])
    return float("nan") if solution_str == "never" else 1.0
"""


def test_a_custom_reward_trains_in_the_sandbox_and_leaves_no_process_behind(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRPO_METRICS_FILE", raising=False)
    marker = f"grpo-sleeper-{uuid.uuid4().hex}"
    resolved = custom_job(tmp_path, tiny_model_dir, FORKING_NAN_REWARD, marker=marker)
    attempt = Attempt("colours", "default", 1, tmp_path / "attempt-1.jsonl")
    assert run(resolved, attempt, Options(report=False)) == 0
    lines = [json.loads(line) for line in attempt.metrics_file.read_text().splitlines()]
    assert [line["data"]["critic/score/mean"] for line in lines if "data" in line] == [1.0, 1.0]
    assert gone(marker), processes_with(marker)


def test_a_nan_from_a_custom_reward_stops_the_run_before_it_reaches_the_loss(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GRPO_METRICS_FILE", raising=False)
    source = "def compute_score(*args, **kwargs):\n    return float('nan')\n"
    resolved = custom_job(tmp_path, tiny_model_dir, source)
    attempt = Attempt("colours", "default", 1, tmp_path / "attempt-1.jsonl")
    assert run(resolved, attempt, Options(report=False)) == 3
    failure = json.loads(capsys.readouterr().err.split("GRPO_FAILURE ", 1)[1].splitlines()[0])
    assert "reward.py::compute_score: the function returned nan, not a finite number" in failure["message"]


def test_validation_runs_on_the_validation_rows_and_its_score_reaches_the_status(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grpo_trainer.progress import TrainingState, status_patch

    monkeypatch.delenv("GRPO_METRICS_FILE", raising=False)
    resolved = job(tmp_path, tiny_model_dir, verl_parquet(tmp_path / "train.parquet", 4))
    validation = verl_parquet(tmp_path / "val.parquet", 2)
    spec = resolved.spec.model_copy(
        update={
            "dataset": resolved.spec.dataset.model_copy(update={"validation": [str(validation)]}),
            "evaluation": resolved.spec.evaluation.model_copy(update={"interval": 1, "before_train": False}),
            "export": resolved.spec.export.model_copy(update={"hugging_face": False, "lora_adapter": False}),
        }
    )
    resolved = resolved.model_copy(update={"spec": spec})
    attempt = Attempt("colours", "default", 1, tmp_path / "attempt-1.jsonl")
    assert run(resolved, attempt, Options(report=False)) == 0

    lines = [json.loads(line) for line in attempt.metrics_file.read_text().splitlines()]
    validation_lines = [
        line for line in lines if any(k.startswith("val-core/") for k in line.get("data", {}))
    ]
    assert [line["step"] for line in validation_lines] == [1, 2]
    state = TrainingState()
    for line in lines:
        if "data" in line:
            state.add_line(line["step"], line["data"])
    patch = status_patch(state)
    expected = validation_lines[-1]["data"]["val-core/all/reward/mean@4"]
    assert patch["status"]["metrics"]["valScore"] == pytest.approx(expected, abs=1e-3)
    assert state.history[2]["reward"] is not None  # the training line of the same step is kept
