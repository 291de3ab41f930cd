"""`kubectl grpo`: see and steer GRPOJobs from where you work (`kubectl-grpo` on PATH).

    kubectl grpo list [-A] [-o wide|json|yaml|name]   the jobs of a namespace, or of all of them
    kubectl grpo validate -f JOB.yaml [--offline]     the API server's verdict (dry run), else the same rules here
    kubectl grpo plan (-f JOB.yaml | JOB)             every setting the trainer will use, and why
    kubectl grpo status JOB [-o json|yaml]            phase, progress, metrics, health, checkpoint, log
    kubectl grpo logs JOB [-f] [--attempt N]          an attempt's output, also after its Ray cluster is gone
    kubectl grpo plot JOB [--png FILE] [--baseline V] reward (moving average), validation, length, entropy, KL
    kubectl grpo suspend JOB | resume JOB             tear the Ray cluster down, keep the checkpoints; resume
    kubectl grpo checkpoints JOB                      the checkpoints on the job's volume
    kubectl grpo dashboard JOB [--port N]             the job's Ray dashboard on localhost
    kubectl grpo completion bash|zsh                  a shell completion script

kubectl's flags (-n, --context, --kubeconfig; -A and -o where a command has them) go before or
after the command; each command's --help lists what it takes. Files on
the job's volume (logs, metrics, checkpoints) are read through a short-lived Pod that mounts it
read-only, or, with `--workdir DIR`, from a folder whose `grpo/` is the pods' /grpo tree; after the
job is deleted, `--claim CLAIM` reads the volume it left (`logs`, `checkpoints`, `plot`). Errors
are one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import httpx2 as httpx
import yaml
from grpo_operator.api.contract import (
    CHECKPOINT_MOUNT,
    CONFIG_ERROR,
    JOB_UID_CHARS,
    attempt_log_file,
    job_dir,
)
from grpo_operator.api.documents import DocumentError, decode, grpojob_manifest
from grpo_operator.api.v1alpha1 import GROUP, VERSION, GRPOJob, JobPaths
from grpo_operator.api.v1alpha1.status import history_points
from grpo_operator.children.meta import checkpoint_claim_name
from grpo_operator.config import Settings
from grpo_operator.preflight import judge as preflight_judge
from grpo_operator.preflight import references
from grpo_operator.validation import validate
from grpo_operator.verdict import manifest_problems, parse
from grpo_trainer.arguments import positive_int
from lightkube import ApiError

from . import completion, drawing, listing, portforward
from .cluster import Cluster, JobNotFoundError, NoVerdictError, PluginError, one_line, stored_job
from .companions import companions
from .history import history_from_metrics, steps_in
from .portforward import RAY_DASHBOARD_PORT
from .reader import DEFAULT_IMAGE, ReadTarget
from .show import describe
from .version import extra_for, plugin_version
from .volume import LocalVolume, PodVolume, Volume

TERMINAL = ("Succeeded", "Failed")
OUTPUTS = ("json", "yaml", "wide", "name")
USAGE = 2
EXIT_CODES = """exit codes:
  0    done
  1    an error (the message says which; nothing was changed half-way)
  2    a usage mistake (an unknown flag, a missing argument, an output the command has not)
  3    the job would be refused (validate), or the file asked for is not on the volume
  130  interrupted (Ctrl-C)"""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # named with the command's help, which lists what it takes
            completion.commands(parser)[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as done:  # --help, --version, or a usage error already printed in one line
        return int(done.code or 0)
    try:
        _check_options(args)
        return int(args.handler(args))
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.code
    except ApiError as error:
        print(f"error: the API server refused: {error.status.code} {error.status.message}", file=sys.stderr)
        return 1
    except httpx.HTTPError as error:  # a request no command wrapped: still the server, not a bug
        print(f"error: cannot reach the API server: {one_line(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except ModuleNotFoundError as error:
        extra = extra_for(error.name)
        if extra is None:
            raise
        print(
            f"error: `kubectl grpo {args.command}` needs grpo-kubectl[{extra}] "
            f"(pip install 'grpo-kubectl[{extra}]')",
            file=sys.stderr,
        )
        return 1
    except Exception as error:  # a bug: still one line, the traceback on request
        if os.environ.get("GRPO_DEBUG"):
            traceback.print_exc()
        print(
            f"error: internal error: {type(error).__name__}: {one_line(error)} (GRPO_DEBUG=1 shows where)",
            file=sys.stderr,
        )
        return 1


class _Parser(argparse.ArgumentParser):
    """A usage mistake is one line and exit code 2, as kubectl's own are."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"error: {message} (see {self.prog} --help)\n")


