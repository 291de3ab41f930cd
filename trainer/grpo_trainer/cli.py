"""`grpo-train`: what the Ray job runs, and the tools to see what it would do, for every engine.

    grpo-train plan          --spec FILE [--attempt N] [--json]   every setting of the run and why
    grpo-train validate      --spec FILE                          check the plan (verl: compose its config)
    grpo-train prepare-data  --spec FILE                          the dataset -> parquet (cached)
    grpo-train run           --spec FILE                          one attempt (the entrypoint)
    grpo-train export        --spec FILE                          final checkpoint -> HF model
    grpo-train report        --spec FILE [--once]                 status reporter on its own

FILE is the resolved job the operator mounts (default $GRPO_SPEC_FILE, else /grpo/spec/job.json) or a
GRPOJob manifest (paths as the operator would choose them). `--workdir DIR` (default $GRPO_WORKDIR)
runs outside a pod: the pod's /grpo tree is DIR/grpo. Exit codes: grpo_operator.api.contract.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from grpo_operator.api.contract import OK, SPEC_FILE, UNKNOWN, Env, under_workdir
from grpo_operator.api.v1alpha1 import GRPOJob, ResolvedJob
from grpo_operator.children.rayjob import save_on_stop_bound
from grpo_operator.config import Settings
from grpo_operator.verdict import job_problems

from . import data, trainer_image
from .arguments import positive_int
from .attempt import Options, start_reporter
from .attempt import run as run_attempt
from .engines.base import Engine, EngineOptions, RunPlan, SaveOnStop, engine_for, plan_json, plan_text
from .engines.verl.versions import version_argument  # also `kubectl grpo plan`'s check
from .failures import ConfigError, TrainerError
from .inputs import planned_inputs
from .kube import KubeStatusWriter
from .rewards.custom import check_defines
from .spec import Attempt, load_job, localise_environment, measured_status
from .stopping import hook_main
from .supervisor import ATTEMPT_PROCESS_FLAG, supervise
from .trainer_image import TrainerImage

log = logging.getLogger("grpo_trainer")
# The commands that only read what an attempt left under --workdir.
_READS_WORKDIR = frozenset({"plan", "validate", "export"})


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.workdir:
        # Every path is read and written under it, by this process and every one it starts
        # (verl's workers change their working folder): one absolute folder for all of them.
        args.workdir = os.path.abspath(args.workdir)
        if args.command in _READS_WORKDIR and not os.path.isdir(args.workdir):
            # A mistyped folder would otherwise give a plan of paths that exist nowhere, or an
            # export that finds no checkpoint: `run` and `prepare-data` create it, these only read.
            parser.error(
                f"--workdir (or ${Env.WORKDIR}) {args.workdir}: no such folder; "
                f"{args.command} reads the job's files there"
            )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    localise_environment(os.environ, args.workdir)
    try:
        return int(args.handler(args))
    except TrainerError as exc:
        failure = exc.failure()
        print(f"error: {failure.message}", file=sys.stderr)
        if args.command in ("run", "export", "prepare-data"):
            print(failure.line(), file=sys.stderr)
        return failure.code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo-train", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def command(
        name: str, handler: Callable[[argparse.Namespace], int], help_: str
    ) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_, description=help_)
        cmd.add_argument(
            "--spec",
            default=os.environ.get(Env.SPEC_FILE, SPEC_FILE),
            help=f"resolved job JSON or GRPOJob manifest (default: ${Env.SPEC_FILE} or %(default)s)",
        )
        cmd.add_argument(
            "--workdir",
            default=os.environ.get(Env.WORKDIR) or None,
            help=f"outside a pod: the pod's /grpo tree is this folder's grpo/ (default: ${Env.WORKDIR})",
        )
        cmd.set_defaults(handler=handler)
        return cmd

    plan = command("plan", _plan, "print every setting of the run and why it has its value")
    plan.add_argument(
        "--verl-version",
        type=version_argument,
        help="verl jobs: plan for this verl release (default: installed)",
    )
    plan.add_argument(
        "--attempt", type=positive_int, default=None, help=f"attempt number (default: ${Env.ATTEMPT} or 1)"
    )
    plan.add_argument("--json", action="store_true", help="machine-readable output")

    validate = command(
        "validate", _validate, "check the plan: batch arithmetic, and verl's own config for verl"
    )
    validate.add_argument(
        "--verl-version",
        type=version_argument,
        help="verl jobs: validate against this release (default: installed)",
    )
    validate.add_argument(
        "--config-dir", type=_folder, help="verl jobs: verl's trainer/config folder to compose with"
    )

    prepare = command("prepare-data", _prepare, "turn the job's dataset into parquet on the shared volume")
    prepare.add_argument("--no-progress", action="store_true")

    run = command("run", _run, "run one attempt: data, engine, status reports, export")
    run.add_argument(
        "--verl-version", type=version_argument, help="verl jobs: treat the installed verl as this release"
    )
    run.add_argument("--no-report", action="store_true", help="do not patch the job's status")
    run.add_argument("--kubeconfig", help="kubeconfig for status reports (default: in-cluster, $KUBECONFIG)")
    run.add_argument(ATTEMPT_PROCESS_FLAG, action="store_true", help=argparse.SUPPRESS)

    command("export", _export, "the final checkpoint -> a Hugging Face model (and LoRA adapter)")

    report = command("report", _report, "tail the attempt's metrics and patch the job's status")
    report.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster, then $KUBECONFIG)")
    report.add_argument("--once", action="store_true", help="read what is there, patch once, exit")
    report.add_argument(
        "--interval", type=_positive_float, default=5.0, help="seconds between patches at most"
    )

    # Every Ray pod's preStop hook (children/rayjob.py): no --spec, the attempt's files are named by
    # the metrics file the operator sets on the pod.
    stop = sub.add_parser(
        "yield",
        help="a Ray pod's preStop: ask the attempt to save and stop, and wait until it has ended",
        description="Ask the running attempt to save its step and stop (save, then yield), and wait "
        "until it has ended or --timeout seconds have passed. Never fails: a hook's failure would "
        "only delay the pod's stop.",
    )
    stop.add_argument("--timeout", type=_positive_float, required=True, help="seconds to wait at most")
    stop.add_argument(
        "--metrics-file",
        default=os.environ.get(Env.METRICS_FILE, ""),
        help=f"the attempt's metrics file (default: ${Env.METRICS_FILE})",
    )
    stop.set_defaults(handler=_yield, workdir=os.environ.get(Env.WORKDIR) or None)
    return parser


def _yield(args: argparse.Namespace) -> int:
    if not args.metrics_file:
        print(f"grpo-train yield: no attempt to stop (${Env.METRICS_FILE} is not set)", flush=True)
        return 0
    return hook_main(under_workdir(args.metrics_file, args.workdir), args.timeout)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected more than 0 seconds, got {text}")
    return value


def _folder(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"no folder {text}")
    return path


def _attempt(
    args: argparse.Namespace, number: int | None = None, *, planning: bool = False
) -> tuple[Attempt, Engine, ResolvedJob, TrainerImage | None]:
    """The job, its attempt and its engine; `planning`: the engine plans for the trainer image the
    job will run in (trainer_image.for_job), else for the image this process runs in."""
    job = load_job(args.spec, args.workdir)
    env = dict(os.environ)
    if number is not None:
        env[Env.ATTEMPT] = str(number)
        env.pop(Env.METRICS_FILE, None)
    image = trainer_image.for_job(job) if planning else None
    verl_version = getattr(args, "verl_version", None)
    options = EngineOptions(
        # verl plans for the image's verl unless --verl-version names another release.
        verl_version=verl_version or (image.version("verl") if image else None),
        verl_config_dir=str(args.config_dir) if getattr(args, "config_dir", None) else None,
        progress=not getattr(args, "no_progress", False),
        image=image,
    )
    return Attempt.from_env(job, env), engine_for(job.spec.engine.name, options), job, image


def _planned(args: argparse.Namespace) -> tuple[RunPlan, Engine, ResolvedJob, TrainerImage]:
    """The engine's plan of a job the cluster would accept, made for the trainer image the job
    will run in (its manifest, never this machine's packages); ConfigError (after printing every
    problem) for one the API server or the operator would refuse."""
    attempt, engine, job, image = _attempt(args, getattr(args, "attempt", None), planning=True)
    assert image is not None
    problems = spec_problems(job)
    if problems:
        # validate's verdict is its output; plan's output is the plan, so its problems go to stderr.
        stream = sys.stdout if args.command == "validate" else sys.stderr
        for problem in problems:
            print(f"problem: {problem}", file=stream)
        raise ConfigError(f"{len(problems)} problem(s) in the job: the cluster would refuse it")
    return engine.plan(job, attempt, planned_inputs(job, attempt.number, engine)), engine, job, image


def spec_problems(job: ResolvedJob) -> list[str]:
    """The verdict of the CRD's rules and the operator's checks (grpo_operator.verdict) on `job`.

    A resolved job from a pod was accepted with the operator's own settings, whose profiles this
    process does not know: only its accelerator profile is taken on trust.
    """
    settings = Settings()
    manifest = GRPOJob(metadata={"name": job.name, "namespace": job.namespace}, spec=job.spec)
    problems = job_problems(manifest, settings)
    if settings.profile(job.accelerator.name) is None:
        problems = [p for p in problems if p.field != "spec.resources.accelerator"]
    return [str(p) for p in problems]


def _save_on_stop(args: argparse.Namespace, job: ResolvedJob) -> SaveOnStop:
    """How the operator would stop the job's pods, from its spec and what its status measured."""
    manifest = GRPOJob(
        metadata={"name": job.name, "namespace": job.namespace},
        spec=job.spec,
        status=measured_status(args.spec, args.workdir),
    )
    return SaveOnStop(save_on_stop_bound(manifest))


