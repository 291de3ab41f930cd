"""The post-training check: one generation on a held-out image and prompt, scored and recorded.

The single-GPU LoRA recipe ends by generating on a test image with the trained model (temperature 0.7, min_p 0.1)
and reading the answer by eye. Here the exported (merged) model does the same on one row of the
validation set, or of the training set when the job has none; the job's reward functions score
the response against the row's answer, and the whole record goes to `sample.json` beside the
exported model, named in `status.outputs.sampleFile` (its text also goes to the attempt's log).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_operator.api.timestamps import rfc3339

from ..base import SampleSummary
from .rewards import RewardFunc

SAMPLE_FILE = "sample.json"


@dataclass(frozen=True)
class SampleRequest:
    """Which row, and how to decode (the single-GPU LoRA recipe's check: 512 new tokens, temperature 0.7, min_p 0.1)."""

    row: dict[str, Any]
    source: str
    """Where the row came from, e.g. "validation row 0"."""
    max_new_tokens: int = 512
    temperature: float = 0.7
    min_p: float = 0.1
    seed: int = 42


def pick_row(
    validation: Sequence[dict[str, Any]], train: Sequence[dict[str, Any]], index: int
) -> tuple[dict[str, Any], str]:
    """The row to check on: held out when there is a validation set, else a training row."""
    rows, split = (validation, "validation") if validation else (train, "training")
    if not rows:
        raise ValueError("export.sample: no rows to take a sample from")
    if index >= len(rows):
        raise ValueError(f"export.sample.row: {index} is past the {split} set's {len(rows)} rows")
    suffix = "" if split == "validation" else " (the job has no validation set)"
    return rows[index], f"{split} row {index}{suffix}"


def prompt_text(prompt: Any) -> str:
    """The prompt's words as a person reads them (the user turns' text, images left out)."""
    if isinstance(prompt, str):
        return prompt
    parts = []
    for message in prompt:
        content = message.get("content", "")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(str(content))
    return "\n".join(p for p in parts if p)


def _images(row: dict[str, Any]) -> list[Any] | None:
    if row.get("images"):
        return list(row["images"])
    if row.get("image") is not None:
        return [row["image"]]
    return None


def generate(model: Any, processor: Any, request: SampleRequest) -> str:
    """Decode one response the way training rollouts see the prompt (TRL's chat layout)."""
    import torch
    from trl.data_utils import prepare_multimodal_messages

    row = request.row
    messages = prepare_multimodal_messages(row["prompt"], images=_images(row))
    inputs = processor.apply_chat_template(
        [messages], add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )
    device = next(model.parameters()).device
    inputs = {k: v.to(device) if hasattr(v, "to") else v for k, v in inputs.items()}
    tokenizer = getattr(processor, "tokenizer", processor)
    sampling = request.temperature > 0
    options: dict[str, Any] = {
        "max_new_tokens": request.max_new_tokens,
        "do_sample": sampling,
        "pad_token_id": tokenizer.pad_token_id,
    }
    if sampling:
        options.update(temperature=request.temperature, min_p=request.min_p or None, top_k=None, top_p=None)
    image_token = getattr(model.config, "image_token_id", None)
    if image_token is not None:
        options["suppress_tokens"] = [image_token]
    was_training = model.training
    model.eval()
    try:
        torch.manual_seed(request.seed)
        with torch.no_grad():
            output = model.generate(**inputs, **options)
    finally:
        model.train(was_training)
    completion = output[0, inputs["input_ids"].shape[1] :]
    return str(tokenizer.decode(completion, skip_special_tokens=True))


def score(
    reward_funcs: Sequence[RewardFunc], row: dict[str, Any], response: str, weights: Sequence[float] | None
) -> tuple[dict[str, float], float | None]:
    """Each reward function's score for the response, and their weighted sum (as training adds them)."""
    if "answer" not in row:
        return {}, None
    extra = {k: [v] for k, v in row.items() if k not in ("prompt", "images", "image", "answer")}
    scores: dict[str, float] = {}
    for func in reward_funcs:
        values = func(
            prompts=[row["prompt"]],
            completions=[[{"role": "assistant", "content": response}]],
            answer=[row["answer"]],
            **extra,
        )
        if values and values[0] is not None:
            scores[getattr(func, "__name__", "reward")] = float(values[0])
    if not scores:
        return scores, None
    weights = list(weights) if weights is not None else [1.0] * len(reward_funcs)
    total = sum(
        w * scores.get(getattr(f, "__name__", "reward"), 0.0)
        for w, f in zip(weights, reward_funcs, strict=True)
    )
    return scores, float(total)


def run_sample(
    model: Any,
    processor: Any,
    request: SampleRequest,
    reward_funcs: Sequence[RewardFunc],
    out_dir: str | os.PathLike[str],
    *,
    step: int,
    model_path: str | None,
    reward_weights: Sequence[float] | None = None,
) -> SampleSummary:
    """Generate, score, and write `sample.json` under `out_dir` (atomically); return the summary."""
    response = generate(model, processor, request)
    scores, total = score(reward_funcs, request.row, response, reward_weights)
    record = {
        "step": step,
        "model": model_path,
        "source": request.source,
        "prompt": prompt_text(request.row["prompt"]),
        "images": len(_images(request.row) or []),
        "answer": request.row.get("answer"),
        "response": response,
        "rewards": scores,
        "reward": total,
        "generation": {
            "max_new_tokens": request.max_new_tokens,
            "temperature": request.temperature,
            "min_p": request.min_p,
            "seed": request.seed,
        },
        "generatedAt": rfc3339(),
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    partial = out / (SAMPLE_FILE + ".partial")
    partial.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(partial, out / SAMPLE_FILE)
    return summary(record, str(out / SAMPLE_FILE))


def summary(record: dict[str, Any], path: str) -> SampleSummary:
    return SampleSummary(
        prompt=str(record["prompt"]), response=str(record["response"]), reward=record.get("reward"), path=path
    )


def read_sample(out_dir: str | os.PathLike[str]) -> SampleSummary | None:
    """The recorded check of a finished export (a later attempt reports it without redoing it)."""
    path = Path(out_dir) / SAMPLE_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return summary(record, str(path))
