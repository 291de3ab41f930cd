"""Export: the tracked final checkpoint through verl's merger, placed atomically, done once per step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grpo_trainer.engines.verl.checkpoints import TRACKER
from grpo_trainer.engines.verl.export import ExportError, export, merge_command
from grpo_trainer.failures import ConfigError
from support.trainer_inputs import example_job


class FakeMerger:
    """Writes what verl's merger writes: the model, plus lora_adapter/ when the shards hold LoRA weights."""

    def __init__(self, lora: bool = False, fail: bool = False):
        self.lora = lora
        self.fail = fail
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str]) -> None:
        self.commands.append(command)
        if self.fail:
            raise ExportError("merger failed")
        if "grpo_trainer.engines.verl.lora_merge" in command:  # the adapter folded into the base
            out = Path(command[command.index("--out") + 1])
            out.mkdir()
            (out / "model.safetensors").write_bytes(b"merged")
            return
        target = Path(command[command.index("--target_dir") + 1])
        (target / "model.safetensors").write_bytes(b"w")
        if self.lora:
            (target / "lora_adapter").mkdir()
            (target / "lora_adapter" / "adapter_config.json").write_text("{}")


def checkpoint(job, step: int) -> Path:
    actor = Path(job.paths.checkpoint_dir) / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True)
    Path(job.paths.checkpoint_dir, TRACKER).write_text(str(step))
    return actor


def test_merge_command_is_verls():
    command = merge_command(Path("/c/global_step_60/actor"), Path("/out"))
    assert command[1:] == [
        "-m",
        "verl.model_merger",
        "merge",
        "--backend",
        "fsdp",
        "--local_dir",
        "/c/global_step_60/actor",
        "--target_dir",
        "/out",
    ]


def test_full_model_export_once_per_step(tmp_path):
    job = example_job("geo3k-ascend-910b", tmp_path)
    actor = checkpoint(job, 60)
    merger = FakeMerger()
    result = export(job, run=merger)
    out = Path(job.paths.export_dir)
    assert result.model == str(out / "model")
    assert result.lora_adapter is None
    assert (out / "model" / "model.safetensors").is_file()
    assert merger.commands[0][merger.commands[0].index("--local_dir") + 1] == str(actor)
    assert json.loads((out / "export.json").read_text())["step"] == 60
    assert {p.name for p in out.iterdir()} == {"model", "export.json"}
    again = export(job, run=merger)
    assert again.skipped
    assert len(merger.commands) == 1


def test_lora_model_is_merged_and_the_adapter_kept_beside_it(tmp_path):
    job = example_job("geo3k-two-node-nvidia", tmp_path, engine={"lora": {"rank": 16, "alpha": 32}})
    checkpoint(job, 30)
    merger = FakeMerger(lora=True)
    result = export(job, run=merger)
    assert result.lora_adapter == f"{job.paths.export_dir}/lora-adapter"
    assert result.model == f"{job.paths.export_dir}/model"
    # verl's merger first, then ours on its output: model/ holds the merged weights.
    assert merger.commands[0][1:3] == ["-m", "verl.model_merger"]
    merge = merger.commands[1]
    assert merge[1:3] == ["-m", "grpo_trainer.engines.verl.lora_merge"]
    assert merge[merge.index("--adapter") + 1] == merge[merge.index("--model") + 1] + "/lora_adapter"
    assert Path(result.model, "model.safetensors").read_bytes() == b"merged"
    # An adapter_config.json without alpha (verl 0.7's merger writes 0) gets the job's values.
    config = json.loads(Path(result.lora_adapter, "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"]) == (16, 32)


def test_adapter_only(tmp_path):
    job = example_job(
        "geo3k-two-node-nvidia", tmp_path, engine={"lora": {"rank": 16}}, export={"huggingFace": False}
    )
    checkpoint(job, 30)
    merger = FakeMerger(lora=True)
    result = export(job, run=merger)
    assert result.model is None
    assert len(merger.commands) == 1  # nothing to merge when only the adapter is asked for
    assert Path(result.lora_adapter, "adapter_config.json").is_file()
    assert not Path(job.paths.export_dir, "model").exists()


def test_nothing_asked_nothing_done(tmp_path):
    job = example_job("geo3k-ascend-910b", tmp_path, export={"huggingFace": False})
    assert export(job, run=FakeMerger()) is None


def test_no_checkpoint_to_export(tmp_path):
    job = example_job("geo3k-ascend-910b", tmp_path)
    with pytest.raises(ConfigError, match="no checkpoint"):
        export(job, run=FakeMerger())


def test_a_failed_merge_leaves_no_partial_export(tmp_path):
    job = example_job("geo3k-ascend-910b", tmp_path)
    checkpoint(job, 60)
    with pytest.raises(ExportError):
        export(job, run=FakeMerger(fail=True))
    assert list(Path(job.paths.export_dir).iterdir()) == []
    assert ExportError("x").failure().retryable