def complete(argv: list[str] | None = None) -> int:
    """`kubectl_complete-grpo`: what kubectl runs for `kubectl grpo <TAB>` (completion.py)."""
    return completion.main(argv, build_parser)


def _global_options(
    parser: argparse.ArgumentParser,
    *,
    top: bool,
    all_namespaces: bool = False,
    outputs: tuple[str, ...] = (),
) -> None:
    """kubectl's flags, accepted before or after the command (`kubectl grpo -n ns status x` and
    `kubectl grpo status x -n ns`). A command offers only the ones it acts on (-A for `list`, the
    outputs it has); its copy has no default, so it never undoes the top level's."""

    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    parser.add_argument("-n", "--namespace", default=default(None), help="namespace (default: the context's)")
    if top or all_namespaces:
        parser.add_argument(
            "-A",
            "--all-namespaces",
            action="store_true",
            default=default(False),
            help="every namespace (list only)" if top else "every namespace",
        )
    parser.add_argument(
        "--kubeconfig", default=default(None), help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"
    )
    parser.add_argument(
        "--context", default=default(None), help="kubeconfig context (default: the current one)"
    )
    if top or outputs:
        choices = OUTPUTS if top else outputs
        parser.add_argument(
            "-o",
            "--output",
            choices=choices,
            default=default(None),
            help="output format: "
            + "|".join(choices)
            + (" (each command's --help says which it has)" if top else ""),
        )


def _version() -> str:
    return f"kubectl-grpo {plugin_version()} (GRPOJob API {GROUP}/{VERSION})"


Command = Callable[..., argparse.ArgumentParser]
"""Adds a subcommand: name, handler, help; `outputs` its -o formats, `cluster=False` none of kubectl's flags."""

JOB_HELP = "the GRPOJob's name"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kubectl grpo",
        description=__doc__.split("\n\n")[0],
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    _global_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def command(
        name: str,
        handler: Callable[[argparse.Namespace], int],
        help_: str,
        *,
        outputs: tuple[str, ...] = (),
        all_namespaces: bool = False,
        cluster: bool = True,
    ) -> argparse.ArgumentParser:
        cmd = sub.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if cluster:
            _global_options(cmd, top=False, all_namespaces=all_namespaces, outputs=outputs)
        cmd.set_defaults(handler=handler, formats=outputs)
        return cmd

    _looking_commands(command)
    _volume_commands(command)
    _steering_commands(command)
    return parser


def _looking_commands(command: Command) -> None:
    """list, validate, plan, status: what is there, and what a file would be."""
    command(
        "list",
        _list,
        "the GRPOJobs of a namespace (-A: of every namespace)",
        outputs=("wide", "json", "yaml", "name"),
        all_namespaces=True,
    )
    check = command("validate", _validate, "the cluster's verdict on a GRPOJob, before applying it")
    check.add_argument(
        "-f", "--filename", required=True, help="the GRPOJob manifest (YAML or JSON; - for stdin)"
    )
    check.add_argument(
        "--offline", action="store_true", help="do not ask the cluster; the same rules run here"
    )

    plan = command("plan", _plan, "every setting the trainer will use for a job, and why", outputs=("json",))
    plan.add_argument("job", nargs="?", help="a GRPOJob in the cluster (or give -f)")
    plan.add_argument("-f", "--filename", help="a GRPOJob manifest")
    plan.add_argument("--verl-version", help="verl jobs: plan for this verl release")
    plan.add_argument("--attempt", type=positive_int, help="plan this attempt (default: 1)")
    plan.add_argument("--json", action="store_true", help="machine-readable output (same as -o json)")

    status = command(
        "status",
        _status,
        "a job's phase, progress, metrics, health and where its log is",
        outputs=("json", "yaml"),
    )
    status.add_argument("job", help=JOB_HELP)