def _plan(args: argparse.Namespace) -> int:
    plan, _, job, image = _planned(args)
    stop = _save_on_stop(args, job)
    if args.json:
        print(json.dumps(plan_json(plan, image, stop), indent=2, default=str))
        return OK
    print(plan_text(plan, image, stop))
    for warning in [*image.warnings, *plan.warnings]:
        print(f"warning: {warning}", file=sys.stderr)
    return OK


def _validate(args: argparse.Namespace) -> int:
    plan, engine, job, _ = _planned(args)
    findings = engine.check(job, plan)
    if findings.checked:
        print(findings.checked)
    for warning in findings.warnings:
        print(f"warning: {warning}")
    problems = [*findings.problems, *_reward_file_problems(job)]
    if problems:
        for problem in problems:
            print(f"problem: {problem}")
        raise ConfigError(f"{len(problems)} problem(s) in the {plan.engine} plan")
    print("ok")
    return OK


def _reward_file_problems(job: ResolvedJob) -> list[str]:
    """With --workdir the job's own reward file is here: parsed (never run), as `run` does before
    training, so a syntax error or a missing function shows now. Without it the file lives only in
    the job's ConfigMap, which `kubectl grpo validate` checks on the cluster."""
    custom = job.spec.reward.custom
    if custom is None or not job.workdir or not job.paths.reward_file:
        return []
    try:
        check_defines(job.local_path(job.paths.reward_file), custom.function)
    except ConfigError as exc:
        return [str(exc)]
    return []


