"""The engine seam: what every training engine offers the attempt driver and the CLI, and a registry.

An engine turns a resolved job into a training run. The driver (`grpo_trainer.attempt`) owns
everything engine-neutral — status reports, the completion marker, the failure line, the exit
code — and builds each attempt's `RunInputs` once (`grpo_trainer.inputs`: the model's path, the
prepared data, the resume decision); it also applies `checkpoint.keep`. As a framework hands
each plugin a ready runtime description, the engine gets those inputs and, through this
protocol:

- `plan`s a run: every setting it will use, each with the reason it has that value (what
  `grpo-train plan` prints), and `check`s that plan (what `grpo-train validate` runs);
- `run`s one attempt to the end of training from what it is handed;
- lists its checkpoints in its own layout: the `latest_checkpoint`, the one at a path the spec
  names (`checkpoint_at`), and deletes those beyond `keep` (`prune`);
- `export`s the final model (idempotent: a finished export of the same step is kept).

Engines are registered by `spec.engine.name` and imported on first use, so a job's engine is the
only heavy stack a process loads. An engine never imports the driver or the CLI: what it needs
from the driver reaches it through `Session`.
"""

from __future__ import annotations

import importlib
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from grpo_operator.api.contract import Failure
from grpo_operator.api.stop_bound import StopBound

from ..failures import ConfigError
from ..trainer_image import TrainerImage

if TYPE_CHECKING:
    from grpo_operator.api.v1alpha1 import ResolvedJob

    from ..spec import Attempt


@dataclass(frozen=True)
class Setting:
    """One setting of a planned run and why it has its value."""

    key: str
    value: Any
    why: str = ""


@dataclass(frozen=True)
class RunPlan:
    """What an engine would run for one attempt."""

    engine: str
    title: str
    """One line naming the engine and the versions the plan is for."""
    settings: list[Setting]
    command: list[str] | None = None
    """The process the engine starts, when it starts one (verl's main_ppo)."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment the engine (and every Ray worker) gets on top of the pod's."""
    warnings: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    """Engine-specific fields of `grpo-train plan --json` (verl: its version and raw overrides)."""
    detail: Any = None
    """The engine's own form of the plan, for its `check`."""


@dataclass(frozen=True)
class SaveOnStop:
    """How the job's pods stop (spec.checkpoint.saveOnStop), as the operator builds them: the
    bound and the termination grace period it sets (children/rayjob.save_on_stop_bound), or None
    when the job does not save on a planned stop."""

    bound: StopBound | None

    def describe(self) -> str:
        if self.bound is None:
            return (
                f"off (spec.checkpoint.saveOnStop.enabled): a planned stop loses the steps since the last "
                f"checkpoint; the pods keep Kubernetes' {DEFAULT_GRACE_SECONDS} s grace"
            )
        return f"{self.bound.describe()}; each Ray pod's preStop waits {self.bound.hook_seconds} s at most"

    def as_json(self) -> dict[str, Any]:
        if self.bound is None:
            return {"enabled": False, "terminationGracePeriodSeconds": DEFAULT_GRACE_SECONDS}
        return {"enabled": True, **self.bound.as_json()}


DEFAULT_GRACE_SECONDS = 30
"""A pod's terminationGracePeriodSeconds when its spec sets none."""


def plan_text(plan: RunPlan, image: TrainerImage, stop: SaveOnStop | None = None) -> str:
    """A plan as `grpo-train plan` prints it and the pod logs it at start-up: the image it is for,
    how the pods stop (`stop`, where known), then the engine's command and every setting with its
    reason."""
    lines = [f"# image: {image.describe()}"]
    if stop is not None:
        lines.append(f"# save on stop: {stop.describe()}")
    if plan.command:
        lines.append(f"# {plan.title}; environment of the engine and every Ray worker:")
        lines += [f"#   {key}={value}" for key, value in sorted(plan.env.items())]
        words = [_shell_word(word) for word in plan.command]
        lines.append(" \\\n    ".join([" ".join(words[:3]), *words[3:]]))
        lines.append("\n# why:")
        lines += [f"#   {s.key}: {s.why}" for s in plan.settings if s.why]
    else:
        lines.append(f"# {plan.title}")
        width = max((len(s.key) for s in plan.settings), default=0)
        lines += [f"{s.key:<{width}}  {json.dumps(s.value, default=str)}  # {s.why}" for s in plan.settings]
    return "\n".join(lines)


_SAFE_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_DOUBLE_QUOTE_SPECIAL = re.compile(r'["$`\\!]')


def _shell_word(word: str) -> str:
    """Shell quoting that stays readable: double quotes for Hydra's single-quoted values."""
    if _SAFE_WORD.fullmatch(word):
        return word
    if not _DOUBLE_QUOTE_SPECIAL.search(word):
        return f'"{word}"'
    return shlex.quote(word)


def plan_json(plan: RunPlan, image: TrainerImage, stop: SaveOnStop | None = None) -> dict[str, Any]:
    """`grpo-train plan --json`."""
    return {
        "engine": plan.engine,
        "title": plan.title,
        "image": image.as_json(),
        **({"saveOnStop": stop.as_json()} if stop is not None else {}),
        "command": plan.command,
        "env": plan.env,
        "settings": [{"key": s.key, "value": s.value, "why": s.why} for s in plan.settings],
        "warnings": [*image.warnings, *plan.warnings],
        **plan.facts,
    }