def _volume_options(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--workdir",
        help="read the job's volume from this folder (its grpo/ is the pods' /grpo tree) instead of a pod",
    )
    cmd.add_argument("--image", help=f"image of the reader pod (default: {DEFAULT_IMAGE})")
    cmd.add_argument("--claim", help="read this claim (a deleted job's kept volume) instead of the job's")
    cmd.add_argument(
        "--job",
        dest="folder",
        metavar="NAME-UID8",
        help="with --claim or --workdir: the job's folder there (default: the one folder named after JOB)",
    )


def _volume_commands(command: Command) -> None:
    """logs, plot, checkpoints: the job's files on its volume."""
    kept = "the GRPOJob's name (with --claim: its name, the job may be gone)"
    logs = command("logs", _logs, "an attempt's output, kept on the job's volume")
    logs.add_argument("job", nargs="?", help=kept)
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing as the trainer writes")
    logs.add_argument("--attempt", type=positive_int, help="which attempt (default: the current one)")
    _volume_options(logs)

    plot = command(
        "plot",
        _plot,
        "reward (with its moving average), validation score, response length, entropy and KL: "
        "a PNG and a terminal chart",
        outputs=("json", "yaml"),
    )
    plot.add_argument(
        "job", nargs="?", help="a GRPOJob (its status.history, or its metrics files with --full)"
    )
    plot.add_argument("--metrics-file", action="append", help="plot these metrics files instead (no cluster)")
    plot.add_argument("--full", action="store_true", help="every step, from the metrics files on the volume")
    plot.add_argument("--png", help="the PNG (default: <job>-curves.png; 'none' for none)")
    plot.add_argument("--no-terminal", action="store_true", help="do not draw in the terminal")
    plot.add_argument(
        "--baseline",
        type=_number,
        metavar="VALUE",
        help="a reward to compare with, drawn as a dashed line (e.g. 0.25, the chance of a 4-way answer)",
    )
    _volume_options(plot)

    ckpts = command("checkpoints", _checkpoints, "the checkpoints on the job's volume")
    ckpts.add_argument("job", nargs="?", help=kept)
    _volume_options(ckpts)


def _steering_commands(command: Command) -> None:
    """suspend, resume, dashboard, completion."""
    suspend = command("suspend", _suspend, "tear the job's Ray cluster down and keep its checkpoints")
    suspend.add_argument("job", help=JOB_HELP)
    resume = command("resume", _resume, "start a suspended job again, from its latest checkpoint")
    resume.add_argument("job", help=JOB_HELP)

    dashboard = command(
        "dashboard", _dashboard, "the job's Ray dashboard on localhost (kubectl port-forward)"
    )
    dashboard.add_argument("job", help=JOB_HELP)
    dashboard.add_argument(
        "--port",
        type=_port,
        default=RAY_DASHBOARD_PORT,
        help="local port (default: %(default)s; 0: any free one)",
    )
    dashboard.add_argument(
        "--address", default="127.0.0.1", help="local address to listen on (default: %(default)s)"
    )

    shell = command(
        "completion",
        _completion,
        "a shell completion script for kubectl-grpo (`kubectl grpo` completes through "
        "kubectl_complete-grpo, installed beside it)",
        cluster=False,
    )
    shell.add_argument(
        "shell", choices=completion.SHELLS, help="the shell: " + " or ".join(completion.SHELLS)
    )


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


# --- helpers -----------------------------------------------------------------------------------


def _check_options(args: argparse.Namespace) -> None:
    """kubectl's flags are accepted everywhere; the ones a command has no use for are refused."""
    formats = getattr(args, "formats", ())
    if args.output and args.output not in formats:
        has = f"it has {', '.join(formats)}" if formats else "it prints text only"
        raise PluginError(f"-o {args.output}: not an output of `kubectl grpo {args.command}` ({has})", USAGE)
    if args.all_namespaces and args.command != "list":
        raise PluginError(f"-A: `kubectl grpo {args.command}` works on one job; give -n NAMESPACE", USAGE)
    if args.all_namespaces and args.namespace:
        raise PluginError("give -n NAMESPACE or -A, not both", USAGE)
    _check_conflicts(args)


CONFLICTS: tuple[tuple[str, str, str], ...] = (
    ("--claim", "--workdir", "--claim reads a kept claim through a pod, --workdir reads a folder here"),
    ("--image", "--workdir", "--image is the reader pod's, and --workdir reads a folder with no pod"),
    ("--offline", "--kubeconfig", "--offline asks no cluster"),
    ("--offline", "--context", "--offline asks no cluster"),
    *(
        ("--metrics-file", flag, "--metrics-file plots those files, not a job's volume")
        for flag in ("--claim", "--workdir", "--image", "--job", "--full")
    ),
    ("--output", "--png", "-o prints the points and draws nothing"),
    ("--output", "--no-terminal", "-o prints the points and draws nothing"),
)
"""Flags a command would act on one of and silently drop the other: a usage mistake, as
`kubectl get pods NAME --all` is, rather than a result that is not what was asked."""