def _prepare(args: argparse.Namespace) -> int:
    job = load_job(args.spec, args.workdir)
    prepared = data.prepare(job, progress=not args.no_progress)
    for warning in prepared.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        json.dumps(
            {
                "train": prepared.train_files,
                "validation": prepared.val_files,
                "trainRows": prepared.train_rows,
                "built": prepared.built,
            },
            indent=2,
        )
    )
    return OK


def _run(args: argparse.Namespace) -> int:
    """The attempt, in a child process that `supervisor` watches (an exit 0 counts only for an
    attempt that recorded its end); the child, started with ATTEMPT_PROCESS_FLAG, runs it."""
    job = load_job(args.spec, args.workdir)
    if not args.attempt_process:
        return supervise(args.argv, job, Attempt.from_env(job))
    options = Options(
        engine=EngineOptions(verl_version=args.verl_version),
        report=not args.no_report,
        kubeconfig=args.kubeconfig,
    )
    return run_attempt(job, Attempt.from_env(job), options)


def _export(args: argparse.Namespace) -> int:
    _, engine, job, _ = _attempt(args)
    result = engine.export(job)
    print(json.dumps(result.__dict__ if result else {"skipped": "the spec asks for no export"}, indent=2))
    return OK


def _report(args: argparse.Namespace) -> int:
    attempt, engine, job, _ = _attempt(args)
    try:
        writer = KubeStatusWriter(attempt.job_name, attempt.namespace, args.kubeconfig)
        found = writer.exists()
    except Exception as exc:  # lightkube's ConfigError, an unreadable kubeconfig, the API server away
        where = (
            f"with --kubeconfig {args.kubeconfig}"
            if args.kubeconfig
            else "give --kubeconfig or set $KUBECONFIG"
        )
        raise ConfigError(f"cannot reach the job's status: {_one_line(exc)} ({where})") from exc
    if not found:
        raise ConfigError(
            f"no GRPOJob {attempt.namespace}/{attempt.job_name} to report to (set ${Env.NAMESPACE} and ${Env.JOB_NAME})"
        )
    latest = engine.latest_checkpoint(job)
    reporter = start_reporter(
        job,
        attempt,
        writer,
        engine,
        data.known_train_rows(job),
        latest.step if latest and attempt.number > 1 else None,
    )
    reporter.min_interval = args.interval
    if not args.once:
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
    return OK if reporter.stop() else UNKNOWN


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
