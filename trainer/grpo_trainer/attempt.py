"""`grpo-train run`: one attempt of a GRPOJob, whatever its engine, from resolved spec to exported model.

The driver owns what every engine shares: the attempt's log on the checkpoint volume (everything
printed, by the trainer and the engine, kept after the Ray cluster is gone: `logfile.py`), the
job's status reports (the reporter runs for the engine's whole life), the completion marker, the
export after training, and how the attempt ends — an exit code from the contract and, on a
failure, one `GRPO_FAILURE` line. The engine
(`engines/base.py`) owns how training runs. Every step is safe to repeat: a later attempt after
a finished training goes straight to export.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import COMPLETE_FILE, OK, UNKNOWN, Failure, attempt_log_file, metrics_file
from grpo_operator.api.timestamps import rfc3339
from grpo_operator.api.v1alpha1 import ResolvedJob
from grpo_operator.api.v1alpha1.status import GgufOutputs, LogStatus, Outputs

from . import trainer_image
from .engines.base import Engine, EngineOptions, ExportResult, RunInputs, engine_for, plan_text
from .failures import TrainerError
from .inputs import decide_resume, prepare_inputs
from .kube import KubeStatusWriter, StatusWriter
from .logfile import AttemptLog
from .progress import TrainingState, total_steps
from .reporter import Reporter
from .spec import Attempt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    engine: EngineOptions = field(default_factory=EngineOptions)
    report: bool = True
    """Patch the job's status (off for a workstation run that has no job to report to)."""
    kubeconfig: str | None = None
    """Credentials for status reports; default: in-cluster, then $KUBECONFIG."""


def run(job: ResolvedJob, attempt: Attempt, options: Options, writer: StatusWriter | None = None) -> int:
    """One attempt; returns the process exit code and prints a GRPO_FAILURE line on failure.

    Everything it prints (and its engine prints) is also kept in the attempt's log file.
    """
    started = time.time()  # the attempt's start-up counts from here (status.progress.startupSeconds)
    path = log_file(job, attempt)
    header = f"grpo-train attempt {attempt.number} of {attempt.namespace}/{attempt.job_name}"
    with AttemptLog(path, header):
        return _run(job, attempt, options, writer, path, started)


def log_file(job: ResolvedJob, attempt: Attempt) -> Path:
    """This attempt's log, as this process sees the volume (contract.attempt_log_file)."""
    return Path(attempt_log_file(job.paths.metrics_dir, attempt.number))


def _run(
    job: ResolvedJob,
    attempt: Attempt,
    options: Options,
    writer: StatusWriter | None,
    path: Path,
    started: float,
) -> int:
    try:
        image = trainer_image.running(job)
        check_image(image)
        engine = engine_for(job.spec.engine.name, dataclasses.replace(options.engine, image=image))
        if writer is None and options.report:
            writer = status_writer(attempt, options.kubeconfig)
        if writer is not None:
            _report_log(writer, attempt, job.pod_path(str(path)))
        if training_complete(job):
            log.info("training finished in an earlier attempt; exporting only")
            return _export(engine, job, writer, attempt.number)
        resume = decide_resume(job, attempt.number, engine)
        engine.preflight(job, resume)
        prune(engine, job)
        inputs = prepare_inputs(job, resume, progress=options.engine.progress)
        # The plan `grpo-train plan` prints for this job, made from this image's manifest as it was
        # outside, now with the attempt's own inputs (the model's weights, the checkpoint resumed).
        plan = plan_text(engine.plan(job, attempt, inputs), image)
        print(f"grpo-train: the plan of attempt {attempt.number}:\n{plan}")
        print(PLAN_END, flush=True)
        session = _Session(job, attempt, writer, engine, inputs, started)
        try:
            failure = engine.run(job, attempt, inputs, session)
        finally:
            session.stop()
        if failure is not None:
            return fail(failure)
        prune(engine, job)
        mark_complete(job, attempt.number, engine)
        return _export(engine, job, writer, attempt.number)
    except TrainerError as exc:
        return fail(exc.failure())
    except Exception as exc:  # a bug or an unforeseen fault: still one line the operator can read
        log.exception("the attempt failed")
        return fail(Failure(UNKNOWN, "TrainerCrashed", f"{type(exc).__name__}: {exc}"))


