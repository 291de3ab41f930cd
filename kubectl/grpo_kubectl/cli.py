"""`kubectl grpo`: see and steer GRPOJobs from where you work (`kubectl-grpo` on PATH).

    kubectl grpo validate -f JOB.yaml [--offline]     the API server's verdict (dry run), else the same rules here
    kubectl grpo plan (-f JOB.yaml | JOB)             every setting the trainer will use, and why
    kubectl grpo status JOB                           phase, progress, metrics, health, checkpoint, log
    kubectl grpo logs JOB [-f] [--attempt N]          an attempt's output, also after its Ray cluster is gone
    kubectl grpo plot JOB [--output PNG]              reward, validation score, response length
    kubectl grpo suspend JOB | resume JOB             tear the Ray cluster down, keep the checkpoints; resume
    kubectl grpo checkpoints JOB                      the checkpoints on the job's volume

Files on the job's volume (logs, metrics, checkpoints) are read through a short-lived Pod that
mounts it read-only, or, with `--workdir DIR`, from a folder standing for the pods' /grpo tree.
Errors are one line on stderr; exit codes: 0 ok, 1 error, 2 usage, 3 the job would be refused.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from grpo_operator.api.contract import CONFIG_ERROR, attempt_log_file, job_dir
from grpo_operator.api.v1alpha1 import GRPOJob, JobPaths
from grpo_operator.config import Settings
from grpo_operator.preflight import judge as preflight_judge
from grpo_operator.preflight import references
from grpo_operator.validation import validate
from grpo_operator.verdict import manifest_problems, parse
from grpo_trainer.spec import grpojob_document
from lightkube import ApiError

from . import drawing
from .cluster import Cluster, NoVerdictError, PluginError, one_line
from .history import history_from_metrics
from .reader import DEFAULT_IMAGE
from .show import describe
from .volume import LocalVolume, PodVolume, Volume

TERMINAL = ("Succeeded", "Failed")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.code
    except ApiError as error:
        print(f"error: the API server refused: {error.status.code} {error.status.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # a bug: still one line, the traceback on request
        if os.environ.get("GRPO_DEBUG"):
            traceback.print_exc()
        print(
            f"error: internal error: {type(error).__name__}: {one_line(error)} (GRPO_DEBUG=1 shows where)",
            file=sys.stderr,
        )
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubectl grpo", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, handler: Callable[[argparse.Namespace], int], help_: str
    ) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_, description=help_)
        cmd.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)")
        cmd.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
        cmd.add_argument("--context", help="kubeconfig context (default: the current one)")
        cmd.set_defaults(handler=handler)
        return cmd

    def volume_options(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument(
            "--workdir",
            help="read the job's volume from this folder (standing for the pods' /grpo tree) instead of a pod",
        )
        cmd.add_argument(
            "--image", default=DEFAULT_IMAGE, help="image of the reader pod (default: %(default)s)"
        )

    check = command("validate", _validate, "the cluster's verdict on a GRPOJob, before applying it")
    check.add_argument(
        "-f", "--filename", required=True, help="the GRPOJob manifest (YAML or JSON; - for stdin)"
    )
    check.add_argument(
        "--offline", action="store_true", help="do not ask the cluster; the same rules run here"
    )

    plan = command("plan", _plan, "every setting the trainer will use for a job, and why")
    plan.add_argument("job", nargs="?", help="a GRPOJob in the cluster (or give -f)")
    plan.add_argument("-f", "--filename", help="a GRPOJob manifest")
    plan.add_argument("--verl-version", help="verl jobs: plan for this verl release")
    plan.add_argument("--attempt", type=int, help="plan this attempt (default: 1)")
    plan.add_argument("--json", action="store_true", help="machine-readable output")

    status = command("status", _status, "a job's phase, progress, metrics, health and where its log is")
    status.add_argument("job")
    status.add_argument("-o", "--output", choices=["text", "json"], default="text")

    logs = command("logs", _logs, "an attempt's output, kept on the job's volume")
    logs.add_argument("job")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing as the trainer writes")
    logs.add_argument("--attempt", type=int, help="which attempt (default: the current one)")
    volume_options(logs)

    plot = command("plot", _plot, "reward, validation score and response length: a PNG and a terminal chart")
    plot.add_argument(
        "job", nargs="?", help="a GRPOJob (its status.history, or its metrics files with --full)"
    )
    plot.add_argument("--metrics-file", action="append", help="plot these metrics files instead (no cluster)")
    plot.add_argument("--full", action="store_true", help="every step, from the metrics files on the volume")
    plot.add_argument("-o", "--output", help="the PNG (default: <job>-curves.png; 'none' for none)")
    plot.add_argument("--no-terminal", action="store_true", help="do not draw in the terminal")
    volume_options(plot)

    suspend = command("suspend", _suspend, "tear the job's Ray cluster down and keep its checkpoints")
    suspend.add_argument("job")
    resume = command("resume", _resume, "start a suspended job again, from its latest checkpoint")
    resume.add_argument("job")

    ckpts = command("checkpoints", _checkpoints, "the checkpoints on the job's volume")
    ckpts.add_argument("job")
    volume_options(ckpts)
    return parser


# --- helpers -----------------------------------------------------------------------------------


def _cluster(args: argparse.Namespace) -> Cluster:
    return Cluster(args.kubeconfig, args.context, args.namespace)


def _read_manifest(path: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise PluginError(f"cannot read {path}: {error.strerror or error}") from error
    try:
        document = grpojob_document(text)  # the GRPOJob of a file that also holds its ConfigMap
    except yaml.YAMLError as error:
        raise PluginError(f"{path} is not valid YAML: {one_line(error)}") from error
    if not isinstance(document, dict) or document.get("kind") != "GRPOJob":
        raise PluginError(f"{path} does not hold a GRPOJob (kind: GRPOJob)")
    return document


def _job_folder(name: str, body: dict[str, Any] | None) -> str:
    """The job's folder as the pods see it: named after the job and its uid (contract.job_dir), so
    a job re-created under the same name has its own. A run by hand (`--workdir`, no cluster) has
    no uid: its folder is the name alone, as the trainer makes it."""
    return job_dir(name, ((body or {}).get("metadata") or {}).get("uid", ""))


def _job_paths(name: str, body: dict[str, Any] | None) -> JobPaths:
    """The job's folders as the pods see them (JobPaths.in_folder: the layout the trainer writes)."""
    return JobPaths.in_folder(_job_folder(name, body))