def _given(args: argparse.Namespace, flag: str) -> bool:
    dest = {"--job": "folder"}.get(flag, flag.lstrip("-").replace("-", "_"))
    value = getattr(args, dest, None)
    if flag == "--png" and str(value).lower() == "none":  # no picture: what -o means too
        return False
    return value not in (None, False, [])


def _check_conflicts(args: argparse.Namespace) -> None:
    for first, second, why in CONFLICTS:
        if _given(args, first) and _given(args, second):
            shown = "-o" if first == "--output" else first
            raise PluginError(f"{shown} and {second} do not go together: {why}", USAGE)


def _dump(document: Any, output: str) -> str:
    if output == "yaml":
        return yaml.safe_dump(document, sort_keys=False, default_flow_style=False).rstrip("\n")
    return json.dumps(document, indent=2)


def _cluster(args: argparse.Namespace) -> Cluster:
    return Cluster(args.kubeconfig, args.context, args.namespace)


def _read_file(path: str) -> tuple[dict[str, Any], str]:
    """The GRPOJob manifest of a file that may also hold its ConfigMap, and the file's text."""
    source = "standard input" if path == "-" else path
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as error:
        raise PluginError(f"cannot read {path}: {error.strerror or error}") from error
    try:
        return grpojob_manifest(data, source), decode(data, source)
    except DocumentError as error:
        raise PluginError(str(error)) from error


def _read_manifest(path: str) -> dict[str, Any]:
    return _read_file(path)[0]


def _job_folder(name: str, body: dict[str, Any] | None) -> str:
    """The job's folder as the pods see it: named after the job and its uid (contract.job_dir), so
    a job re-created under the same name has its own. A run by hand (`--workdir`, no cluster) has
    no uid: its folder is the name alone, as the trainer makes it."""
    return job_dir(name, ((body or {}).get("metadata") or {}).get("uid", ""))


def _job_paths(name: str, body: dict[str, Any] | None) -> JobPaths:
    """The job's folders as the pods see them (JobPaths.in_folder: the layout the trainer writes)."""
    return JobPaths.in_folder(_job_folder(name, body))


def _volume(args: argparse.Namespace, cluster: Cluster | None, job: GRPOJob | None) -> Volume:
    if args.workdir:
        return LocalVolume(args.workdir)
    if cluster is None or job is None:
        raise PluginError("no cluster to read the job's volume through; give --workdir")
    return PodVolume(cluster, ReadTarget.of_job(job), args.image or DEFAULT_IMAGE)


@dataclass(frozen=True)
class _Source:
    """Where a command reads a job's files: the volume, the job's folders on it, and the job
    itself when it still exists (None when read from its kept claim alone)."""

    name: str
    volume: Volume
    paths: JobPaths
    cluster: Cluster | None
    body: dict[str, Any] | None


def _source(args: argparse.Namespace) -> _Source:
    if args.folder and not (args.claim or args.workdir):
        raise PluginError("--job NAME-UID8 goes with --claim CLAIM or --workdir DIR", USAGE)
    name = args.job or (args.folder or "").rsplit("-", 1)[0]
    if not name:
        raise PluginError(
            "give a job name, or --job NAME-UID8 (its folder) with --claim CLAIM or --workdir DIR", USAGE
        )
    if args.claim:
        return _claim_source(args, name)
    body = None if args.folder else _job_if_reachable(args)
    if body is None:  # a copy of a volume whose job is not in the cluster (kept, or a run by hand)
        volume = LocalVolume(args.workdir)
        folder = args.folder or _only_folder(volume, name, f"in {args.workdir}")
        return _Source(name, volume, JobPaths.in_folder(f"{CHECKPOINT_MOUNT}/{folder}"), None, None)
    cluster, found = body
    return _Source(name, _volume(args, cluster, stored_job(found)), _job_paths(name, found), cluster, found)


