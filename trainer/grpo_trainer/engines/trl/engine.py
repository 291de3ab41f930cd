"""The TRL engine behind the Engine protocol: plan, check, one attempt, checkpoints, export.

Planning and checking are pure (no torch, no TRL needed); `run` and `export` import the stack.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import logging
import os
from typing import Any

from grpo_operator.api.batch import Batch, batch_problems
from grpo_operator.api.contract import Failure
from grpo_operator.api.v1alpha1 import ResolvedJob

from ... import data, sources, trainer_image
from ...export_record import read_record
from ...failures import ConfigError
from ...spec import Attempt
from ...trainer_image import TrainerImage
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
from .checkpoints import checkpoint_at, latest_checkpoint, prune_checkpoints
from .export import ExportPlan, GgufChoice
from .generation import vllm_installed
from .gguf_tools import find_tools
from .job import (
    RECIPE,
    generation_choice,
    reasons,
    reporting_env,
    reward_funcs_for,
    sample_setting,
    settings_from_job,
    vllm_sizing,
)
from .memory import footprint
from .settings import TrlSettings, build_trl_config, split_overrides

log = logging.getLogger(__name__)


class TrlEngine:
    name = "trl"

    def __init__(self, options: EngineOptions) -> None:
        self.options = options

    def image(self, job: ResolvedJob) -> TrainerImage:
        """The trainer image this engine plans and runs for: the one the command line chose (outside
        a pod, the job's image), else the one this process runs in."""
        return self.options.image or trainer_image.running(job)

    def plan(self, job: ResolvedJob, attempt: Attempt, inputs: RunInputs) -> RunPlan:
        """Every GRPOConfig and LoraConfig value this job gets, with where it comes from."""
        model = footprint(inputs.model_path)
        image = self.image(job)
        grpo, lora = build_trl_config(settings_from_job(job, model, image=image))
        why = reasons(job, model, image=image)
        settings = [Setting(key, value, why.get(key, RECIPE)) for key, value in sorted(grpo.items())]
        settings += [
            Setting(f"lora.{key}", value, why.get(f"lora.{key}", RECIPE))
            for key, value in sorted(lora.items())
        ]
        settings.append(_prompt_fitting(job))
        generation, generation_why = generation_choice(job, image)
        settings.append(Setting("generation", generation, generation_why))
        if generation == "vllm":
            sizing = vllm_sizing(job, model)
            settings.append(Setting("vllm memory", sizing.value, sizing.why))
        gguf = job.spec.export.gguf
        if gguf is not None:
            settings.append(
                Setting("export.gguf", f"{gguf.quantization} + mmproj {gguf.projector}", _gguf_why(image))
            )
        if job.spec.export.sample.enabled:
            settings.append(Setting("export.sample", *sample_setting(job)))
        resume = inputs.resume
        if resume.checkpoint is not None:
            resume_why = "spec.checkpoint.resume" if resume.named else "the latest complete checkpoint"
            settings.append(Setting("resume_from_checkpoint", resume.checkpoint.path, resume_why))
        return RunPlan(
            engine="trl",
            title=f"TRL GRPOTrainer + peft LoRA on one device ({_versions(image)})",
            settings=settings,
            detail=(grpo, lora),
        )

    def check(self, job: ResolvedJob, plan: RunPlan) -> Findings:
        """The batch arithmetic, one device, and override names that GRPOConfig/LoraConfig know."""
        problems = [str(p) for p in batch_problems(Batch.from_spec(job.spec, "trl"))]
        if job.spec.world_size != 1:
            problems.append(
                f"spec.resources: the trl engine trains on one device; resources ask for {job.spec.world_size}"
            )
        warnings: list[str] = []
        known = _known_fields()
        if known is None:
            warnings.append("TRL and peft are not installed here: override names were not checked")
        else:
            grpo_fields, lora_fields = known
            trainer_overrides, lora_overrides = split_overrides(job.spec.engine.overrides)
            problems += [
                f"engine.overrides: GRPOConfig has no field {key!r}"
                for key in trainer_overrides
                if key not in grpo_fields
            ]
            problems += [
                f"engine.overrides: LoraConfig has no field {key!r} (lora.{key})"
                for key in lora_overrides
                if key not in lora_fields
            ]
        problems += _missing_in(job, self.image(job))
        return Findings(problems, warnings, checked=f"{len(plan.settings)} TRL and LoRA settings")

    def preflight(self, job: ResolvedJob, resume: Resume) -> None:
        # Before training, not after an hour of it: what the job and its plan need must be installed
        # where it runs (a plan made from a stale manifest is caught here, not by TRL mid-run).
        missing = _missing_here(job)
        if settings_from_job(job, image=self.image(job)).optim == "adamw_8bit" and not _imports(
            "bitsandbytes"
        ):
            missing.append(
                "optim adamw_8bit: the plan took bitsandbytes from the image's manifest, and it is not "
                "installed where this attempt runs (the image differs from its manifest: see the log's start)"
            )
        if missing:
            raise ConfigError("; ".join(missing))

    def run(self, job: ResolvedJob, attempt: Attempt, inputs: RunInputs, session: Session) -> Failure | None:
        from ...rewards.custom import close_pools
        from .data import rows_from_parquet
        from .runner import RunRequest, run

        settings = settings_from_job(job, footprint(inputs.model_path), image=self.image(job))
        dataset = job.spec.dataset
        rows = rows_from_parquet(
            inputs.train_files, prompt_key=dataset.prompt_key, image_key=dataset.image_key
        )
        eval_rows: list[dict[str, Any]] = []
        if settings.eval_steps:
            eval_rows = rows_from_parquet(
                inputs.val_files, prompt_key=dataset.prompt_key, image_key=dataset.image_key
            )
            if not eval_rows:
                raise ConfigError(
                    f"evaluation.interval: validating every {job.spec.evaluation.interval} steps needs "
                    "validation rows, and the job's validation set is empty (or set evaluation.interval=0)"
                )
        os.environ.update(reporting_env(job))
        try:
            rewards = reward_funcs_for(job)
            plan = export_plan(job, inputs.val_files, rows, rewards, settings)
            session.start_reporting(len(rows))
            return run(
                RunRequest(
                    settings=settings,
                    model_path=inputs.model_path,
                    rows=rows,
                    eval_rows=eval_rows,
                    reward_funcs=rewards,
                    metrics_path=str(attempt.metrics_file),
                    resume=inputs.resume.checkpoint,
                    export_dir=job.paths.export_dir,
                    export=plan,
                )
            )
        finally:
            # A custom reward's workers, and whatever they started, end with the run.
            close_pools()

    def latest_checkpoint(self, job: ResolvedJob) -> Checkpoint | None:
        return latest_checkpoint(job.paths.checkpoint_dir)

    def checkpoint_at(self, job: ResolvedJob, path: str) -> Checkpoint:
        return checkpoint_at(path)

    def prune(self, job: ResolvedJob, keep: int) -> list[int]:
        deleted = prune_checkpoints(job.paths.checkpoint_dir, keep)
        return sorted(int(folder.name.removeprefix("checkpoint-")) for folder in deleted)

    def export(self, job: ResolvedJob) -> ExportResult | None:
        """The export `run` wrote at the end of training, or one made now from the latest checkpoint.

        A later attempt gets here when training finished but the export did not (a crash, a full
        volume): the base model is loaded, the checkpoint's adapter applied, and both written.
        """
        wanted = job.spec.export
        if not (wanted.hugging_face or wanted.lora_adapter):
            return None
        latest = latest_checkpoint(job.paths.checkpoint_dir)
        if latest is None:
            raise ConfigError(f"nothing to export: no checkpoint in {job.paths.checkpoint_dir}")
        done = read_record(job.paths.export_dir)
        if done is not None and done.get("step") == latest.step:
            from .export import finished_extras

            extras = finished_extras(job.paths.export_dir, gguf_choice(job), sample_wanted(job))
            if extras is not None:
                gguf, sample = extras
                return ExportResult(
                    latest.step,
                    done.get("model"),
                    done.get("loraAdapter"),
                    skipped=True,
                    gguf=gguf,
                    sample=sample,
                )
        missing = _missing_here(job)
        if missing:
            raise ConfigError("; ".join(missing))
        return _export_checkpoint(job, latest.path, latest.step, self.image(job))


def _prompt_fitting(job: ResolvedJob) -> Setting:
    """What happens to a prompt over maxPromptLength (TRL has no max_prompt_length: the engine does it)."""
    dataset = job.spec.dataset
    limit = dataset.max_prompt_length
    if dataset.filter_overlong_prompts:
        value = f"drop prompts over {limit} tokens"
    elif dataset.truncation == "error":
        value = f"fail before training on a prompt over {limit} tokens"
    else:
        value = f"cut the text of prompts over {limit} tokens ({dataset.truncation}), never an image"
    return Setting(
        "prompts",
        value,
        "spec.dataset.filterOverlongPrompts, spec.dataset.truncation, spec.dataset.maxPromptLength",
    )


def gguf_choice(job: ResolvedJob) -> GgufChoice | None:
    gguf = job.spec.export.gguf
    if gguf is None:
        return None
    sample = job.spec.export.sample
    return GgufChoice(gguf.quantization, gguf.projector, temperature=sample.temperature, min_p=sample.min_p)


def sample_wanted(job: ResolvedJob) -> bool:
    """The check runs on the merged model, so only when one is exported."""
    return job.spec.export.sample.enabled and job.spec.export.hugging_face


def export_plan(
    job: ResolvedJob,
    val_files: list[str],
    train_rows: list[dict[str, Any]],
    rewards: list[Any],
    settings: TrlSettings,
) -> ExportPlan:
    """What the job's spec.export asks for; the sample row is picked now, so a bad row fails early."""
    wanted = job.spec.export
    sample = None
    if sample_wanted(job):
        from .data import rows_from_parquet
        from .sample import SampleRequest, pick_row

        dataset = job.spec.dataset
        validation = (
            rows_from_parquet(val_files, prompt_key=dataset.prompt_key, image_key=dataset.image_key)
            if val_files
            else []
        )
        try:
            row, source = pick_row(validation, train_rows, wanted.sample.row)
        except ValueError as error:
            raise ConfigError(str(error)) from error
        sample = SampleRequest(
            row=row,
            source=source,
            max_new_tokens=wanted.sample.max_new_tokens or dataset.max_response_length,
            temperature=wanted.sample.temperature,
            min_p=wanted.sample.min_p,
            seed=job.spec.algorithm.seed,
        )
    return ExportPlan(
        adapter=wanted.lora_adapter,
        merged=wanted.hugging_face,
        gguf=gguf_choice(job),
        sample=sample,
        reward_funcs=tuple(rewards),
        reward_weights=settings.reward_weights,
    )


def _missing_here(job: ResolvedJob) -> list[str]:
    """What the job asks for that this installation lacks (GGUF tools, vLLM, loggers), one line each."""
    missing = []
    if job.spec.export.gguf is not None:
        absent = find_tools().missing()
        if absent:
            missing.append(
                "export.gguf: llama.cpp's GGUF tools are not installed here (missing "
                f"{', '.join(absent)}; `python -m grpo_trainer.engines.trl.gguf_tools install` builds them)"
            )
    if job.spec.logging.tensorboard and not any(
        importlib.util.find_spec(name) for name in ("tensorboard", "tensorboardX")
    ):
        missing.append("logging.tensorboard: the tensorboard package is not installed here")
    if job.spec.logging.wandb is not None and importlib.util.find_spec("wandb") is None:
        missing.append("logging.wandb: the wandb package is not installed here")
    if job.spec.rollout.generation == "vllm" and not vllm_installed():
        missing.append("rollout.generation: vllm is not installed here (use compiled or eager)")
    return missing


def _export_checkpoint(job: ResolvedJob, checkpoint: str, step: int, image: TrainerImage) -> ExportResult:
    from peft import PeftModel

    from .data import rows_from_parquet
    from .export import export_policy
    from .runner import load_policy

    settings = settings_from_job(job, image=image)
    grpo, _ = build_trl_config(settings)
    model_path = sources.resolve(job.spec.model.source, "model", job.paths.cache_dir, workdir=job.workdir)
    base, processor = load_policy(str(model_path), bf16=bool(grpo["bf16"]))
    policy = PeftModel.from_pretrained(base, str(checkpoint))
    rows: list[dict[str, Any]] = []
    val_files: list[str] = []
    if sample_wanted(job):
        prepared = data.prepare(job, progress=False)
        dataset = job.spec.dataset
        rows = rows_from_parquet(
            prepared.train_files, prompt_key=dataset.prompt_key, image_key=dataset.image_key
        )
        val_files = prepared.val_files
    plan = export_plan(job, val_files, rows, reward_funcs_for(job), settings)
    return export_policy(policy, processor, job.paths.export_dir, step=step, plan=plan)


def _versions(image: TrainerImage) -> str:
    """The training stack's versions in the image the plan is for."""
    return ", ".join(
        f"{package} {image.version(package)}" if image.has(package) else f"no {package} in {image.name}"
        for package in ("trl", "peft", "transformers")
    )


def _gguf_why(image: TrainerImage) -> str:
    tools = image.manifest.tools.get("llama.cpp")
    if tools is None:
        return f"spec.export.gguf: llama.cpp's GGUF tools, which {image.name} does not have"
    return f"spec.export.gguf: llama.cpp from llama-cpp-python {tools['version']}, in {tools['path']} in {image.name}"


def _imports(package: str) -> bool:
    """Whether `package` imports where this process runs (bitsandbytes loads CUDA libraries)."""
    if importlib.util.find_spec(package) is None:
        return False
    try:
        importlib.import_module(package)
    except Exception:  # a broken install (no CUDA libraries) is as good as none
        return False
    return True


def _missing_in(job: ResolvedJob, image: TrainerImage) -> list[str]:
    """What the job asks for that its trainer image does not have (its manifest), one line each."""
    missing = []
    if job.spec.export.gguf is not None and "llama.cpp" not in image.manifest.tools:
        missing.append(f"export.gguf: {image.name} has no llama.cpp GGUF tools")
    if job.spec.logging.tensorboard and not image.has("tensorboard"):
        missing.append(f"logging.tensorboard: {image.name} has no tensorboard package")
    if job.spec.logging.wandb is not None and not image.has("wandb"):
        missing.append(f"logging.wandb: {image.name} has no wandb package")
    if job.spec.rollout.generation == "vllm" and not image.has("vllm"):
        missing.append(f"rollout.generation: vllm, and {image.name} has no vLLM (use compiled or eager)")
    if not (image.has("trl") and image.has("peft")):
        missing.append(f"spec.engine.name: trl, and {image.name} has no TRL and peft")
    return missing


def _known_fields() -> tuple[set[str], set[str]] | None:
    """GRPOConfig's and LoraConfig's field names, when TRL and peft import here."""
    try:
        from peft import LoraConfig
        from trl import GRPOConfig
    except ImportError:
        return None
    fields: Any = dataclasses.fields
    return {f.name for f in fields(GRPOConfig)}, {f.name for f in fields(LoraConfig)}
