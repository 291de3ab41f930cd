"""`grpo-operator`: run the operator, or print its CRD.

A mistake in how it is started — a settings file with a typo, no credentials — is one line on
stderr and exit code 2, before anything listens or watches; a traceback is for bugs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Any

from . import __version__


class StartupError(Exception):
    """The operator cannot start as configured; the message says what to change."""


def _settings(path: str | None) -> Any:
    from pydantic import ValidationError

    from .api.problem import error_field, error_words
    from .config import load_settings

    try:
        return load_settings(path)
    except ValidationError as error:
        where = path or os.environ.get("GRPO_OPERATOR_CONFIG") or "the environment"
        problems = "; ".join(
            f"{error_field(e['loc']) or 'settings'}: "
            + ("unknown setting" if e["type"] == "extra_forbidden" else error_words(e))
            for e in error.errors()
        )
        raise StartupError(f"settings in {where}: {problems}") from error
    except (OSError, ValueError) as error:  # a missing file, YAML that is not a mapping
        raise StartupError(f"cannot read the settings: {error}") from error


def _credentials() -> Any:
    from .k8s.credentials import Credentials

    try:
        return Credentials.from_environment()
    except Exception as error:  # lightkube's ConfigError, a broken kubeconfig, a missing CA file
        message = " ".join(str(error).split())
        raise StartupError(
            f"no Kubernetes credentials: {message} (in a pod: its service account; elsewhere: $KUBECONFIG)"
        ) from error


def _run(args: argparse.Namespace) -> int:
    import kopf

    from .handlers.queue import JobQueue
    from .handlers.reconcile import Reconciler
    from .handlers.wiring import LOST_LEADERSHIP_EXIT, register
    from .k8s import Api, Leader, LeaseTerms
    from .metrics import Metrics

    settings = _settings(args.config)
    credentials = _credentials()
    kopf.configure(
        log_format=kopf.LogFormat.JSON if settings.log_format == "json" else kopf.LogFormat.PLAIN,
        verbose=args.verbose,
    )
    metrics = Metrics()
    try:
        metrics.serve(settings.metrics_port)
    except OSError as error:
        raise StartupError(
            f"cannot serve /metrics on port {settings.metrics_port}: {error.strerror}"
        ) from error
    registry = kopf.OperatorRegistry()
    lost = False

    async def main() -> None:
        nonlocal lost
        api = Api(credentials, settings.field_manager)
        api.observer = metrics.count_request  # requests by verb and resource, on /metrics
        leader = None
        if settings.leader_election:
            namespace, identity = settings.lease_place()
            leader = Leader(
                api,
                LeaseTerms(
                    name=settings.lease_name,
                    namespace=namespace,
                    identity=identity,
                    duration=settings.lease_duration_seconds,
                    renew_deadline=settings.lease_renew_deadline_seconds,
                    retry=settings.lease_retry_seconds,
                ),
            )
            # No write leaves this replica unless it holds the Lease right now.
            api.guard = lambda: leader.leading
        stop = asyncio.Event()
        queue = JobQueue(
            Reconciler(api, settings, metrics),
            leading=(lambda: leader.leading) if leader else (lambda: True),
            max_passes=settings.max_concurrent_reconciles,
        )
        register(registry, settings, queue, leader, stop)
        # kopf's own peering is not leader election (it pauses on seeing a peer, with no fencing):
        # standalone, and the Lease decides who acts. The identity is given: kopf's default asks
        # the password database for the user's name, and the image's numeric user has no entry.
        await kopf.operator(
            registry=registry,
            identity=settings.lease_place()[1],
            standalone=True,
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            liveness_endpoint=f"http://0.0.0.0:{settings.health_port}/healthz",
            stop_flag=stop,
        )
        lost = stop.is_set()

    logging.getLogger(__name__).info(
        "grpo-operator %s starting", __version__, extra={"namespaces": settings.namespaces or "all"}
    )
    # uvloop where it is installed (the operator extra brings it): the operator's event handling
    # and HTTP calls all run on this one loop, and bursts of new jobs are loop-bound.
    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())
    if lost:
        logging.getLogger(__name__).error("lost the leader Lease: exiting so that a fresh process stands by")
        return LOST_LEADERSHIP_EXIT
    return 0


def _crd(_: argparse.Namespace) -> int:
    from .api.crdgen import render

    sys.stdout.write(render())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grpo-operator", description="Kubernetes operator for GRPOJobs.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the operator against the current cluster")
    run.add_argument("--config", help="settings file (default: $GRPO_OPERATOR_CONFIG)")
    run.add_argument("--verbose", action="store_true", help="debug logging")
    run.set_defaults(func=_run)
    crd = sub.add_parser("crd", help="print the GRPOJob CustomResourceDefinition")
    crd.set_defaults(func=_crd)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except StartupError as error:
        print(f"grpo-operator: {error}", file=sys.stderr)
        return 2