def _metrics_dir(name: str, body: dict[str, Any] | None) -> str:
    return _job_paths(name, body).metrics_dir


def _volume(args: argparse.Namespace, cluster: Cluster | None, job: GRPOJob | None) -> Volume:
    if args.workdir:
        return LocalVolume(args.workdir)
    if cluster is None or job is None:
        raise PluginError("no cluster to read the job's volume through; give --workdir")
    return PodVolume(cluster, job, args.image)


# --- commands ----------------------------------------------------------------------------------


def _validate(args: argparse.Namespace) -> int:
    manifest = _read_manifest(args.filename)
    problems: list[str]
    if args.offline:
        how = "offline"
    else:
        try:
            cluster = _cluster(args)
            refused = cluster.dry_run(manifest)
        except NoVerdictError as why:
            how = f"offline ({why})"
        except PluginError as why:  # no kubeconfig at all
            how = f"offline ({why})"
        else:
            if refused:
                print(f"problem: {refused}")
                print("refused by the API server (dry run)", file=sys.stderr)
                return CONFIG_ERROR
            job, schema = parse(manifest, cluster.namespace)
            assert job is not None, schema  # the server accepted the schema the models are made from
            modes = None
            if job.spec.checkpoint.claim_name and job.spec.resources.nodes > 1:
                modes = cluster.claim_access_modes(job.spec.checkpoint.claim_name)
            problems = [str(p) for p in validate(job, Settings(), claim_access_modes=modes)]
            problems += _preflight(cluster, job, _sent_along(args.filename))
            return _verdict(
                problems, "the API server accepts it (dry run); the operator's checks and what the job names"
            )
    problems = [str(p) for p in manifest_problems(manifest)]
    return _verdict(problems, f"checked {how}: the CRD's schema and CEL rules, then the operator's checks")


