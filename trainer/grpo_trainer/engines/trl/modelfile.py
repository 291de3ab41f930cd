"""An Ollama `Modelfile` beside the GGUF files, as Unsloth writes one with its GGUF export.

    cd <export>/gguf && ollama create my-model -f Modelfile && ollama run my-model

Two `FROM` lines, the language model and the vision projector (Ollama takes a GGUF whose
architecture is `clip` as the model's projector); the chat template in Ollama's own template
language when the model speaks ChatML (the Qwen-VL family: `<|im_start|>role ... <|im_end|>`),
else none, so Ollama falls back to the template stored in the GGUF file; the end-of-turn tokens as
stop words; and the sampling of the post-training check (the single-GPU LoRA recipe's temperature
0.7 and min_p 0.1), so `ollama run` answers the way the check did. Pure: no llama.cpp, no Ollama.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

MODELFILE = "Modelfile"

# ChatML in Ollama's Go template language: system, then each message, then the assistant's turn.
CHATML_TEMPLATE = """{{- if .System }}<|im_start|>system
{{ .System }}<|im_end|>
{{ end }}
{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
"""
CHATML_STOPS = ("<|im_end|>", "<|endoftext|>")


@dataclass(frozen=True)
class Modelfile:
    """What the file says, and what `read_modelfile` reads back."""

    sources: tuple[str, ...]
    template: str | None = None
    stops: tuple[str, ...] = ()
    parameters: dict[str, float] = field(default_factory=dict)

    def text(self) -> str:
        lines = ["# Ollama: `ollama create <name> -f Modelfile` in this folder, then `ollama run <name>`."]
        lines += [f"FROM ./{source}" for source in self.sources]
        if self.template is not None:
            lines.append(f'TEMPLATE """{self.template}"""')
        lines += [f"PARAMETER stop {json.dumps(stop)}" for stop in self.stops]
        lines += [f"PARAMETER {name} {value:g}" for name, value in self.parameters.items()]
        return "\n".join(lines) + "\n"


def chat_template_of(model_dir: str | os.PathLike[str]) -> str | None:
    """The merged model's Jinja chat template (chat_template.jinja, else tokenizer_config.json)."""
    folder = Path(model_dir)
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    for name in ("tokenizer_config.json", "processor_config.json"):
        config = folder / name
        if config.is_file():
            template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
            if isinstance(template, str):
                return template
    return None


def modelfile_for(
    model_file: str,
    projector_file: str,
    chat_template: str | None,
    *,
    temperature: float | None = None,
    min_p: float | None = None,
) -> Modelfile:
    """The Modelfile for the two GGUF files (names relative to the folder they share)."""
    chatml = chat_template is not None and "<|im_start|>" in chat_template
    parameters: dict[str, float] = {}
    if temperature is not None:
        parameters["temperature"] = temperature
    if min_p is not None and min_p > 0:
        parameters["min_p"] = min_p
    return Modelfile(
        sources=(Path(model_file).name, Path(projector_file).name),
        template=CHATML_TEMPLATE if chatml else None,
        stops=CHATML_STOPS if chatml else (),
        parameters=parameters,
    )


def write_modelfile(folder: str | os.PathLike[str], modelfile: Modelfile) -> Path:
    """Write `Modelfile` into `folder` under a temporary name first (never half a file)."""
    target = Path(folder) / MODELFILE
    partial = target.with_name(f".{MODELFILE}.partial")
    partial.write_text(modelfile.text(), encoding="utf-8")
    os.replace(partial, target)
    return target


def read_modelfile(path: str | os.PathLike[str]) -> Modelfile:
    """Read a Modelfile back (the instructions this module writes: FROM, TEMPLATE, PARAMETER)."""
    text = Path(path).read_text(encoding="utf-8")
    sources: list[str] = []
    stops: list[str] = []
    parameters: dict[str, float] = {}
    template: str | None = None
    rest = text
    while rest:
        line, _, rest = rest.partition("\n")
        instruction, _, argument = line.strip().partition(" ")
        if instruction == "FROM":
            sources.append(argument.removeprefix("./"))
        elif instruction == "TEMPLATE" and argument.startswith('"""'):
            body = argument[3:] + "\n" + rest
            template, _, rest = body.partition('"""')
        elif instruction == "PARAMETER":
            name, _, value = argument.partition(" ")
            if name == "stop":
                stops.append(json.loads(value) if value.startswith('"') else value)
            else:
                parameters[name] = float(value)
    return Modelfile(tuple(sources), template, tuple(stops), parameters)
