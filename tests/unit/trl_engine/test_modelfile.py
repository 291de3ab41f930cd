"""Ollama's Modelfile beside the GGUF files: written from the merged model's folder, read back."""

from __future__ import annotations

from pathlib import Path

from grpo_trainer.engines.trl.modelfile import (
    CHATML_TEMPLATE,
    chat_template_of,
    modelfile_for,
    read_modelfile,
    write_modelfile,
)


def test_a_qwen_model_gets_both_files_its_chat_template_stops_and_the_checks_sampling(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    template = chat_template_of(tiny_model_dir)
    assert template is not None
    assert "<|im_start|>" in template  # the tiny Qwen3-VL's own template
    written = write_modelfile(
        tmp_path,
        modelfile_for("model-q4_k_m.gguf", "mmproj-f16.gguf", template, temperature=0.7, min_p=0.1),
    )
    assert written == tmp_path / "Modelfile"
    assert not list(tmp_path.glob(".*partial"))
    text = written.read_text()
    assert text.splitlines()[1:3] == ["FROM ./model-q4_k_m.gguf", "FROM ./mmproj-f16.gguf"]
    back = read_modelfile(written)
    assert back.sources == ("model-q4_k_m.gguf", "mmproj-f16.gguf")
    assert back.template == CHATML_TEMPLATE
    assert back.stops == ("<|im_end|>", "<|endoftext|>")
    assert back.parameters == {"temperature": 0.7, "min_p": 0.1}


def test_a_model_without_chatml_leaves_the_template_to_the_gguf_file(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text('{"chat_template": "{{ messages }}"}')
    modelfile = modelfile_for("model-f16.gguf", "mmproj-f16.gguf", chat_template_of(tmp_path), min_p=0.0)
    back = read_modelfile(write_modelfile(tmp_path, modelfile))
    assert (back.template, back.stops, back.parameters) == (None, (), {})
    assert chat_template_of(tmp_path / "nothing-here") is None