def _sent_along(path: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The objects of the file beside its GRPOJob (an example with its reward ConfigMap): applied
    with it, so they count as there."""
    if path == "-":
        return {}
    try:
        documents = list(yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError):
        return {}
    return {
        (d["kind"], d["metadata"]["name"]): d
        for d in documents
        if isinstance(d, dict)
        and d.get("kind") in ("ConfigMap", "Secret", "PersistentVolumeClaim")
        and isinstance(d.get("metadata"), dict)
        and d["metadata"].get("name")
    }


def _preflight(cluster: Cluster, job: GRPOJob, along: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """The operator's preflight with the user's credentials: every claim, ConfigMap, Secret and key
    the job names, and the custom reward file (a missing object would keep the job waiting)."""
    found: dict[tuple[str, str], Any] = dict(along)
    for ref in references(job):
        if (ref.kind, ref.name) not in found:
            found[(ref.kind, ref.name)] = cluster.read_object(ref.kind, ref.name)
    verdict = preflight_judge(job, found)
    problems = [str(p) for p in verdict.problems]
    problems += [
        f"{ref.field}: {ref.kind} {ref.name!r} does not exist in namespace {cluster.namespace} "
        "(the job would wait Pending for it)"
        for ref in verdict.missing
    ]
    return problems


def _verdict(problems: list[str], checked: str) -> int:
    for problem in problems:
        print(f"problem: {problem}")
    if problems:
        print(f"{len(problems)} problem(s); {checked}", file=sys.stderr)
        return CONFIG_ERROR
    print(f"ok: {checked} pass" if "operator's checks" in checked else f"ok: {checked}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from grpo_trainer.cli import main as grpo_train

    if bool(args.filename) == bool(args.job):
        raise PluginError("give a job name or -f FILE")
    if args.filename:
        manifest = _read_manifest(args.filename)
    else:
        body = _cluster(args).job_body(args.job)
        manifest = {k: body[k] for k in ("apiVersion", "kind", "spec")}
        manifest["metadata"] = {"name": body["metadata"]["name"], "namespace": body["metadata"]["namespace"]}
    with tempfile.TemporaryDirectory(prefix="kubectl-grpo-") as tmp:
        spec = Path(tmp) / "job.yaml"
        spec.write_text(yaml.safe_dump(manifest), encoding="utf-8")
        argv = ["plan", "--spec", str(spec)]
        argv += ["--verl-version", args.verl_version] if args.verl_version else []
        argv += ["--attempt", str(args.attempt)] if args.attempt else []
        argv += ["--json"] if args.json else []
        return grpo_train(argv)


def _status(args: argparse.Namespace) -> int:
    body = _cluster(args).job_body(args.job)
    if args.output == "json":
        print(json.dumps(body.get("status") or {}, indent=2))
    else:
        print(describe(body))
    return 0


def _job_if_reachable(args: argparse.Namespace) -> tuple[Cluster | None, dict[str, Any] | None]:
    """The cluster and the job, needed for its uid (its folder's name) and status. With --workdir a
    run by hand needs neither: no cluster or no such job there reads the folder by name alone."""
    try:
        cluster = _cluster(args)
        return cluster, cluster.job_body(args.job)
    except PluginError:
        if args.workdir:
            return None, None
        raise


def _logs(args: argparse.Namespace) -> int:
    cluster, body = _job_if_reachable(args)
    if body is None and args.attempt is None:
        raise PluginError(f"give --attempt: grpojob {args.job} cannot be read from a cluster")
    job = GRPOJob.model_validate(body) if body else None
    volume = _volume(args, cluster, job)
    attempt = args.attempt or (body or {}).get("status", {}).get("attempt")
    if not attempt:
        raise PluginError(f"grpojob {args.job} has not started an attempt yet")
    path = attempt_log_file(_metrics_dir(args.job, body), attempt)
    _print_lines(volume.follow(path, _finished(cluster, args.job)) if args.follow else volume.read(path))
    return 0


def _finished(cluster: Cluster | None, name: str, every: float = 5.0) -> Callable[[], bool]:
    """For `logs -f` on a local folder: stop once the job has ended (never without a cluster)."""
    last = [0.0, False]

    def done() -> bool:
        if cluster is None:
            return False
        if time.monotonic() - last[0] >= every:
            last[0] = time.monotonic()
            phase = ((cluster.job_body(name).get("status")) or {}).get("phase")
            last[1] = phase in TERMINAL
        return bool(last[1])

    return done


def _print_lines(lines: Iterator[str]) -> None:
    for line in lines:
        print(line, flush=True)


def _plot(args: argparse.Namespace) -> int:
    if args.metrics_file:
        lines: list[str] = []
        for file in args.metrics_file:
            try:
                lines += Path(file).read_text(encoding="utf-8").splitlines()
            except OSError as error:
                raise PluginError(f"cannot read {file}: {error.strerror or error}") from error
        title = args.job or ", ".join(Path(f).name for f in args.metrics_file)
        history = history_from_metrics(lines)
    elif not args.job:
        raise PluginError("give a job name or --metrics-file")
    else:
        cluster = _cluster(args)
        body = cluster.job_body(args.job)
        status = body.get("status") or {}
        title = f"{cluster.namespace}/{args.job}"
        if args.full:
            volume = _volume(args, cluster, GRPOJob.model_validate(body))
            history = history_from_metrics(
                volume.metrics_lines(_metrics_dir(args.job, body), status.get("attempt") or 1)
            )
        else:
            history = status.get("history") or []
    found = drawing.curves(history)
    if not found:
        raise PluginError(f"no points to plot yet for {title}: the trainer has not reported a step")
    if not args.no_terminal:
        print(title)
        for curve in found:
            print()
            print(drawing.terminal_chart(curve))
    if (args.output or "").lower() != "none":
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", args.job or "metrics")
        path = drawing.write_png(found, Path(args.output or f"{name}-curves.png"), title)
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _suspend(args: argparse.Namespace) -> int:
    _cluster(args).set_suspend(args.job, True)
    print(f"grpojob {args.job} suspended: its Ray cluster is torn down, its checkpoints kept")
    return 0


def _resume(args: argparse.Namespace) -> int:
    _cluster(args).set_suspend(args.job, False)
    print(f"grpojob {args.job} resumed: a new attempt continues from the latest checkpoint")
    return 0


def _checkpoints(args: argparse.Namespace) -> int:
    cluster, body = _job_if_reachable(args)
    job = GRPOJob.model_validate(body) if body else None
    volume = _volume(args, cluster, job)
    folder = _job_paths(args.job, body).checkpoint_dir
    entries = [
        (stamp, name)
        for stamp, name in volume.listing(folder)
        if name.startswith(("global_step_", "checkpoint-"))
    ]
    if not entries:
        print(f"no checkpoints yet in {folder}")
        return 0
    entries.sort(key=lambda e: int(re.sub(r"\D", "", e[1]) or 0))
    print(f"{'STEP':>8}  {'SAVED (UTC)':<20}  PATH")
    for stamp, name in entries:
        step = int(re.sub(r"\D", "", name) or 0)
        saved = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(stamp))
        print(f"{step:>8}  {saved:<20}  {folder}/{name}")
    return 0
