"""Fixtures shared by the whole suite: the Kubernetes cluster and a namespace per test.

- ``cluster`` (session): a ``support.cluster.Cluster`` for the backend ``GRPO_TEST_CLUSTER`` names
  (local | kind | existing; see tests/support/cluster.py). Started once, never skipped: when it
  cannot start, every test that needs it errors.
- ``namespace``: a fresh namespace for one test, labelled ``grpo.dev/test=true``, deleted after it.
- ``job_api``: the fake Ray job API client (``support.rayjobapi.RayJobAPI``).

Tests that need the cluster carry ``@pytest.mark.cluster`` (the marker alone brings the cluster up)
or use one of these fixtures (which adds the marker), so ``pytest -m "not cluster"`` runs only what
needs no cluster, and unit tests never start one. Tests marked ``real_node`` (the real node of the
cpu pool, hack/node-up.sh) are collected only with ``GRPO_REAL_NODE=1`` (``make test-real-node``), and tests marked
``kind_backend`` only with ``GRPO_TEST_CLUSTER=kind`` (``make e2e-kind``). When such a test fails, its report carries the
events of its namespace and the tail of every cluster component's log.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Generator, Iterator

import pytest
from support.cluster import Cluster, ClusterUnavailableError, connect
from support.rayjobapi import RayJobAPI
from support.real_node import NODE, node_up

CLUSTER_FIXTURES = {"cluster", "namespace", "job_api"}
# Where the session's cluster is kept for the failure report, once a test has started it.
CLUSTER_KEY = pytest.StashKey[Cluster]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cluster)
    # Tests of the real node (tests/cluster/test_real_node.py) only where it is asked for: its
    # first start imports the trainer image into the node's containerd (minutes).
    if os.environ.get("GRPO_REAL_NODE") != "1":
        deselected = [item for item in items if item.get_closest_marker("real_node") is not None]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if item.get_closest_marker("real_node") is None]
    # Tests of the kind backend itself (tests/cluster/test_kind.py) only on that backend.
    if os.environ.get("GRPO_TEST_CLUSTER") != "kind":
        deselected = [item for item in items if item.get_closest_marker("kind_backend") is not None]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if item.get_closest_marker("kind_backend") is None]


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> Cluster:
    try:
        connected = connect()
    except ClusterUnavailableError as e:
        pytest.fail(f"the test cluster is unavailable: {e}", pytrace=False)
    pytestconfig.stash[CLUSTER_KEY] = connected
    return connected


@pytest.fixture(autouse=True)
def _cluster_for_marked_tests(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("cluster") is not None:
        request.getfixturevalue("cluster")


@pytest.fixture(scope="session")
def real_node(cluster: Cluster) -> str:
    """The real node's name, once hack/node-up.sh has it Ready (tests marked ``real_node``)."""
    node_up()
    return NODE


@pytest.fixture
def job_api(cluster: Cluster) -> RayJobAPI:
    if cluster.job_api is None:
        pytest.skip("GRPO_TEST_CLUSTER=existing without GRPO_RAYJOBAPI_URL: no fake Ray job API")
    return cluster.job_api


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    # Readable and unique: the test's name, cut to fit the 63-character limit, plus a suffix.
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:48].rstrip("-")
    name = f"t-{stem}-{secrets.token_hex(3)}"
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"grpo.dev/test": "true"}},
        }
    )
    # Pods are refused until the namespace's default service account exists.
    cluster.wait_for("serviceaccount", "default", name, lambda _: True, timeout=30, what="existence")
    yield name
    # Deleted in the background: KubeRay and the garbage collector finish the job while the
    # next test runs; hack/cluster-down.sh waits for whatever is left.
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
    if cluster.job_api is not None:
        cluster.job_api.forget_namespace(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and item.get_closest_marker("cluster") is not None:
        _attach_cluster_state(item, report)
    return report


def _attach_cluster_state(item: pytest.Item, report: pytest.TestReport) -> None:
    cluster = item.config.stash.get(CLUSTER_KEY, None)
    if cluster is None:
        return
    namespace = getattr(item, "funcargs", {}).get("namespace")
    if namespace:
        result = cluster.kubectl(
            "get", "events", "--namespace", namespace, "--sort-by=.lastTimestamp", check=False, timeout=15
        )
        report.sections.append((f"events in {namespace}", result.stdout or result.stderr))
    for component, tail in cluster.log_tails().items():
        report.sections.append((f"log tail: {component}", tail))
