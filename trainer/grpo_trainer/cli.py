"""`grpo-train`: what the Ray job runs, and the tools to see what it would do.

    grpo-train plan          --spec FILE [--verl-version V] [--attempt N]   the exact engine command
    grpo-train validate      --spec FILE [--verl-version V]                 compose verl's config, check it
    grpo-train prepare-data  --spec FILE                                    data -> verl parquet (cached)
    grpo-train run           --spec FILE                                    one attempt (the entrypoint)
    grpo-train export        --spec FILE                                    final checkpoint -> HF model
    grpo-train report        --spec FILE [--once]                           status reporter on its own

FILE is the resolved job the operator mounts (default $GRPO_SPEC_FILE, else /grpo/spec/job.json) or a
GRPOJob manifest (paths as the operator would choose them). Exit codes: grpo_trainer.exitcodes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shlex
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from grpo_operator.api.v1alpha1 import ResolvedJob
from grpo_operator.api.v1alpha1.resolved import SPEC_FILE

from . import checkpoints, data, sources
from .engines import verl as verl_engine
from .engines.verl_compose import check, compose, effective_reward
from .engines.verl_configs import config_dir
from .engines.verl_versions import installed_version
from .exitcodes import OK, UNKNOWN, ConfigError, DataError, TrainerError
from .run import Options, resolve_profile, start_reporter
from .run import run as run_attempt
from .spec import Attempt, load_job

log = logging.getLogger("grpo_trainer")
_SAFE_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_DOUBLE_QUOTE_SPECIAL = re.compile(r'["$`\\!]')


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.handler(args))
    except TrainerError as exc:
        failure = exc.failure()
        print(f"error: {failure.message}", file=sys.stderr)
        if args.command in ("run", "export", "prepare-data"):
            print(failure.marker_line(), file=sys.stderr)
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
            default=os.environ.get("GRPO_SPEC_FILE", SPEC_FILE),
            help="resolved job JSON or GRPOJob manifest (default: $GRPO_SPEC_FILE or %(default)s)",
        )
        cmd.set_defaults(handler=handler)
        return cmd

    plan = command("plan", _plan, "print the exact engine command and why each override is there")
    plan.add_argument("--verl-version", help="plan for this verl release (default: the installed one)")
    plan.add_argument(
        "--attempt", type=int, default=None, help="attempt number (default: $GRPO_ATTEMPT or 1)"
    )
    plan.add_argument("--json", action="store_true", help="machine-readable output")

    validate = command("validate", _validate, "compose verl's own config with the overrides and check it")
    validate.add_argument("--verl-version", help="validate against this verl release (default: installed)")
    validate.add_argument("--config-dir", type=Path, help="verl's trainer/config folder to compose with")

    prepare = command(
        "prepare-data", _prepare, "turn the job's dataset into verl parquet on the shared volume"
    )
    prepare.add_argument("--no-progress", action="store_true")

    run = command("run", _run, "run one attempt: data, engine, status reports, export")
    run.add_argument("--verl-version", help="treat the installed verl as this release")
    run.add_argument("--no-report", action="store_true", help="do not patch the job's status")
    run.add_argument("--kubeconfig", help="kubeconfig for status reports (default: in-cluster, $KUBECONFIG)")

    command("export", _export, "merge the final checkpoint into a Hugging Face model (and LoRA adapter)")

    report = command("report", _report, "tail the attempt's metrics and patch the job's status")
    report.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster, then $KUBECONFIG)")
    report.add_argument("--once", action="store_true", help="read what is there, patch once, exit")
    report.add_argument("--interval", type=float, default=5.0, help="seconds between patches at most")
    return parser


def _attempt(job: ResolvedJob, number: int | None = None) -> Attempt:
    env = dict(os.environ)
    if number is not None:
        env["GRPO_ATTEMPT"] = str(number)
        env.pop("GRPO_METRICS_FILE", None)
    return Attempt.from_env(job, env)


def _planned_launch(args: argparse.Namespace) -> verl_engine.VerlLaunch:
    job = load_job(args.spec)
    if job.spec.engine.name != "verl":
        raise ConfigError(f"plan and validate cover the verl engine; this job uses {job.spec.engine.name!r}")
    profile = resolve_profile(args.verl_version)
    attempt = _attempt(job, getattr(args, "attempt", None))
    planned = data.planned(job)
    try:
        model = str(sources.resolve(job.spec.model.source, "model", job.paths.cache_dir, download=False))
    except DataError:
        model = f"<{job.spec.model.source}, downloaded into {job.paths.cache_dir} at run time>"
    return verl_engine.plan_launch(
        job,
        profile,
        attempt,
        model_path=model,
        train_files=planned.train_files,
        val_files=planned.val_files,
        resume=checkpoints.decide_resume(job, attempt.number, dry_run=True),
    )


def _plan(args: argparse.Namespace) -> int:
    launch = _planned_launch(args)
    if args.json:
        payload = {
            "verlVersion": launch.profile.reference_version,
            "command": launch.command,
            "env": launch.env,
            "overrides": [{"override": o.render(), "why": o.why} for o in launch.plan.overrides],
            "warnings": launch.warnings,
        }
        print(json.dumps(payload, indent=2))
        return OK
    print(f"# verl {launch.profile.reference_version}; environment of the engine and every Ray worker:")
    for key, value in sorted(launch.env.items()):
        print(f"#   {key}={value}")
    words = [_shell_word(word) for word in launch.command]
    print(" \\\n    ".join([" ".join(words[:3]), *words[3:]]))
    print("\n# why:")
    for override in launch.plan.overrides:
        if override.why:
            print(f"#   {override.key}: {override.why}")
    for warning in launch.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return OK


def _shell_word(word: str) -> str:
    """Shell quoting that stays readable: double quotes for Hydra's single-quoted values."""
    if _SAFE_WORD.fullmatch(word):
        return word
    if not _DOUBLE_QUOTE_SPECIAL.search(word):
        return f'"{word}"'
    return shlex.quote(word)


