"""The merged model as GGUF files for llama.cpp and Ollama: the language model and its vision projector.

llama.cpp loads a Qwen3-VL as two files, the language model and the `mmproj` projector (vision
encoder + merger), e.g. `llama-mtmd-cli -m model-q4_k_m.gguf --mmproj mmproj-f16.gguf`. Both are
made by llama.cpp's own converter from the merged Hugging Face folder; the language model is then
quantized by `llama-quantize` unless the chosen type is one the converter writes itself (f32, f16,
bf16, q8_0). The tools come from `gguf_tools` (llama-cpp-python's vendored llama.cpp).

Everything is written under a temporary name and renamed into place, so a crash leaves no file a
reader could take for a finished one. Ollama's `Modelfile` (modelfile.py) is written last, beside
them, as Unsloth's GGUF export writes one.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from ...failures import ConfigError, TrainerError
from ..base import GgufFiles
from .gguf_tools import Tools, find_tools
from .modelfile import chat_template_of, modelfile_for, write_modelfile

log = logging.getLogger(__name__)

CONVERTER_TYPES = frozenset({"f32", "f16", "bf16", "q8_0"})
"""Types the converter writes directly; every other one goes through llama-quantize."""
GGUF_DIR = "gguf"
"""The GGUF files' folder inside the export folder."""


class GgufError(TrainerError):
    reason = "GgufExportFailed"


def file_names(quantization: str, projector: str) -> tuple[str, str]:
    return f"model-{quantization}.gguf", f"mmproj-{projector}.gguf"


def require_tools(tools: Tools | None = None) -> Tools:
    """The tools, or a configuration error naming the field that asked for them."""
    tools = tools or find_tools()
    missing = tools.missing()
    if missing:
        raise ConfigError(
            "export.gguf: llama.cpp's GGUF tools are not installed here (missing "
            f"{', '.join(missing)}); build them with `python -m grpo_trainer.engines.trl.gguf_tools "
            "install` or use the trainer image"
        )
    return tools


def _run(command: list[str], what: str) -> None:
    """Run one tool, logging its output as it comes; GgufError with the output's tail on failure."""
    started = time.monotonic()
    log.info("GGUF: %s", what)
    tail: deque[str] = deque(maxlen=20)
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            tail.append(line.rstrip())
            log.debug("%s", line.rstrip())
        code = process.wait()
    if code != 0:
        detail = " | ".join(line for line in tail if line.strip())[-1500:]
        raise GgufError(f"export.gguf: {what} failed (exit {code}): {detail}")
    log.info("GGUF: %s took %.1f s", what, time.monotonic() - started)


def convert(tools: Tools, model_dir: Path, out: Path, outtype: str, *, projector: bool) -> None:
    command = [
        sys.executable,
        str(tools.converter),
        str(model_dir),
        "--outfile",
        str(out),
        "--outtype",
        outtype,
    ]
    if projector:
        command.append("--mmproj")
    _run(command, f"converting the {'vision projector' if projector else 'language model'} to {outtype}")


def quantize(tools: Tools, source: Path, out: Path, quantization: str, threads: int) -> None:
    command = [str(tools.quantize), str(source), str(out), quantization.upper(), str(threads)]
    _run(command, f"quantizing the language model to {quantization}")


def export_gguf(
    model_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    quantization: str = "q4_k_m",
    projector: str = "f16",
    tools: Tools | None = None,
    temperature: float | None = None,
    min_p: float | None = None,
) -> GgufFiles:
    """Write the language model and projector GGUF files for the merged model in `model_dir`,
    and Ollama's Modelfile beside them (sampling: `temperature`, `min_p`)."""
    tools = require_tools(tools)
    source = Path(model_dir)
    target = Path(out_dir)
    target.mkdir(parents=True, exist_ok=True)
    model_name, projector_name = file_names(quantization, projector)
    model_file, projector_file = target / model_name, target / projector_name
    partial_model = target / f".{model_name}.partial"
    if quantization in CONVERTER_TYPES:
        convert(tools, source, partial_model, quantization, projector=False)
    else:
        # Quantized from a bf16 conversion: the weights' own precision, nothing rounded twice.
        intermediate = target / ".model-bf16.gguf.partial"
        try:
            convert(tools, source, intermediate, "bf16", projector=False)
            quantize(tools, intermediate, partial_model, quantization, os.cpu_count() or 2)
        finally:
            intermediate.unlink(missing_ok=True)
    partial_projector = target / f".{projector_name}.partial"
    convert(tools, source, partial_projector, projector, projector=True)
    os.replace(partial_model, model_file)
    os.replace(partial_projector, projector_file)
    modelfile = write_modelfile(
        target,
        modelfile_for(
            model_name, projector_name, chat_template_of(source), temperature=temperature, min_p=min_p
        ),
    )
    return GgufFiles(
        model=str(model_file),
        projector=str(projector_file),
        quantization=quantization,
        modelfile=str(modelfile),
    )
