"""A part's inputs: the offline model, geo3k-layout data with images, and its GRPOJob."""

from __future__ import annotations

import importlib.util
import io
import json
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from .machine import log, write_json

WORDS = ("<think>", "</think>", "x", "find", "5", "7", "\\boxed{5}", "\\boxed{7}")


def _attention() -> dict[str, Any]:
    """verl's actor asks transformers for FlashAttention 2, which the trainer image compiles
    (Dockerfile.cuda) but PyPI has no wheel of for this torch: without the package the actor and
    reference use PyTorch's SDPA, and padding stays in (verl's remove-padding path goes through
    flash-attn's varlen kernel). Recorded in each summary, since it changes the step time."""
    if importlib.util.find_spec("flash_attn") is not None:
        return {"implementation": "flash_attention_2", "overrides": [], "remove_padding": True}
    return {
        "implementation": "sdpa",
        "overrides": ["+actor_rollout_ref.model.override_config.attn_implementation=sdpa"],
        "remove_padding": False,
    }


ATTENTION = _attention()


def build_model(folder: Path, shape_name: str, smoke: bool) -> Path:
    """The offline Qwen3-VL: tiny (head_dim 64 for vLLM's kernels) or Qwen3-VL-4B's shapes."""
    import torch
    from grpo_trainer.testing import tiny_vlm

    if (folder / "config.json").is_file():
        return folder
    if shape_name == "tiny" or smoke:
        # vLLM's attention kernels reject heads under 64 wide (text and vision tower alike).
        shape = replace(
            tiny_vlm.TINY,
            head_dim=64,
            mrope_section=(16, 8, 8),
            vision_hidden=128,
            vision_heads=2,
            vision_intermediate=256,
        )
    else:
        shape = tiny_vlm.QWEN3_VL_4B
    started = time.monotonic()
    tokenizer = tiny_vlm.build_tokenizer(WORDS, vocab_size=shape.vocab_size, newline=True)
    processor = tiny_vlm.build_processor(tokenizer, patch_size=shape.patch_size, max_image_side=448)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = tiny_vlm.build_model(shape, tokenizer, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    params = sum(p.numel() for p in model.parameters())
    del model
    log(
        f"model: {shape_name}, {params / 1e9:.3f}B parameters, built on {device} in {time.monotonic() - started:.0f} s"
    )
    return folder


def png(rng: random.Random, side: int) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (side, side), "white")
    draw = ImageDraw.Draw(image)
    for _ in range(3):
        points = [(rng.randrange(side), rng.randrange(side)) for _ in range(3)]
        draw.polygon(points, outline="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def build_geo3k(folder: Path, train: int, test: int, side: int, *, varied: bool = False) -> Path:
    """geo3k's hub layout (images, problem, answer), read by the trainer's own geo3k preset.

    `varied` gives each problem a different length (up to 64 extra words), so prompts differ in
    length the way real data's do; otherwise every prompt has one length, which with a random
    model writing every response to the limit makes every sequence of a batch one length.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    # The same arguments give the same bytes (one seed): a later start on the same machine (a
    # retry, the chain's) keeps them instead of drawing 2,101 images again, ~40 s of every start.
    built = {"train": train, "test": test, "side": side, "varied": varied}
    stamp = folder / "built.json"
    splits = [folder / "data" / f"{split}-00000-of-00001.parquet" for split in ("train", "test")]
    if stamp.is_file() and json.loads(stamp.read_text()) == built and all(p.is_file() for p in splits):
        return folder
    stamp.unlink(missing_ok=True)
    rng = random.Random(0)
    schema = pa.schema(
        [
            ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
            ("problem", pa.string()),
            ("answer", pa.string()),
        ]
    )
    for split, rows in (("train", train), ("test", test)):
        records = [
            {
                "images": [{"bytes": png(rng, side), "path": f"{split}_{i}.png"}],
                "problem": "<image>Find x. Round to the nearest tenth."
                + (" Look at the figure." * rng.randrange(16) if varied else ""),
                "answer": rng.choice(["5", "7"]),
            }
            for i in range(rows)
        ]
        path = folder / "data" / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(records, schema=schema), path)
    write_json(stamp, built)
    return folder


EXAMPLE = "geo3k-two-node-nvidia"
"""The recipe these jobs are made from: the geo3k preset, its builtin reward, verl on NVIDIA GPUs."""
LEFT_OUT = (
    "spec.reward",
    "spec.algorithm.logProbMicroBatchSizePerDevice",
    "spec.algorithm.kl",
    "spec.algorithm.epochs",
    "spec.resources.product",
    "spec.resources.sharedMemory",
    "spec.checkpoint.size",
    "spec.checkpoint.accessMode",
    "spec.runPolicy",
)
"""What the example sets for its two 8-GPU nodes that the benchmark's job leaves at the defaults
(the reward and the KL settings come back from the sizes)."""


def spec(name: str, model: Path, data: Path, gpus: int, *, steps: int, **sizes: Any) -> dict[str, Any]:
    """The GRPOJob: the geo3k example on `gpus` GPUs of one node, at the benchmark's sizes."""
    from benchmarks.examples import example_job, with_changes  # YAML: `preflight` may install it

    return with_changes(
        example_job(EXAMPLE, **dict.fromkeys(LEFT_OUT)),
        {
            "metadata.name": name,
            "metadata.namespace": "bench",
            "spec.model.source": str(model),
            "spec.dataset.source": str(data),
            "spec.dataset.maxPromptLength": sizes["prompt"],
            "spec.dataset.maxResponseLength": sizes["response"],
            "spec.reward": sizes.get("reward", {"builtin": "geo3k"}),
            "spec.algorithm": {
                "groupSize": sizes["group"],
                "trainBatchSize": sizes["batch"],
                "miniBatchSize": sizes["mini"],
                "microBatchSizePerDevice": sizes["micro"],
                **sizes.get("algorithm", {}),
                "learningRate": 1.0e-6,
                "totalSteps": steps,
            },
            "spec.rollout": {
                "tensorParallelSize": 1,
                "gpuMemoryUtilization": sizes["gpu_memory"],
                "enforceEager": sizes["eager"],
                **sizes.get("rollout", {}),
            },
            "spec.engine": {
                "strategy": "fsdp2",
                "overrides": [*sizes.get("overrides", []), *ATTENTION["overrides"]],
                "useRemovePadding": ATTENTION["remove_padding"],
                **sizes.get("engine", {}),
            },
            "spec.resources.devicesPerNode": gpus,
            "spec.resources.nodes": 1,
            "spec.checkpoint": {"saveInterval": sizes["save"], "keep": 2},
            "spec.evaluation.interval": 0,
            "spec.export.huggingFace": sizes["export"],
        },
    )


def write_spec(path: Path, manifest: dict[str, Any]) -> Path:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


BATCH_REWARD = """
import json, os

def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, log=None, **kwargs):
    with open(log, "a") as out:
        out.write(json.dumps({"size": len(solution_strs), "pid": os.getpid()}) + "\\n")
    return [float("\\\\boxed{" + str(t) + "}" in s) for s, t in zip(solution_strs, ground_truths)]
"""


def custom_batch_reward(work: Path) -> dict[str, Any]:
    """A user's batch reward in the job's reward mount: it logs the size of every call it gets."""
    # The operator mounts the file at /grpo/reward/reward.py; --workdir DIR puts /grpo at DIR/grpo.
    mount = work / "grpo" / "reward"
    mount.mkdir(parents=True, exist_ok=True)
    (mount / "reward.py").write_text(BATCH_REWARD)
    calls = work / "reward-calls.jsonl"
    return {
        "custom": {"configMap": "bench-reward", "function": "compute_score_batch", "batch": True},
        "kwargs": {"log": str(calls)},
    }


def reward_calls(work: Path) -> list[dict[str, Any]]:
    file = work / "reward-calls.jsonl"
    return [json.loads(line) for line in file.read_text().splitlines()] if file.is_file() else []
