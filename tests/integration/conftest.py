"""Integration fixtures: the operator running against the real local cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.cluster import Cluster
from support.operator_process import OperatorProcess


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """The operator with the admin kubeconfig, for the modules that ask for it.

    Module scope: tests that drive status by hand (the trainer's reporter) must not have an
    operator reconciling the same jobs behind their back.
    """
    cluster.install_crds()
    process = OperatorProcess(cluster.kubeconfig, tmp_path_factory.mktemp("operator") / "operator.log")
    process.start()
    yield process
    process.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    # The processes a test ran beside the cluster (the operator, a Kueue controller): their log tails.
    for name in ("operator", "kueue"):
        if report.failed and name in getattr(item, "funcargs", {}):
            report.sections.append((f"{name} log (tail)", item.funcargs[name].tail(60)))
    return report
