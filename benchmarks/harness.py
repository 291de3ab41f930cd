"""The test suite's cluster harness (tests/support), which the cluster benchmarks drive: the fake
Ray job API, the operator as a process of its own, the burst's jobs and nodes, lightkube's kinds.

It is loaded from its file as the package `support`, the name the tests import it by, so that a
benchmark and a test in one process share one copy of it (the virtualenv holds an unrelated
`tests` package, so `tests.support` is no name to import it by).
"""

from __future__ import annotations

import importlib.util
import sys

from .paths import REPO

SUPPORT = REPO / "tests" / "support"


def _load() -> None:
    if "support" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(
        "support", SUPPORT / "__init__.py", submodule_search_locations=[str(SUPPORT)]
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["support"] = module
    spec.loader.exec_module(module)


_load()

from support.burst import (  # noqa: E402
    add_nodes,
    burst_jobs,
    burst_nodes,
    create_all,
    metric_samples,
    remove_nodes,
)
from support.cluster import read_env_file  # noqa: E402
from support.operator_process import OperatorProcess  # noqa: E402
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI  # noqa: E402
from support.resources import GRPOJobResource, RayJobResource  # noqa: E402

__all__ = [
    "RUNNING_FOREVER",
    "GRPOJobResource",
    "OperatorProcess",
    "RayJobAPI",
    "RayJobResource",
    "add_nodes",
    "burst_jobs",
    "burst_nodes",
    "create_all",
    "metric_samples",
    "read_env_file",
    "remove_nodes",
]
