"""Training rows for TRL's GRPOTrainer, from the verl-format parquet the data step writes.

One dataset format serves both engines: verl's rows hold a chat `prompt` whose text marks images
with `<image>`, the images as `{"bytes", "path"}` structs, and `reward_model.ground_truth`. TRL
wants the prompt as messages, the images in an `images` column (it inserts them into the first
user turn) and the answer in a column the reward functions receive (`answer`).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...failures import DataError

IMAGE_MARKER = "<image>"


def _to_image(value: Any) -> Any:
    from PIL import Image

    if isinstance(value, Image.Image):
        return value.convert("RGB")
    if isinstance(value, dict):
        if value.get("bytes"):
            return Image.open(io.BytesIO(value["bytes"])).convert("RGB")
        if value.get("path"):
            return Image.open(value["path"]).convert("RGB")
    if isinstance(value, bytes | bytearray):
        return Image.open(io.BytesIO(value)).convert("RGB")
    raise ValueError(f"cannot read an image from {type(value).__name__}")


def trl_row(row: dict[str, Any], *, prompt_key: str = "prompt", image_key: str = "images") -> dict[str, Any]:
    """One verl row as a TRL row (prompt messages, images, answer, data_source, extra_info)."""
    messages = [
        {"role": m["role"], "content": str(m["content"]).replace(IMAGE_MARKER, "").strip()}
        for m in row[prompt_key]
    ]
    reward_model = row.get("reward_model") or {}
    extra = row.get("extra_info")
    out: dict[str, Any] = {
        "prompt": messages,
        "answer": str(reward_model.get("ground_truth", row.get("answer", ""))),
        "data_source": str(row.get("data_source", "")),
        # JSON text: per-row dicts of differing keys do not fit one Arrow schema.
        "extra_info": json.dumps(extra, default=str) if extra is not None else None,
    }
    images = row.get(image_key)
    if images:
        out["images"] = [_to_image(image) for image in images]
    return out


def rows_from_parquet(
    paths: Iterable[str | os.PathLike[str]], *, prompt_key: str = "prompt", image_key: str = "images"
) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for path in paths:
        for row in pq.read_table(path).to_pylist():
            rows.append(trl_row(row, prompt_key=prompt_key, image_key=image_key))
    return rows


def prompt_length(processor: Any, row: dict[str, Any]) -> int:
    """Tokens the model sees for a row's prompt, image placeholders expanded."""
    from trl.data_utils import prepare_multimodal_messages

    images = row.get("images") or ([row["image"]] if row.get("image") is not None else None)
    messages = prepare_multimodal_messages(row["prompt"], images=images)
    encoded = processor.apply_chat_template(
        [messages], add_generation_prompt=True, tokenize=True, return_dict=True
    )
    return len(encoded["input_ids"][0])


@dataclass(frozen=True)
class FittedPrompts:
    rows: list[dict[str, Any]]
    dropped: int = 0
    truncated: int = 0


def fit_prompts(
    rows: list[dict[str, Any]],
    processor: Any,
    max_prompt_length: int,
    *,
    filter_overlong: bool = True,
    truncation: str = "error",
) -> FittedPrompts:
    """Prompts within `max_prompt_length`, as `dataset.filterOverlongPrompts` and `truncation` say.

    verl's order: overlong prompts are dropped when filtering is on; what is still too long is cut
    (`left` keeps the end of the text, `right` its start, `middle` both ends) or, with `error`, fails
    the job before training, naming both fields. Only the text is cut, never an image's
    placeholder tokens; a prompt whose images alone are too long fails likewise (DataError).
    """
    if filter_overlong:
        kept, dropped = filter_overlong_prompts(rows, processor, max_prompt_length)
        return FittedPrompts(kept, dropped=dropped)
    lengths = [prompt_length(processor, row) for row in rows]
    overlong = [length for length in lengths if length > max_prompt_length]
    if not overlong:
        return FittedPrompts(rows)
    if truncation == "error":
        raise DataError(
            f"dataset.truncation=error: {len(overlong)} of {len(rows)} prompts are longer than "
            f"dataset.maxPromptLength={max_prompt_length} tokens (the longest {max(overlong)}); set "
            "dataset.filterOverlongPrompts: true to drop them or dataset.truncation: left, right or middle to cut them"
        )
    fitted = [
        row if length <= max_prompt_length else truncate_prompt(row, processor, max_prompt_length, truncation)
        for row, length in zip(rows, lengths, strict=True)
    ]
    return FittedPrompts(fitted, truncated=len(overlong))


def truncate_prompt(row: dict[str, Any], processor: Any, max_prompt_length: int, side: str) -> dict[str, Any]:
    """The row with its last user message's text cut on `side` until the prompt fits.

    Re-measured after each cut: a cut can change how the text's edges tokenize by a token or two.
    """
    tokenizer = getattr(processor, "tokenizer", processor)
    messages = [dict(message) for message in row["prompt"]]
    users = [
        i for i, m in enumerate(messages) if m.get("role") == "user" and isinstance(m.get("content"), str)
    ]
    length = prompt_length(processor, row)
    for _ in range(4):
        over = length - max_prompt_length
        if over <= 0:
            return row
        ids = tokenizer.encode(messages[users[-1]]["content"], add_special_tokens=False) if users else []
        if over >= len(ids):
            raise DataError(
                f"dataset.maxPromptLength={max_prompt_length}: a prompt is {length} tokens and its text is "
                f"only {len(ids)} of them (the rest are images); dataset.truncation={side} cannot cut it "
                "short enough: raise maxPromptLength or set dataset.filterOverlongPrompts: true"
            )
        keep = len(ids) - over
        if side == "left":
            ids = ids[len(ids) - keep :]
        elif side == "right":
            ids = ids[:keep]
        else:
            ids = ids[: keep // 2] + ids[len(ids) - (keep - keep // 2) :]
        messages[users[-1]]["content"] = tokenizer.decode(ids)
        row = {**row, "prompt": [dict(m) for m in messages]}
        length = prompt_length(processor, row)
    if length > max_prompt_length:
        raise DataError(f"dataset.truncation={side}: a prompt could not be cut to {max_prompt_length} tokens")
    return row


def filter_overlong_prompts(
    rows: list[dict[str, Any]], processor: Any, max_prompt_length: int
) -> tuple[list[dict[str, Any]], int]:
    """Drop rows whose prompt is longer than `max_prompt_length` (TRL 1.16 no longer truncates).

    Dropping rather than truncating follows verl's `filter_overlong_prompts`: a cut prompt can lose
    the question or split an image's placeholder run, which breaks the vision input.
    """
    kept = [row for row in rows if prompt_length(processor, row) <= max_prompt_length]
    return kept, len(rows) - len(kept)