PLAN_END = "grpo-train: end of the plan"
"""The line after the plan an attempt prints at start-up (its log holds both)."""


def check_image(image: trainer_image.TrainerImage) -> list[str]:
    """Say loudly, before anything runs, where this environment differs from the manifest its plans
    are made from: a plan made outside (and the one printed below) would not be what runs."""
    for warning in image.warnings:
        log.warning(warning)
    found = trainer_image.differences(image.manifest, trainer_image.installed_packages())
    if found:
        log.error(
            "THIS ENVIRONMENT DIFFERS FROM THE MANIFEST OF %s (%s), which every plan of this job is made "
            "from: %d difference(s); rebuild the image with images/build.sh, or expect this run to "
            "differ from its plan where they matter",
            image.manifest.image,
            image.why,
            len(found),
        )
        for line in found:
            log.error("  %s", line)
    else:
        log.info("the installed packages are those of the %s manifest (%s)", image.manifest.image, image.why)
    return found


def prune(engine: Engine, job: ResolvedJob) -> list[int]:
    """Delete the checkpoints beyond `checkpoint.keep`, every attempt's counted (never one being saved)."""
    keep = job.spec.checkpoint.keep
    deleted = engine.prune(job, keep)
    if deleted:
        log.info("deleted checkpoints beyond keep=%s: steps %s", keep, deleted)
    return deleted


def fail(failure: Failure) -> int:
    log.error("%s: %s", failure.reason, failure.message)
    print(failure.line(), file=sys.stderr, flush=True)
    return failure.code


def _export(engine: Engine, job: ResolvedJob, writer: StatusWriter | None, attempt: int) -> int:
    result = engine.export(job)
    mark_exported(job, attempt, result)
    if result is None:
        return OK
    log.info("exported step %s: model=%s adapter=%s", result.step, result.model, result.lora_adapter)
    if result.gguf is not None:
        log.info("GGUF: %s + %s (%s)", result.gguf.model, result.gguf.projector, result.gguf.quantization)
    if result.sample is not None:
        # The post-training check in the attempt's log (`kubectl grpo logs`); status names its file.
        sample = result.sample
        log.info(
            "sample (reward %s, %s): %s -> %s",
            "-" if sample.reward is None else f"{sample.reward:g}",
            sample.path,
            _excerpt(sample.prompt, 256),
            _excerpt(sample.response, 512),
        )
    if writer is not None:
        outputs = outputs_status(result, job.pod_path)
        try:
            writer.patch_status({"status": {"outputs": outputs.to_wire()}})
        except Exception as exc:  # the export is on the volume either way; status is a convenience
            log.warning("could not record the outputs in the job's status: %s", exc)
    return OK


def outputs_status(result: ExportResult, pod_path: Callable[[str], str] = str) -> Outputs:
    """status.outputs from an engine's export: where each file is, as the pods name them. The
    sample's text stays in its file (and the attempt's log): status says where to find it."""
    gguf = None
    if result.gguf is not None:
        gguf = GgufOutputs(model=pod_path(result.gguf.model), projector=pod_path(result.gguf.projector))
    return Outputs(
        step=result.step,
        model=pod_path(result.model) if result.model else None,
        lora_adapter=pod_path(result.lora_adapter) if result.lora_adapter else None,
        gguf=gguf,
        sample_file=pod_path(result.sample.path) if result.sample is not None else None,
    )


def _excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- status reports --------------------------------------------------------------------------


def _report_log(writer: StatusWriter, attempt: Attempt, path: str) -> None:
    """status.log names this attempt's log file, before anything else can fail."""
    try:
        writer.patch_status({"status": {"log": LogStatus(attempt=attempt.number, path=path).to_wire()}})
    except Exception as exc:  # status is a convenience; the log is on the volume either way
        log.warning("could not record the log file in the job's status: %s", exc)


def status_writer(attempt: Attempt, kubeconfig: str | None) -> StatusWriter | None:
    """The job's status client; without credentials training still runs (status just stays empty)."""
    try:
        return KubeStatusWriter(attempt.job_name, attempt.namespace, kubeconfig)
    except Exception as exc:  # lightkube's ConfigError, a missing or unreadable kubeconfig
        log.error("no Kubernetes credentials for status reports (%s); training without them", exc)
        return None


