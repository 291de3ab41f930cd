"""The post-training check: one held-out row, one generation by the exported model, scored and recorded."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import trl  # noqa: F401  (the trl-cpu extra; make install brings it, CI never skips)
from grpo_operator.api.v1alpha1.status import Outputs
from grpo_trainer.attempt import _export, outputs_status
from grpo_trainer.engines.base import ExportResult, GgufFiles, SampleSummary
from grpo_trainer.engines.trl.runner import load_policy
from grpo_trainer.engines.trl.sample import SampleRequest, pick_row, read_sample, run_sample
from grpo_trainer.testing.colour_task import COLOURS, colour_reward, make_rows


def test_the_row_is_held_out_when_there_is_a_validation_set() -> None:
    train, validation = make_rows(4, seed=1), make_rows(2, seed=2)
    assert pick_row(validation, train, 1) == (validation[1], "validation row 1")
    row, source = pick_row([], train, 0)
    assert row is train[0]
    assert source == "training row 0 (the job has no validation set)"
    with pytest.raises(ValueError, match=r"export\.sample\.row: 2 is past the validation set's 2 rows"):
        pick_row(validation, train, 2)


def test_the_exported_model_answers_and_the_answer_is_scored(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, processor = load_policy(str(tiny_model_dir), bf16=False)
    row = make_rows(1, seed=5)[0]
    request = SampleRequest(row=row, source="validation row 0", max_new_tokens=3, temperature=0.0)
    model.train()

    summary = run_sample(model, processor, request, [colour_reward], tmp_path, step=7, model_path="/x/model")
    assert model.training  # put back in training mode, as the trainer left it

    record = json.loads((tmp_path / "sample.json").read_text())
    assert record["step"] == 7
    assert record["source"] == "validation row 0"
    assert record["prompt"] == "what colour is the square ?"
    assert record["images"] == 1
    assert record["answer"] == row["answer"] in COLOURS
    # Greedy: the recorded response is what the model decodes for this prompt and image.
    content = [
        {"type": "image", "image": row["image"]},
        {"type": "text", "text": row["prompt"][0]["content"]},
    ]
    inputs = processor.apply_chat_template(
        [[{"role": "user", "content": content}]],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        return_tensors="pt",
    )
    model.eval()
    with torch.no_grad():
        out = model.generate(
            **inputs,
            max_new_tokens=3,
            do_sample=False,
            suppress_tokens=[model.config.image_token_id],
            pad_token_id=processor.tokenizer.pad_token_id,
        )
    expected = processor.tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert record["response"] == expected
    score = colour_reward([row["prompt"]], [[{"content": expected}]], [row["answer"]])[0]
    assert record["rewards"] == {"colour_reward": score}
    assert record["reward"] == score
    assert summary == SampleSummary(
        record["prompt"], record["response"], score, str(tmp_path / "sample.json")
    )
    assert read_sample(tmp_path) == summary
    assert read_sample(tmp_path / "nowhere") is None


def test_status_outputs_name_the_files_and_the_log_holds_the_sample_in_short(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """The status says where the export is (a line each in `kubectl describe`); the sample's text
    stays in its file and, cut, in the attempt's log (`kubectl grpo logs`)."""
    long_response = "<REASONING>" + "x" * 2000
    result = ExportResult(
        12,
        "/grpo/checkpoints/j/export/model",
        "/grpo/checkpoints/j/export/lora-adapter",
        gguf=GgufFiles("/e/gguf/model-q4_k_m.gguf", "/e/gguf/mmproj-f16.gguf", "q4_k_m"),
        sample=SampleSummary("p" * 400, long_response, 1.0, "/e/sample.json"),
    )
    wire = outputs_status(result).to_wire()
    assert wire == {
        "step": 12,
        "model": "/grpo/checkpoints/j/export/model",
        "loraAdapter": "/grpo/checkpoints/j/export/lora-adapter",
        "gguf": {"model": "/e/gguf/model-q4_k_m.gguf", "projector": "/e/gguf/mmproj-f16.gguf"},
        "sampleFile": "/e/sample.json",
    }
    Outputs.model_validate(wire)  # within the status schema's bounds

    class _Engine:
        def export(self, job: object) -> ExportResult:
            return result

    class _Job:
        pod_path = staticmethod(str)
        paths = SimpleNamespace(job_dir=str(tmp_path))

    with caplog.at_level(logging.INFO, logger="grpo_trainer.attempt"):
        assert _export(_Engine(), _Job(), None, 1) == 0  # type: ignore[arg-type]
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("sample"))
    assert line.startswith("sample (reward 1, /e/sample.json): " + "p" * 255 + "… -> <REASONING>xx")
    assert line.endswith("x…")
    assert len(line) < 850