def _claim_source(args: argparse.Namespace, name: str) -> _Source:
    """A claim by name: the job may be gone (its claim kept), so no job is read or owns the pod."""
    cluster = _cluster(args)
    target = ReadTarget(cluster.namespace, args.claim, name)
    volume = PodVolume(cluster, target, args.image or DEFAULT_IMAGE)
    folder = args.folder or _only_folder(volume, name, f"on claim {args.claim}")
    return _Source(name, volume, JobPaths.in_folder(f"{CHECKPOINT_MOUNT}/{folder}"), cluster, None)


def _only_folder(volume: Volume, name: str, where: str) -> str:
    """The job's folder on a claim: `<name>-<uid8>`; several when the name was used again."""
    found = [
        entry
        for _, entry in volume.listing(CHECKPOINT_MOUNT)
        if entry == name or re.fullmatch(rf"{re.escape(name)}-[0-9a-f]{{{JOB_UID_CHARS}}}", entry)
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        raise PluginError(f"no folder of a job named {name} {where}", code=3)
    raise PluginError(
        f"{len(found)} jobs named {name} {where} ({', '.join(found)}): give --job with one", USAGE
    )


def _attempts_on_volume(source: _Source) -> int:
    """The newest attempt that left a log or metrics on the volume (no job to ask)."""
    numbers = [
        int(match.group(1))
        for _, entry in source.volume.listing(source.paths.metrics_dir)
        if (match := re.fullmatch(r"attempt-(\d+)\.(?:log|jsonl)", entry))
    ]
    if not numbers:
        raise PluginError(f"no attempt has left a log in {source.paths.metrics_dir}", code=3)
    return max(numbers)


# --- commands ----------------------------------------------------------------------------------


def _validate(args: argparse.Namespace) -> int:
    manifest, text = _read_file(args.filename)
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
            if job is None:  # the server accepted what the models, its source, refuse: say what
                return _verdict(
                    [str(p) for p in schema],
                    ok="",
                    refused="the API server accepts it (dry run), but the operator's models refuse it",
                )
            modes = None
            if job.spec.checkpoint.claim_name and job.spec.resources.nodes > 1:
                modes = cluster.claim_access_modes(job.spec.checkpoint.claim_name)
            problems = [str(p) for p in validate(job, Settings(), claim_access_modes=modes)]
            # What create(path) would apply with the job counts as there; nothing else does.
            along = companions(text, args.filename, cluster.namespace).present()
            problems += _preflight(cluster, job, along)
            return _verdict(
                problems,
                ok="the API server accepts it (dry run), it passes the operator's checks, and what it "
                "names is there",
                refused="the API server accepts it (dry run), but the operator would fail it or keep it "
                "waiting",
            )
    problems = [str(p) for p in manifest_problems(manifest)]
    return _verdict(
        problems,
        ok=f"checked {how}: it passes the CRD's schema and CEL rules and the operator's checks",
        refused=f"checked {how}: the CRD's schema and CEL rules or the operator's checks refuse it",
    )


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


def _verdict(problems: list[str], *, ok: str, refused: str) -> int:
    """The problems, then one sentence: what accepted the job, or what refuses it."""
    for problem in problems:
        print(f"problem: {problem}")
    if problems:
        print(f"{len(problems)} problem(s); {refused}", file=sys.stderr)
        return CONFIG_ERROR
    print(f"ok: {ok}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from grpo_trainer.cli import main as grpo_train

    if bool(args.filename) == bool(args.job):
        both = " (not both)" if args.filename else ""
        raise PluginError(f"give a job name or -f FILE{both}", USAGE)
    if args.verl_version:
        # Checked here, with the trainer's rule (which needs the plan extra, as planning does), so
        # a mistyped release is one line and a usage mistake, not the trainer's own usage text.
        from grpo_trainer.cli import version_argument

        try:
            version_argument(args.verl_version)
        except argparse.ArgumentTypeError as error:
            raise PluginError(f"--verl-version: {error}", USAGE) from error
    if args.filename:
        manifest = _read_manifest(args.filename)
    else:
        body = _cluster(args).job_body(args.job)
        manifest = {k: body[k] for k in ("apiVersion", "kind", "spec")}
        # The uid too: the job's folder on its volume carries it (contract.job_dir).
        manifest["metadata"] = {
            k: body["metadata"][k] for k in ("name", "namespace", "uid") if k in body["metadata"]
        }
        # What the job measured sizes its pods' grace period (the plan's save-on-stop line).
        manifest["status"] = _measured(body.get("status") or {})
    with tempfile.TemporaryDirectory(prefix="kubectl-grpo-") as tmp:
        spec = Path(tmp) / "job.yaml"
        spec.write_text(yaml.safe_dump(manifest), encoding="utf-8")
        argv = ["plan", "--spec", str(spec)]
        argv += ["--verl-version", args.verl_version] if args.verl_version else []
        argv += ["--attempt", str(args.attempt)] if args.attempt else []
        argv += ["--json"] if args.json or args.output == "json" else []
        return grpo_train(argv)


def _measured(status: dict[str, Any]) -> dict[str, Any]:
    """The parts of a job's status its plan reads: its last save's and last step's seconds."""
    return {
        part: {key: status[part][key]}
        for part, key in (("checkpoint", "saveSeconds"), ("metrics", "stepSeconds"))
        if isinstance(status.get(part), dict) and status[part].get(key) is not None
    }


def _list(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    bodies = cluster.list_jobs(all_namespaces=args.all_namespaces)
    if args.output in ("json", "yaml"):
        print(_dump(listing.as_list(bodies), args.output))
    elif args.output == "name":
        for body in bodies:
            print(f"grpojob.{GROUP}/{body['metadata']['name']}")
    elif not bodies:
        where = "any namespace" if args.all_namespaces else f"namespace {cluster.namespace}"
        print(f"No GRPOJobs found in {where}.", file=sys.stderr)
    else:
        print(listing.table(bodies, namespaces=args.all_namespaces, wide=args.output == "wide"))
    _tell_no_operator(cluster)
    return 0


def _tell_no_operator(cluster: Cluster) -> None:
    """A stale operator Lease, on stderr: jobs show `not reconciled yet` and nothing else says why."""
    if (absent := cluster.no_operator()) is not None:
        print(f"note: {absent}", file=sys.stderr)


def _status(args: argparse.Namespace) -> int:
    """Text for a person; -o json|yaml the status object itself (`kubectl get -o yaml` has the rest)."""
    cluster = _cluster(args)
    body = cluster.job_body(args.job)
    if args.output:
        print(_dump(body.get("status") or {}, args.output))
    else:
        print(describe(body))
    _tell_no_operator(cluster)
    return 0


def _job_if_reachable(args: argparse.Namespace) -> tuple[Cluster, dict[str, Any]] | None:
    """The cluster and the job, needed for its uid (its folder's name) and status. With --workdir a
    copy of a volume needs neither: no cluster or no such job there gives None, and the job's
    folder is found on the copy."""
    try:
        cluster = _cluster(args)
        return cluster, _kept_job_body(cluster, args.job)
    except PluginError:
        if args.workdir:
            return None
        raise


def _kept_job_body(cluster: Cluster, name: str) -> dict[str, Any]:
    """The job, for a command that reads its volume: a deleted job's claim may still be there,
    and the not-found error says how to read it."""
    try:
        return cluster.job_body(name)
    except JobNotFoundError as error:
        raise JobNotFoundError(
            f"{error}; if it was deleted and its claim kept, --claim {checkpoint_claim_name(name)} "
            "(or the claim its spec named) reads its files"
        ) from error


def _logs(args: argparse.Namespace) -> int:
    source = _source(args)
    body, name = source.body, source.name
    current = ((body or {}).get("status") or {}).get("attempt")
    attempt = args.attempt or current or (_attempts_on_volume(source) if body is None else None)
    if not attempt:
        raise PluginError(f"grpojob {name} has not started an attempt yet")
    if current and attempt > current:  # (no status yet: the volume says whether a log is there)
        had = f"its attempts are 1 to {current}" if current > 1 else "it has had attempt 1 only"
        raise PluginError(f"--attempt {attempt}: grpojob {name} has no such attempt ({had})", USAGE)
    path = attempt_log_file(source.paths.metrics_dir, attempt)
    live = source.cluster if body is not None else None  # a deleted job's log does not grow
    volume = source.volume
    _print_lines(volume.follow(path, _finished(live, name)) if args.follow else volume.read(path))
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


def _metrics_files(files: list[str]) -> list[str]:
    """The lines of `--metrics-file`s, each checked to be a metrics file."""
    lines: list[str] = []
    for file in files:
        try:
            found = Path(file).read_text(encoding="utf-8").splitlines()
        except OSError as error:
            raise PluginError(f"cannot read {file}: {error.strerror or error}") from error
        except UnicodeDecodeError as error:
            raise PluginError(f"{file} is not a metrics file: it is not UTF-8 text") from error
        if found and not steps_in(found):
            raise PluginError(
                f"{file} is not a metrics file: none of its {len(found)} lines is a step's metrics "
                "(the trainer writes them to attempt-N.jsonl)"
            )
        lines += found
    return lines


def _plot(args: argparse.Namespace) -> int:
    if args.metrics_file:
        title = args.job or ", ".join(Path(f).name for f in args.metrics_file)
        history = history_from_metrics(_metrics_files(args.metrics_file))
    elif not (args.job or args.claim or args.folder):
        raise PluginError("give a job name, --claim CLAIM or --metrics-file", USAGE)
    elif args.full or args.claim or args.workdir or args.folder:  # every step, from the volume
        source = _source(args)
        if source.body is not None:
            assert source.cluster is not None
            title = f"{source.cluster.namespace}/{source.name}"
            attempts = (source.body.get("status") or {}).get("attempt") or 1
        else:
            title = f"{args.claim}: {source.name}" if args.claim else source.name
            attempts = _attempts_on_volume(source)
        history = history_from_metrics(source.volume.metrics_lines(source.paths.metrics_dir, attempts))
    else:
        if args.image:
            raise PluginError(
                "--image is the reader pod's, and plot reads the job's status unless --full or --claim", USAGE
            )
        cluster = _cluster(args)
        title = f"{cluster.namespace}/{args.job}"
        history = history_points(_kept_job_body(cluster, args.job).get("status") or {})
    if args.output:  # the points themselves, for a notebook or a spreadsheet
        print(_dump(history, args.output))
        return 0
    found = drawing.curves(history)
    if not found:
        raise PluginError(f"no points to plot yet for {title}: the trainer has not reported a step")
    if not args.no_terminal:
        print(f"{title}: {drawing.headline(found)}" if drawing.headline(found) else title)
        for curve in found:
            print()
            reward = curve.name == "reward"
            print(drawing.terminal_chart(curve, smooth=reward, baseline=args.baseline if reward else None))
    if (args.png or "").lower() != "none":
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", args.job or "metrics")
        where = _png_path(args.png, f"{name}-curves.png")
        path = drawing.write_png(found, where, title, baseline=args.baseline)
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _png_path(given: str | None, default: str) -> Path:
    """Where the picture goes: `--png` as given, a folder's default name in it, `.png` added to a
    name without a suffix (as matplotlib would, unseen); never a folder that does not exist."""
    path = Path(given or default)
    if path.is_dir():
        path = path / default
    elif not path.suffix:
        path = path.with_suffix(".png")
    if not path.parent.is_dir():
        raise PluginError(f"--png {given}: there is no folder {path.parent} to write it in", USAGE)
    return path


def _suspend(args: argparse.Namespace) -> int:
    _cluster(args).set_suspend(args.job, True)
    print(f"grpojob {args.job} suspended: its Ray cluster is torn down, its checkpoints kept")
    return 0


def _resume(args: argparse.Namespace) -> int:
    _cluster(args).set_suspend(args.job, False)
    print(f"grpojob {args.job} resumed: a new attempt continues from the latest checkpoint")
    return 0


def _checkpoints(args: argparse.Namespace) -> int:
    source = _source(args)
    folder = source.paths.checkpoint_dir
    entries = [
        (stamp, name)
        for stamp, name in source.volume.listing(folder)
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


def _completion(args: argparse.Namespace) -> int:
    print(completion.script(args.shell), end="")
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    """`kubectl port-forward` to the head's Service: the dashboard's in-cluster address
    (status.dashboardURL) is reachable from pods only."""
    cluster = _cluster(args)
    body = cluster.job_body(args.job)
    service, port = portforward.dashboard_service(args.job, body)
    labels = portforward.head_labels(body)
    heads = cluster.pods(labels) if labels else None
    if heads is not None and (problem := portforward.head_problem(args.job, body, heads)):
        raise PluginError(problem)
    return portforward.forward(
        cluster.namespace,
        service,
        remote=port,
        local=args.port,
        address=args.address,
        kubeconfig=args.kubeconfig,
        context=args.context,
    )
