"""`grpo-operator`: run the operator, or print its CRD."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from . import __version__


def _run(args: argparse.Namespace) -> int:
    import kopf

    from .config import load_settings
    from .handlers.reconcile import Reconciler
    from .handlers.wiring import LOST_LEADERSHIP_EXIT, register
    from .k8s import Api, Leader, LeaseTerms
    from .metrics import Metrics

    settings = load_settings(args.config)
    kopf.configure(
        log_format=kopf.LogFormat.JSON if settings.log_format == "json" else kopf.LogFormat.PLAIN,
        verbose=args.verbose,
    )
    metrics = Metrics()
    metrics.serve(settings.metrics_port)
    registry = kopf.OperatorRegistry()
    lost = False

    async def main() -> None:
        nonlocal lost
        api = Api.from_environment(settings.field_manager)
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
        reconciler = Reconciler(
            api, settings, metrics, leading=(lambda: leader.leading) if leader else (lambda: True)
        )
        register(registry, settings, reconciler, leader, stop)
        # kopf's own peering is not leader election (it pauses on seeing a peer, with no fencing):
        # standalone, and the Lease decides who acts.
        await kopf.operator(
            registry=registry,
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
    return int(args.func(args))
