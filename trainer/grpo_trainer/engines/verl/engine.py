"""The verl engine behind the Engine protocol: plan, check, one attempt, checkpoints, export."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from grpo_operator.api.contract import Failure
from grpo_operator.api.v1alpha1 import ResolvedJob

from ...failures import ConfigError
from ...rewards.custom import check_defines, check_imports
from ...spec import Attempt
from ...stopping import AttemptFiles, yielded
from ..base import (
    Checkpoint,
    EngineOptions,
    ExportResult,
    Findings,
    Resume,
    RunInputs,
    RunPlan,
    Session,
    Setting,
)
from . import checkpoints, compile_cache
from .compose import check, compose, effective_reward
from .configs import config_dir, installed_config_dir
from .export import export
from .launch import VerlLaunch, plan_launch, run_engine, write_overrides
from .versions import SUPPORTED, VerlProfile, installed_version, profile_for

log = logging.getLogger(__name__)


class VerlEngine:
    name = "verl"

    def __init__(self, options: EngineOptions) -> None:
        self.options = options

    def profile(self, *, planning: bool = False) -> VerlProfile:
        """The verl release to write overrides for: --verl-version, else the installed one; a plan
        or check on a machine without verl is for the newest release the trainer supports."""
        version = self.options.verl_version or installed_version()
        if version is None:
            if not planning:
                raise ConfigError(
                    "verl is not installed here; pass --verl-version to plan for a given release"
                )
            version = SUPPORTED[0]
        profile, warning = profile_for(version)
        if warning:
            log.warning(warning)
        return profile

    # --- plan and check -----------------------------------------------------------------------

    def plan(self, job: ResolvedJob, attempt: Attempt, inputs: RunInputs) -> RunPlan:
        """The exact main_ppo command for the inputs the driver would hand this attempt."""
        profile = self.profile(planning=True)
        if inputs.resume.checkpoint is not None:
            checkpoints.check_world(job, Path(inputs.resume.checkpoint.path))
        launch = plan_launch(
            job,
            profile,
            attempt,
            model_path=inputs.model_path,
            train_files=inputs.train_files,
            val_files=inputs.val_files,
            resume=checkpoints.verl_resume(inputs.resume),
        )
        plan = _run_plan(launch)
        if not (self.options.verl_version or installed_version()):
            note = (
                f"verl is not installed here: this is the plan for verl {profile.reference_version}, "
                "the newest release the trainer supports (--verl-version picks another)"
            )
            plan = dataclasses.replace(plan, warnings=[note, *plan.warnings])
        return plan

    def check(self, job: ResolvedJob, plan: RunPlan) -> Findings:
        """Compose verl's own ppo_trainer config with the plan's overrides and check the values."""
        launch: VerlLaunch = plan.detail
        version = self.options.verl_version or installed_version() or launch.profile.reference_version
        folder = Path(self.options.verl_config_dir) if self.options.verl_config_dir else config_dir(version)
        cfg = compose(folder, launch.plan.rendered())
        findings = check(cfg, launch.plan, launch.profile)
        reward = effective_reward(cfg, launch.profile)
        return Findings(
            findings.problems,
            findings.warnings,
            checked=(
                f"composed verl's ppo_trainer from {folder} with {len(launch.plan.overrides)} overrides; "
                f"reward verl will load: {reward.get('path')} :: {reward.get('name')}"
            ),
        )

    # --- one attempt --------------------------------------------------------------------------

    def preflight(self, job: ResolvedJob, resume: Resume) -> None:
        """The device count against the checkpoint, the custom reward's function, and the
        checkpoint folder: an earlier run moved aside for a fresh start, this job's layout noted;
        compile caches of other versions removed (compile_cache.py)."""
        self.profile()
        if resume.checkpoint is not None:
            checkpoints.check_world(job, Path(resume.checkpoint.path))
        custom = job.spec.reward.custom
        if custom is not None and job.paths.reward_file:
            # Before anything heavy: verl would find a missing function minutes later, in a worker.
            check_defines(job.paths.reward_file, custom.function)
            check_imports(job.paths.reward_file)
        if resume.fresh:
            checkpoints.archive_previous_run(Path(job.paths.checkpoint_dir))
        checkpoints.record_world(job)
        stale = compile_cache.prune_stale(job.paths.cache_dir)
        if stale:
            log.info("deleted compile caches of other versions: %s", ", ".join(stale))

    def run(self, job: ResolvedJob, attempt: Attempt, inputs: RunInputs, session: Session) -> Failure | None:
        launch = plan_launch(
            job,
            self.profile(),
            attempt,
            model_path=inputs.model_path,
            train_files=inputs.train_files,
            val_files=inputs.val_files,
            resume=checkpoints.verl_resume(inputs.resume),
        )
        for warning in launch.warnings:
            log.warning(warning)
        _verify_against_installed(launch)
        write_overrides(launch, attempt.metrics_file.with_suffix(".command.txt"))
        print("engine command:", " ".join(launch.command), flush=True)
        session.start_reporting()
        failure = run_engine(launch)
        if failure is not None:
            # verl's driver ended on the attempt's stop request (stop_hook.py): a yield, no crash.
            record = AttemptFiles(attempt.metrics_file).read_yield()
            if record is not None:
                return yielded(record)
        return failure

    def latest_checkpoint(self, job: ResolvedJob) -> Checkpoint | None:
        return checkpoints.latest(job.paths.checkpoint_dir)

    def checkpoint_at(self, job: ResolvedJob, path: str) -> Checkpoint:
        return checkpoints.at(path)

    def prune(self, job: ResolvedJob, keep: int) -> list[int]:
        return checkpoints.prune(job.paths.checkpoint_dir, keep)

    def export(self, job: ResolvedJob) -> ExportResult | None:
        return export(job)


def _run_plan(launch: VerlLaunch) -> RunPlan:
    return RunPlan(
        engine="verl",
        title=f"verl {launch.profile.reference_version}",
        settings=[Setting(o.key, o.render().partition("=")[2], o.why) for o in launch.plan.overrides],
        command=launch.command,
        env=launch.env,
        warnings=list(launch.warnings),
        facts={
            "verlVersion": launch.profile.reference_version,
            "overrides": [{"override": o.render(), "why": o.why} for o in launch.plan.overrides],
        },
        detail=launch,
    )


def _verify_against_installed(launch: VerlLaunch) -> None:
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