@dataclass(frozen=True)
class Findings:
    problems: list[str]
    """What would fail at run time, or silently not do what the job asks."""
    warnings: list[str] = field(default_factory=list)
    checked: str = ""
    """What was checked, for the person reading `grpo-train validate`."""


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint an attempt can resume from."""

    step: int
    path: str
    saved_at: float
    """When it was completed (seconds since the epoch): older than an attempt means reported before."""


@dataclass(frozen=True)
class Resume:
    """How an attempt starts: `spec.checkpoint.resume`, decided once by the driver for every engine.

    `latest` (the default) continues from the newest complete checkpoint, when there is one; `none`
    starts a first attempt from scratch; a path continues from that checkpoint. A retried attempt
    always continues from the latest, whatever the first one asked.
    """

    checkpoint: Checkpoint | None = None
    """What to continue from; None: the first step."""
    named: bool = False
    """`checkpoint` is the one the spec names by path (not simply the latest)."""
    fresh: bool = False
    """Start over (`none` on a first attempt): an earlier run's checkpoints must not be continued."""

    @property
    def from_step(self) -> int | None:
        return self.checkpoint.step if self.checkpoint else None


@dataclass(frozen=True)
class RunInputs:
    """What the driver hands an engine for one attempt (or, for a plan, what it would hand)."""

    model_path: str
    """The model's local folder (for a plan without downloading: a placeholder naming the source)."""
    train_files: list[str]
    val_files: list[str]
    train_rows: int | None
    """Prompts in the training files, when known."""
    resume: Resume = field(default_factory=Resume)


@dataclass(frozen=True)
class GgufFiles:
    """The GGUF export: the language model file and its vision projector (mmproj)."""

    model: str
    projector: str
    quantization: str
    modelfile: str | None = None
    """Ollama's Modelfile beside them (engines/trl/modelfile.py)."""


@dataclass(frozen=True)
class SampleSummary:
    """The post-training check in short; the whole record is the JSON file at `path`."""

    prompt: str
    response: str
    reward: float | None
    path: str


@dataclass(frozen=True)
class ExportResult:
    step: int
    model: str | None
    lora_adapter: str | None
    skipped: bool = False
    """A finished export of the same step was already there."""
    gguf: GgufFiles | None = None
    sample: SampleSummary | None = None


@dataclass(frozen=True)
class EngineOptions:
    """Choices from the command line that only some engines read."""

    verl_version: str | None = None
    """Plan for this verl release instead of the installed one (verl)."""
    verl_config_dir: str | None = None
    """Compose with this verl trainer/config folder (verl)."""
    progress: bool = True
    """Progress bars for data preparation and downloads."""
    image: TrainerImage | None = None
    """The trainer image to plan and run for (its manifest says what it holds); None: the image this
    process runs in (`trainer_image.running`). Never this machine's own packages."""


class Session(Protocol):
    """What the attempt driver offers an engine while it runs."""

    def start_reporting(self, train_rows: int | None = None) -> None:
        """Start patching the job's status from the attempt's metrics file (and pruning beyond
        `checkpoint.keep` as checkpoints are reported); when the engine is about to train.

        `train_rows`: the engine's own count of training prompts, where it reads them itself."""


class Engine(Protocol):
    """A training engine (see the module docstring)."""

    name: str

    def plan(self, job: ResolvedJob, attempt: Attempt, inputs: RunInputs) -> RunPlan: ...

    def check(self, job: ResolvedJob, plan: RunPlan) -> Findings: ...

    def preflight(self, job: ResolvedJob, resume: Resume) -> None:
        """Before anything heavy: ConfigError for what cannot work here (a checkpoint of another
        device count, a missing tool), and the checkpoint folder readied for this start (an earlier
        run's checkpoints moved aside when `resume.fresh`)."""
        ...

    def run(
        self, job: ResolvedJob, attempt: Attempt, inputs: RunInputs, session: Session
    ) -> Failure | None: ...

    def latest_checkpoint(self, job: ResolvedJob) -> Checkpoint | None: ...

    def checkpoint_at(self, job: ResolvedJob, path: str) -> Checkpoint:
        """The checkpoint a spec names by path; ConfigError when it is not one of this engine's."""
        ...

    def prune(self, job: ResolvedJob, keep: int) -> list[int]:
        """Delete checkpoints beyond the newest `keep` (never one being saved); the steps deleted."""
        ...

    def export(self, job: ResolvedJob) -> ExportResult | None: ...


ENGINES: dict[str, str] = {
    "verl": "grpo_trainer.engines.verl.engine:VerlEngine",
    "trl": "grpo_trainer.engines.trl.engine:TrlEngine",
}
"""spec.engine.name -> the engine's class, as `module:Class` (imported on first use)."""


def engine_for(name: str, options: EngineOptions | None = None) -> Engine:
    """The engine a job names; ConfigError for a name this trainer image does not have."""
    target = ENGINES.get(name)
    if target is None:
        raise ConfigError(
            f"spec.engine.name: no engine {name!r} in this trainer (known: {', '.join(ENGINES)})"
        )
    module, _, cls = target.partition(":")
    engine: Engine = getattr(importlib.import_module(module), cls)(options or EngineOptions())
    return engine
