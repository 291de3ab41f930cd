"""GGUF export round trip on a tiny Qwen3-VL: llama.cpp's converter and llama-quantize write it, the
`gguf` package reads it back, and llama.cpp's own runtime loads both files and answers a question.

The tools are built by `make install` (`python -m grpo_trainer.engines.trl.gguf_tools install`);
without them these tests fail, they do not skip. The model has Qwen's real tokenizer (rebuilt from
the vocabulary file llama.cpp ships, `testing/qwen_tokenizer.py`) so the converter recognises it as
it recognises Qwen3-VL-4B's, and 256-wide layers so the K-quants apply as they do at full size.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trl  # noqa: F401  (the trl-cpu extra; make install brings it, CI never skips)
from gguf import GGMLQuantizationType, GGUFReader, LlamaFileType
from grpo_trainer.engines.base import GgufFiles
from grpo_trainer.engines.trl.gguf import export_gguf
from grpo_trainer.engines.trl.gguf_tools import Tools, find_tools
from grpo_trainer.engines.trl.modelfile import read_modelfile
from grpo_trainer.testing.colour_task import QUESTION, render_square
from grpo_trainer.testing.qwen_tokenizer import (
    QWEN_VOCAB_SIZE,
    VOCAB_FILE,
    build_qwen_vlm,
    cached_qwen_tokenizer,
    vocab_test_cases,
)
from grpo_trainer.testing.tiny_vlm import TINY

SHAPE = replace(
    TINY,
    text_hidden=256,
    text_intermediate=512,
    text_heads=4,
    text_kv_heads=2,
    head_dim=64,
    mrope_section=(16, 8, 8),
    vision_hidden=64,
    vision_intermediate=128,
    embedding_std=None,
)
LAYER_TENSORS = (
    "attn_norm",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "attn_q_norm",
    "attn_k_norm",
    "ffn_norm",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
)


@pytest.fixture(scope="module")
def tools() -> Tools:
    found = find_tools()
    missing = found.missing()
    assert not missing, (
        f"llama.cpp's GGUF tools are not built ({', '.join(missing)}): `make install` builds them "
        "(python -m grpo_trainer.engines.trl.gguf_tools install)"
    )
    return found


@pytest.fixture(scope="module")
def tokenizer(tools: Tools) -> Any:
    return cached_qwen_tokenizer(tools.source / VOCAB_FILE, tools.root / "qwen2-tokenizer")


@pytest.fixture(scope="module")
def model_dir(tokenizer: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_qwen_vlm(tmp_path_factory.mktemp("qwen-vl") / "model", tokenizer, SHAPE)


@pytest.fixture(scope="module")
def exported(model_dir: Path, tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> GgufFiles:
    out = tmp_path_factory.mktemp("gguf")
    started = time.monotonic()
    files = export_gguf(model_dir, out, quantization="q4_k_m", projector="f16", tools=tools)
    print(f"GGUF export of the tiny Qwen3-VL: {time.monotonic() - started:.1f} s")
    return files


def fields(reader: GGUFReader) -> dict[str, Any]:
    return {name: field.contents() for name, field in reader.fields.items() if not name.startswith("GGUF.")}


def test_the_rebuilt_tokenizer_tokenizes_as_qwens(tools: Tools, tokenizer: Any) -> None:
    cases = vocab_test_cases(tools.source / VOCAB_FILE)
    assert len(cases) > 40
    for text, ids in cases:
        assert tokenizer.encode(text, add_special_tokens=False) == ids, text


def test_the_language_model_file_reads_back(exported: GgufFiles, model_dir: Path) -> None:
    assert Path(exported.model).name == "model-q4_k_m.gguf"
    assert exported.quantization == "q4_k_m"
    reader = GGUFReader(exported.model)
    meta = fields(reader)
    assert meta["general.architecture"] == "qwen3vl"
    assert meta["general.file_type"] == LlamaFileType.MOSTLY_Q4_K_M
    assert (meta["qwen3vl.block_count"], meta["qwen3vl.embedding_length"]) == (2, 256)
    assert meta["qwen3vl.feed_forward_length"] == 512
    assert (meta["qwen3vl.attention.head_count"], meta["qwen3vl.attention.head_count_kv"]) == (4, 2)
    assert meta["qwen3vl.n_deepstack_layers"] == 1
    assert (meta["tokenizer.ggml.model"], meta["tokenizer.ggml.pre"]) == ("gpt2", "qwen2")
    assert len(meta["tokenizer.ggml.tokens"]) == QWEN_VOCAB_SIZE
    assert meta["tokenizer.ggml.eos_token_id"] == 151645
    tensors = {t.name: t for t in reader.tensors}
    expected = {"token_embd.weight", "output_norm.weight"} | {
        f"blk.{layer}.{name}.weight" for layer in range(2) for name in LAYER_TENSORS
    }
    assert set(tensors) == expected  # embeddings are tied: no output.weight, and no vision tensor
    # GGUF lists dimensions innermost first: (inputs, outputs).
    shapes = {
        "token_embd.weight": [256, QWEN_VOCAB_SIZE],
        "blk.0.attn_q.weight": [256, 4 * 64],
        "blk.0.attn_k.weight": [256, 2 * 64],
        "blk.1.ffn_down.weight": [512, 256],
        "blk.1.attn_q_norm.weight": [64],
    }
    for name, shape in shapes.items():
        assert [int(d) for d in tensors[name].shape] == shape, name
    kinds = {t.tensor_type for name, t in tensors.items() if name.startswith("blk.") and "norm" not in name}
    assert GGMLQuantizationType.Q4_K in kinds
    assert kinds <= {GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q6_K, GGMLQuantizationType.Q5_0}
    assert tensors["blk.0.attn_norm.weight"].tensor_type == GGMLQuantizationType.F32


def test_the_projector_file_reads_back(exported: GgufFiles) -> None:
    assert Path(exported.projector).name == "mmproj-f16.gguf"
    reader = GGUFReader(exported.projector)
    meta = fields(reader)
    assert meta["general.architecture"] == "clip"
    assert meta["clip.projector_type"] == "qwen3vl_merger"
    assert meta["clip.has_vision_encoder"] is True
    assert (meta["clip.vision.block_count"], meta["clip.vision.embedding_length"]) == (2, 64)
    assert meta["clip.vision.projection_dim"] == 256
    assert list(meta["clip.vision.is_deepstack_layers"]) == [True, False]
    tensors = {t.name: t for t in reader.tensors}
    # The patch embedding's two temporal halves, the merger (mm.*), the deepstack merger of block 0.
    wanted = {
        "v.patch_embd.weight",
        "v.patch_embd.weight.1",
        "mm.0.weight",
        "mm.2.weight",
        "v.deepstack.0.fc1.weight",
    }
    assert wanted <= set(tensors)
    assert {f"v.blk.{layer}.attn_qkv.weight" for layer in range(2)} <= set(tensors)
    assert [int(d) for d in tensors["v.blk.1.attn_qkv.weight"].shape] == [64, 3 * 64]
    assert not any(name.startswith(("blk.", "token_embd")) for name in tensors)
    assert [int(d) for d in tensors["mm.2.weight"].shape] == [256, 256]
    assert tensors["mm.0.weight"].tensor_type == GGMLQuantizationType.F16


def test_llama_cpp_loads_both_files_and_answers(exported: GgufFiles, tools: Tools, tmp_path: Path) -> None:
    import random

    image = tmp_path / "square.png"
    render_square("red", random.Random(0), side=64).save(image)
    result = subprocess.run(
        [
            str(tools.cli),
            "-m",
            exported.model,
            "--mmproj",
            exported.projector,
            "--image",
            str(image),
            "-p",
            QUESTION,
            "-n",
            "8",
            "--temp",
            "0",
            "-t",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert "batch encoding done" in log, log[-3000:]  # the image went through the projector file
    # The answer (a random model's words) is what the program prints on stdout.
    assert result.stdout.strip(), log[-3000:]


def test_a_trl_job_ends_with_gguf_files_and_a_sample(
    model_dir: Path, tools: Tools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`grpo-train run`'s TRL path with spec.export.gguf: training, the merged model, its GGUF files
    (q8_0: the converter's own quantization, no llama-quantize), the sample, and the outputs a
    later attempt reports."""
    from grpo_operator.api.v1alpha1.spec import GgufExport
    from grpo_trainer.attempt import Options, outputs_status, run
    from grpo_trainer.engines.base import engine_for
    from grpo_trainer.spec import Attempt

    from .test_run_job import job, verl_parquet

    monkeypatch.delenv("GRPO_METRICS_FILE", raising=False)
    monkeypatch.setenv("GRPO_LLAMA_CPP_DIR", str(tools.root))
    resolved = job(tmp_path, model_dir, verl_parquet(tmp_path / "train.parquet", 4))
    export = resolved.spec.export.model_copy(update={"gguf": GgufExport(quantization="q8_0")})
    resolved = resolved.model_copy(update={"spec": resolved.spec.model_copy(update={"export": export})})
    attempt = Attempt("colours", "default", 1, Path(resolved.paths.metrics_dir) / "attempt-1.jsonl")

    assert run(resolved, attempt, Options(report=False)) == 0

    gguf_dir = Path(resolved.paths.export_dir) / "gguf"
    assert sorted(p.name for p in gguf_dir.iterdir()) == ["Modelfile", "mmproj-f16.gguf", "model-q8_0.gguf"]
    # Ollama's import of the same two files, with the recipe's check sampling (spec.export.sample).
    modelfile = read_modelfile(gguf_dir / "Modelfile")
    assert modelfile.sources == ("model-q8_0.gguf", "mmproj-f16.gguf")
    assert modelfile.parameters == {"temperature": 0.7, "min_p": 0.1}
    assert "<|im_end|>" in modelfile.stops
    meta = fields(GGUFReader(gguf_dir / "model-q8_0.gguf"))
    assert (meta["general.architecture"], meta["general.file_type"]) == ("qwen3vl", LlamaFileType.MOSTLY_Q8_0)
    assert (Path(resolved.paths.export_dir) / "sample.json").is_file()
    result = engine_for("trl").export(resolved)
    assert result is not None
    assert result.skipped
    outputs = outputs_status(result).to_wire()
    assert outputs["gguf"] == {
        "model": str(gguf_dir / "model-q8_0.gguf"),
        "projector": str(gguf_dir / "mmproj-f16.gguf"),
    }
    assert outputs["sampleFile"] == str(Path(resolved.paths.export_dir) / "sample.json")
