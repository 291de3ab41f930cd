"""The engine seam: what every training engine offers the attempt driver and the CLI, and a registry.

An engine turns a resolved job into a training run. The driver (`grpo_trainer.attempt`) owns
everything engine-neutral — status reports, the completion marker, the failure line and the
exit code — and asks the engine, through this protocol, to:

- `plan` a run: every setting it will use, each with the reason it has that value (what
  `grpo-train plan` prints), and `check` that plan (what `grpo-train validate` runs);
- `run` one attempt to the end of training, resuming from its own latest checkpoint;
- find its `latest_checkpoint` (for status, resume and the completion record);
- `export` the final model (idempotent: a finished export of the same step is kept).

Engines are registered by `spec.engine.name` and imported on first use, so a job's engine is the
only heavy stack a process loads. An engine never imports the driver or the CLI: what it needs
from the driver reaches it through `Session`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from grpo_operator.api.contract import Failure

from ..failures import ConfigError

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
class GgufFiles:
    """The GGUF export: the language model file and its vision projector (mmproj)."""

    model: str
    projector: str
    quantization: str


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


class Session(Protocol):
    """What the attempt driver offers an engine while it runs."""

    def start_reporting(
        self,
        train_rows: int | None,
        resumed_from_step: int | None,
        on_checkpoint: Callable[[int], None] | None = None,
    ) -> None:
        """Start patching the job's status from the attempt's metrics file; once data is known."""


class Engine(Protocol):
    """A training engine (see the module docstring)."""

    name: str

    def plan(self, job: ResolvedJob, attempt: Attempt, *, dry_run: bool = True) -> RunPlan: ...

    def check(self, job: ResolvedJob, plan: RunPlan) -> Findings: ...

    def run(self, job: ResolvedJob, attempt: Attempt, session: Session) -> Failure | None: ...

    def latest_checkpoint(self, job: ResolvedJob) -> Checkpoint | None: ...

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
