"""End-to-end fixtures: helm, and a namespace per test that this session owns.

Each test module installs one release of the chart (``helm install --wait``) into a namespace of
its own and uninstalls it at the end. Because KWOK runs no container, the operator the release
deploys runs here as a process (out_of_cluster.py) that authenticates with a token of the
release's ServiceAccount and reads the release's settings ConfigMap: the chart's RBAC and
settings are exactly what it gets. Nothing here is specific to the local backend, so
``GRPO_TEST_CLUSTER=kind`` runs the same tests.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator

import pytest
from support.cluster import Cluster
from support.namespaces import create_namespace, delete_namespace
from support.operator_process import OperatorProcess
from support.release import Helm, helm_binary


@pytest.fixture(scope="session")
def helm(cluster: Cluster) -> Helm:
    return Helm(helm_binary(cluster), cluster)


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test (tests/conftest.py's, marked as this session's)."""
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].rstrip("-")
    name = create_namespace(cluster, stem)
    yield name
    delete_namespace(cluster, name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, OperatorProcess):
                report.sections.append((f"{name} log (tail)", value.tail(60)))
    return report