def _validate(args: argparse.Namespace) -> int:
    launch = _planned_launch(args)
    folder = args.config_dir or config_dir(args.verl_version or installed_version() or "")
    cfg = compose(folder, launch.plan.rendered())
    findings = check(cfg, launch.plan, launch.profile)
    reward = effective_reward(cfg, launch.profile)
    print(f"composed verl's ppo_trainer from {folder} with {len(launch.plan.overrides)} overrides")
    print(f"reward verl will load: {reward.get('path')} :: {reward.get('name')}")
    for warning in findings.warnings:
        print(f"warning: {warning}")
    if findings.problems:
        for problem in findings.problems:
            print(f"problem: {problem}")
        raise ConfigError(f"{len(findings.problems)} problem(s) in the composed verl configuration")
    print("ok")
    return OK


def _prepare(args: argparse.Namespace) -> int:
    job = load_job(args.spec)
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
    job = load_job(args.spec)
    options = Options(verl_version=args.verl_version, report=not args.no_report, kubeconfig=args.kubeconfig)
    return run_attempt(job, _attempt(job), options)


def _export(args: argparse.Namespace) -> int:
    from .export import export

    job = load_job(args.spec)
    result = export(job)
    print(json.dumps(result.__dict__ if result else {"skipped": "the spec asks for no export"}, indent=2))
    return OK


def _report(args: argparse.Namespace) -> int:
    from .kube import KubeStatusWriter

    job = load_job(args.spec)
    attempt = _attempt(job)
    writer = KubeStatusWriter(attempt.job_name, attempt.namespace, args.kubeconfig)
    tracked = checkpoints.tracked_step(job.paths.checkpoint_dir)
    reporter = start_reporter(
        job, attempt, writer, data.known_train_rows(job), tracked if attempt.number > 1 else None
    )
    reporter.min_interval = args.interval
    if not args.once:
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
    return OK if reporter.stop() else UNKNOWN
