"""`grpo-train run`: one attempt of a GRPOJob, from resolved spec to exported model.

Order matters and every step is safe to repeat: checkpoints are checked first (a resume that cannot
work fails in seconds, not after the model is loaded), data and model are prepared into caches on
the shared volume, the overrides are composed against the installed verl before anything heavy
starts, and the reporter runs for the engine's whole life. A later attempt after a finished
training goes straight to export.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from grpo_operator.api.v1alpha1 import ResolvedJob

from . import checkpoints, data, sources
from .engines import verl as verl_engine
from .engines.verl_compose import check, compose
from .engines.verl_configs import installed_config_dir
from .engines.verl_overrides import Resume
from .engines.verl_versions import VerlProfile, installed_version, profile_for
from .exitcodes import OK, ConfigError, Failure, TrainerError
from .export import export
from .kube import KubeStatusWriter, StatusWriter
from .report import TrainingState, total_steps
from .reporter import Reporter
from .spec import Attempt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    verl_version: str | None = None
    """Override the installed verl version (tests, images without package metadata)."""
    report: bool = True
    kubeconfig: str | None = None
    progress: bool = True


def resolve_profile(version: str | None) -> VerlProfile:
    version = version or installed_version()
    if version is None:
        raise ConfigError("verl is not installed here; pass --verl-version to plan for a given release")
    profile, warning = profile_for(version)
    if warning:
        log.warning(warning)
    return profile


def prepare_launch(
    job: ResolvedJob, attempt: Attempt, profile: VerlProfile, resume: Resume, progress: bool = True
) -> tuple[verl_engine.VerlLaunch, data.PreparedData]:
    """Data, model and the engine command for this attempt (downloads and conversion happen here)."""
    prepared = data.prepare(job, progress=progress)
    for warning in prepared.warnings:
        log.warning(warning)
    model = sources.resolve(job.spec.model.source, "model", job.paths.cache_dir, job.spec.model.revision)
    launch = verl_engine.plan_launch(
        job,
        profile,
        attempt,
        model_path=str(model),
        train_files=prepared.train_files,
        val_files=prepared.val_files,
        resume=resume,
    )
    return launch, prepared


def verify_against_installed(launch: verl_engine.VerlLaunch) -> None:
    """Compose the overrides with the installed verl's own config; ConfigError on any problem."""
    folder = installed_config_dir()
    if folder is None:
        log.warning("verl's configuration was not found; skipping the pre-launch composition check")
        return
    findings = check(compose(folder, launch.plan.rendered()), launch.plan, launch.profile)
    for warning in findings.warnings:
        log.warning(warning)
    if findings.problems:
        raise ConfigError("the verl configuration would not work: " + "; ".join(findings.problems))


def run(job: ResolvedJob, attempt: Attempt, options: Options, writer: StatusWriter | None = None) -> int:
    """One attempt; returns the process exit code and prints a GRPO_FAILURE line on failure."""
    try:
        if job.spec.engine.name != "verl":
            return _run_other_engine(job, attempt)
        return _run_verl(job, attempt, options, writer)
    except TrainerError as exc:
        return _fail(exc.failure())


def _run_verl(job: ResolvedJob, attempt: Attempt, options: Options, writer: StatusWriter | None) -> int:
    profile = resolve_profile(options.verl_version)
    ckpt_dir = Path(job.paths.checkpoint_dir)
    if checkpoints.training_complete(job):
        log.info("training finished in an earlier attempt; exporting only")
        return _export(job)
    resume = checkpoints.decide_resume(job, attempt.number)
    checkpoints.record_world(job)
    pruned = checkpoints.prune(ckpt_dir, job.spec.checkpoint.keep)
    if pruned:
        log.info("deleted checkpoints beyond keep=%s: steps %s", job.spec.checkpoint.keep, pruned)
    launch, prepared = prepare_launch(job, attempt, profile, resume, options.progress)
    for warning in launch.warnings:
        log.warning(warning)
    verify_against_installed(launch)
    verl_engine.write_overrides(launch, attempt.metrics_file.with_suffix(".command.txt"))
    print("engine command:", " ".join(launch.command), flush=True)

    reporter = None
    writer = writer or (_status_writer(attempt, options.kubeconfig) if options.report else None)
    if writer is not None:
        reporter = start_reporter(job, attempt, writer, prepared.train_rows, resume.from_step)
    try:
        failure = verl_engine.run_engine(launch)
    finally:
        if reporter is not None and not reporter.stop():
            log.warning("the last status update could not be sent")
    if failure is not None:
        return _fail(failure)
    checkpoints.mark_complete(job, attempt.number)
    checkpoints.prune(ckpt_dir, job.spec.checkpoint.keep)
    return _export(job)


def _status_writer(attempt: Attempt, kubeconfig: str | None) -> StatusWriter | None:
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
    train_rows: int | None,
    resumed_from: int | None,
) -> Reporter:
    algo = job.spec.algorithm
    state = TrainingState(
        total_steps=total_steps(train_rows, algo.train_batch_size, algo.epochs, algo.total_steps),
        resumed_from_step=resumed_from,
    )
    metrics_dir = attempt.metrics_file.parent
    previous = [metrics_dir / f"attempt-{n}.jsonl" for n in range(1, attempt.number)]
    reporter = Reporter(
        writer,
        state,
        attempt.metrics_file,
        attempt.checkpoint_events_file,
        Path(job.paths.checkpoint_dir),
        previous_metrics=[p for p in previous if p.is_file()],
        on_checkpoint=lambda _step: checkpoints.prune(job.paths.checkpoint_dir, job.spec.checkpoint.keep),
    )
    reporter.start()
    return reporter


def _export(job: ResolvedJob) -> int:
    result = export(job)
    if result is not None:
        log.info("exported step %s: model=%s adapter=%s", result.step, result.model, result.lora_adapter)
    return OK


def _run_other_engine(job: ResolvedJob, attempt: Attempt) -> int:
    from .engines import trl

    run_job = getattr(trl, "run_job", None)
    if run_job is None:
        raise ConfigError(f"engine {job.spec.engine.name!r} has no job entry point in this trainer image")
    return int(run_job(job, attempt))


def _fail(failure: Failure) -> int:
    log.error("%s: %s", failure.reason, failure.message)
    print(failure.marker_line(), file=sys.stderr, flush=True)
    return failure.code
