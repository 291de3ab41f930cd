"""verl-format parquet rows become TRL rows; prompts over max_prompt_length are dropped."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from grpo_trainer.engines.trl.data import rows_from_parquet, trl_row
from PIL import Image


def png(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), colour).save(buffer, format="PNG")
    return buffer.getvalue()


VERL_ROW = {
    "prompt": [{"role": "user", "content": "<image>What colour is the square?"}],
    "images": [{"bytes": png((200, 0, 0)), "path": None}],
    "reward_model": {"style": "rule", "ground_truth": "red"},
    "data_source": "colours",
    "extra_info": {"index": 3, "split": "train"},
}


def test_verl_row_becomes_a_trl_row() -> None:
    row = trl_row(VERL_ROW)
    assert row["prompt"] == [{"role": "user", "content": "What colour is the square?"}]
    assert row["answer"] == "red"
    assert row["data_source"] == "colours"
    assert json.loads(row["extra_info"]) == {"index": 3, "split": "train"}
    assert row["images"][0].size == (32, 32)
    assert row["images"][0].mode == "RGB"


def test_rows_from_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist([VERL_ROW, {**VERL_ROW, "images": None}]), path)
    rows = rows_from_parquet([path])
    assert len(rows) == 2
    assert "images" in rows[0]
    assert "images" not in rows[1]


def test_overlong_prompts_are_dropped(tiny_model_dir: Path) -> None:
    from grpo_trainer.engines.trl.data import filter_overlong_prompts, prompt_length
    from grpo_trainer.engines.trl.runner import load_policy

    _, processor = load_policy(str(tiny_model_dir), bf16=False)
    short = trl_row(VERL_ROW)
    long = {**short, "prompt": [{"role": "user", "content": "the " * 200}]}
    limit = prompt_length(processor, short)
    kept, dropped = filter_overlong_prompts([short, long], processor, limit)
    assert kept == [short]
    assert dropped == 1


@pytest.mark.parametrize("side", ["left", "right", "middle"])
def test_overlong_prompts_are_cut_on_the_side_truncation_names(tiny_model_dir: Path, side: str) -> None:
    from grpo_trainer.engines.trl.data import fit_prompts, prompt_length
    from grpo_trainer.engines.trl.runner import load_policy

    _, processor = load_policy(str(tiny_model_dir), bf16=False)
    short = trl_row(VERL_ROW)
    text = "red " * 30 + "green " * 30 + "blue " * 30
    long = {**short, "prompt": [{"role": "user", "content": text}]}
    limit = prompt_length(processor, short) + 20
    fitted = fit_prompts([short, long], processor, limit, filter_overlong=False, truncation=side)
    assert (fitted.dropped, fitted.truncated) == (0, 1)
    assert fitted.rows[0] == short
    cut = fitted.rows[1]
    assert prompt_length(processor, cut) <= limit
    assert "images" in cut  # the image is never what is cut
    words = cut["prompt"][0]["content"].split()
    assert {"left": "blue", "right": "red", "middle": "red"}[side] == words[0]
    assert {"left": "blue", "right": "red", "middle": "blue"}[side] == words[-1]


def test_overlong_prompts_with_truncation_error_fail_naming_both_fields(tiny_model_dir: Path) -> None:
    from grpo_trainer.engines.trl.data import fit_prompts, prompt_length
    from grpo_trainer.engines.trl.runner import load_policy
    from grpo_trainer.failures import DataError

    _, processor = load_policy(str(tiny_model_dir), bf16=False)
    short = trl_row(VERL_ROW)
    long = {**short, "prompt": [{"role": "user", "content": "the " * 200}]}
    with pytest.raises(DataError, match=r"dataset.truncation=error: 1 of 2 prompts .*filterOverlongPrompts"):
        fit_prompts([short, long], processor, prompt_length(processor, short), filter_overlong=False)
    # The image alone is over the limit: no cut of the text makes it fit.
    with pytest.raises(DataError, match="the rest are images"):
        fit_prompts([short], processor, 8, filter_overlong=False, truncation="left")
    # Filtering (the default) drops instead, whatever truncation says.
    kept = fit_prompts([short, long], processor, prompt_length(processor, short), truncation="left")
    assert (kept.rows, kept.dropped) == ([short], 1)
