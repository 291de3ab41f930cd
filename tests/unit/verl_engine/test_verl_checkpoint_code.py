"""Our checkpoint handling on folders written by verl's own checkpoint manager and model merger.

verl's FSDPCheckpointManager saves the tiny Qwen3-VL wrapped in FSDP1 or FSDP2 (gloo, one rank),
fully trained or with LoRA, as verl's trainer does at `global_step_N/actor`; our discovery,
world-size check, pruning and resume decision then read those folders, verl loads the checkpoint
we pick, and our export runs verl's real merger on it (and, for LoRA, merges the adapter).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from grpo_trainer.engines.base import EngineOptions
from grpo_trainer.engines.verl.engine import VerlEngine
from grpo_trainer.inputs import decide_resume
from support.verl_runtime import example_job

STEPS = (1, 2, 3)


def build(model_dir: Path, strategy: str, lora: bool) -> tuple[Any, Any, Any, Any]:
    """(FSDP-wrapped model, optimizer, scheduler, the unwrapped model) as verl's FSDP engine builds them."""
    from transformers import Qwen3VLForConditionalGeneration

    torch.manual_seed(0)
    model = Qwen3VLForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32)
    if lora:
        from peft import LoraConfig, TaskType, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(
                task_type=TaskType.CAUSAL_LM, r=4, lora_alpha=8, target_modules="all-linear", bias="none"
            ),
        )
        with torch.no_grad():  # a trained adapter: B is zero at initialisation and would merge to nothing
            for name, parameter in model.named_parameters():
                if "lora_B" in name:
                    parameter.normal_(0.0, 0.2)
    plain = model
    if strategy == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel

        model = FullyShardedDataParallel(model, device_id=torch.device("cpu"), use_orig_params=True)
    else:
        from omegaconf import OmegaConf
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy
        from verl.utils.fsdp_utils import apply_fsdp2

        inner = plain.base_model.model if lora else plain
        layers = sorted(inner._no_split_modules)  # a list: verl 0.7 indexes it, transformers 5 gives a set
        apply_fsdp2(
            model,
            {
                "mesh": init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",)),
                "mp_policy": MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=torch.float32),
                "offload_policy": None,
                "reshard_after_forward": True,
            },
            OmegaConf.create({"wrap_policy": {"transformer_layer_cls_to_wrap": layers}}),
        )
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    return model, optimizer, scheduler, plain


def train_step(model: Any, optimizer: Any, scheduler: Any) -> None:
    ids = torch.randint(0, 20, (1, 12))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


def manager(model: Any, optimizer: Any, scheduler: Any, processor: Any) -> Any:
    from omegaconf import OmegaConf
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

    contents = ["model", "optimizer", "extra"]
    config = OmegaConf.create({"save_contents": contents, "load_contents": contents})
    return FSDPCheckpointManager(
        model=model,
        optimizer=optimizer,
        lr_scheduler=scheduler,
        processing_class=processor,
        checkpoint_config=config,
    )


def full_state(model: Any) -> dict[str, torch.Tensor]:
    return {
        key: (value.full_tensor() if hasattr(value, "full_tensor") else value).detach().clone()
        for key, value in model.state_dict().items()
    }


@pytest.fixture(
    scope="module",
    params=[("fsdp", False), ("fsdp", True), ("fsdp2", False), ("fsdp2", True)],
    ids=["fsdp1-full", "fsdp1-lora", "fsdp2-full", "fsdp2-lora"],
)
def saved(
    request: Any, gloo: None, tiny_model: Path, processor: Any, tmp_path_factory: pytest.TempPathFactory
):
    """A job folder holding three checkpoints saved by verl, as its trainer lays them out."""
    strategy, lora = request.param
    root = tmp_path_factory.mktemp(f"{strategy}-{'lora' if lora else 'full'}")
    spec: dict[str, Any] = {"resources": {"devicesPerNode": 1}, "algorithm": {"miniBatchSize": 16}}
    if lora:
        spec["engine"] = {"lora": {"rank": 4, "alpha": 8}}
    job = example_job("geo3k-ascend-910b", root, export={"huggingFace": True, "loraAdapter": True}, **spec)
    model, optimizer, scheduler, _ = build(tiny_model, strategy, lora)
    checkpoints = Path(job.paths.checkpoint_dir)
    for step in STEPS:
        train_step(model, optimizer, scheduler)
        manager(model, optimizer, scheduler, processor).save_checkpoint(
            local_path=str(checkpoints / f"global_step_{step}" / "actor"),
            global_step=step,
            max_ckpt_to_keep=None,
        )
        # What verl's trainer writes after each save (the manager does not).
        (checkpoints / "latest_checkpointed_iteration.txt").write_text(str(step))
    return {"job": job, "strategy": strategy, "lora": lora, "state": full_state(model)}