def start_reporter(
    job: ResolvedJob,
    attempt: Attempt,
    writer: StatusWriter,
    engine: Engine,
    train_rows: int | None,
    resumed_from: int | None,
    on_checkpoint: Callable[[int], object] | None = None,
    started_at: float | None = None,
) -> Reporter:
    """Tail this attempt's metrics (and the earlier attempts', for the history) into the status."""
    algo, health = job.spec.algorithm, job.spec.health
    state = TrainingState(
        total_steps=total_steps(train_rows, algo.train_batch_size, algo.epochs, algo.total_steps),
        resumed_from_step=resumed_from,
        attempt=attempt.number,
        entropy_floor=health.entropy_floor,
        entropy_collapse_steps=health.entropy_collapse_steps,
        started_at=started_at,
    )
    metrics_dir = str(attempt.metrics_file.parent)
    previous = [Path(metrics_file(metrics_dir, n)) for n in range(1, attempt.number)]
    reporter = Reporter(
        writer,
        state,
        attempt.metrics_file,
        attempt.checkpoint_events_file,
        latest_checkpoint=lambda: engine.latest_checkpoint(job),
        previous_metrics=[p for p in previous if p.is_file()],
        on_checkpoint=on_checkpoint,
        pod_path=job.pod_path,
    )
    reporter.start()
    return reporter


class _Session:
    """What the engine gets from the driver: a reporter it starts when it is about to train, which
    prunes beyond `checkpoint.keep` as checkpoints are reported."""

    def __init__(
        self,
        job: ResolvedJob,
        attempt: Attempt,
        writer: StatusWriter | None,
        engine: Engine,
        inputs: RunInputs,
        started: float | None = None,
    ):
        self.job, self.attempt, self.writer, self.engine, self.inputs = job, attempt, writer, engine, inputs
        self.started = started
        self.reporter: Reporter | None = None

    def start_reporting(self, train_rows: int | None = None) -> None:
        if self.writer is None or self.reporter is not None:
            return
        self.reporter = start_reporter(
            self.job,
            self.attempt,
            self.writer,
            self.engine,
            train_rows if train_rows is not None else self.inputs.train_rows,
            self.inputs.resume.from_step,
            on_checkpoint=lambda _step: self.engine.prune(self.job, self.job.spec.checkpoint.keep),
            started_at=self.started,
        )

    def stop(self) -> None:
        if self.reporter is not None and not self.reporter.stop():
            log.warning("the last status update could not be sent")


# --- the completion marker -------------------------------------------------------------------


def mark_complete(job: ResolvedJob, attempt: int, engine: Engine) -> None:
    """Training finished: a later attempt (after an export failure) goes straight to export."""
    latest = engine.latest_checkpoint(job)
    record = {
        "attempt": attempt,
        "step": latest.step if latest else None,
        "finishedAt": rfc3339(),
    }
    path = Path(job.paths.job_dir) / COMPLETE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")


def training_complete(job: ResolvedJob) -> bool:
    return (Path(job.paths.job_dir) / COMPLETE_FILE).is_file()


def mark_exported(job: ResolvedJob, attempt: int, result: ExportResult | None) -> None:
    """The export is done (or not asked for): the record now says this attempt reached the end,
    which is what `grpo-train run`'s supervisor requires of an exit 0."""
    path = Path(job.paths.job_dir) / COMPLETE_FILE
    record = _completion_record(path) or {}
    record["export"] = {"attempt": attempt, "step": result.step if result is not None else None}
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record) + "\n", encoding="utf-8")
    partial.replace(path)


def unfinished(job: ResolvedJob, attempt: int) -> str | None:
    """What the completion record lacks for `attempt` to have finished; None when nothing does."""
    path = Path(job.paths.job_dir) / COMPLETE_FILE
    record = _completion_record(path)
    if record is None:
        return f"training did not finish (no completion mark {path})"
    export = record.get("export")
    if not isinstance(export, dict) or export.get("attempt") != attempt:
        return f"its export did not finish ({path} records no export by attempt {attempt})"
    return None


def _completion_record(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
