"""What an attempt runs on, built once by the driver for whichever engine: `RunInputs`.

Both engines used to prepare the data, resolve the model and decide how to resume on their own,
in their own words. Here it is done once: the model's local folder (downloaded into the job's
cache when the source is remote), the prepared training and validation files, and one meaning of
`spec.checkpoint.resume` — `latest` continues from the newest complete checkpoint, `none` starts
a first attempt from scratch, an absolute path continues from that checkpoint, and a retried
attempt always continues from the latest. Each engine only says what its checkpoints look like
(`Engine.latest_checkpoint`, `Engine.checkpoint_at`).
"""

from __future__ import annotations

import logging

from grpo_operator.api.v1alpha1 import ResolvedJob

from . import data, sources
from .engines.base import Engine, Resume, RunInputs
from .failures import DataError

log = logging.getLogger(__name__)


def decide_resume(job: ResolvedJob, attempt: int, engine: Engine) -> Resume:
    """How attempt number `attempt` starts; ConfigError when a named checkpoint is not one."""
    wanted = job.spec.checkpoint.resume
    if attempt > 1 or wanted == "latest":
        # A retry always continues from its own latest checkpoint, whatever the first start asked.
        latest = engine.latest_checkpoint(job)
        if latest is not None:
            return Resume(latest)
        if wanted in ("latest", "none"):
            return Resume()
    if wanted == "none":
        return Resume(fresh=True)
    return Resume(engine.checkpoint_at(job, wanted), named=True)


def planned_inputs(job: ResolvedJob, attempt: int, engine: Engine) -> RunInputs:
    """The inputs a run would get, decided without downloading, converting or moving anything."""
    planned = data.planned(job)
    try:
        model = str(
            sources.resolve(
                job.spec.model.source, "model", job.paths.cache_dir, download=False, workdir=job.workdir
            )
        )
    except DataError:
        model = f"<{job.spec.model.source}, downloaded into {job.paths.cache_dir} at run time>"
    return RunInputs(
        model_path=model,
        train_files=planned.train_files,
        val_files=planned.val_files,
        train_rows=planned.train_rows,
        resume=decide_resume(job, attempt, engine),
    )


def prepare_inputs(job: ResolvedJob, resume: Resume, *, progress: bool = True) -> RunInputs:
    """The inputs of a run: the data prepared, the model resolved (downloaded when remote)."""
    prepared = data.prepare(job, progress=progress)
    for warning in prepared.warnings:
        log.warning(warning)
    model = sources.resolve(
        job.spec.model.source, "model", job.paths.cache_dir, job.spec.model.revision, workdir=job.workdir
    )
    return RunInputs(
        model_path=str(model),
        train_files=prepared.train_files,
        val_files=prepared.val_files,
        train_rows=prepared.train_rows,
        resume=resume,
    )