def test_the_checkpoint_we_name_is_the_one_verl_resumes_from(saved: dict[str, Any]) -> None:
    from grpo_trainer.engines.verl import checkpoints
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    job = saved["job"]
    latest = checkpoints.latest(job.paths.checkpoint_dir)
    assert latest is not None
    assert latest.step == STEPS[-1]
    assert latest.path == find_latest_ckpt_path(job.paths.checkpoint_dir)
    assert checkpoints.saved_steps(job.paths.checkpoint_dir) == list(STEPS)
    assert checkpoints.world_size_of(Path(latest.path)) == 1
    resume = checkpoints.verl_resume(decide_resume(job, 2, VerlEngine(EngineOptions())))
    assert (resume.mode, resume.from_step) == ("auto", STEPS[-1])


def test_a_job_with_another_device_count_is_refused_before_launch(saved: dict[str, Any]) -> None:
    from grpo_trainer.failures import ConfigError

    job = saved["job"]
    resources = job.spec.resources.model_copy(update={"devices_per_node": 4})
    other = job.model_copy(update={"spec": job.spec.model_copy(update={"resources": resources})})
    with pytest.raises(ConfigError, match="written by 1 devices and this job has 4"):
        VerlEngine(EngineOptions()).preflight(other, decide_resume(other, 2, VerlEngine(EngineOptions())))


def test_verl_loads_what_we_resume_from(saved: dict[str, Any], tiny_model: Path, processor: Any) -> None:
    from grpo_trainer.engines.verl import checkpoints

    latest = checkpoints.latest(saved["job"].paths.checkpoint_dir)
    assert latest is not None
    model, optimizer, scheduler, _ = build(tiny_model, saved["strategy"], saved["lora"])
    manager(model, optimizer, scheduler, processor).load_checkpoint(str(Path(latest.path) / "actor"))
    loaded = full_state(model)
    assert loaded.keys() == saved["state"].keys()
    assert all(torch.equal(loaded[key], saved["state"][key]) for key in loaded)
    assert optimizer.state_dict()["state"], "the optimizer state came back too"


def reference_weights(model_dir: Path, saved: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the trained model's weights with LoRA merged by peft, the untrained base weights or None)."""
    from transformers import Qwen3VLForConditionalGeneration

    model = Qwen3VLForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32)
    if not saved["lora"]:
        model.load_state_dict(saved["state"])
        return model.state_dict(), None
    from peft import LoraConfig, TaskType, get_peft_model

    config = LoraConfig(
        task_type=TaskType.CAUSAL_LM, r=4, lora_alpha=8, target_modules="all-linear", bias="none"
    )
    model = get_peft_model(model, config)
    model.load_state_dict(saved["state"])
    base = {
        key.removeprefix("base_model.model.").replace(".base_layer", ""): value
        for key, value in saved["state"].items()
        if "lora_" not in key
    }
    return model.merge_and_unload().state_dict(), base


def test_export_merges_verls_merger_output(saved: dict[str, Any], tiny_model: Path) -> None:
    """verl's merger writes the base weights (and, for LoRA, the adapter); model/ must be the trained model."""
    from grpo_trainer.engines.verl.export import export
    from peft import PeftModel
    from transformers import Qwen3VLForConditionalGeneration

    job = saved["job"]
    result = export(job)
    assert result is not None
    assert result.step == STEPS[-1]
    got = Qwen3VLForConditionalGeneration.from_pretrained(result.model, dtype=torch.float32).state_dict()
    reference, base = reference_weights(tiny_model, saved)
    assert got.keys() == reference.keys()
    changed = 0
    for key, value in got.items():
        expected = reference[key].to(torch.bfloat16).to(torch.float32)  # the merger writes bfloat16
        torch.testing.assert_close(value, expected, rtol=0.02, atol=2e-3, msg=key)
        if base is not None and not torch.allclose(expected, base[key].to(torch.float32), atol=2e-3):
            changed += 1
    if saved["lora"]:
        assert changed >= 10, "model/ must hold the adapter merged in, not only the base weights"
        assert result.lora_adapter is not None
        config = json.loads((Path(result.lora_adapter) / "adapter_config.json").read_text())
        assert (config["r"], config["lora_alpha"]) == (4, 8)
        # The adapter beside it still applies to the untrained base, as peft expects.
        untrained = Qwen3VLForConditionalGeneration.from_pretrained(tiny_model, dtype=torch.float32)
        assert PeftModel.from_pretrained(untrained, result.lora_adapter) is not None
    else:
        assert result.lora_adapter is None
    processor_files = {"tokenizer.json", "chat_template.jinja", "processor_config.json"}
    assert processor_files <= {p.name for p in Path(result.model).iterdir()}
    again = export(job)
    assert again is not None
    assert again.skipped


def test_pruning_keeps_the_newest_and_what_verl_tracks(saved: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    from grpo_trainer.engines.verl import checkpoints

    folder = tmp_path / "checkpoints"
    shutil.copytree(saved["job"].paths.checkpoint_dir, folder)
    (folder / "latest_checkpointed_iteration.txt").write_text("1")  # verl's tracker names an older one
    assert checkpoints.prune(folder, keep=1) == [2]
    assert checkpoints.saved_steps(folder) == [1, 3]
