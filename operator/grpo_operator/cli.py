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
    from .handlers.wiring import register
    from .k8s import Api
    from .metrics import Metrics

    settings = load_settings(args.config)
    kopf.configure(
        log_format=kopf.LogFormat.JSON if settings.log_format == "json" else kopf.LogFormat.PLAIN,
        verbose=args.verbose,
    )
    metrics = Metrics()
    metrics.serve(settings.metrics_port)
    registry = kopf.OperatorRegistry()

    async def main() -> None:
        api = Api.from_environment(settings.field_manager)
        register(registry, settings, Reconciler(api, settings, metrics))
        await kopf.operator(
            registry=registry,
            standalone=True,
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            liveness_endpoint=f"http://0.0.0.0:{settings.health_port}/healthz",
        )

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
